#!/usr/bin/env python3
"""A counting relay on loopback in front of a node's sshd: every byte that
ssh sends and receives is forwarded unchanged and counted (the SSH stream
as it goes over the network, encrypted), and each connection is logged
when it closes as a JSON line {"up": BYTES, "down": BYTES, "cut": BOOL,
"opened": SECONDS, "closed": SECONDS} (the epoch times it was accepted and
closed: whether two nodes' sessions overlapped).
While the file CUT exists and holds a number N, a connection is cut (both
sides closed, as a node that stops would) once N bytes went up it.
Usage: tcpcount.py PORT-FILE UPSTREAM-PORT LOG CUT"""
import json
import os
import socket
import sys
import threading
import time

port_file, upstream, log_path, cut_path = sys.argv[1:5]
lock = threading.Lock()


def cut_after():
    try:
        with open(cut_path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def pump(src, dst, counter, key, limit, peers):
    try:
        while True:
            b = src.recv(1 << 16)
            if not b:
                break
            if limit is not None and key == "up" and counter["up"] + len(b) >= limit:
                dst.sendall(b[: max(0, limit - counter["up"])])
                counter["up"] = limit
                counter["cut"] = True
                for s in peers:
                    s.shutdown(socket.SHUT_RDWR)
                break
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
    opened = time.time()
    up = socket.create_connection(("127.0.0.1", int(upstream)))
    counter = {"up": 0, "down": 0, "cut": False}
    limit = cut_after()
    peers = (client, up)
    t = threading.Thread(target=pump, args=(up, client, counter, "down", None, peers))
    t.start()
    pump(client, up, counter, "up", limit, peers)
    t.join()
    client.close()
    up.close()
    counter.update(opened=opened, closed=time.time())
    with lock, open(log_path, "a") as f:
        f.write(json.dumps(counter) + "\n")


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(16)
with open(port_file + ".tmp", "w") as f:
    f.write(str(srv.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
