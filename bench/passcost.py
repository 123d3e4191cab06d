#!/usr/bin/python3
"""What a one-row pass costs the relay worker (issue 37).  Not a test: prints figures.

The table of bench/hops.py (items: id bigint key, store uuid, name text), N rows
broadcast to one replica, provisioned by the real agent, which then stops (what is
measured is the worker's alone: its pulls and filings are not in the figures).
WRITES one-row UPDATEs, each alone (200 ms apart), each waking the preloaded worker.
Figures, over the writes:

  worker CPU ms a write     from /proc/<pid>/schedstat (time on a CPU, ns), so the
                            passes, their commits and flushes, the bounds'
                            transaction and housekeeping are all in it
  passes a write            the pass's read of its notes counted (one a pass,
                            batch.c), or where a probe reads them
                            (batch_probe.c), its look for fast rows (fast.c)
  statements a write        pg_stat_statements, track = all: every statement the
                            worker ran, SPI's included
  statements planned        of those, how many were planned again (kept plans
                            but their first: pg_stat_statements.track_planning)
  the statements            calls, plans, rows and milliseconds each (wall
                            clock), the heaviest first

Wall-clock figures are noisy on a shared machine: the load average is printed
beside them; the CPU and the counts decide.

PROFILE=1: perf records the worker over the writes, and prints its top symbols
(self, then with their callees; /tmp/passcost-worker.perf).

  scripts/isolated bench/passcost.py [N] [writes]      (defaults 10^5, 150)
"""
import os
import subprocess
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
WRITES = int(sys.argv[2]) if len(sys.argv) > 2 else 150
DB = "passcost"

if not os.environ.get("MS_BENCH_INSIDE"):
    here = os.path.abspath(__file__)
    sys.exit(subprocess.call(
        ["sh", "-c", '. scripts/lib.sh && ms_ready && ms_cluster -o fsync=on -o synchronous_commit=on'
         ' -o shared_preload_libraries=magic_sync,pg_stat_statements -o pg_stat_statements.track=all'
         ' -o pg_stat_statements.track_planning=on'
         ' -o magic_sync.database=' + DB +
         ' env MS_BENCH_INSIDE=1 /usr/bin/python3 "$0" "$@"', here] + sys.argv[1:], cwd=ROOT))

from harness import connect as connect_to, val, wait  # noqa: E402


def connect(db=DB):
    return connect_to(db)


def main():
    admin = connect("postgres")
    admin.cursor().execute(f"CREATE DATABASE {DB}")
    admin.close()
    conn = connect()
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION pg_stat_statements")
    cur.execute("CREATE TABLE items (id bigint PRIMARY KEY, store uuid NOT NULL, name text NOT NULL)")
    cur.execute("INSERT INTO items SELECT g, ('00000000-0000-0000-0000-' || lpad(to_hex(1 + g %% 200), 12, '0'))::uuid,"
                " 'i' || g FROM generate_series(1, %s) g", (N,))
    cur.execute("VACUUM ANALYZE items")
    cur.execute("CREATE EXTENSION magic_sync")
    cur.execute("SELECT sync.mirror('items', 'catalog', 'broadcast')")
    cur.execute("SELECT sync.wake()")
    wait("the declaration's notes", lambda: val(cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"))
    replica = str(uuid.uuid4())
    cur.execute("SELECT sync.replica_add(%s)", (replica,))
    cur.execute("SELECT sync.wake()")
    work = f"/tmp/ms_passcost_{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    agent = subprocess.Popen([os.path.join(ROOT, "magic_sync_agent"), "--server", f"dbname={DB}",
                              "--listen", f"dbname={DB}", "--replica", replica, "--db", work + "/replica.db",
                              "--quiet"])
    wait("the replica's snapshot",
         lambda: val(cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"
                          " AND NOT EXISTS (SELECT FROM sync.replicas WHERE provision OR acked_number < last_number)"))
    agent.terminate()
    agent.wait()
    time.sleep(1)
    worker = val(cur, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'")

    def cpu_ms():
        with open(f"/proc/{worker}/schedstat") as f:
            return int(f.read().split()[0]) / 1e6

    for i in range(5):  # the session's first passes prepare what the rest keep
        cur.execute("UPDATE items SET name = name || 'w' WHERE id = %s", (1 + i * 997,))
        time.sleep(0.2)
    time.sleep(1.5)
    cur.execute("SELECT pg_stat_statements_reset()")
    perf = None
    if os.environ.get("PROFILE"):
        perf = subprocess.Popen(["perf", "record", "-q", "-g", "-o", "/tmp/passcost-worker.perf", "-p", str(worker)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    before = cpu_ms()
    for i in range(WRITES):
        cur.execute("UPDATE items SET name = name || 'x' WHERE id = %s", (17 + (i * 1013) % (N - 40),))
        time.sleep(0.2)
    time.sleep(1.0)
    spent = cpu_ms() - before
    if perf is not None:
        perf.send_signal(2)
        perf.wait()
    load = os.getloadavg()
    cur.execute("SELECT s.calls, s.plans, s.total_exec_time, s.rows, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 110)"
                " FROM pg_stat_statements s WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = %s)"
                "  AND s.query NOT LIKE 'UPDATE items%%' AND s.query NOT LIKE '%%pg_stat_statements%%'"
                " ORDER BY s.total_exec_time DESC", (DB,))
    rows = cur.fetchall()
    calls = sum(r[0] for r in rows)
    # the pass's read of its batch of notes, one a pass that reads notes (batch.c)
    passes = sum(r[0] for r in rows if r[4].startswith("WITH r AS (INSERT INTO ms_notes_read"))
    if passes == 0:
        passes = sum(r[0] for r in rows if r[4].startswith("WITH f AS (INSERT INTO pg_temp.ms_fast"))
    plans = sum(r[1] for r in rows)
    print(f"{WRITES} one-row writes of {N} rows broadcast to one replica (load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f})")
    print(f"worker CPU {spent / WRITES:.2f} ms a write; {passes / WRITES:.2f} passes a write;"
          f" {calls / WRITES:.1f} statements a write ({len(rows)} kinds), {plans / WRITES:.1f} planned")
    print(" calls  plans     ms   rows  statement")
    for c, pl, ms, r, q in rows:
        print(f"{c:6d} {pl:6d} {ms:7.1f} {r:6d}  {q}")
    if perf is not None:
        for children in ("--no-children", "--children"):
            subprocess.run(f"perf report -i /tmp/passcost-worker.perf {children} --stdio -g none"
                           " --percent-limit 1 2>/dev/null | grep -v '^#' | grep -v '^$' | head -60", shell=True)


main()
