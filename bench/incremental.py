#!/usr/bin/python3
"""What a one-row change's pass costs, against the size of the database (issue 14).
Not a test: prints figures and the ratio it is judged by.

Three mirrored tables, 200 replicas registered and provisioned:
  products   broadcast, 1,000 rows (every replica holds them all)
  items      assigned(store), N rows spread over the replicas
  lines      follows(item), one per item, each pointing at a product
Then one-row changes, each followed by one sync.relay_pass() (timed with its
commit): a broadcast row (a product's price), an assigned row moving to
another replica (an item's store), a follower (a line's quantity).  The
median pass over the three kinds, at N = 10^4 and N = 10^6.
Targets: median pass <= 10 ms at 10^6, and 10^6 / 10^4 <= 1.5.

With --batch K, then K-row changes in one statement each, one pass each (an
assigned row changed in place, moved to another replica, a follower): the
pass's time a row, against the provisioning pass's time a held row (no
target: a batch costs what its rows and the replicas they go to cost).

  bench/run incremental.py [N ...] [--replicas R] [--changes C] [--batch K]
"""
import os
import statistics
import sys
import time
import uuid

import psycopg2

args = sys.argv[1:]
REPLICAS = 200
CHANGES = 9
if "--replicas" in args:
    i = args.index("--replicas")
    REPLICAS = int(args[i + 1])
    del args[i:i + 2]
if "--changes" in args:
    i = args.index("--changes")
    CHANGES = int(args[i + 1])
    del args[i:i + 2]
BATCH = 0
if "--batch" in args:
    i = args.index("--batch")
    BATCH = int(args[i + 1])
    del args[i:i + 2]
SIZES = [int(a) for a in args] or [10_000, 1_000_000]


def connect():
    c = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    c.autocommit = True
    # sync.relay_pass() runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
    c.cursor().execute("SET default_transaction_isolation = 'repeatable read'")
    c.cursor().execute("SET client_min_messages = warning")
    return c


def timed(cur, sql, args=None):
    t = time.monotonic()
    cur.execute(sql, args)
    return time.monotonic() - t


def relay_all(cur):
    """Passes until every note is done (a backlog takes a pass a batch)."""
    while True:
        cur.execute("SELECT * FROM sync.relay_pass()")
        cur.execute("SELECT EXISTS (SELECT FROM sync.notes WHERE NOT done)")
        if not cur.fetchone()[0]:
            return


def setup(n):
    """The tables, the replicas, every replica provisioned and acknowledged."""
    conn = connect()
    cur = conn.cursor()
    cur.execute("DROP EXTENSION IF EXISTS magic_sync CASCADE")
    cur.execute("DROP TABLE IF EXISTS lines, items, products CASCADE")
    cur.execute("CREATE EXTENSION magic_sync")
    ids = [str(uuid.UUID(int=i + 1)) for i in range(REPLICAS)]
    cur.execute("CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price numeric NOT NULL)")
    cur.execute("CREATE TABLE items (id bigint PRIMARY KEY, store uuid NOT NULL, name text NOT NULL)")
    cur.execute("CREATE TABLE lines (id bigint PRIMARY KEY, item bigint NOT NULL REFERENCES items,"
                " product int NOT NULL REFERENCES products, qty int NOT NULL)")
    cur.execute("CREATE INDEX ON lines (item)")
    cur.execute("CREATE INDEX ON items (store)")
    cur.execute("INSERT INTO products SELECT g, 'p' || g, g FROM generate_series(1, 1000) g")
    cur.execute("INSERT INTO items SELECT g, (%s::uuid[])[1 + g %% %s], 'i' || g FROM generate_series(1, %s) g",
                (ids, REPLICAS, n))
    cur.execute("INSERT INTO lines SELECT g, g, 1 + g %% 1000, 1 FROM generate_series(1, %s) g", (n,))
    cur.execute("VACUUM ANALYZE products, items, lines")
    cur.execute("SELECT sync.mirror('products', 'catalog', 'broadcast')")
    cur.execute("SELECT sync.mirror('items', 'catalog', 'assigned(store)')")
    cur.execute("SELECT sync.mirror('lines', 'catalog', 'follows(item)')")
    # sync.mirror notes the rows each table has: for no replica yet, so passes only
    # take them (a batch of magic_sync.batch_notes at a time); left for later, the
    # first timed passes would plan 2 * N of them in question for every replica
    relay_all(cur)
    for r in ids:
        cur.execute("SELECT sync.replica_add(%s)", (r,))
    t = timed(cur, "SELECT * FROM sync.relay_pass()")
    cur.execute("UPDATE sync.replicas SET acked_number = last_number")
    cur.execute("SELECT count(*) FROM sync.held")
    held = cur.fetchone()[0]
    cur.execute("VACUUM ANALYZE sync.held, sync.outbox, sync.replicas, sync.notes")
    cur.execute("CHECKPOINT")
    conn.close()
    return ids, held, t


def changes(n, ids):
    """Passes of one-row changes, in a session of its own, as the worker's is (warm)."""
    conn = connect()
    cur = conn.cursor()
    cur.execute("SELECT * FROM sync.relay_pass()")      # warm: the plan's temp tables
    kinds = {"broadcast": [], "assigned moves": [], "follower": []}
    for i in range(CHANGES):
        cur.execute("UPDATE products SET price = price + 1 WHERE id = %s", (1 + i,))
        kinds["broadcast"].append(timed(cur, "SELECT * FROM sync.relay_pass()"))
        item = 1 + (i * 7919) % n
        cur.execute("UPDATE items SET store = %s WHERE id = %s", (ids[(i * 31 + 5) % len(ids)], item))
        kinds["assigned moves"].append(timed(cur, "SELECT * FROM sync.relay_pass()"))
        cur.execute("UPDATE lines SET qty = qty + 1 WHERE id = %s", (1 + (i * 104729) % n,))
        kinds["follower"].append(timed(cur, "SELECT * FROM sync.relay_pass()"))
    cur.execute("SELECT count(*) FROM sync.notes WHERE NOT done")
    assert cur.fetchone()[0] == 0
    conn.close()
    return kinds


def batches(n, ids, k):
    """Passes of k-row changes, one statement each, in a warm session."""
    conn = connect()
    cur = conn.cursor()
    cur.execute("SELECT * FROM sync.relay_pass()")
    cur.execute("UPDATE sync.replicas SET acked_number = last_number")
    k = min(k, n)
    kinds = {}
    cur.execute("UPDATE items SET name = name || 'x' WHERE id <= %s", (k,))
    kinds["assigned"] = timed(cur, "SELECT * FROM sync.relay_pass()")
    cur.execute("UPDATE items SET store = (%s::uuid[])[1 + (id + 1) %% %s] WHERE id <= %s", (ids, len(ids), k))
    kinds["assigned moves"] = timed(cur, "SELECT * FROM sync.relay_pass()")
    cur.execute("UPDATE lines SET qty = qty + 1 WHERE id <= %s", (k,))
    kinds["follower"] = timed(cur, "SELECT * FROM sync.relay_pass()")
    cur.execute("SELECT count(*) FROM sync.notes WHERE NOT done")
    assert cur.fetchone()[0] == 0
    conn.close()
    return k, kinds


def main():
    print(f"one-row changes, one sync.relay_pass() each, {REPLICAS} replicas, {CHANGES} changes of each kind")
    medians = {}
    for n in SIZES:
        ids, held, provision = setup(n)
        kinds = changes(n, ids)
        every = [t for ts in kinds.values() for t in ts]
        medians[n] = statistics.median(every)
        line = "  ".join(f"{k} {statistics.median(v) * 1000:6.1f} ms" for k, v in kinds.items())
        print(f"  N={n:>9,}  ({held:,} held, provisioned in {provision:.1f} s)  {line}"
              f"  median {medians[n] * 1000:6.1f} ms  max {max(every) * 1000:6.1f} ms")
        if BATCH:
            k, kinds = batches(n, ids, BATCH)
            per_held = provision / held
            line = "  ".join(f"{name} {t:.2f} s ({t / k * 1e6:.0f} us a row, {t / k / per_held:.1f}x)"
                             for name, t in kinds.items())
            print(f"    {k:,}-row changes, one pass each: {line};"
                  f" the provisioning pass {per_held * 1e6:.1f} us a held row")
    if len(SIZES) >= 2:
        big, small = max(SIZES), min(SIZES)
        print(f"median pass at N={big:,}: {medians[big] * 1000:.1f} ms (target <= 10 ms);"
              f" N={big:,} / N={small:,} = {medians[big] / medians[small]:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
