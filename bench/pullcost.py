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

MS_PULL_PERF=PREFIX also counts the session's instructions over the pulls
(perf stat, user and kernel as perf may see them: PREFIX.stat) and samples its
call graphs (perf record -g: PREFIX.data, read with perf report -i).

MS_PULL_LIBPQ=unnamed pulls as the agent does (libpq's extended protocol, binary
parameters, the unnamed statement: bench/pullcost_libpq.py); =prepared, through
a statement prepared once on the connection (Parse once, then Bind/Execute).

MS_PULL_PREPARED=1 runs each pull through a statement prepared once (PREPARE,
EXECUTE): what an agent that prepared its pull would spare its session (the agent
sends it unnamed, parsed and planned at every call).

Wall-clock figures are noisy on a shared machine: the load average is printed
beside them; the CPU, instructions and counts decide.

  scripts/isolated bench/pullcost.py [N] [writes]      (defaults 10^4, 200)
"""
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid

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
    libpq = os.environ.get("MS_PULL_LIBPQ")
    if libpq:
        from pullcost_libpq import Puller
        lp = Puller(DB, libpq == "prepared")
        pid = lp.pid()

    prepared = bool(os.environ.get("MS_PULL_PREPARED"))
    if prepared:
        pc.execute("PREPARE pull (uuid, bigint, int, bytea) AS " + PULL.replace("%s::uuid", "$1").replace("%s", "$2", 1)
                   .replace("%s", "$3", 1).replace("%s", "$4", 1))

    def one_pull():
        after, claim = db.execute("SELECT json_extract(sync_status(), '$.applied'), sync_applied()").fetchone()
        if libpq:
            got = lp.pull(uuid.UUID(replica), after, 1024, claim)
        elif prepared:
            pc.execute("EXECUTE pull (%s, %s, %s, %s)", (replica, after, 1024, claim))
        else:
            pc.execute(PULL, (replica, after, 1024, claim))
        # an answer the agent's last filing left (number NULL): given once, not a message
        got = [r for r in (got if libpq else pc.fetchall()) if r[0] is not None]
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
    perf = os.environ.get("MS_PULL_PERF")
    watchers = []
    if perf:
        watchers = [subprocess.Popen(["perf", "stat", "-e", "instructions", "-x,", "-o", perf + ".stat", "-p", str(pid)]),
                    subprocess.Popen(["perf", "record", "-q", "-F", "25000", "--call-graph", "dwarf,8192", "-o", perf + ".data", "-p", str(pid)])]
        time.sleep(1.0)
    before = cpu_ms()
    for _ in range(WRITES):
        one_pull()
    spent = cpu_ms() - before
    for w in watchers:
        w.send_signal(signal.SIGINT)
        w.wait()
    if perf:
        with open(perf + ".stat") as f:
            counted = [line.split(",") for line in f if ",instructions" in line]
        if counted and counted[0][0].isdigit():
            print(f"instructions a pull (perf stat, the session): {int(counted[0][0]) / WRITES / 1000:.1f} k")
    load = os.getloadavg()
    cur.execute("SELECT s.calls, s.plans, s.total_exec_time, s.rows, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 110)"
                " FROM pg_stat_statements s WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = %s)"
                "  AND s.query NOT LIKE '%%pg_stat_statements%%'"
                " ORDER BY s.calls DESC, s.total_exec_time DESC", (DB,))
    rows = cur.fetchall()
    pulls = sum(r[0] for r in rows if "sync.pull(" in r[4])
    calls = sum(r[0] for r in rows if "sync.pull(" not in r[4])
    plans = sum(r[1] for r in rows)
    how = f" (libpq, {libpq})" if libpq else " (prepared)" if prepared else ""
    print(f"{WRITES} one-message pulls{how}, {N} rows broadcast to one replica (load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f})")
    print(f"session CPU {spent / WRITES:.3f} ms a pull;"
          f" {calls / max(pulls, 1):.2f} statements a pull besides it ({len(rows) - 1} kinds),"
          f" {plans / max(pulls, 1):.2f} planned")
    print(" calls  plans     ms   rows  statement")
    for c, pl, ms, r, q in rows:
        print(f"{c:6d} {pl:6d} {ms:7.1f} {r:6d}  {q}")
    loop = int(os.environ.get("MS_PULL_LOOP", "0"))
    if loop:
        looped(pc, cpu_ms, db, replica, loop)


def looped(pc, cpu_ms, db, replica, calls):
    """MS_PULL_LOOP=calls: the function's own work, steadier than a pull's CPU on a loaded
    machine: a caught-up sync.pull (after the last message, with its claim: access, claim,
    epoch, answers, outbox looked at, nothing returned) called `calls` times in one
    statement, its session's CPU a call, in 8 rounds; with MS_PULL_AB=1, rounds
    alternate between sync.pull with its SET search_path and without."""
    after, claim = db.execute("SELECT json_extract(sync_status(), '$.applied'), sync_applied()").fetchone()
    sql = ("SELECT count(*) FROM generate_series(1, %s) g,"
           " LATERAL sync.pull(%s::uuid, %s + 0 * g, 1024, %s::bytea) p")
    pc.execute(sql, (10, replica, after, claim))
    alternate = bool(os.environ.get("MS_PULL_AB"))
    for r in range(8):
        kind = ""
        if alternate:
            kind = " (no SET)" if r % 2 == 0 else " (SET search_path)"
            pc.execute("ALTER FUNCTION sync.pull(uuid, bigint, integer, bytea) " +
                       ("RESET ALL" if r % 2 == 0 else "SET search_path = pg_catalog, pg_temp"))
            pc.execute(sql, (10, replica, after, claim))
        before = cpu_ms()
        pc.execute(sql, (calls, replica, after, claim))
        assert pc.fetchone()[0] == 0
        spent = cpu_ms() - before
        load = os.getloadavg()
        print(f"caught-up sync.pull, {calls} calls in one statement{kind}: {spent * 1000 / calls:.1f} us CPU a call"
              f" (load {load[0]:.1f})")


main()
