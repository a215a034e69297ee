#!/usr/bin/env python3
"""A counting relay in front of the Docker Engine's unix socket: every byte
a client sends and receives is forwarded unchanged, and each connection is
logged when it closes as a JSON line {"up": BYTES, "down": BYTES, "first":
"the request line"} (so tests count what was really sent on the socket,
not what imgbuild says it sent).
Usage: sockcount.py LISTEN-SOCKET UPSTREAM-SOCKET LOG"""
import json
import os
import socket
import sys
import threading

listen_path, upstream, log_path = sys.argv[1:4]
lock = threading.Lock()


def pump(src, dst, counter, key, first):
    try:
        while True:
            b = src.recv(1 << 16)
            if not b:
                break
            if key == "up" and not first:
                first.append(b.split(b"\r\n", 1)[0].decode("latin-1"))
            counter[key] += len(b)
            dst.sendall(b)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(client):
    up = socket.socket(socket.AF_UNIX)
    up.connect(upstream)
    counter, first = {"up": 0, "down": 0}, []
    t = threading.Thread(target=pump, args=(up, client, counter, "down", first))
    t.start()
    pump(client, up, counter, "up", first)
    t.join()
    client.close()
    up.close()
    with lock, open(log_path, "a") as f:
        f.write(json.dumps(dict(counter, first=first[0] if first else "")) + "\n")


if os.path.exists(listen_path):
    os.unlink(listen_path)
srv = socket.socket(socket.AF_UNIX)
srv.bind(listen_path)
srv.listen(16)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
