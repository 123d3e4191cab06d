"""shopwalk.py - the shop's walk as pieces, for scripts that run it over
other topologies (fleet.py: a standby, pgbouncer, TLS): the head office's
connection, a store (its file and its agent), one random step on either
side, and the checks that end a walk (every store holds its wanted set, row
by row, and every sale it wrote is at the head office as it last wrote it).
The same walk as tests/e2e/shop.py, parameterized by how an agent connects.
"""
import json
import os
import random
import signal
import sqlite3
import subprocess
import time

import psycopg2

from harness import EXTENSION, TOP, check

AGENT = os.path.join(TOP, "magic_sync_agent")
SHOP = os.path.join(TOP, "examples", "shop")


class HeadOffice:
    """A psycopg2 connection that reconnects after a server restart."""

    def __init__(self, dbname, **kw):
        self.dbname = dbname
        self.kw = kw
        self.conn = None

    def connect(self):
        for _ in range(100):
            try:
                self.conn = psycopg2.connect(dbname=self.dbname, **self.kw)
                self.conn.autocommit = True
                return
            except psycopg2.OperationalError:
                time.sleep(0.2)
        raise RuntimeError("the server does not come back")

    def rows(self, sql, args=None):
        for attempt in range(3):
            if self.conn is None or self.conn.closed:
                self.connect()
            try:
                with self.conn.cursor() as c:
                    c.execute(sql, args)
                    return c.fetchall() if c.description else []
            except (psycopg2.OperationalError, psycopg2.InterfaceError):
                self.conn = None
                if attempt == 2:
                    raise
                time.sleep(0.3)
        return []

    def one(self, sql, args=None):
        r = self.rows(sql, args)
        return r[0][0] if r else None

    def exec(self, sql, args=None):
        self.rows(sql, args)


class Store:
    """A store: its SQLite file, what it wrote, and its agent (args given by the caller)."""

    def __init__(self, name, uuid, region, tmp, rng):
        self.name, self.id, self.region = name, uuid, region
        self.rng = rng
        self.path = os.path.join(tmp, f"{name}.db")
        self.log = os.path.join(tmp, f"{name}.log")
        self.agent = None
        self.db = None
        self.sales = {}
        self.next_sale = 1
        self.runs = 0

    def start(self, args, env=None):
        self.runs += 1
        with open(self.log, "a") as out:
            out.write(json.dumps({"event": "test", "run": self.runs}) + "\n")
            self.agent = subprocess.Popen([AGENT, "--replica", self.id, "--db", self.path, "--json",
                                           "--name", self.name] + args,
                                          stdout=out, stderr=subprocess.STDOUT, env=env or os.environ)

    def stop(self, sig=signal.SIGTERM):
        self.agent.send_signal(sig)
        rc = self.agent.wait(timeout=30)
        self.agent = None
        return rc

    def open(self):
        if self.db is None:
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.db.enable_load_extension(True)
            self.db.load_extension(EXTENSION)
            self.db.enable_load_extension(False)
        return self.db

    def q(self, sql, args=()):
        return self.open().execute(sql, args).fetchall()

    def one(self, sql, args=()):
        r = self.q(sql, args)
        return r[0][0] if r else None

    def status(self):
        return json.loads(self.one("SELECT sync_status()"))

    def has(self, table):
        return self.one("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)) == 1

    def backlog(self):
        return sum(v["unsent"] + v["unfiled"] + v["set_aside"]
                   for v in json.loads(self.one("SELECT sync_progress()")).values())

    def events(self):
        out = []
        for line in open(self.log):
            try:
                out.append(json.loads(line))
            except ValueError:
                check(f"every line of {self.name}'s log is JSON", line, None)
        return out

    def sell(self):
        if not self.has("products"):
            return
        # as a till would: no sale before the device knows its own store (a
        # first sync cut short may not have brought it yet; the file refuses
        # a sale pointing at a store it does not hold)
        if not self.has("stores") or not self.q("SELECT 1 FROM stores WHERE id = ?", (self.id,)):
            return
        products = [r[0] for r in self.q("SELECT id FROM products")]
        if not products:
            return
        rng = self.rng
        sale = {"product": rng.choice(products), "qty": rng.randint(1, 9),
                "total_cents": rng.randint(100, 9999), "sold_at": f"2024-05-{rng.randint(1, 28):02d}", "v": 1}
        sid = self.next_sale
        self.next_sale += 1
        self.q("INSERT INTO sales (store, id, product, qty, total_cents, sold_at, v) VALUES (?, ?, ?, ?, ?, ?, ?)",
               (self.id, sid, sale["product"], sale["qty"], sale["total_cents"], sale["sold_at"], sale["v"]))
        self.sales[sid] = sale

    def correct(self):
        if not self.sales:
            return
        sid = self.rng.choice(sorted(self.sales))
        sale = dict(self.sales[sid], qty=self.rng.randint(1, 9), total_cents=self.rng.randint(100, 9999),
                    v=self.sales[sid]["v"] + 1)
        self.q("UPDATE sales SET qty = ?, total_cents = ?, v = ? WHERE store = ? AND id = ?",
               (sale["qty"], sale["total_cents"], sale["v"], self.id, sid))
        self.sales[sid] = sale

    def void(self):
        if len(self.sales) < 4:
            return
        sid = self.rng.choice(sorted(self.sales))
        self.q("DELETE FROM sales WHERE store = ? AND id = ?", (self.id, sid))
        del self.sales[sid]

    def count(self):
        if not self.has("stock"):
            return
        rows = self.q("SELECT product FROM stock")
        if rows:
            self.q("UPDATE stock SET counted = ? WHERE product = ?",
                   (self.rng.randint(0, 99), self.rng.choice(rows)[0]))


def setup(dbname, roles):
    """The shop's database: schema, declarations, seed; a login role per store."""
    subprocess.run(["psql", "-XAtq", "-v", "ON_ERROR_STOP=1", "-d", "postgres",
                    "-c", "SET client_min_messages = warning", "-c", f"DROP DATABASE IF EXISTS {dbname}",
                    "-c", f"CREATE DATABASE {dbname}"], check=True, stdout=subprocess.DEVNULL)
    for role, password in roles.items():
        subprocess.run(["psql", "-XAtq", "-v", "ON_ERROR_STOP=1", "-d", "postgres",
                        "-c", "SET client_min_messages = warning", "-c", f"DROP ROLE IF EXISTS {role}",
                        "-c", f"CREATE ROLE {role} LOGIN PASSWORD '{password}'"],
                       check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["psql", "-XAtq", "-v", "ON_ERROR_STOP=1", "-d", dbname, "-c", "CREATE EXTENSION magic_sync",
                    "-f", os.path.join(SHOP, "schema.sql"), "-f", os.path.join(SHOP, "declare.sql"),
                    "-f", os.path.join(SHOP, "seed.sql")], check=True, stdout=subprocess.DEVNULL)


class Walk:
    """The head office's side of the walk; deleted stock rows are never made again (shop.py says why)."""

    def __init__(self, ho, stores, rng):
        self.ho, self.stores, self.rng = ho, stores, rng
        self.deleted_stock = set()

    def ho_step(self):
        ho, rng = self.ho, self.rng
        k = rng.random()
        store = rng.choice(list(self.stores.values())).id
        products = [r[0] for r in ho.rows("SELECT id FROM products WHERE id < 10000")]
        if k < 0.15:
            ho.exec("UPDATE products SET price = price + 0.10 WHERE id = %s", (rng.choice(products),))
        elif k < 0.20:
            ho.exec("UPDATE products SET region = CASE region WHEN 'north' THEN 'south' ELSE 'north' END"
                    " WHERE id = %s", (rng.choice(products),))
        elif k < 0.26:
            pid = max(products) + 1
            ho.exec("INSERT INTO products (id, name, region, price) VALUES (%s, %s, %s, 1.99)",
                    (pid, f"new {pid}", rng.choice(["north", "south"])))
        elif k < 0.38:
            product = rng.choice(products)
            if (store, product) not in self.deleted_stock:
                ho.exec("INSERT INTO stock (store, product, qty) VALUES (%s, %s, %s) ON CONFLICT (store, product)"
                        " DO UPDATE SET qty = EXCLUDED.qty", (store, product, rng.randint(0, 99)))
        elif k < 0.42:
            for key in ho.rows("DELETE FROM stock WHERE (store, product) IN (SELECT store, product FROM stock"
                               " WHERE store = %s ORDER BY random() LIMIT 1) RETURNING store::text, product",
                               (store,)):
                self.deleted_stock.add(tuple(key))
        elif k < 0.48:
            ho.exec("INSERT INTO customers (id, name, city) SELECT coalesce(max(id), 0) + 1,"
                    " 'customer ' || (coalesce(max(id), 0) + 1), 'town' FROM customers")
        elif k < 0.64:
            oid = (ho.one("SELECT max(id) FROM orders") or 0) + 1
            customer = rng.choice([None] + [r[0] for r in ho.rows("SELECT id FROM customers")])
            ho.exec("INSERT INTO orders (id, store, customer) VALUES (%s, %s, %s)", (oid, store, customer))
            for line in range(1, rng.randint(1, 3) + 1):
                ho.exec("INSERT INTO order_lines VALUES (%s, %s, %s, %s)",
                        (oid, line, rng.choice(products), rng.randint(1, 5)))
        elif k < 0.70:
            ho.exec("UPDATE orders SET status = CASE status WHEN 'open' THEN 'closed' ELSE 'open' END"
                    " WHERE id = (SELECT id FROM orders ORDER BY random() LIMIT 1)")
        elif k < 0.73:
            ho.exec("DELETE FROM orders WHERE id = (SELECT id FROM orders ORDER BY random() LIMIT 1)")
        elif k < 0.82:
            ho.exec("INSERT INTO prices VALUES ((SELECT id FROM price_lists ORDER BY random() LIMIT 1), %s, %s)"
                    " ON CONFLICT (price_list, product) DO UPDATE SET price = EXCLUDED.price",
                    (rng.choice(products), rng.randint(100, 999) / 100))
        elif k < 0.88:
            ho.exec("INSERT INTO group_stores VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    (rng.choice(["north", "south", "club", "porto"]), store))
        elif k < 0.92:
            ho.exec("DELETE FROM group_stores WHERE (grp, store) IN (SELECT grp, store FROM group_stores"
                    " ORDER BY random() LIMIT 1)")
        else:
            ho.exec("UPDATE stores SET name = name || '.' WHERE id = %s", (store,))

    def store_step(self, s):
        k = self.rng.random()
        if k < 0.5:
            s.sell()
        elif k < 0.7:
            s.correct()
        elif k < 0.78:
            s.void()
        else:
            s.count()

    def step(self):
        if self.rng.random() < 0.45:
            self.ho_step()
        else:
            self.store_step(self.rng.choice(list(self.stores.values())))


def settled(ho, stores):
    """Every note planned, nothing to provision, every message acknowledged, every store's backlog empty."""
    if ho.one("SELECT count(*) FROM sync.notes WHERE NOT done AND parked IS NULL") != 0:
        return False
    if ho.one("SELECT count(*) FROM sync.replicas WHERE provision") != 0:
        return False
    if ho.one("SELECT count(*) FROM sync.outbox o JOIN sync.replicas r ON r.id = o.replica"
              " WHERE NOT o.dropped AND o.number > r.acked_number") != 0:
        return False
    for s in stores.values():
        st = s.status()
        if st["snapshot"] is not None or st["gap"] != 0 or s.backlog() != 0:
            return False
    return True


def wait_settled(ho, stores, seconds=120):
    """Settled twice in a row, a second apart."""
    end = time.time() + seconds
    while time.time() < end:
        try:
            if settled(ho, stores):
                time.sleep(1)
                if settled(ho, stores):
                    return True
        except (psycopg2.Error, sqlite3.Error):
            pass
        time.sleep(0.2)
    return False


def server_rows(ho, relid, key):
    parts = ", ".join(f"t.{k}::text" for k in key)
    return {k: json.loads(row, parse_float=str)
            for k, row in ho.rows(f"SELECT sync.key(ARRAY[{parts}]), row_to_json(t)::text FROM {relid} t")}


def replica_rows(s, table, key, retired):
    if not s.has(table):
        return {}
    cols = [r[1] for r in s.q(f'PRAGMA table_info("{table}")')]
    keyexpr = ", ".join(f'"{k}"' for k in key)
    live = f' AND "{retired}" IS NULL' if retired else ""
    return {r[0]: dict(zip(cols, r[1:])) for r in s.q(
        f'SELECT sync_key({keyexpr}), * FROM "{table}" WHERE sync_key({keyexpr}) NOT IN'
        f' (SELECT key FROM _sync_retired WHERE tbl = ?){live}', (table,))}


def check_converged(ho, stores):
    """Every store holds its wanted set with the server's values; every sale is at the head office."""
    tables = ho.rows("SELECT t.name, t.relid::text, t.key, t.retired FROM sync.tables t ORDER BY t.id")
    for name, s in stores.items():
        wanted = {}
        for tname, key in ho.rows("SELECT t.name, w.key FROM sync.wanted(%s) w"
                                  " JOIN sync.tables t ON t.relid = w.tab", (s.id,)):
            wanted.setdefault(tname, set()).add(key)
        for tname, relid, key, retired in tables:
            srv = server_rows(ho, relid, key)
            rep = replica_rows(s, tname, key, retired)
            want = wanted.get(tname, set())
            check(f"{name} holds the wanted keys of {tname}", set(rep), want)
            differ = [(k, col) for k in sorted(want & set(rep)) for col, value in rep[k].items()
                      if col != retired and (col not in srv[k] or srv[k][col] != value)]
            check(f"{name}'s rows of {tname} have the server's values", differ[:5], [])
        at_hq = {r[0]: {"product": r[1], "qty": r[2], "total_cents": r[3], "sold_at": r[4], "v": r[5]}
                 for r in ho.rows("SELECT id, product, qty, total_cents, sold_at, v FROM sales WHERE store = %s",
                                  (s.id,))}
        check(f"every sale of {name} reached the head office ({len(s.sales)})", at_hq, s.sales)


def rng_for(seed):
    return random.Random(seed)
