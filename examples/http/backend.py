#!/usr/bin/python3
"""backend.py - an app's own backend carrying a replica's bytes over HTTP(S),
for devices that cannot reach PostgreSQL (docs/transports.md, "Over HTTPS,
through your backend").

    python3 backend.py --listen 0.0.0.0:8443 --cert cert.pem --key key.pem \\
        --conninfo "host=hq dbname=shop user=app_backend"

Two endpoints, each behind a bearer token that names one replica:

    POST /sync/pull?after=N&max_bytes=M   body: the replica's sync_applied()
        200: the messages sync.pull returned, in order, each as a 4-byte
             big-endian length and its bytes (application/octet-stream)
    POST /sync/file                        body: one sync_upload() result
        200: sync.file's answer (application/json)

The backend moves bytes and never looks inside: messages are sealed, chained
and signed, uploads checked whole by the server.  What it adds is who the
device is.  A token is looked up by its SHA-256 in app.device_tokens (the
app's own table: token_sha256, replica, role), never taken from the request,
and each call runs as that replica's own role (SET LOCAL ROLE): the backend's
login role is a member of the replica roles it serves and of nothing else, so
sync.pull and sync.file refuse it any other replica whatever a token or an
upload says, and it can call nothing else of the engine.

Answers: 401 without a token the table knows (the body unread), 413 for a
body over --max-body, 403 when the server refuses the replica (42501, 42704),
503 for what the device retries (SQLSTATE classes 08, 40, 53, 57, 55P03:
docs/design.md 6.1), 400 for an upload refused for good (the device's agent
narrows it down as the agent does).  Requires psycopg2 (python3-psycopg2)."""
import argparse
import hashlib
import json
import ssl
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg2
import psycopg2.extras
import psycopg2.pool
from psycopg2 import sql

MAX_PULL_BYTES = 16 << 20          # the most a device may ask for in one pull
TRANSIENT = ("08", "40", "53", "57")


def transient(code):
    return code is not None and (code[:2] in TRANSIENT or code == "55P03")


class Backend:
    def __init__(self, conninfo, max_body):
        self.pool = psycopg2.pool.ThreadedConnectionPool(1, 8, conninfo)
        self.max_body = max_body

    def device(self, token):
        """(replica uuid, role) of a bearer token, or None"""
        digest = hashlib.sha256(token.encode()).digest()
        return self.run(None, "SELECT replica::text, role FROM app.device_tokens WHERE token_sha256 = %s",
                        (psycopg2.Binary(digest),), one=True)

    def run(self, role, query, args, one=False):
        """one statement in a transaction of its own, as ROLE when given"""
        conn = self.pool.getconn()
        try:
            with conn:                      # commits, or rolls back on an error
                with conn.cursor() as c:
                    if role is not None:
                        c.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
                    c.execute(query, args)
                    return c.fetchone() if one else c.fetchall()
        finally:
            self.pool.putconn(conn, close=bool(conn.closed))  # a broken one is not lent again


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60                            # a client that stops sending holds a thread no longer
    backend = None                          # set by serve()

    def log_message(self, fmt, *args):      # one line per request on stderr
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    def answer(self, status, body, kind="application/json"):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = json.dumps({"error": body}).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if self.close_connection:
            self.linger()

    def linger(self):
        """Before closing on a body left unread: read what the client still
        sends, for a second at most, discarding it.  Closed with bytes unread,
        the socket would reset the connection, and the client could lose the
        answer it was sent (as HTTP servers linger)."""
        self.wfile.flush()
        try:
            self.connection.settimeout(1.0)
            end = time.monotonic() + 1.0
            while time.monotonic() < end and self.rfile.read1(65536):
                pass
        except OSError:
            pass

    def do_GET(self):
        self.close_connection = True
        self.answer(405, "POST only")

    def do_POST(self):
        b = self.backend
        url = urllib.parse.urlsplit(self.path)
        if url.path not in ("/sync/pull", "/sync/file"):
            self.close_connection = True
            return self.answer(404, "no such endpoint")
        # who it is, before a byte of the body is read
        auth = self.headers.get("Authorization", "")
        try:
            who = b.device(auth[7:]) if auth.startswith("Bearer ") and len(auth) < 200 else None
        except psycopg2.Error:
            self.close_connection = True
            return self.answer(503, "the server is unavailable: try again")
        if who is None:
            self.close_connection = True
            return self.answer(401, "a bearer token of a device is needed")
        replica, role = who
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self.close_connection = True
            return self.answer(411, "Content-Length is needed")
        if length < 0 or length > b.max_body:
            self.close_connection = True
            return self.answer(413, f"a body of at most {b.max_body} bytes")
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            return self.answer(400, "the body was cut short")
        try:
            if url.path == "/sync/pull":
                return self.pull(replica, role, urllib.parse.parse_qs(url.query), body)
            return self.file(replica, role, body)
        except psycopg2.Error as e:
            code = e.pgcode
            if transient(code) or (code is None and isinstance(e, (psycopg2.OperationalError, psycopg2.InterfaceError,
                                                                psycopg2.pool.PoolError))):
                return self.answer(503, "the server is unavailable: try again")
            if code in ("42501", "42704"):
                return self.answer(403, "the server refuses this replica")
            return self.answer(400, {"error": (e.pgerror or str(e)).strip(), "sqlstate": code})

    def pull(self, replica, role, query, applied):
        try:
            after = int(query.get("after", ["0"])[0])
            max_bytes = min(int(query.get("max_bytes", [str(MAX_PULL_BYTES)])[0]), MAX_PULL_BYTES)
        except ValueError:
            return self.answer(400, "after and max_bytes are integers")
        if after < 0 or max_bytes <= 0:
            return self.answer(400, "after is 0 or more, max_bytes more than 0")
        rows = self.backend.run(role, "SELECT message FROM sync.pull(%s, %s, %s, %s)",
                                (replica, after, max_bytes, psycopg2.Binary(applied)))
        out = bytearray()
        for (message,) in rows:
            out += len(message).to_bytes(4, "big") + bytes(message)
        self.answer(200, bytes(out), "application/octet-stream")

    def file(self, replica, role, upload):
        sender = {"app": "http", "via": "examples/http/backend.py", "address": self.client_address[0]}
        (result,) = self.backend.run(role, "SELECT sync.file(%s, %s, %s)",
                                     (replica, psycopg2.Binary(upload), psycopg2.extras.Json(sender)), one=True)
        self.answer(200, result)


def serve(listen, conninfo, cert=None, key=None, max_body=8 << 20, ready=None):
    host, port = listen.rsplit(":", 1)
    Handler.backend = Backend(conninfo, max_body)
    httpd = ThreadingHTTPServer((host, int(port)), Handler)
    if cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.minimum_version = ssl.TLSVersion.TLSv1_2
        tls.load_cert_chain(cert, key)
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    if ready:
        ready(httpd.server_address[1])
    httpd.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="a replica's bytes over HTTP(S), behind device tokens")
    ap.add_argument("--listen", default="127.0.0.1:8443", help="HOST:PORT (port 0: any free one)")
    ap.add_argument("--conninfo", default="", help="libpq connection string of the backend's role (PG* otherwise)")
    ap.add_argument("--cert", help="TLS certificate (PEM): HTTPS; without it plain HTTP, for a proxy in front")
    ap.add_argument("--key", help="its private key (PEM)")
    ap.add_argument("--max-body", type=int, default=8 << 20, help="the largest upload accepted, in bytes")
    a = ap.parse_args()
    serve(a.listen, a.conninfo, a.cert, a.key, a.max_body,
          ready=lambda port: print(f"listening on port {port}", flush=True))
