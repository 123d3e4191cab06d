#!/usr/bin/python3
"""What a one-message sync.pull costs its session (issue 37).  Not a test: prints figures.

The table of bench/hops.py (items: id bigint key, store uuid, name text), N rows
broadcast to one replica, provisioned by the real agent, which then stops.  WRITES
one-row UPDATEs, each alone (200 ms apart, each its own pass and message; a name of
700 bytes, so that one message fills a pull's smallest bound).  Then, from one
session, the agent's pulls of them one at a time, as the agent makes them: after the
last message applied, its claim (sync_applied()) with it, in a transaction whose
commit waits for no flush; each message applied to the replica's file in between
(Python's sqlite3 with magic_sync_sqlite), so that every pull is a first send of one
message.  Figures, over the pulls:

  session CPU ms a pull     from /proc/<pid>/schedstat of the pulling session
                            (time on a CPU, ns): the request's parse, the pull
                            and its answer
  statements a pull         pg_stat_statements, track = all: every statement the
                            pulls ran, SPI's included (the relay worker idles
                            meanwhile: its statements, if any, are listed too)
  statements planned        of those, how many were planned (track_planning)

MS_PULL_PREPARED=1 runs each pull through a statement prepared once (PREPARE,
EXECUTE): what an agent that prepared its pull would spare its session (the agent
sends it unnamed, parsed and planned at every call).

Wall-clock figures are noisy on a shared machine: the load average is printed
beside them; the CPU, instructions and counts decide.

  scripts/isolated bench/pullcost.py [N] [writes]      (defaults 10^4, 200)
"""
import os
import sqlite3
import sys
import time

from harness import ROOT, connect as connect_to, inside, provisioned, val, wait

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
WRITES = int(sys.argv[2]) if len(sys.argv) > 2 else 200
DB = "pullcost"

inside(DB, "-o shared_preload_libraries=magic_sync,pg_stat_statements -o pg_stat_statements.track=all"
       " -o pg_stat_statements.track_planning=on")

PULL = ("SELECT p.number, p.message FROM pg_catalog.set_config('synchronous_commit', 'off', true) s,"
        " sync.pull(%s::uuid, %s, %s, %s) p")


def connect():
    return connect_to(DB)


def main():
    admin = connect_to("postgres")
    admin.cursor().execute(f"CREATE DATABASE {DB}")
    admin.close()
    conn = connect()
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION pg_stat_statements")
    replica, file = provisioned(DB, cur, N)

    for i in range(WRITES + 5):
        cur.execute("UPDATE items SET name = repeat('x', 700) || %s WHERE id = %s", (i, 1 + (i * 1013) % N))
        time.sleep(0.2)
    wait("the writes' messages", lambda: val(cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"))
    time.sleep(1.0)

    db = sqlite3.connect(file, isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(os.path.join(ROOT, "magic_sync_sqlite"))
    db.enable_load_extension(False)

    puller = connect()
    pc = puller.cursor()
    pid = val(pc, "SELECT pg_backend_pid()")

    prepared = bool(os.environ.get("MS_PULL_PREPARED"))
    if prepared:
        pc.execute("PREPARE pull (uuid, bigint, int, bytea) AS " + PULL.replace("%s::uuid", "$1").replace("%s", "$2", 1)
                   .replace("%s", "$3", 1).replace("%s", "$4", 1))

    def one_pull():
        after, claim = db.execute("SELECT json_extract(sync_status(), '$.applied'), sync_applied()").fetchone()
        if prepared:
            pc.execute("EXECUTE pull (%s, %s, %s, %s)", (replica, after, 1024, claim))
        else:
            pc.execute(PULL, (replica, after, 1024, claim))
        got = pc.fetchall()
        assert len(got) == 1 and got[0][0] == after + 1, (after, [r[0] for r in got])
        db.execute("BEGIN IMMEDIATE")
        db.execute("SELECT sync_apply(?)", (bytes(got[0][1]),))
        db.execute("COMMIT")

    def cpu_ms():
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e6

    for _ in range(5):  # the session's first pulls prepare what the rest keep
        one_pull()
    cur.execute("SELECT pg_stat_statements_reset()")
    before = cpu_ms()
    for _ in range(WRITES):
        one_pull()
    spent = cpu_ms() - before
    load = os.getloadavg()
    cur.execute("SELECT s.calls, s.plans, s.total_exec_time, s.rows, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 110)"
                " FROM pg_stat_statements s WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = %s)"
                "  AND s.query NOT LIKE '%%pg_stat_statements%%'"
                " ORDER BY s.calls DESC, s.total_exec_time DESC", (DB,))
    rows = cur.fetchall()
    pulls = sum(r[0] for r in rows if "sync.pull(" in r[4])
    calls = sum(r[0] for r in rows if "sync.pull(" not in r[4])
    plans = sum(r[1] for r in rows)
    print(f"{WRITES} one-message pulls{' (prepared)' if prepared else ''}, {N} rows broadcast to one replica (load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f})")
    print(f"session CPU {spent / WRITES:.3f} ms a pull;"
          f" {calls / max(pulls, 1):.2f} statements a pull besides it ({len(rows) - 1} kinds),"
          f" {plans / max(pulls, 1):.2f} planned")
    print(" calls  plans     ms   rows  statement")
    for c, pl, ms, r, q in rows:
        print(f"{c:6d} {pl:6d} {ms:7.1f} {r:6d}  {q}")


main()
