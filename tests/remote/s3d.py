#!/usr/bin/env python3
"""The S3 suite's server: moto's S3 API on 127.0.0.1 with authentication
on (an unsigned or wrongly signed request gets 403), a bucket holding the
files of a folder.

    s3d.py --root DIR --bucket B --prefix P --port-file F --keys F
           [--lifetime S]

It makes an IAM user allowed s3:* (the three requests moto takes without
authentication), writes "ACCESS_KEY SECRET" to --keys, uploads every file
of --root under s3://B/P/ signed with them, then writes its port to
--port-file and serves until --lifetime seconds have passed.
"""
import argparse
import json
import os
import socket
import sys
import threading
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--keys", required=True)
    ap.add_argument("--lifetime", type=float, default=300)
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
                                           "Action": "s3:*",
                                           "Resource": "*"}]}))
    key = iam.create_access_key(UserName="pinload")["AccessKey"]
    with open(a.keys, "w") as f:
        f.write("%s %s\n" % (key["AccessKeyId"], key["SecretAccessKey"]))
    s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                      aws_access_key_id=key["AccessKeyId"],
                      aws_secret_access_key=key["SecretAccessKey"])
    s3.create_bucket(Bucket=a.bucket)
    for name in sorted(os.listdir(a.root)):
        path = os.path.join(a.root, name)
        if os.path.isfile(path):
            s3.upload_file(path, a.bucket, "%s/%s" % (a.prefix, name))
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.rename(tmp, a.port_file)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
