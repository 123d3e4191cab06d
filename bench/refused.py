#!/usr/bin/python3
"""What rows refused cost the relay (issue 19.6).  Not a test: prints figures.

200 replicas, 1,000 products broadcast, every replica provisioned.  Median
sync.relay_pass() (timed with its commit) of:
  idle      a pass with no note
  change    a one-row change, sent to every replica
each with no row refused, then with R rows refused (spread over the replicas,
none due: the wait of a minute); then the pass that sends R rows refused,
all due, to their replicas again.

  bench/run refused.py [--refused R] [--passes P]
"""
import os
import statistics
import sys
import time
import uuid

import psycopg2

args = sys.argv[1:]
REPLICAS = 200
REFUSED = 10_000
PASSES = 21
if "--refused" in args:
    REFUSED = int(args[args.index("--refused") + 1])
if "--passes" in args:
    PASSES = int(args[args.index("--passes") + 1])


def connect():
    c = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    c.autocommit = True
    c.cursor().execute("SET default_transaction_isolation = 'repeatable read'")
    c.cursor().execute("SET client_min_messages = warning")
    return c


def timed(cur, sql):
    t = time.monotonic()
    cur.execute(sql)
    return time.monotonic() - t


def passes(cur, change):
    idle, changed = [], []
    for i in range(PASSES):
        idle.append(timed(cur, "SELECT * FROM sync.relay_pass()"))
        if change:
            cur.execute("UPDATE products SET price = price + 1 WHERE id = %s", (1 + i,))
            changed.append(timed(cur, "SELECT * FROM sync.relay_pass()"))
            cur.execute("UPDATE sync.replicas SET acked_number = last_number")
            cur.execute("DELETE FROM sync.outbox")
    return statistics.median(idle) * 1000, statistics.median(changed) * 1000


conn = connect()
cur = conn.cursor()
cur.execute("DROP EXTENSION IF EXISTS magic_sync CASCADE")
cur.execute("DROP TABLE IF EXISTS products CASCADE")
cur.execute("CREATE EXTENSION magic_sync")
ids = [str(uuid.UUID(int=i + 1)) for i in range(REPLICAS)]
cur.execute("CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price numeric NOT NULL)")
cur.execute("INSERT INTO products SELECT g, 'p' || g, g FROM generate_series(1, 1000) g")
cur.execute("SELECT sync.mirror('products', 'catalog', 'broadcast')")
for r in ids:
    cur.execute("SELECT sync.replica_add(%s)", (r,))
cur.execute("SELECT * FROM sync.relay_pass()")
cur.execute("UPDATE sync.replicas SET acked_number = last_number")
cur.execute("DELETE FROM sync.outbox")
cur.execute("VACUUM ANALYZE sync.held, sync.outbox, sync.replicas, sync.notes")
print(f"{REPLICAS} replicas, 1,000 products broadcast, median of {PASSES} passes each")
idle, change = passes(cur, True)
print(f"  no row refused:          idle pass {idle:6.2f} ms   one-row change {change:6.2f} ms")
# refusals as sync.file records them: the held row marked, its count and due time
cur.execute("""
WITH r AS (SELECT h.* FROM sync.held h
            WHERE (hashtext(h.replica::text || h.key) & 2147483647) %% (%s * 1000 / %s) = 0 LIMIT %s)
, u AS (UPDATE sync.held h SET refused = 'a bench' FROM r
         WHERE h.replica = r.replica AND h.tab = r.tab AND h.key = r.key)
INSERT INTO sync.refused_rows (replica, tab, key, note, due)
SELECT replica, tab, key, note, now() + interval '1 minute' FROM r""", (REPLICAS, max(REFUSED, 1), REFUSED))
cur.execute("SELECT count(*) FROM sync.refused_rows")
n = cur.fetchone()[0]
cur.execute("VACUUM ANALYZE sync.held, sync.refused_rows")
idle, change = passes(cur, True)
print(f"  {n:,} refused, none due: idle pass {idle:6.2f} ms   one-row change {change:6.2f} ms")
cur.execute("UPDATE sync.refused_rows SET due = now() - interval '1 second'")
t = time.monotonic()
cur.execute("SELECT rows_sent, messages FROM sync.relay_pass()")
sent, messages = cur.fetchone()
print(f"  all {n:,} due: one pass sends {sent:,} rows in {messages:,} messages to their replicas"
      f" in {(time.monotonic() - t) * 1000:.0f} ms")
cur.execute("SELECT count(*) FILTER (WHERE due IS NULL), count(*) FILTER (WHERE due IS NOT NULL),"
            " (SELECT count(*) FROM sync.held WHERE refused IS NOT NULL) FROM sync.refused_rows")
print("  after it: sent and awaited, still due, held still refused:", cur.fetchone(),
      "(rows a change sent meanwhile went at once: their counts are over)")
conn.close()
