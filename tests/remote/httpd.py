#!/usr/bin/env python3
"""The remote suites' HTTP server: a folder on 127.0.0.1, with Range
requests, a log of every request, injected faults and a bandwidth limit.

    httpd.py --root DIR --port-file F --log F [--lifetime S]
             [--fault KIND:PATH:COUNT ...] [--rate BYTES_PER_S]

It writes its port to --port-file once it listens, appends one line per
request to --log ("GET /path RANGE STATUS"), and exits after --lifetime
seconds whatever happens (a test that dies cannot leave it behind).
A fault applies to the first COUNT requests (-1: all) for the path PATH
(exactly, "/shard-000001.tar"): `cut` sends the headers and half the body, then closes; `stall`
sends the headers and a quarter of the body, then stalls for a minute;
`500` and `404` answer that status; `short` sends half the body and ends
the response cleanly (a lying Content-Length).
"""
import argparse
import os
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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

    def do_GET(self, head=False):
        rng = self.headers.get("Range")
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
        self.record(status, rng)
        length = end - start + 1
        self.send_response(status)
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
        # destroyed) is expected here, not news.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError,
                                               ConnectionResetError)):
            super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--lifetime", type=float, default=300)
    ap.add_argument("--fault", action="append", default=[])
    ap.add_argument("--rate", type=float, default=0)
    a = ap.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    srv.root = a.root
    srv.log_path = a.log
    srv.log_lock = threading.Lock()
    srv.bucket = Bucket(a.rate)
    srv.faults = []
    for spec in a.fault:
        kind, path, count = spec.split(":")
        srv.faults.append([kind, path, int(count)])
    open(a.log, "a").close()
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, a.port_file)
    threading.Timer(a.lifetime, lambda: os._exit(0)).start()
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
