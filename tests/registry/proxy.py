#!/usr/bin/env python3
"""A counting, fault-injecting HTTP proxy on loopback, in front of a registry.

Usage: proxy.py PORT_FILE UPSTREAM_PORT LOG [RULES]

Listens on 127.0.0.1 (a free port, written to PORT_FILE), forwards every
request to 127.0.0.1:UPSTREAM_PORT with its Host header unchanged (so the
registry's Location headers point back here), and appends one JSON line per
request to LOG: method, path (without the query), status, bytes up (request
body) and down (response body), and the fault injected if any.

RULES, read again on every request, has lines `METHOD PATH-REGEX ACTION COUNT`:
  status:CODE   answer CODE without asking the registry
  drop          forward the headers and half the body, then close both
                connections (a connection lost mid-upload)
  cut           read half the body, then close the client's connection; the
                registry never hears of it (lost before it arrived)
  slow:SECONDS  wait before forwarding (a slow response)
  truncate      forward, then send the response's headers and half its body
                and close (a download broken half-way)
  corrupt       forward, and flip one bit in the middle of the response body
  delay:SECONDS wait before forwarding, logged as one request (to make
                concurrent transfers overlap where they can)
  wait:FILE     hold the request until FILE exists, then forward it (a
                transfer that cannot end before the test lets it: what
                the client does meanwhile is then seen without timing it)
Each rule fires for the first COUNT matching requests; COUNT as SKIP+N lets
SKIP matching requests pass first.

Each line also has "t", when the request came (seconds since the epoch, as
a file's mtime), and "inflight": how many requests the proxy was handling
when this one came in, itself included.  A request stops counting before
its response is sent, so a client that waits for each answer before its
next request is never seen at more than 1.
"""
import http.client
import json
import os
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT_FILE, UPSTREAM, LOG = sys.argv[1], int(sys.argv[2]), sys.argv[3]
RULES = sys.argv[4] if len(sys.argv) > 4 else None
lock = threading.Lock()
fired = {}
inflight = [0]


def enter():
    with lock:
        inflight[0] += 1
        return inflight[0]


def leave():
    with lock:
        inflight[0] -= 1


def fault_for(method, path):
    if not RULES or not os.path.exists(RULES):
        return None
    with lock:
        for n, line in enumerate(open(RULES)):
            parts = line.split()
            if len(parts) != 4 or parts[0] != method or not re.search(parts[1], path):
                continue
            key = (n, line)
            skip, _, count = parts[3].rpartition("+")
            seen = fired[key] = fired.get(key, 0) + 1
            if int(skip or 0) < seen <= int(skip or 0) + int(count):
                return parts[2]
    return None


def log(entry):
    with lock, open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            # Docker sends uploads chunked; the registry gets them whole.
            parts = []
            while True:
                n = int(self.rfile.readline().split(b";")[0], 16)
                parts.append(self.rfile.read(n))
                self.rfile.readline()
                if n == 0:
                    return b"".join(parts)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def handle_any(self):
        self.counted = True
        n = enter()
        try:
            self.forward(n)
        finally:
            self.answered()

    def answered(self):
        if self.counted:
            self.counted = False
            leave()

    def forward(self, n):
        path, _, query = self.path.partition("?")
        fault = fault_for(self.command, path)
        # Upload URLs carry the registry's opaque state; keep the rest
        # (digest=, mount=, from=).
        query = "&".join(q for q in query.split("&") if q and not q.startswith("_state="))
        entry = {"method": self.command, "path": path, "query": query, "fault": fault,
                 "range": self.headers.get("Range"), "inflight": n, "t": time.time()}
        if fault in ("drop", "cut"):
            return self.drop(entry, forward=fault == "drop")
        body = self.body()
        entry["up"] = len(body)
        if fault and fault.startswith("status:"):
            code = int(fault.split(":")[1])
            msg = b'{"errors":[{"code":"UNAVAILABLE","message":"injected by the test proxy"}]}'
            self.answered()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            entry.update(status=code, down=len(msg))
            return log(entry)
        if fault and fault.startswith("slow:"):
            # Logged now: a client that gives up waiting never sees the end.
            log(dict(entry, status=None, down=0))
            entry["fault"] = None
            time.sleep(float(fault.split(":")[1]))
        if fault and fault.startswith("delay:"):
            time.sleep(float(fault.split(":")[1]))
        if fault and fault.startswith("wait:"):
            while not os.path.exists(fault.split(":", 1)[1]):
                time.sleep(0.05)
        conn = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=120)
        conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in self.headers.items():
            if k.lower() not in ("content-length", "connection", "transfer-encoding"):
                conn.putheader(k, v)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read()
        self.answered()
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() in ("transfer-encoding", "connection"):
                continue
            if k.lower() == "content-length" and self.command != "HEAD":
                continue
            self.send_header(k, v)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if fault == "truncate":
            data = data[: len(data) // 2]
            self.close_connection = True
        if fault == "corrupt" and data:
            data = bytearray(data)
            data[len(data) // 2] ^= 1
            data = bytes(data)
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()
        entry.update(status=resp.status, down=len(data), upload_range=resp.getheader("Range"))
        log(entry)
        if fault == "truncate":
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)

    def drop(self, entry, forward):
        n = int(self.headers.get("Content-Length") or 0)
        half = self.rfile.read(n // 2)
        if forward:
            up = socket.create_connection(("127.0.0.1", UPSTREAM))
            head = "%s %s HTTP/1.1\r\n" % (self.command, self.path)
            head += "".join("%s: %s\r\n" % (k, v) for k, v in self.headers.items())
            up.sendall(head.encode() + b"\r\n" + half)
            time.sleep(0.2)
            up.close()
        entry.update(status=0, up=len(half), down=0)
        log(entry)
        self.answered()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any


server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
server.daemon_threads = True
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
