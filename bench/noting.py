#!/usr/bin/python3
"""What the noting trigger costs the writer's backend, alone (issue 37).  Not a
test: prints figures, and the ratio against the same run with the triggers off.

pgbench's four tables mirrored (bench/pgbench_mirror.sql), no relay worker (so
nothing but the writer touches sync.notes), one session running T transactions
of pgbench's TPC-B-like script (4 changed rows each), triggers off and on,
alternating for R rounds.  Per 1,000 changed rows: the backend's CPU ms (from
/proc/<pid>/stat), the WAL bytes written, and on - off for both.

  bench/noting.py [rounds] [transactions]      (defaults 5, 5000)

PERF=1: record the backend with perf during the last "on" run and print the top
symbols.
"""
import os
import random
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
TX = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
TABLES = ["pgbench_branches", "pgbench_tellers", "pgbench_accounts", "pgbench_history"]
SCALE = 1

if not os.environ.get("MS_BENCH_INSIDE"):
    here = os.path.abspath(__file__)
    sys.exit(subprocess.call(
        ["sh", "-c", '. scripts/lib.sh && ms_ready && ms_cluster -o synchronous_commit=off'
         ' -o max_wal_size=4GB -o checkpoint_timeout=30min'
         ' env MS_BENCH_INSIDE=1 /usr/bin/python3 "$0" "$@"', here] + sys.argv[1:], cwd=ROOT))

import psycopg2  # noqa: E402  (inside the cluster only)

TICK = os.sysconf("SC_CLK_TCK")


def ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


def val(cur, sql, args=None):
    cur.execute(sql, args)
    return cur.fetchone()[0]


def main():
    subprocess.run(["createdb", "nb"], check=True)
    subprocess.run(["pgbench", "-q", "-i", "-s", str(SCALE), "nb"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(["psql", "-q", "-X", "-v", "ON_ERROR_STOP=1", "-d", "nb", "-f",
                    os.path.join(ROOT, "bench/pgbench_mirror.sql")], check=True, stdout=subprocess.DEVNULL)
    c = psycopg2.connect(dbname="nb")
    c.autocommit = True
    cur = c.cursor()
    cur.execute("VACUUM ANALYZE")
    pid = val(cur, "SELECT pg_backend_pid()")
    rng = random.Random(37)
    res = {"off": [], "on": []}

    def txn():
        aid = rng.randint(1, 100000 * SCALE)
        bid = rng.randint(1, SCALE)
        tid = rng.randint(1, 10 * SCALE)
        d = rng.randint(-5000, 5000)
        return ("BEGIN;"
                f"UPDATE pgbench_accounts SET abalance = abalance + {d} WHERE aid = {aid};"
                f"SELECT abalance FROM pgbench_accounts WHERE aid = {aid};"
                f"UPDATE pgbench_tellers SET tbalance = tbalance + {d} WHERE tid = {tid};"
                f"UPDATE pgbench_branches SET bbalance = bbalance + {d} WHERE bid = {bid};"
                "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime)"
                f" VALUES ({tid}, {bid}, {aid}, {d}, CURRENT_TIMESTAMP);"
                "END;")

    for r in range(ROUNDS + 1):
        for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
            for t in TABLES:
                cur.execute(f"SELECT sync.retrigger('{t}')" if mode == "on"
                            else f"ALTER TABLE {t} DISABLE TRIGGER USER")
            cur.execute("CHECKPOINT")
            for _ in range(200):
                cur.execute(txn())
            perf = None
            if os.environ.get("PERF") and mode == "on" and r == ROUNDS:
                perf = subprocess.Popen(["perf", "record", "-q", "-g", "-o", "/tmp/noting.perf", "-p", str(pid)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            lsn = val(cur, "SELECT pg_current_wal_lsn()::text")
            t0 = ticks(pid)
            for _ in range(TX):
                cur.execute(txn())
            t1 = ticks(pid)
            wal = val(cur, "SELECT pg_current_wal_lsn() - %s::pg_lsn", (lsn,))
            if perf:
                perf.send_signal(2)
                perf.wait()
            if r == 0:
                continue  # warm-up round
            changes = 4 * TX
            res[mode].append(((t1 - t0) * 1000 / TICK * 1000 / changes, float(wal) * 1000 / changes))
            print(f"round {r} {mode:3}: backend {res[mode][-1][0]:6.1f} ms, WAL {res[mode][-1][1]:8.0f} B"
                  f" per 1,000 changes; load {open('/proc/loadavg').read().split()[0]}", flush=True)
    off = [statistics.median(x[i] for x in res["off"]) for i in (0, 1)]
    on = [statistics.median(x[i] for x in res["on"]) for i in (0, 1)]
    print(f"\n{TX} TPC-B transactions x {ROUNDS} rounds, one session, medians per 1,000 changed rows:")
    print(f"  backend CPU  off {off[0]:6.1f} ms  on {on[0]:6.1f} ms  trigger {on[0] - off[0]:6.1f} ms")
    print(f"  WAL          off {off[1]:6.0f} B   on {on[1]:6.0f} B   notes   {on[1] - off[1]:6.0f} B"
          f"  ({(on[1] - off[1]) / 1000:.0f} B a note)")
    print(f"  notes written: {val(cur, 'SELECT count(*) FROM sync.notes')}")
    if os.environ.get("PERF"):
        subprocess.run("perf report -i /tmp/noting.perf --no-children --stdio -g none --percent-limit 0.7"
                       " | grep -v '^#' | grep -v '^$' | head -60", shell=True)
        # the trigger's part, inclusive: the trigger itself and the notes it leaves for commit
        print("  inclusive shares of the backend's samples:")
        subprocess.run("perf report -i /tmp/noting.perf --children --stdio -g none --percent-limit 0.1"
                       " | grep -E ' (ms_note|write_note|writer_xact|notes_flush|notes_executor_start"
                       "|AfterTriggerEndQuery|CommitTransaction|nextval_internal|heap_multi_insert"
                       "|heap_insert|ExecInsertIndexTuples|exec_simple_query)$'", shell=True)


if __name__ == "__main__":
    main()
