#!/usr/bin/python3
"""over_http.py - a replica that reaches the server only through an app's backend
over HTTPS (examples/http: backend.py, device.py), end to end: the shop of
examples/shop, the backend as a process of its own with a certificate made
here, logging in as its own role (a member of the store roles, which log in
nowhere), and a device holding nothing but its token.

  - Oslo's device is provisioned through the backend, writes a sale and
    counts its shelf; the head office changes a price and adds a product;
    at the end the device holds exactly its wanted set (by digest per table),
    the server holds what it wrote, and nothing is left on its way;
  - the doors: no token, a token the backend does not know, and a body over
    the backend's bound are refused before the body is read (401, 413);
    Lisbon's token pulls Lisbon's messages only, and filing Oslo's upload
    with it is refused by the server (the upload names another replica) and
    files nothing.
Run by tests/e2e/run (inside pg_virtualenv)."""
import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import harness
from harness import TOP, check, finish, psql

sys.path.insert(0, os.path.join(TOP, "examples", "http"))
import device as dev  # noqa: E402

OSLO = "a1a1a1a1-0000-4000-8000-000000000001"
LISBON = "b2b2b2b2-0000-4000-8000-000000000002"
DB = "httpshop"
SHOP = os.path.join(TOP, "examples", "shop")
tmp = tempfile.mkdtemp(prefix="http_e2e.")

server = harness.Server(DB)
subprocess.run(["psql", "-XAtq", "-v", "ON_ERROR_STOP=1", "-d", DB, "-f", f"{SHOP}/schema.sql",
                "-f", f"{SHOP}/declare.sql", "-f", f"{SHOP}/seed.sql"], check=True, stdout=subprocess.DEVNULL)

# the store roles log in nowhere: the backend's role acts as them (SET ROLE)
password = secrets.token_hex(12)
tokens = {OSLO: secrets.token_urlsafe(24), LISBON: secrets.token_urlsafe(24)}
psql(DB, f"""CREATE ROLE store_oslo NOLOGIN; CREATE ROLE store_lisbon NOLOGIN;
SELECT sync.replica_add('{OSLO}', 'north', role => 'store_oslo');
SELECT sync.replica_add('{LISBON}', 'south', role => 'store_lisbon');
CREATE ROLE app_backend LOGIN PASSWORD '{password}';
GRANT store_oslo, store_lisbon TO app_backend;
CREATE SCHEMA app;
CREATE TABLE app.device_tokens (token_sha256 bytea PRIMARY KEY, replica uuid NOT NULL, role name NOT NULL);
GRANT USAGE ON SCHEMA app TO app_backend; GRANT SELECT ON app.device_tokens TO app_backend""")
for replica, role in ((OSLO, "store_oslo"), (LISBON, "store_lisbon")):
    server.exec("INSERT INTO app.device_tokens VALUES (%s, %s, %s)",
                (hashlib.sha256(tokens[replica].encode()).digest(), replica, role))

# a certificate for localhost, which the device trusts by its own file
cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
MAX_BODY = 1 << 20
backend = subprocess.Popen(
    ["/usr/bin/python3", os.path.join(TOP, "examples", "http", "backend.py"), "--listen", "127.0.0.1:0",
     "--cert", cert, "--key", key, "--max-body", str(MAX_BODY),
     "--conninfo", f"host=localhost dbname={DB} user=app_backend password={password}"],
    stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "backend.log"), "w"), text=True)
line = backend.stdout.readline()
check("the backend listens", line.startswith("listening on port "), True)
URL = f"https://localhost:{line.split()[-1]}"


def settle(d):
    for _ in range(10):
        did = server.relay()
        moved = d.round()
        if did["messages"] == 0 and did["provisioned"] == 0 and moved == 0:
            return True
    return False


def replica_digests(db):
    return {t: f"{d['count']} {d['fnv']}" for t, d in json.loads(db.execute("SELECT sync_digest()").fetchone()[0]).items()
            if d["count"] > 0}


def wanted_digests(replica):
    return {name: f"{count} {fnv}" for name, count, fnv in server.rows(
        "SELECT t.name, (x.d).count, (x.d).fnv FROM (SELECT w.tab, sync.digest(w.key) AS d"
        " FROM sync.wanted(%s) w GROUP BY w.tab) x JOIN sync.tables t ON t.relid = x.tab", (replica,))}


def post(path, body, token=None, headers=None):
    """status and body of one request, made by hand"""
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = "Bearer " + token
    req = urllib.request.Request(URL + path, data=body, method="POST", headers=h)
    tls = dev.ssl.create_default_context(cafile=cert)
    try:
        with urllib.request.urlopen(req, timeout=60, context=tls) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, OSError) as e:
        return "no answer", str(e)


try:
    oslo_db = dev.open_replica(os.path.join(tmp, "oslo.db"), harness.EXTENSION, OSLO)
    oslo = dev.Device(oslo_db, URL, tokens[OSLO], cafile=cert)

    # provisioned through the backend
    check("Oslo settles after its snapshot", settle(oslo), True)
    check("it applied messages", oslo.status()["applied"] > 0, True)
    wanted = wanted_digests(OSLO)
    check("it holds products, stock and prices", all(t in wanted for t in ("products", "stock", "prices")), True)
    check("after its snapshot it holds its wanted set", replica_digests(oslo_db), wanted)
    tea = oslo_db.execute("SELECT price FROM products WHERE id = 1").fetchone()[0]

    # both sides write
    oslo_db.execute("INSERT INTO sales (store, id, product, qty, total_cents, sold_at, v)"
                    " VALUES (?, 1, 1, 2, 680, datetime('now'), 1)", (OSLO,))
    oslo_db.execute("UPDATE stock SET counted = 38 WHERE product = 1")
    server.exec("UPDATE products SET price = price + 1 WHERE id = 1")
    server.exec("INSERT INTO products (id, name, region, price, cost) VALUES (8, 'cloudberry jam', 'north', 7.90, 3.10)")
    check("Oslo settles after the writes", settle(oslo), True)
    check("the server filed Oslo's sale", server.rows("SELECT qty, total_cents FROM sales WHERE store = %s", (OSLO,)),
          [(2, 680)])
    check("the server has Oslo's count",
          server.one("SELECT counted FROM stock WHERE store = %s AND product = 1", (OSLO,)), 38)
    check("the head office's price reached Oslo",
          oslo_db.execute("SELECT price FROM products WHERE id = 1").fetchone()[0], f"{float(tea) + 1:.2f}")
    check("the new product reached Oslo",
          oslo_db.execute("SELECT name FROM products WHERE id = 8").fetchone()[0], "cloudberry jam")
    progress = json.loads(oslo_db.execute("SELECT sync_progress()").fetchone()[0])
    check("nothing of Oslo is on its way", sum(p["unsent"] + p["unfiled"] + p["set_aside"] for p in progress.values()), 0)
    check("Oslo ends holding its wanted set", replica_digests(oslo_db), wanted_digests(OSLO))
    check("no upload was set aside", server.one("SELECT count(*) FROM sync.inbox"), 0)

    # the doors
    big = bytes(MAX_BODY + 1)
    check("no token: 401", post("/sync/pull?after=0", b"")[0], 401)
    check("a token the backend does not know: 401", post("/sync/pull?after=0", b"", token="x" + tokens[OSLO])[0], 401)
    check("a body over the bound, without a token: 401, unread", post("/sync/file", big)[0], 401)
    check("a body over the bound, with a token: 413", post("/sync/file", big, token=tokens[OSLO])[0], 413)
    check("a path the backend does not serve: 404", post("/sync/relay", b"", token=tokens[OSLO])[0], 404)
    check("a pull's after must be a number: 400", post("/sync/pull?after=x", b"", token=tokens[OSLO])[0], 400)
    status, body = post("/sync/file", b"not an upload", token=tokens[OSLO])
    check("bytes that are no upload: 400, with the server's SQLSTATE",
          (status, json.loads(body).get("sqlstate", "")[:2] if status == 400 else body), (400, "22"))

    # Lisbon's token is Lisbon's: its pull reads Lisbon's outbox (relayed
    # for it here), never Oslo's, and Oslo's upload filed with it is refused
    server.relay()
    status, body = post("/sync/pull?after=0", b"", token=tokens[LISBON])
    replicas = set()
    pos = 0
    while status == 200 and pos < len(body):
        n = int.from_bytes(body[pos:pos + 4], "big")
        replicas.add(bytes(body[pos + 4:pos + 4 + n]).find(bytes.fromhex(LISBON.replace("-", ""))) >= 0)
        pos += 4 + n
    check("Lisbon's token pulls messages, each naming Lisbon", (status, replicas), (200, {True}))
    oslo_db.execute("INSERT INTO sales (store, id, product, qty, total_cents, sold_at, v)"
                    " VALUES (?, 2, 1, 1, 340, datetime('now'), 1)", (OSLO,))
    up = bytes(oslo_db.execute("SELECT sync_upload()").fetchone()[0])
    status, body = post("/sync/file", up, token=tokens[LISBON])
    check("Oslo's upload filed with Lisbon's token is refused", status in (400, 403), True)
    check("and files nothing", server.one("SELECT count(*) FROM sales WHERE id = 2"), 0)
    # the same bytes through Oslo's own door are filed, once
    status, body = post("/sync/file", up, token=tokens[OSLO])
    check("the same upload with Oslo's token is filed", (status, json.loads(body).get("filed")), (200, 1))
    check("the sale is filed as Oslo's", server.rows("SELECT store::text FROM sales WHERE id = 2"), [(OSLO,)])
    status, body = post("/sync/file", up, token=tokens[OSLO])
    check("and once: again, it is a duplicate", (status, json.loads(body).get("duplicate")), (200, True))
    check("Oslo settles", settle(oslo), True)
    check("Oslo ends holding its wanted set, again", replica_digests(oslo_db), wanted_digests(OSLO))

    # a filing that breaks on the way: the device sends the same bytes again first
    oslo_db.execute("INSERT INTO sales (store, id, product, qty, total_cents, sold_at, v)"
                    " VALUES (?, 3, 1, 1, 340, datetime('now'), 1)", (OSLO,))
    cut = dev.Device(oslo_db, "https://localhost:1", tokens[OSLO], cafile=cert)
    try:
        cut.upload()
        check("an unreachable backend is said", "filed", "Unavailable")
    except dev.Unavailable:
        pass
    check("the device keeps the upload it could not file", cut.unfiled is not None, True)
    cut.url = URL
    check("and files the same bytes at its next round", (cut.upload() or {}).get("filed"), 1)
    check("the third sale is filed", server.one("SELECT count(*) FROM sales WHERE store = %s", (OSLO,)), 3)
finally:
    backend.terminate()
    backend.wait(timeout=30)
print(open(os.path.join(tmp, "backend.log")).read()[-2000:] if harness.failed else "", end="")
finish()
