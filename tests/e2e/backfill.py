#!/usr/bin/python3
"""backfill.py - rows already in a file before its first snapshot are never
deleted by it (issue 40, the backfill), with real SQLite files and replica
roles that are not superusers:

  - till 1's app made `sales` and `products` itself, with the schema the
    server declares, and wrote into them before the replica was set up:
    after the first snapshot every sale is still there; those the till may
    write are noted, uploaded and filed on the server; one pointing at a
    store the till does not reach, and one in another till's name, are
    refused, each with its reason, and set aside in the file, not dropped;
    products (a catalog), which held stale rows, ends equal to the server's;
  - till 2 was provisioned, filed a sale, wrote another, and then lost its
    provisioning (every _sync_ object of its file gone): the server
    provisions it again, and both sales stay, the unsent one filed;
  - a table of the app's that does not fit the declaration stays the
    app's (tests/e2e/host_tables.py covers it whole).

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import tempfile

from harness import Replica, Server, check, finish

T1 = "bfbfbfbf-0000-4000-8000-000000000001"
T2 = "bfbfbfbf-0000-4000-8000-000000000002"
OTHER = "bfbfbfbf-0000-4000-8000-0000000000ff"
DB = "backfill"
tmp = tempfile.mkdtemp(prefix="backfill.")

root = Server(DB)
for role in ("backfill_1", "backfill_2"):
    root.exec(f"DROP ROLE IF EXISTS {role}")
    root.exec(f"CREATE ROLE {role} LOGIN PASSWORD 'pw-{role}'")
root.exec(f"""
CREATE TABLE store (id text PRIMARY KEY, till uuid NOT NULL, name text NOT NULL);
CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE sales (till uuid, id int, store text NOT NULL REFERENCES store, amount int NOT NULL,
                    PRIMARY KEY (till, id));
CREATE INDEX ON sales (store);
INSERT INTO store VALUES ('X', '{T1}', 'north'), ('Y', '{OTHER}', 'south'), ('Z', '{T2}', 'east');
INSERT INTO products VALUES (1, 'tea'), (2, 'coffee');
SELECT sync.mirror('store', 'catalog', 'assigned(till)');
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('sales', 'record', 'follows(store)', origin => 'till');
SELECT sync.replica_add('{T1}', role => 'backfill_1');
SELECT sync.replica_add('{T2}', role => 'backfill_2');
""")


def till(replica, n):
    srv = Server(DB, create=False, user=f"backfill_{n}", password=f"pw-backfill_{n}")
    return Replica(srv, replica, os.path.join(tmp, f"{n}.db"))


def settle(r, rounds=5):
    for _ in range(rounds):
        root.relay()
        r.sync()


def server_sales(t):
    return root.rows("SELECT id, store, amount FROM sales WHERE till = %s ORDER BY id", (t,))


def aside(r):
    """the rows of sales set aside in the file: {key: (reason, sqlstate)}"""
    p = json.loads(r.one("SELECT sync_progress()")).get("sales", {})
    return {tuple(row["key"]): (row.get("reason") or "", row.get("sqlstate")) for row in p.get("set_aside_rows", [])}


# till 1: the app's migrations ran before the replica was set up, as the server declares
r1 = till(T1, 1)
r1.q("CREATE TABLE sales (till TEXT, id INTEGER, store TEXT NOT NULL, amount INTEGER NOT NULL,"
     " PRIMARY KEY (till, id))")
r1.q("CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
r1.q("INSERT INTO sales VALUES (?, 1, 'X', 10), (?, 2, 'X', 20), (?, 3, 'Y', 30), (?, 4, 'X', 40)",
     (T1, T1, T1, OTHER))
r1.q("INSERT INTO products VALUES (1, 'old tea'), (9, 'gone')")
root.relay()
r1.sync()
check("till 1: after the first snapshot, every sale written before it is still in the file",
      r1.q("SELECT till, id, store, amount FROM sales ORDER BY id"),
      [(T1, 1, 'X', 10), (T1, 2, 'X', 20), (T1, 3, 'Y', 30), (OTHER, 4, 'X', 40)])
a1 = aside(r1)
check("the sale pointing at a store it does not reach is set aside, with its reason",
      ("points at the row of table \"store\"" in a1.get((T1, "3"), ("", None))[0], a1.get((T1, "3"), ("", None))[1]),
      (True, "42501"))
check("the sale in another till's name is set aside, with its reason",
      a1.get((OTHER, "4")), ("refused by the server: a replica writes and deletes only its own records", "42501"))
check("and the server says both were refused",
      sorted(r[0][:40] for r in root.rows("SELECT reason FROM sync.health() WHERE replica = %s"
                                          " AND kind = 'writes refused'", (T1,))),
      ['refused by the server: a replica writes ', 'refused by the server: column "store" of'])
settle(r1)
check("then the one in another's name is taken back, as any write in another's name (design 5.2)",
      r1.q("SELECT till, id, store, amount FROM sales ORDER BY id"),
      [(T1, 1, 'X', 10), (T1, 2, 'X', 20), (T1, 3, 'Y', 30)])
check("while the till's own stays, set aside with its reason", list(aside(r1)), [(T1, "3")])
check("its own sales of its store are filed on the server", server_sales(T1), [(1, 'X', 10), (2, 'X', 20)])
check("none in another's name is", server_sales(OTHER), [])
check("nothing of sales is unsent or unfiled",
      {k: json.loads(r1.one("SELECT sync_progress()"))["sales"][k] for k in ("unsent", "unfiled")},
      {"unsent": 0, "unfiled": 0})
check("products, a catalog, ends equal to the server's (stale rows replaced, gone ones let go)",
      r1.q("SELECT id, name FROM products ORDER BY id"), [(1, 'tea'), (2, 'coffee')])
try:
    r1.q("UPDATE products SET name = 'mine' WHERE id = 2")
    guarded = False
except Exception:
    guarded = True
check("products is guarded like any catalog it made", guarded, True)
r1.q("INSERT INTO sales VALUES (?, 5, 'X', 50)", (T1,))
settle(r1)
check("a sale written after is filed as ever", server_sales(T1), [(1, 'X', 10), (2, 'X', 20), (5, 'X', 50)])

# till 2: provisioned, a sale filed, another written, then its provisioning lost
r2 = till(T2, 2)
settle(r2)
r2.q("INSERT INTO sales VALUES (?, 1, 'Z', 5)", (T2,))
settle(r2)
check("till 2's first sale is filed", server_sales(T2), [(1, 'Z', 5)])
r2.q("INSERT INTO sales VALUES (?, 2, 'Z', 6)", (T2,))
for (kind, name) in r2.q("SELECT type, name FROM sqlite_master WHERE name LIKE '\\_sync%' ESCAPE '\\'"
                         " AND type IN ('table', 'trigger') ORDER BY type DESC"):
    r2.q(f'DROP {kind.upper()} IF EXISTS "{name}"')
r2.close()
r2 = till(T2, 2)
check("its file no longer knows it was provisioned", r2.status()["applied"], 0)
settle(r2, 8)
check("provisioned again: both sales still in the file",
      r2.q("SELECT id, store, amount FROM sales ORDER BY id"), [(1, 'Z', 5), (2, 'Z', 6)])
check("and the one never sent is filed on the server", server_sales(T2), [(1, 'Z', 5), (2, 'Z', 6)])
check("its products are the server's", r2.q("SELECT id, name FROM products ORDER BY id"), [(1, 'tea'), (2, 'coffee')])
check("nothing is set aside", aside(r2), {})
check("it holds what it should", root.held(T2), root.wanted(T2))
finish()
