#!/usr/bin/env python3
"""The token service of a registry's Bearer auth, for the tests.

Usage: token_server.py PORT_FILE KEY CERT ISSUER USER PASSWORD LOG

GET /token?service=S&scope=A&scope=B with Basic USER:PASSWORD answers
{"token": JWT} granting every scope asked for; anything else gets 401.  The
JWT is RS256, signed by KEY (with `openssl dgst`: the standard library has
no RSA) and carries CERT in its x5c header, which the registry checks
against its rootcertbundle.  Each request's scopes are appended to LOG.
"""
import base64
import json
import os
import subprocess
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT_FILE, KEY, CERT, ISSUER, USER, PASSWORD, LOG = sys.argv[1:8]


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def cert_der():
    pem = open(CERT).read()
    body = pem.split("-----BEGIN CERTIFICATE-----")[1].split("-----END CERTIFICATE-----")[0]
    return "".join(body.split())  # x5c is standard base64 of the DER


def token(service, scopes):
    access = []
    for s in scopes:
        kind, rest = s.split(":", 1)
        name, actions = rest.rsplit(":", 1)
        access.append({"type": kind, "name": name, "actions": actions.split(",")})
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": USER, "aud": service, "exp": now + 600, "nbf": now - 30, "iat": now,
              "jti": b64url(os.urandom(12)), "access": access}
    header = {"typ": "JWT", "alg": "RS256", "x5c": [cert_der()]}
    signing = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", KEY], input=signing.encode(),
                         capture_output=True, check=True).stdout
    return signing + "." + b64url(sig)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, code, doc):
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        scopes = q.get("scope", [])
        want = "Basic " + base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode()).decode()
        ok = url.path == "/token" and self.headers.get("Authorization") == want
        with open(LOG, "a") as f:
            f.write(json.dumps({"scopes": scopes, "granted": ok}) + "\n")
        if not ok:
            return self.reply(401, {"errors": [{"code": "UNAUTHORIZED", "message": "bad credentials"}]})
        t = token(q.get("service", [""])[0], scopes)
        self.reply(200, {"token": t, "access_token": t, "expires_in": 600})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
