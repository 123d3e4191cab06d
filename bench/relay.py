#!/usr/bin/python3
"""Relay benchmarks (issue 4).  Not a test: prints figures and ratios against a
baseline measured in the same run, because these machines are noisy.

  snapshot   provisioning one replica with N five-column rows, against the
             floor of the work it cannot avoid: COPY (SELECT row_to_json(t))
             of the same rows, plus an INSERT ... SELECT of one held-like row
             per row into a table indexed like sync.held.  Target <= 2.
  fan-out    one changed broadcast row to 1 replica vs to 200.  Target <= 10.
  A replica holds a one-row table, then the N-row table is declared (the
  replica is sent its rows as notes, untimed); each relay is measured in a
  backend of its own, warmed as the worker's is after its first pass (a
  one-row change relayed): a second replica added, its provisioning timed.

  The snapshot and its floor are timed 5 times at N <= 10^4, 3 times at
  N <= 10^5 (a replica added each time), and their medians compared: one
  run of 0.2 s is mostly noise.

  memory     the relay backend's peak private memory (RssAnon) for N = 10^6
             vs N = 10^4 at the same chunk size.  Target <= 1.5.  The session
             runs with temp_buffers = 1MB, as the worker does
             (magic_sync.temp_buffers); at the default 8MB the local buffers
             add a fixed 8 MB once the plan's temp tables outgrow them.

Run through bench/run (which starts a throw-away cluster):
  bench/run relay.py [N ...]
"""
import os
import statistics
import sys
import threading
import time
import uuid

import psycopg2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from incremental import relay_all  # noqa: E402  (its arguments are sizes too)

SIZES = [int(a) for a in sys.argv[1:]] or [10_000, 100_000, 1_000_000]


def repeats(n):
    """a small snapshot is timed several times, its median kept: one run of 0.2 s is mostly noise"""
    return 5 if n <= 10_000 else 3 if n <= 100_000 else 1


def connect():
    c = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    c.autocommit = True
    # sync.relay_pass() runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
    c.cursor().execute("SET default_transaction_isolation = 'repeatable read'")
    return c


def timed(cur, sql, args=None):
    t = time.monotonic()
    cur.execute(sql, args)
    return time.monotonic() - t


class PeakAnon(threading.Thread):
    """Samples a backend's RssAnon (private memory) until stopped."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, False

    def run(self):
        while not self.done:
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    for line in f:
                        if line.startswith("RssAnon:"):
                            self.peak = max(self.peak, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.02)


def setup(cur):
    cur.execute("DROP EXTENSION IF EXISTS magic_sync CASCADE")
    cur.execute("CREATE EXTENSION magic_sync")
    cur.execute("SET client_min_messages = warning")


def snapshot(n):
    conn = connect()
    cur = conn.cursor()
    setup(cur)
    cur.execute("DROP TABLE IF EXISTS bench")
    cur.execute("CREATE TABLE bench (id bigint PRIMARY KEY, a int NOT NULL, b text NOT NULL,"
                " c double precision, d timestamptz NOT NULL)")
    cur.execute("INSERT INTO bench SELECT g, g %% 1000, md5(g::text), g / 7.0, now() FROM generate_series(1, %s) g", (n,))
    cur.execute("VACUUM ANALYZE bench")
    # the floor: encode every row once, record one held-like row per row
    cur.execute("DROP TABLE IF EXISTS heldlike")
    # no autovacuum of it while the relay is timed: the two must not share the cores
    cur.execute("CREATE TABLE heldlike (LIKE sync.held INCLUDING ALL) WITH (autovacuum_enabled = off)")
    # timed in a backend of its own, as the relay is: a backend's first touch
    # of each shared buffer's pages (a page fault mapping it) is then on both sides
    floors = []
    for _ in range(repeats(n)):
        cur.execute("TRUNCATE heldlike")
        cur.execute("CHECKPOINT")
        floor_conn = connect()
        fcur = floor_conn.cursor()
        floor = timed(fcur, "COPY (SELECT row_to_json(t) FROM bench t) TO '/dev/null'")
        floor += timed(fcur, "INSERT INTO heldlike SELECT %s::uuid, 1, sync.key(ARRAY[id::text]), 0, 1 FROM bench",
                       (str(uuid.uuid4()),))
        floor_conn.close()
        floors.append(floor)
    # a first replica, holding a one-row table; then the N-row table declared:
    # since schema changes go down the chain, that replica is not provisioned
    # again but sent the table and its rows as notes (incremental.py --batch
    # measures those), in this set-up session
    cur.execute("DROP TABLE IF EXISTS warm")
    cur.execute("CREATE TABLE warm (id bigint PRIMARY KEY)")
    cur.execute("INSERT INTO warm VALUES (1)")
    cur.execute("SELECT sync.mirror('warm', 'catalog', 'broadcast')")
    cur.execute("SELECT sync.replica_add(%s)", (str(uuid.uuid4()),))
    cur.execute("SELECT * FROM sync.relay_pass()")
    cur.execute("SELECT sync.mirror('bench', 'catalog', 'broadcast')")
    relay_all(cur)
    # what autovacuum would do of those rows, done before the timing, not during it
    cur.execute("VACUUM ANALYZE sync.held, sync.outbox, sync.notes, sync.bodies")
    conn.close()
    relays, peaks = [], []
    for _ in range(repeats(n)):
        # a backend of its own, as the worker's: what the set-up did (ANALYZE
        # of the table, the floor, the notes, the snapshot before) stays out of its memory
        conn = connect()
        cur = conn.cursor()
        # as the worker's session runs: before any temporary table, as it must be
        cur.execute("SET temp_buffers = '1MB'")
        cur.execute("SET client_min_messages = warning")
        # and warm, as the worker is after its first pass: a one-row change's
        # pass (which creates the plan's temporary tables)
        cur.execute("UPDATE warm SET id = id")
        cur.execute("SELECT * FROM sync.relay_pass()")
        # the relay: a replica added now is provisioned by one pass, a snapshot of both tables
        target = str(uuid.uuid4())
        cur.execute("SELECT sync.replica_add(%s)", (target,))
        cur.execute("CHECKPOINT")
        cur.execute("SELECT pg_backend_pid()")
        peak = PeakAnon(cur.fetchone()[0])
        peak.start()
        relays.append(timed(cur, "SELECT * FROM sync.relay_pass()"))
        peak.done = True
        peak.join()
        peaks.append(peak.peak)
        cur.execute("SELECT count(*), sum(bytes) FROM sync.outbox WHERE replica = %s", (target,))
        messages, size = cur.fetchone()
        cur.execute("SELECT count(*) FROM sync.held WHERE replica = %s", (target,))
        held = cur.fetchone()[0]
        assert held == n + 1, (held, n)
        conn.close()
    return statistics.median(floors), statistics.median(relays), max(peaks), messages, size


def fanout(replicas, products=1000):
    conn = connect()
    cur = conn.cursor()
    setup(cur)
    cur.execute("DROP TABLE IF EXISTS products CASCADE")
    cur.execute("CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL, price numeric NOT NULL)")
    cur.execute("INSERT INTO products SELECT g, 'p' || g, g FROM generate_series(1, %s) g", (products,))
    cur.execute("SELECT sync.mirror('products', 'catalog', 'broadcast')")
    for _ in range(replicas):
        cur.execute("SELECT sync.replica_add(%s)", (str(uuid.uuid4()),))
    cur.execute("SELECT * FROM sync.relay_pass()")          # provision them
    cur.execute("UPDATE sync.replicas SET acked_number = last_number")
    best = None
    for i in range(5):
        cur.execute("UPDATE products SET price = price + 1 WHERE id = %s", (i + 1,))
        t = timed(cur, "SELECT * FROM sync.relay_pass()")
        best = t if best is None else min(best, t)
    conn.close()
    return best


def main():
    print("snapshot of N rows to one replica (relay pass vs COPY row_to_json + held-like INSERT)")
    peaks = {}
    for n in SIZES:
        floor, relay, peak, messages, size = snapshot(n)
        peaks[n] = peak
        print(f"  N={n:>9,}  floor {floor:7.2f} s  relay {relay:7.2f} s  ratio {relay / floor:5.2f}"
              f"  ({n / relay:,.0f} rows/s, {messages} messages, {size / 1e6:.1f} MB, peak RssAnon {peak / 1024:.0f} MB)")
    if 10_000 in peaks and 1_000_000 in peaks:
        print(f"memory: peak RssAnon N=10^6 / N=10^4 = {peaks[1_000_000] / peaks[10_000]:.2f}  (target <= 1.5)")
    one = fanout(1)
    many = fanout(200)
    print(f"fan-out: one broadcast change, 1 replica {one * 1000:.1f} ms, 200 replicas {many * 1000:.1f} ms,"
          f" ratio {many / one:.1f}  (target <= 10)")


if __name__ == "__main__":
    main()
