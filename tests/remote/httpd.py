#!/usr/bin/env python3
"""The remote suites' HTTP server: a folder on 127.0.0.1, with Range
requests, a log of every request, injected faults and a bandwidth limit.

    httpd.py --root DIR --port-file F --log F [--lifetime S]
             [--fault KIND:PATH:COUNT ...] [--rate BYTES_PER_S]
             [--bind ADDR] [--tls PEM] [--header-log F]
             [--redirect STATUS:BASE[@SUFFIX]] [--answer-header NAME:VALUE ...]
             [--ignore-range] [--bad-content-range] [--huge-header BYTES]
             [--drip BYTES_PER_S] [--require-bearer TOKEN]
             [--refuse-header NAME] [--sigv4 KEY:SECRET:REGION:SERVICE]

It writes its port to --port-file once it listens, appends one line per
request to --log ("GET /path RANGE STATUS"), and exits after --lifetime
seconds whatever happens (a test that dies cannot leave it behind).
--bind listens on another loopback address (127.0.0.2: another host);
--tls serves HTTPS with the certificate and key in PEM (a test CA's, made
by the test); --header-log appends every request's line and headers, as
received, then a blank line; --redirect answers every request (or those
whose path ends in SUFFIX) with STATUS and Location: BASE followed by the
request's path, and --answer-header adds a header to every answer
(x-amz-bucket-region: a store's region redirect).
A fault applies to the first COUNT requests (-1: all) for the path PATH
(exactly, "/shard-000001.tar"): `cut` sends the headers and half the body, then closes; `stall`
sends the headers and a quarter of the body, then stalls for a minute;
`500` and `404` answer that status; `short` sends half the body and ends
the response cleanly (a lying Content-Length).

The faults of a store that misbehaves, each for every request (issue 34):
--ignore-range answers a Range request with 200 and the whole body, as a
server without ranges does; --bad-content-range answers it with 206, the
bytes from 0 and a Content-Range saying so, whatever was asked;
--huge-header adds a header line of BYTES bytes to every answer; --drip
sends every body at BYTES_PER_S, each connection on its own (a
byte-per-second drip that never stalls).

The services pinload speaks to, as they answer: --require-bearer answers
401 to a request without "Authorization: Bearer TOKEN" (the Hugging Face
Hub, a gated or private repository); --refuse-header answers 400 to a
request carrying header NAME (a CDN's presigned URL refuses an
Authorization header beside its own signature: "only one auth mechanism
allowed"); --sigv4 answers 403 SignatureDoesNotMatch to a request not
signed with AWS's Signature Version 4 by KEY and SECRET for REGION and
SERVICE (Google Cloud Storage's XML API with an HMAC key: region auto,
service s3), checked as the store checks it, the signed headers, the
payload's hash and the credential scope included.
"""
import argparse
import hashlib
import hmac
import os
import re
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote


class Bucket:
    """A token bucket shared by every connection: --rate bytes/s."""

    def __init__(self, rate):
        self.rate = rate
        self.lock = threading.Lock()
        self.next = time.monotonic()

    def take(self, n):
        if not self.rate:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next)
            self.next = start + n / self.rate
            wait = self.next - now
        if wait > 0:
            time.sleep(wait)


def sigv4_refusal(handler, spec):
    """Why the request is not signed as the store checks it (AWS's
    Signature Version 4 with KEY and SECRET for REGION and SERVICE), or
    None if it is."""
    key, secret, region, service = spec
    auth = handler.headers.get("Authorization", "")
    m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/"
                 r"([^/]+)/aws4_request, ?SignedHeaders=([^,]+), ?"
                 r"Signature=([0-9a-f]{64})$", auth)
    if not m:
        return "no AWS4-HMAC-SHA256 Authorization header"
    got_key, date, got_region, got_service, signed, signature = m.groups()
    if got_key != key:
        return "the access key %s is not known" % got_key
    if (got_region, got_service) != (region, service):
        return "the credential scope is %s/%s, not %s/%s" % (
            got_region, got_service, region, service)
    amz_date = handler.headers.get("x-amz-date", "")
    if not amz_date.startswith(date):
        return "x-amz-date is not the scope's date"
    names = signed.split(";")
    if "host" not in names:
        return "the host header is not signed"
    path, _, query = handler.path.partition("?")
    pairs = sorted(tuple(quote(unquote(x), safe="-_.~") for x in
                         (kv.split("=", 1) + [""])[:2])
                   for kv in query.split("&") if kv)
    canonical = "\n".join([
        handler.command, path, "&".join("%s=%s" % kv for kv in pairs),
        "".join("%s:%s\n" % (n, " ".join(
            (handler.headers.get(n) or "").split())) for n in names),
        signed,
        handler.headers.get("x-amz-content-sha256",
                            hashlib.sha256(b"").hexdigest())])
    scope = "%s/%s/%s/aws4_request" % (date, region, service)
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    want = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, signature):
        return "the signature does not match"
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # Headers and body go in separate writes: without this, Nagle's
        # algorithm and the client's delayed ACK cost 40 ms a response.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def record(self, status, rng):
        with self.server.log_lock:
            with open(self.server.log_path, "a") as f:
                f.write("%s %s %s %d\n" % (self.command, self.path,
                                            rng or "-", status))

    def fault_for(self):
        with self.server.log_lock:
            for f in self.server.faults:
                if f[1] == self.path.split("?")[0] and f[2] != 0:
                    if f[2] > 0:
                        f[2] -= 1
                    return f[0]
        return None

    def do_HEAD(self):
        self.do_GET(head=True)

    def record_headers(self):
        if not self.server.header_log:
            return
        with self.server.log_lock:
            with open(self.server.header_log, "a") as f:
                f.write("%s\n%s\n" % (self.requestline, str(self.headers)))

    def answer_headers(self):
        for name, value in self.server.answer_headers:
            self.send_header(name, value)
        if self.server.huge_header:
            self.send_header("X-Padding", "a" * self.server.huge_header)

    def refuse(self, status, rng, body):
        """An answer that is not data: status, with body."""
        self.record(status, rng)
        self.send_response(status)
        self.answer_headers()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def refusal(self, rng):
        """Whether the service refuses the request (then answered)."""
        srv = self.server
        bearer = self.headers.get("Authorization", "")
        if srv.bearer and bearer != "Bearer " + srv.bearer:
            self.refuse(401, rng, b'{"error":"Invalid credentials in '
                                  b'Authorization header"}')
            return True
        for name in srv.refused_headers:
            if self.headers.get(name) is not None:
                self.refuse(400, rng, b"<Error><Code>InvalidArgument</Code>"
                                      b"<Message>Only one auth mechanism "
                                      b"allowed</Message></Error>")
                return True
        why = srv.sigv4 and sigv4_refusal(self, srv.sigv4)
        if why:
            self.refuse(403, rng, ("<Error><Code>SignatureDoesNotMatch</Code>"
                                   "<Message>%s</Message></Error>" %
                                   why).encode())
            return True
        return False

    def redirect(self, rng):
        status, base, _ = self.server.redirect
        self.record(status, rng)
        body = b"<Error><Code>Moved</Code></Error>"
        self.send_response(status)
        self.send_header("Location", base + self.path)
        self.answer_headers()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self, head=False):
        rng = self.headers.get("Range")
        self.record_headers()
        if self.refusal(rng):
            return
        if self.server.redirect and \
                self.path.split("?")[0].endswith(self.server.redirect[2]):
            self.redirect(rng)
            return
        path = os.path.join(self.server.root,
                            self.path.split("?")[0].lstrip("/"))
        fault = self.fault_for()
        if fault in ("500", "404"):
            self.record(int(fault), rng)
            body = b"injected"
            self.send_response(int(fault))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if not os.path.isfile(path):
            self.record(404, rng)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        size = os.path.getsize(path)
        start, end, status = 0, size - 1, 200
        m = re.match(r"bytes=(\d+)-(\d*)$", rng or "")
        if self.server.ignore_range:
            m = None
        if m:
            start = int(m.group(1))
            end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            if start >= size:
                self.record(416, rng)
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
            if self.server.bad_content_range:  # the bytes from 0, said so
                start, end = 0, end - start
        self.record(status, rng)
        length = end - start + 1
        self.send_response(status)
        self.answer_headers()
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range",
                             "bytes %d-%d/%d" % (start, end, size))
        self.end_headers()
        if head:
            return
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read(length)
        if fault == "cut":
            self.send(data[: length // 2])
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if fault == "short":
            self.send(data[: length // 2])
            self.close_connection = True
            return
        if fault == "stall":
            self.send(data[: length // 4])
            time.sleep(60)
            self.close_connection = True
            return
        self.send(data)

    def send(self, data):
        if self.server.drip:
            step = max(1, int(self.server.drip / 10))
            for i in range(0, len(data), step):
                self.wfile.write(data[i:i + step])
                self.wfile.flush()
                time.sleep(step / self.server.drip)
            return
        rate = self.server.bucket.rate
        step = 65536 if not rate else max(256, min(65536, int(rate / 50)))
        for i in range(0, len(data), step):
            chunk = data[i:i + step]
            self.server.bucket.take(len(chunk))
            self.wfile.write(chunk)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # socketserver's 5 drops a rank's burst

    def handle_error(self, request, client_address):
        # A client that hangs up mid-body (a cut transfer, a loader
        # destroyed), or refuses the test CA's certificate, is expected
        # here, not news.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError,
                                               ConnectionResetError,
                                               ssl.SSLError)):
            super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--lifetime", type=float, default=300)
    ap.add_argument("--fault", action="append", default=[])
    ap.add_argument("--rate", type=float, default=0)
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--tls")
    ap.add_argument("--header-log")
    ap.add_argument("--redirect")
    ap.add_argument("--answer-header", action="append", default=[])
    ap.add_argument("--ignore-range", action="store_true")
    ap.add_argument("--bad-content-range", action="store_true")
    ap.add_argument("--huge-header", type=int, default=0)
    ap.add_argument("--drip", type=float, default=0)
    ap.add_argument("--require-bearer")
    ap.add_argument("--refuse-header", action="append", default=[])
    ap.add_argument("--sigv4")
    a = ap.parse_args()
    srv = Server((a.bind, 0), Handler)
    if a.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls)
        # The handshake is made by the thread that serves the connection.
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True,
                                     do_handshake_on_connect=False)
    srv.root = a.root
    srv.log_path = a.log
    srv.header_log = a.header_log
    srv.redirect = None
    if a.redirect:
        status, base = a.redirect.split(":", 1)
        base, _, suffix = base.partition("@")
        srv.redirect = (int(status), base, suffix)
    srv.answer_headers = [[p.strip() for p in h.split(":", 1)]
                          for h in a.answer_header]
    srv.ignore_range = a.ignore_range
    srv.bad_content_range = a.bad_content_range
    srv.huge_header = a.huge_header
    srv.drip = a.drip
    srv.bearer = a.require_bearer
    srv.refused_headers = a.refuse_header
    srv.sigv4 = a.sigv4.split(":") if a.sigv4 else None
    srv.log_lock = threading.Lock()
    srv.bucket = Bucket(a.rate)
    srv.faults = []
    for spec in a.fault:
        kind, path, count = spec.split(":")
        srv.faults.append([kind, path, int(count)])
    open(a.log, "a").close()
    if a.header_log:
        open(a.header_log, "a").close()
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, a.port_file)
    threading.Timer(a.lifetime, lambda: os._exit(0)).start()
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
