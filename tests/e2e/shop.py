#!/usr/bin/python3
"""shop.py - the whole engine end to end (issue 7): the shop of examples/shop
with three stores, each run by magic_sync_agent as a real process against the
relay's background worker.

  - Oslo and Lisbon start; Porto joins and its agent is killed (SIGKILL) in the
    middle of its snapshot, then started again;
  - a seeded random walk of writes on both sides: the head office changes
    products, stock, customers, orders and their lines, price lists and their
    groups; the stores sell, correct and delete sales and count their stock;
  - Lisbon goes offline (its agent stops) for a while, and keeps selling;
  - the worker is terminated (the postmaster starts it again) and the whole
    server is restarted (the agents reconnect);
  - at the end every store's SQLite file holds exactly the server's wanted set
    for it, row by row and value by value, and every sale each store wrote is
    at the head office as the store last wrote it.

SHOP_SEED=n picks the walk; SHOP_STEPS=n its length.  Run by tests/e2e/run
(inside pg_virtualenv)."""
import json
import os
import shutil
import random
import signal
import sqlite3
import subprocess
import tempfile
import time

import psycopg2

import harness
import shopwalk
from harness import TOP, check, finish, psql
from shopwalk import AGENT, HeadOffice, replica_rows, server_rows
SEED = int(os.environ.get("SHOP_SEED", "7"))
STEPS = int(os.environ.get("SHOP_STEPS", "500"))
SHOP = os.path.join(TOP, "examples", "shop")
STORES = {
    "oslo": ("a1a1a1a1-0000-4000-8000-000000000001", "north"),
    "lisbon": ("b2b2b2b2-0000-4000-8000-000000000002", "south"),
    "porto": ("c3c3c3c3-0000-4000-8000-000000000003", "south"),
}
rng = random.Random(SEED)
tmp = tempfile.mkdtemp(prefix="shop_e2e.")
os.chmod(tmp, 0o755)
started = time.time()


def shop_failed():
    return harness.failed > 0


def log(msg):
    print(f"{time.time() - started:6.1f}s {msg}", flush=True)


# ---- the head office ----------------------------------------------------------

def restart_server():
    version = os.environ.get("PGVERSION", "15")
    subprocess.run(["pg_ctlcluster", version, "regress", "restart", "-m", "fast"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def worker_pid(ho):
    return ho.one("SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'"
                  " AND datname = 'shop'")


def wait_for(what, seconds, test):
    end = time.time() + seconds
    while time.time() < end:
        try:
            if test():
                return True
        except (psycopg2.Error, sqlite3.Error):
            pass
        time.sleep(0.1)
    log(f"gave up waiting for {what}")
    return False


# ---- the stores ---------------------------------------------------------------

class Store(shopwalk.Store):
    """A store of shopwalk.py whose agent connects straight to the server as its role."""

    def __init__(self, name):
        super().__init__(name, *STORES[name], tmp, rng)
        self.password = "pw-" + name

    def start(self, pull_bytes=None):
        args = ["--server", f"host=localhost port={os.environ['PGPORT']} dbname=shop user=store_{self.name}",
                "--interval", "1000"]
        if pull_bytes:
            args += ["--pull-bytes", str(pull_bytes)]
        super().start(args, env=dict(os.environ, PGPASSWORD=self.password))


# ---- setup ----------------------------------------------------------------------

psql("postgres", "SET client_min_messages = warning; DROP DATABASE IF EXISTS shop")
psql("postgres", "CREATE DATABASE shop")
for name in STORES:
    psql("postgres", f"SET client_min_messages = warning; DROP ROLE IF EXISTS store_{name}")
    psql("postgres", f"CREATE ROLE store_{name} LOGIN PASSWORD 'pw-{name}'")
subprocess.run(["psql", "-XAtq", "-v", "ON_ERROR_STOP=1", "-d", "shop", "-c", "CREATE EXTENSION magic_sync",
                "-f", os.path.join(SHOP, "schema.sql"), "-f", os.path.join(SHOP, "declare.sql"),
                "-f", os.path.join(SHOP, "seed.sql")], check=True, stdout=subprocess.DEVNULL)
# the worker relays in shop; small messages, so that a snapshot takes many
psql("postgres", "ALTER SYSTEM SET magic_sync.database = 'shop'")
psql("postgres", "ALTER SYSTEM SET magic_sync.naptime = 200")
psql("postgres", "ALTER SYSTEM SET magic_sync.message_bytes = 2048")
restart_server()
ho = HeadOffice("shop")
check("the worker starts with the server", wait_for("the worker", 20, lambda: worker_pid(ho) is not None), True)

# Porto, a third store, in the south; 3000 more southern products make the
# snapshots of Lisbon and Porto long enough to kill an agent in the middle of one
porto = STORES["porto"][0]
ho.exec("INSERT INTO stores VALUES (%s, 'Porto', 'south')", (porto,))
ho.exec("INSERT INTO stock (store, product, qty) VALUES (%s, 6, 15), (%s, 7, 30), (%s, 2, 4)", (porto, porto, porto))
ho.exec("INSERT INTO group_stores VALUES ('south', %s), ('club', %s)", (porto, porto))
ho.exec("INSERT INTO products (id, name, region, price) SELECT g, 'item ' || g, 'south', (g % 97) + 0.5"
        " FROM generate_series(10000, 12999) g")
for name, (uuid, region) in STORES.items():
    ho.exec("SELECT sync.replica_add(%s, %s, role => %s)", (uuid, region, f"store_{name}"))
stores = {name: Store(name) for name in STORES}

# the agent's exit codes, against the real server
QUIET = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
conn = f"host=localhost port={os.environ['PGPORT']} dbname=shop user=store_lisbon"
env = dict(os.environ, PGPASSWORD="pw-lisbon")
rc = subprocess.run([AGENT, "--once", "--quiet", "--server", conn, "--replica", STORES["oslo"][0],
                     "--db", os.path.join(tmp, "role.db")], env=env, **QUIET).returncode
check("another store's role is refused: exit 77", rc, 77)
rc = subprocess.run([AGENT, "--once", "--quiet", "--server", conn, "--replica", "dddddddd-0000-4000-8000-000000000000",
                     "--db", os.path.join(tmp, "unknown.db")], env=env, **QUIET).returncode
check("a replica never registered is refused: exit 77", rc, 77)
rc = subprocess.run([AGENT, "--once", "--quiet", "--server", conn + " password=wrong", "--replica", STORES["lisbon"][0],
                     "--db", os.path.join(tmp, "password.db")], env=os.environ, **QUIET).returncode
check("a wrong password is refused: exit 77", rc, 77)
rc = subprocess.run([AGENT, "--once", "--quiet", "--server", "host=localhost port=1", "--replica", STORES["lisbon"][0],
                     "--db", os.path.join(tmp, "unreachable.db")], **QUIET).returncode
check("a server out of reach with --once: exit 69", rc, 69)
rc = subprocess.run([AGENT, "--once", "--quiet", "--server", conn, "--replica", STORES["lisbon"][0]], **QUIET).returncode
check("no --db: exit 64", rc, 64)

stores["oslo"].start()
stores["lisbon"].start()

# ---- Porto's agent killed in the middle of its snapshot ------------------------

p = stores["porto"]
p.start(pull_bytes=1024)
mid = False
end = time.time() + 30
while time.time() < end:
    try:
        if os.path.exists(p.path) and p.has("products") and p.status()["snapshot"] is not None \
                and p.one("SELECT count(*) FROM products") >= 300:
            p.agent.kill()
            mid = True
            break
    except sqlite3.Error:
        pass
    time.sleep(0.002)
rc = p.agent.wait()
p.agent = None
check("Porto's agent dies by SIGKILL", rc, -signal.SIGKILL)
check("it died in the middle of its snapshot", mid and p.status()["snapshot"] is not None, True)
held_then = p.one("SELECT count(*) FROM products")
check("what it applied of the snapshot is in the file", held_then >= 300, True)
log(f"Porto's agent killed mid-snapshot, {held_then} products applied")

# ---- the random walk -------------------------------------------------------------


# A stock row the head office deleted is never created again: a store's count
# of the row it deleted may then be filed on the new row while the store is
# sent it afresh, or dropped while the store keeps it (the delete and the new
# row reach the store as one upsert, and an upsert never overwrites the
# store's column) - the two-way column diverges.  Reported with issue 7.
deleted_stock = set()


def ho_step():
    k = rng.random()
    store = STORES[rng.choice(list(STORES))][0]
    products = [r[0] for r in ho.rows("SELECT id FROM products WHERE id < 10000")]
    if k < 0.12:
        ho.exec("UPDATE products SET price = price + 0.10 WHERE id = %s", (rng.choice(products),))
    elif k < 0.17:
        ho.exec("UPDATE products SET region = CASE region WHEN 'north' THEN 'south' ELSE 'north' END"
                " WHERE id = %s", (rng.choice(products),))
    elif k < 0.22:
        pid = max(products) + 1
        ho.exec("INSERT INTO products (id, name, region, price) VALUES (%s, %s, %s, 1.99)",
                (pid, f"new {pid}", rng.choice(["north", "south"])))
    elif k < 0.32:
        product = rng.choice(products)
        if (store, product) not in deleted_stock:
            ho.exec("INSERT INTO stock (store, product, qty) VALUES (%s, %s, %s) ON CONFLICT (store, product)"
                    " DO UPDATE SET qty = EXCLUDED.qty", (store, product, rng.randint(0, 99)))
    elif k < 0.36:
        for key in ho.rows("DELETE FROM stock WHERE (store, product) IN (SELECT store, product FROM stock"
                           " WHERE store = %s ORDER BY random() LIMIT 1) RETURNING store::text, product", (store,)):
            deleted_stock.add(tuple(key))
    elif k < 0.40:
        ho.exec("INSERT INTO customers (id, name, city) SELECT coalesce(max(id), 0) + 1, 'customer ' || (coalesce(max(id), 0) + 1),"
                " 'town' FROM customers")
    elif k < 0.44:
        ho.exec("UPDATE customers SET city = %s WHERE id = (SELECT id FROM customers ORDER BY random() LIMIT 1)",
                (rng.choice(["Oslo", "Porto", "Faro", "Bergen"]),))
    elif k < 0.58:
        oid = (ho.one("SELECT max(id) FROM orders") or 0) + 1
        customer = rng.choice([None] + [r[0] for r in ho.rows("SELECT id FROM customers")])
        ho.exec("INSERT INTO orders (id, store, customer) VALUES (%s, %s, %s)", (oid, store, customer))
        for line in range(1, rng.randint(1, 3) + 1):
            ho.exec("INSERT INTO order_lines VALUES (%s, %s, %s, %s)", (oid, line, rng.choice(products), rng.randint(1, 5)))
    elif k < 0.64:
        ho.exec("UPDATE orders SET status = CASE status WHEN 'open' THEN 'closed' ELSE 'open' END"
                " WHERE id = (SELECT id FROM orders ORDER BY random() LIMIT 1)")
    elif k < 0.67:
        ho.exec("DELETE FROM orders WHERE id = (SELECT id FROM orders ORDER BY random() LIMIT 1)")
    elif k < 0.71:
        ho.exec("UPDATE order_lines SET qty = qty + 1 WHERE (order_id, line) IN"
                " (SELECT order_id, line FROM order_lines ORDER BY random() LIMIT 1)")
    elif k < 0.77:
        ho.exec("INSERT INTO prices VALUES ((SELECT id FROM price_lists ORDER BY random() LIMIT 1), %s, %s)"
                " ON CONFLICT (price_list, product) DO UPDATE SET price = EXCLUDED.price",
                (rng.choice(products), rng.randint(100, 999) / 100))
    elif k < 0.81:
        ho.exec("INSERT INTO price_list_groups VALUES ((SELECT id FROM price_lists ORDER BY random() LIMIT 1), %s)"
                " ON CONFLICT DO NOTHING", (rng.choice(["north", "south", "club", "porto"]),))
    elif k < 0.84:
        ho.exec("DELETE FROM price_list_groups WHERE (price_list, grp) IN"
                " (SELECT price_list, grp FROM price_list_groups ORDER BY random() LIMIT 1)")
    elif k < 0.88:
        ho.exec("INSERT INTO group_stores VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (rng.choice(["north", "south", "club", "porto"]), store))
    elif k < 0.91:
        ho.exec("DELETE FROM group_stores WHERE (grp, store) IN (SELECT grp, store FROM group_stores"
                " ORDER BY random() LIMIT 1)")
    elif k < 0.94:
        lid = (ho.one("SELECT max(id) FROM price_lists") or 0) + 1
        ho.exec("INSERT INTO price_lists VALUES (%s, %s)", (lid, f"list {lid}"))
        ho.exec("INSERT INTO price_list_groups VALUES (%s, %s)", (lid, rng.choice(["north", "south", "club", "porto"])))
    else:
        ho.exec("UPDATE stores SET name = name || '.' WHERE id = %s", (store,))


def store_step(s):
    k = rng.random()
    if k < 0.5:
        s.sell()
    elif k < 0.7:
        s.correct()
    elif k < 0.78:
        s.void()
    else:
        s.count()


events = {
    STEPS // 8: "porto back",
    STEPS // 4: "lisbon offline",
    STEPS * 3 // 8: "worker terminated",
    STEPS // 2: "lisbon back",
    STEPS * 5 // 8: "server restart",
}
for step in range(STEPS):
    event = events.get(step)
    if event == "porto back":
        log("Porto's agent starts again")
        p.start()
    elif event == "lisbon offline":
        log("Lisbon goes offline")
        check("Lisbon's agent stops cleanly on SIGTERM", stores["lisbon"].stop(), 0)
    elif event == "worker terminated":
        pid = worker_pid(ho)
        log(f"the worker ({pid}) is terminated")
        ho.exec("SELECT pg_terminate_backend(%s)", (pid,))
    elif event == "lisbon back":
        log("Lisbon comes back")
        stores["lisbon"].start()
    elif event == "server restart":
        log("the server restarts")
        restart_server()
    if rng.random() < 0.45:
        ho_step()
    else:
        store_step(stores[rng.choice(list(STORES))])
    time.sleep(0.03)
log(f"{STEPS} steps walked; sales written: "
    + ", ".join(f"{n} {len(s.sales)}" for n, s in stores.items()))
check("the worker came back after it was terminated", wait_for("the worker", 30, lambda: worker_pid(ho) is not None),
      True)

# ---- settling -------------------------------------------------------------------


def settled():
    return shopwalk.settled(ho, stores)


def settle():
    # stable twice in a row, a second apart
    end = time.time() + 90
    while time.time() < end:
        if wait_for("the stores to settle", max(1, end - time.time()), settled):
            time.sleep(1)
            if settled():
                return True
    return False


ok = settle()
check("everything settles", ok, True)
log("settled" if ok else "did not settle")
for r in ho.rows("SELECT r.id, t.name, i.key, i.reason FROM sync.inbox i JOIN sync.tables t ON t.id = i.tab"
                 " JOIN sync.replicas r ON r.id = i.replica"):
    print(f"FAIL inbox: {r}")
check("no upload waits in the inbox", ho.one("SELECT count(*) FROM sync.inbox"), 0)
check("nothing is quarantined", ho.one("SELECT count(*) FROM sync.quarantine"), 0)
check("no note is parked", ho.one("SELECT count(*) FROM sync.notes WHERE parked IS NOT NULL"), 0)

# ---- every store holds the server's wanted set, row by row ---------------------

tables = ho.rows("SELECT t.name, t.relid::text, t.key, t.retired FROM sync.tables t ORDER BY t.id")


for name, s in stores.items():
    wanted = {}
    for tname, key in ho.rows("SELECT t.name, w.key FROM sync.wanted(%s) w JOIN sync.tables t ON t.relid = w.tab",
                              (s.id,)):
        wanted.setdefault(tname, set()).add(key)
    held_rows = 0
    for tname, relid, key, retired in tables:
        srv = server_rows(ho, relid, key)
        rep = replica_rows(s, tname, key, retired)
        want = wanted.get(tname, set())
        check(f"{name} holds the wanted keys of {tname}", set(rep), want)
        differ = []
        for k in sorted(want & set(rep)):
            for col, value in rep[k].items():
                if col == retired:
                    continue
                if col not in srv[k]:
                    differ.append((k, col, "not on the server"))
                elif srv[k][col] != value:
                    differ.append((k, col, srv[k][col], value))
        check(f"{name}'s rows of {tname} have the server's values", differ[:5], [])
        held_rows += len(rep)
    refused = s.one("SELECT count(*) FROM _sync_refused")
    check(f"{name} refused nothing", refused, 0)
    log(f"{name} holds {held_rows} rows, equal to its wanted set")

# ---- every sale reached the head office, as the store last wrote it -------------

for name, s in stores.items():
    at_hq = {r[0]: {"product": r[1], "qty": r[2], "total_cents": r[3], "sold_at": r[4], "v": r[5]}
             for r in ho.rows("SELECT id, product, qty, total_cents, sold_at, v FROM sales WHERE store = %s", (s.id,))}
    check(f"every sale of {name} reached the head office ({len(s.sales)})", at_hq, s.sales)

# the digests agree too, and the agents said what they did
for name, s in stores.items():
    digest = json.loads(s.one("SELECT sync_digest()"))
    server = {t: {"count": c, "fnv": f} for t, c, f in ho.rows(
        "SELECT t.name, (d).count, (d).fnv FROM sync.tables t,"
        " LATERAL (SELECT sync.digest(h.key) AS d FROM sync.held h JOIN sync.replicas r ON r.id = h.replica"
        "          WHERE h.replica = %s AND h.tab = t.id AND h.taken IS NULL AND h.refused IS NULL"
        "            AND h.number <= r.acked_number) x WHERE (d).count > 0", (s.id,))}
    check(f"{name}'s digests agree with the server's record",
          {t: {"count": d["count"], "fnv": d["fnv"]} for t, d in digest.items() if d["count"] > 0}, server)

for name, s in stores.items():
    check(f"{name}'s agent stops cleanly at the end", s.stop(), 0)
events = p.events()
runs = [e.get("run") for e in events if e["event"] == "test"]
second = events[[i for i, e in enumerate(events) if e.get("run") == 2][0]:]
check("Porto's agent ran twice", runs, [1, 2])
check("its second run finished the snapshot the first began",
      any(e["event"] == "snapshot" and e["done"] for e in second), True)
check("its rounds are reported", any(e["event"] == "round" and e["messages"] > 0 for e in second), True)
lisbon_events = stores["lisbon"].events()
stores["oslo"].events()
check("Lisbon's agent lost the server at the restart and reconnected",
      any(e["event"] == "lost" for e in lisbon_events) and
      sum(1 for e in lisbon_events if e["event"] == "connected") >= 3, True)
log(f"seed {SEED}, {STEPS} steps")
if shop_failed():
    print(f"the agents' logs and the stores' files are kept in {tmp}")
else:
    shutil.rmtree(tmp, ignore_errors=True)
finish()
