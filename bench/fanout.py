#!/usr/bin/python3
"""One broadcast change to many replicas (issue 14): the pass's time and the relay
backend's peak memory.  Not a test: prints figures and the targets they are judged by.

A table of 100 broadcast rows; R replicas registered, provisioned and acknowledged;
then one row changes and one sync.relay_pass() sends it to every replica: R messages,
one body.  Measured at R = 100 and R = 10,000, each pass in a backend of its own
warmed by one pass, its peak private memory (RssAnon, sampled every 10 ms) and the
peak of its anonymous memory above what it held before the pass.
Target: peak RssAnon <= 100 MB at 10,000 replicas (magic_sync.fill_bytes bounds the
messages being filled, 64 MB by default, and bodies are shared).

Run through bench/run (which starts a throw-away cluster):
  bench/run fanout.py [R ...]
"""
import os
import sys
import threading
import time
import uuid

import psycopg2

SIZES = [int(a) for a in sys.argv[1:]] or [100, 10_000]


def connect():
    c = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    c.autocommit = True
    c.cursor().execute("SET default_transaction_isolation = 'repeatable read'")
    c.cursor().execute("SET client_min_messages = warning")
    return c


class PeakAnon(threading.Thread):
    """Samples a backend's RssAnon (private memory) until stopped."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, False

    def sample(self):
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def run(self):
        while not self.done:
            self.peak = max(self.peak, self.sample())
            time.sleep(0.01)


def fanout(replicas):
    conn = connect()
    cur = conn.cursor()
    cur.execute("DROP EXTENSION IF EXISTS magic_sync CASCADE")
    cur.execute("DROP TABLE IF EXISTS products CASCADE")
    cur.execute("CREATE EXTENSION magic_sync")
    cur.execute("CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price numeric NOT NULL)")
    cur.execute("INSERT INTO products SELECT g, 'product ' || g, g FROM generate_series(1, 100) g")
    cur.execute("SELECT sync.mirror('products', 'catalog', 'broadcast')")
    cur.execute("SELECT count(sync.replica_add(('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid))"
                " FROM generate_series(1, %s) g", (replicas,))
    t = time.monotonic()
    cur.execute("SELECT * FROM sync.relay_pass()")          # provision them
    provision = time.monotonic() - t
    cur.execute("UPDATE sync.replicas SET acked_number = last_number")
    cur.execute("DELETE FROM sync.outbox")
    cur.execute("SELECT * FROM sync.prune(1000000)")
    cur.execute("VACUUM ANALYZE sync.held, sync.outbox, sync.replicas, sync.bodies")
    conn.close()

    conn = connect()
    cur = conn.cursor()
    cur.execute("UPDATE products SET price = price + 1 WHERE id = 1")
    cur.execute("SELECT * FROM sync.relay_pass()")          # warm, as the worker is
    cur.execute("SELECT pg_backend_pid()")
    peak = PeakAnon(cur.fetchone()[0])
    before = peak.sample()
    cur.execute("UPDATE products SET price = price + 1 WHERE id = 2")
    peak.start()
    t = time.monotonic()
    cur.execute("SELECT messages FROM sync.relay_pass()")
    took = time.monotonic() - t
    peak.done = True
    peak.join()
    messages = cur.fetchone()[0]
    cur.execute("SELECT count(DISTINCT body) FROM sync.outbox")
    bodies = cur.fetchone()[0]
    conn.close()
    assert messages == replicas, (messages, replicas)
    return provision, took, peak.peak, before, bodies


def main():
    print("one broadcast change to R replicas, one sync.relay_pass()")
    got = {}
    for r in SIZES:
        provision, took, peak, before, bodies = fanout(r)
        got[r] = (took, peak)
        print(f"  R={r:>6,}  provisioned in {provision:6.1f} s  pass {took * 1000:8.1f} ms"
              f"  ({took / r * 1e6:6.1f} us a replica)  peak RssAnon {peak / 1024:6.1f} MB"
              f"  (+{(peak - before) / 1024:.1f} MB over the pass)  bodies {bodies}")
    if len(SIZES) >= 2:
        small, big = min(SIZES), max(SIZES)
        print(f"R={big:,}: pass {got[big][0] * 1000:.0f} ms, {got[big][0] / got[small][0]:.0f} x R={small:,}"
              f" for {big // small} x the replicas; peak RssAnon {got[big][1] / 1024:.1f} MB (target <= 100 MB)")


if __name__ == "__main__":
    main()
