#!/usr/bin/env python3
"""The S3 suite's server: moto's S3 API on 127.0.0.1 with authentication
on (an unsigned or wrongly signed request gets 403), a bucket holding the
files of a folder.

    s3d.py --root DIR --bucket B --prefix P --port-file F --keys F
           [--lifetime S] [--session]
           [--proxy-port-file F --proxy-cert PEM --proxy-log F
            --region-answer BUCKET=REGION ... --lure URL]

It makes an IAM user allowed s3:* (the three requests moto takes without
authentication), writes "ACCESS_KEY SECRET" to --keys, uploads every file
of --root under s3://B/P/ signed with them, then writes its port to
--port-file and serves until --lifetime seconds have passed. With
--session, --keys gets "ACCESS_KEY SECRET SESSION_TOKEN" instead: a role's
temporary credentials (STS AssumeRole, made with the user's key), whose
token moto checks on every request.

With --proxy-port-file it also stands in for AWS's endpoints: an HTTPS
proxy (what https_proxy names) on 127.0.0.1 that answers CONNECT to any
host:443 itself, over TLS with --proxy-cert (a test CA's certificate for
*.s3.REGION.amazonaws.com). A request to BUCKET.s3.us-east-1.amazonaws.com
gets S3's region redirect: a 301 PermanentRedirect whose
x-amz-bucket-region is the --region-answer given for BUCKET, and whose
Location points at --lure (a host a client must not follow to); or, for a
--region-answer of "400:REGION", S3's answer to a request signed for the
wrong region: a 400 AuthorizationHeaderMalformed naming REGION in its
body alone. A request
to any other BUCKET.s3.REGION.amazonaws.com goes to moto as it came (moto
checks the signature, with the Host it was made for). --proxy-log gets a
line per CONNECT ("CONNECT host:port") and per request ("HOST METHOD PATH
STATUS scope=REGION token=TOKEN": the region of the signature's
credential scope and the x-amz-security-token sent, "-" for none).
"""
import argparse
import http.client
import json
import os
import re
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Origin(BaseHTTPRequestHandler):
    """One CONNECT tunnel's requests, as the host it was opened to."""
    protocol_version = "HTTP/1.1"
    timeout = 60

    def __init__(self, request, client_address, server, host):
        self.origin = host
        super().__init__(request, client_address, server)

    def log_message(self, *args):
        pass

    def record(self, status):
        auth = self.headers.get("Authorization", "")
        m = re.search(r"Credential=[^/]*/[^/]*/([^/]*)/", auth)
        line = "%s %s %s %d scope=%s token=%s\n" % (
            self.origin, self.command, self.path, status,
            m.group(1) if m else "-",
            self.headers.get("x-amz-security-token", "-"))
        with self.server.log_lock:
            with open(self.server.log_path, "a") as f:
                f.write(line)

    def do_GET(self):
        bucket, _, rest = self.origin.partition(".")
        if rest == "s3.us-east-1.amazonaws.com":
            answer = self.server.region_answers.get(bucket, "us-east-1")
            if answer.startswith("400:"):
                self.malformed(answer[4:])
            else:
                self.moved(answer)
        elif re.match(r"s3\.[a-z0-9-]+\.amazonaws\.com$", rest):
            self.forward()
        else:
            self.answer(502, {}, b"")

    def moved(self, region):
        body = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>"
                b"PermanentRedirect</Code><Message>The bucket you are "
                b"attempting to access must be addressed using the specified "
                b"endpoint.</Message></Error>")
        self.answer(301, {"x-amz-bucket-region": region,
                          "Location": self.server.lure + self.path,
                          "Content-Type": "application/xml"}, body)

    def malformed(self, region):
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>"
                "AuthorizationHeaderMalformed</Code><Message>The "
                "authorization header is malformed; the region 'us-east-1' "
                "is wrong; expecting '%s'</Message><Region>%s</Region>"
                "</Error>" % (region, region)).encode()
        self.answer(400, {"Content-Type": "application/xml"}, body)

    def forward(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.moto_port,
                                          timeout=60)
        conn.putrequest(self.command, self.path, skip_host=True,
                        skip_accept_encoding=True)
        for name, value in self.headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        r = conn.getresponse()
        body = r.read()
        keep = {k: v for k, v in r.getheaders()
                if k.lower() not in ("content-length", "transfer-encoding",
                                     "connection", "server", "date")}
        conn.close()
        self.answer(r.status, keep, body)

    def answer(self, status, headers, body):
        self.record(status)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Proxy(BaseHTTPRequestHandler):
    """CONNECT host:443, answered by Origin over TLS."""
    protocol_version = "HTTP/1.1"
    timeout = 60

    def log_message(self, *args):
        pass

    def do_CONNECT(self):
        with self.server.log_lock:
            with open(self.server.log_path, "a") as f:
                f.write("CONNECT %s\n" % self.path)
        self.send_response(200, "Connection established")
        self.end_headers()
        self.close_connection = True
        try:
            tls = self.server.ctx.wrap_socket(self.connection,
                                              server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            Origin(tls, self.client_address, self.server,
                   self.path.rpartition(":")[0])
        finally:
            tls.close()


class ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError,
                                               ConnectionResetError,
                                               ssl.SSLError)):
            super().handle_error(request, client_address)


def start_proxy(a, moto_port):
    srv = ProxyServer(("127.0.0.1", 0), Proxy)
    srv.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    srv.ctx.load_cert_chain(a.proxy_cert)
    srv.log_path = a.proxy_log
    srv.log_lock = threading.Lock()
    srv.moto_port = moto_port
    srv.lure = a.lure
    srv.region_answers = dict(r.split("=", 1) for r in a.region_answer)
    open(a.proxy_log, "a").close()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    tmp = a.proxy_port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, a.proxy_port_file)


def session_keys(url, key):
    """A role allowed s3:*, assumed with the user's key: "KEY SECRET
    TOKEN" of its temporary credentials."""
    import boto3
    user = dict(endpoint_url=url, region_name="us-east-1",
                aws_access_key_id=key["AccessKeyId"],
                aws_secret_access_key=key["SecretAccessKey"])
    iam = boto3.client("iam", **user)
    role = iam.create_role(RoleName="pinload-reader",
                           AssumeRolePolicyDocument=json.dumps({
                               "Version": "2012-10-17",
                               "Statement": [{"Effect": "Allow",
                                              "Principal": {"AWS": "*"},
                                              "Action": "sts:AssumeRole"}]}))
    iam.put_role_policy(RoleName="pinload-reader", PolicyName="s3",
                        PolicyDocument=json.dumps({
                            "Version": "2012-10-17",
                            "Statement": [{"Effect": "Allow",
                                           "Action": "s3:*",
                                           "Resource": "*"}]}))
    c = boto3.client("sts", **user).assume_role(
        RoleArn=role["Role"]["Arn"], RoleSessionName="pinload")
    c = c["Credentials"]
    return "%s %s %s\n" % (c["AccessKeyId"], c["SecretAccessKey"],
                           c["SessionToken"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--keys", required=True)
    ap.add_argument("--lifetime", type=float, default=300)
    ap.add_argument("--proxy-port-file")
    ap.add_argument("--proxy-cert")
    ap.add_argument("--proxy-log")
    ap.add_argument("--region-answer", action="append", default=[])
    ap.add_argument("--lure", default="https://127.0.0.2:9")
    ap.add_argument("--session", action="store_true")
    a = ap.parse_args()
    threading.Timer(a.lifetime, lambda: os._exit(0)).start()
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
    from moto.server import ThreadedMotoServer
    import boto3

    port = free_port()
    srv = ThreadedMotoServer(ip_address="127.0.0.1", port=port,
                             verbose=False)
    srv.start()
    url = "http://127.0.0.1:%d" % port
    boot = dict(endpoint_url=url, region_name="us-east-1",
                aws_access_key_id="boot", aws_secret_access_key="boot")
    iam = boto3.client("iam", **boot)
    iam.create_user(UserName="pinload")
    iam.put_user_policy(UserName="pinload", PolicyName="s3",
                        PolicyDocument=json.dumps({
                            "Version": "2012-10-17",
                            "Statement": [{"Effect": "Allow",
                                           "Action": ["s3:*", "iam:*",
                                                      "sts:*"],
                                           "Resource": "*"}]}))
    key = iam.create_access_key(UserName="pinload")["AccessKey"]
    line = "%s %s\n" % (key["AccessKeyId"], key["SecretAccessKey"])
    if a.session:
        line = session_keys(url, key)
    with open(a.keys, "w") as f:
        f.write(line)
    s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                      aws_access_key_id=key["AccessKeyId"],
                      aws_secret_access_key=key["SecretAccessKey"])
    s3.create_bucket(Bucket=a.bucket)
    for name in sorted(os.listdir(a.root)):
        path = os.path.join(a.root, name)
        if os.path.isfile(path):
            s3.upload_file(path, a.bucket, "%s/%s" % (a.prefix, name))
    if a.proxy_port_file:
        start_proxy(a, port)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.rename(tmp, a.port_file)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
