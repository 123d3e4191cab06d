#!/usr/bin/python3
"""Backlog benchmark (magic_sync.batch_notes).  Not a test: prints figures and
ratios against a baseline measured in the same run.

Two backlogs of about N notes -- every stock row of 20 stores updated; then
the same with a fifth of the products they point at -- each planned by one
pass that reads all of it
(batch_notes above N: the baseline), then by passes of at most B notes, each
closing its batch over the rows it touches (question.c).  Both start from the
same state: every replica holds what it should and acknowledged it.  Prints
the passes each took, the time, and the ratio to the baseline.

Run through bench/run (which starts a throw-away cluster):
  bench/run backlog.py [N [B ...]]
"""
import os
import sys
import time
import uuid

import psycopg2

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
BATCHES = [int(a) for a in sys.argv[2:]] or [100_000, 20_000]
STORES = 20


def connect():
    c = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    c.autocommit = True
    # sync.relay_pass() runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
    c.cursor().execute("SET default_transaction_isolation = 'repeatable read'")
    return c


conn = connect()
cur = conn.cursor()
cur.execute("SET client_min_messages = warning")
cur.execute("CREATE EXTENSION IF NOT EXISTS magic_sync")
per_store = N // STORES
products = per_store
cur.execute("""
    CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL, price numeric NOT NULL);
    CREATE TABLE stock (store uuid, product bigint REFERENCES products, qty int NOT NULL,
                        PRIMARY KEY (store, product));
""")
stores = [str(uuid.uuid4()) for _ in range(STORES)]
cur.execute("INSERT INTO products SELECT g, 'p' || g, g FROM generate_series(1, %s) g", (products,))
cur.execute("INSERT INTO stock SELECT s::uuid, g, 1 FROM unnest(%s::text[]) s, generate_series(1, %s) g",
            (stores, per_store))
cur.execute("SELECT sync.mirror('products', 'catalog', 'broadcast')")
cur.execute("SELECT sync.mirror('stock', 'catalog', 'assigned(store)')")
for s in stores:
    cur.execute("SELECT sync.replica_add(%s)", (s,))
cur.execute("VACUUM ANALYZE products, stock")


def settle():
    """Relay until no note waits, then acknowledge everything, as replicas would."""
    passes = 0
    while True:
        cur.execute("SELECT notes_read, provisioned FROM sync.relay_pass()")
        read, prov = cur.fetchone()
        passes += 1
        cur.execute("SELECT count(*) FROM sync.notes WHERE NOT done")
        if cur.fetchone()[0] == 0 and read == 0 and prov == 0:
            break
    cur.execute("UPDATE sync.replicas SET acked_number = last_number")
    cur.execute("DELETE FROM sync.held h USING sync.replicas r WHERE h.replica = r.id AND h.taken <= r.acked_number")
    cur.execute("DELETE FROM sync.outbox o USING sync.replicas r WHERE o.replica = r.id AND o.number <= r.acked_number")
    cur.execute("DELETE FROM sync.notes WHERE done")
    cur.execute("VACUUM ANALYZE sync.notes, sync.held, sync.outbox")
    return passes


def backlog(products_too):
    cur.execute("UPDATE stock SET qty = qty + 1")
    if products_too:
        cur.execute("UPDATE products SET price = price + 1 WHERE id % 5 = 0")
    cur.execute("SELECT count(*) FROM sync.notes WHERE NOT done")
    return cur.fetchone()[0]


settle()                                   # provisioned, acknowledged
print(f"backlog: {STORES} stores, {per_store} stock rows each, {products} products")
for products_too in (False, True):
    print("stock" + (" and products" if products_too else " only") + ":")
    results = []
    for batch in [10 * N] + BATCHES:
        notes = backlog(products_too)
        cur.execute("SET magic_sync.batch_notes = %s", (batch,))
        t = time.monotonic()
        passes = settle()
        took = time.monotonic() - t
        results.append((batch, notes, passes, took))
    base = results[0][3]
    for batch, notes, passes, took in results:
        label = "all at once" if batch >= 10 * N else f"batches of {batch}"
        print(f"  {label:>20}: {notes} notes, {passes} passes, {took:.2f} s  (ratio {took / base:.2f})")
