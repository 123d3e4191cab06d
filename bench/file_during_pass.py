#!/usr/bin/python3
"""How long a device's sync.file and sync.pull take while the relay works (issue 37).
Not a test: prints figures.

Replica A (a real SQLite replica, tests/e2e/harness.py) is provisioned (a
broadcast table of 1,000 rows); again and again, as its agent does, it files
an upload, then pulls with its claim (sync_applied(): a pull that
acknowledges takes A's row of sync.replicas) and applies what it pulled, each
call in its own transaction: the wall-clock milliseconds of each sync.file
and sync.pull, p50 and p99 (target: p99 <= 100 ms), in three runs:
  idle      no pass running (the baseline)
  snapshot  while the relay worker provisions replica B with ROWS rows
            (10**6; a pass of its own: relay/observe.c)
  one-row   while a writer changes one row every 20 ms, each commit waking
            the worker for a one-row pass sent to A and B
and beside each its ratio to the idle run, and what A's session was seen
waiting on (pg_stat_activity's wait event, pg_locks' relation), sampled.  Before issue 37 every pass held
sync.replicas whole until it committed: a filing or a pull waited for the
whole snapshot (tests/e2e/file_during_snapshot.py: 55P03 under lock_timeout);
then the worker's passes that read notes still held it, and A waited for each
one-row pass (Lock:relation on sync.replicas); now they copy their chains into
sync.replicas after their commit and hold it whole no more
(tests/e2e/file_mid_pass.py).

Wall-clock times on a shared machine are its load as much as the engine's:
the load average is printed beside them.

  bench/run file_during_pass.py [ROWS] [CALLS]
"""
import os
import statistics
import sys
import threading
import time

import psycopg2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import wire  # noqa: E402  (uploads by hand, docs/protocol.md 7)
from harness import Replica, Server  # noqa: E402

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 400
A = "b37b37b3-0000-4000-8000-00000000000a"
B = "b37b37b3-0000-4000-8000-00000000000b"
DB = "file_during_pass"

server = Server(DB)
cur = server.conn.cursor()


def connect():
    c = psycopg2.connect(dbname=DB)
    c.autocommit = True
    return c


def one(sql, args=None):
    cur.execute(sql, args)
    return cur.fetchone()[0]


def wait(sql, args=None, timeout=1800):
    end = time.time() + timeout
    while time.time() < end:
        if one(sql, args):
            return True
        time.sleep(0.05)
    sys.exit(f"timed out waiting for: {sql}")


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


class Sampler:
    """what A's session waits on while it files and pulls: its wait event, and the
    relation of a lock it waits for (pg_locks), sampled every millisecond or so"""

    def __init__(self, pid):
        self.pid, self.counts, self.samples, self.stop = pid, {}, 0, False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        c = connect().cursor()
        while not self.stop:
            # and, waiting for a lock, behind what (the blocker's activity: a pass, its chains' copy, ...)
            c.execute("SELECT a.wait_event_type || ':' || a.wait_event || coalesce(' on ' || (SELECT"
                      " string_agg(DISTINCT coalesce(l.relation::regclass::text, l.locktype), ',') FROM pg_locks l"
                      " WHERE l.pid = a.pid AND NOT l.granted), '') || coalesce(' behind ' || (SELECT"
                      " string_agg(DISTINCT coalesce(nullif(b.backend_type, 'client backend') || ': ', '')"
                      "   || left(b.query, 40), ',') FROM pg_stat_activity b"
                      " WHERE b.pid = ANY (pg_blocking_pids(a.pid))), '') FROM pg_stat_activity a"
                      " WHERE a.pid = %s AND a.state = 'active'", (self.pid,))
            row = c.fetchone()
            self.samples += 1
            if row and row[0]:
                self.counts[row[0]] = self.counts.get(row[0], 0) + 1
            time.sleep(0.001)

    def report(self):
        self.stop = True
        self.thread.join()
        top = sorted(self.counts.items(), key=lambda kv: -kv[1])[:4]
        print("            A's session waiting, of %d samples: %s" % (
            self.samples, ", ".join(f"{k} {v}" for k, v in top) or "never"), flush=True)


class Device:
    """replica A's agent: files an upload, then pulls and applies, each call timed (ms)"""

    def __init__(self):
        self.server = Server(DB, create=False)
        self.replica.server = self.server
        self.file, self.pull = [], []
        self.sampler = Sampler(self.server.conn.get_backend_pid())

    replica = None

    def once(self):
        t = time.perf_counter()
        self.server.file(A, wire.up(A))
        self.file.append((time.perf_counter() - t) * 1000)
        r = self.replica
        t = time.perf_counter()
        messages = self.server.pull(A, r.status()["applied"], 1 << 20, r.applied())
        self.pull.append((time.perf_counter() - t) * 1000)
        for _, message in messages:
            r.apply(bytes(message))


def report(name, d, base=None):
    f50, f99, p50, p99 = pct(d.file, 50), pct(d.file, 99), pct(d.pull, 50), pct(d.pull, 99)
    ratio = ""
    if base is not None:
        ratio = (f"   ({f50 / base[0]:.2f}x {f99 / base[1]:.2f}x | {p50 / base[2]:.2f}x {p99 / base[3]:.2f}x"
                 " the idle run)")
    print(f"  {name:9} {len(d.file):5} calls  file p50 {f50:7.1f} p99 {f99:7.1f} ms   pull p50 {p50:7.1f}"
          f" p99 {p99:7.1f} ms   max {max(d.file + d.pull):7.0f} ms{ratio}   load {load()}", flush=True)
    d.sampler.report()
    return f50, f99, p50, p99


cur.execute("""
CREATE TABLE small (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO small SELECT g, 'small ' || g FROM generate_series(1, 1000) g;
SELECT sync.mirror('small', 'catalog', 'broadcast');
CREATE TABLE big (id int PRIMARY KEY, store uuid NOT NULL, a text NOT NULL, b int NOT NULL);
SELECT sync.mirror('big', 'catalog', 'assigned(store)');
""")
cur.execute("INSERT INTO big SELECT g, %s, repeat('x', 40), g FROM generate_series(1, %s) g", (B, ROWS))
cur.execute("ANALYZE big")
cur.execute("SELECT sync.replica_add(%s)", (A,))
cur.execute("SELECT sync.relay_start()")
wait("SELECT NOT provision AND last_number > 0 FROM sync.replicas WHERE id = %s", (A,))
wait("SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)")
Device.replica = Replica(server, A)
Device.replica.pull_apply()
print(f"replica A provisioned with 1,000 rows; {CALLS} file + pull calls per run; snapshot of {ROWS:,} rows;"
      f" load {load()}", flush=True)

idle = Device()
for _ in range(CALLS):
    idle.once()
base = report("idle", idle)

# the snapshot: B added, its pass begins; A files and pulls until B is provisioned
snap = Device()
cur.execute("SELECT sync.replica_add(%s)", (B,))
cur.execute("SELECT sync.wake()")
# (the pass that provisions it: a snapshot pass; before issue 37, any pass)
wait("SELECT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'"
     " AND query LIKE 'magic_sync % pass' AND state = 'active')")
began = time.monotonic()
while one("SELECT provision FROM sync.replicas WHERE id = %s", (B,)):
    snap.once()
took = time.monotonic() - began
held = one("SELECT count(*) FROM sync.held WHERE replica = %s", (B,))
print(f"  (B provisioned in {took:.0f} s, {held:,} rows held; the calls below all ran during it)")
report("snapshot", snap, base)

# one-row passes: a writer changes a row every 20 ms, each a pass to A and B
stop = False


changes = 0


def writer():
    global changes
    w = connect()
    c = w.cursor()
    while not stop:
        c.execute("UPDATE small SET name = name || '.' WHERE id = %s", (1 + changes % 1000,))
        changes += 1
        time.sleep(0.02)
    w.close()


busy = Device()
t = threading.Thread(target=writer, daemon=True)
before = one("SELECT last_number FROM sync.replicas WHERE id = %s", (A,))
t.start()
for _ in range(CALLS):
    busy.once()
stop = True
t.join()
sent = one("SELECT count(*) FROM sync.outbox WHERE replica = %s AND number > %s", (A, before))
print(f"  ({changes:,} one-row changes meanwhile, sent to A in {sent:,} messages)")
report("one-row", busy, base)
