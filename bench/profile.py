#!/usr/bin/python3
"""Where a one-row pass spends its time (issue 14): not a test, prints figures.

incremental.py's tables (1,000 broadcast products, N assigned items, a follower line
each), R replicas provisioned and acknowledged; then C one-row changes of one kind,
each followed by one sync.relay_pass() in one warm session, with pg_stat_statements
tracking every statement the pass runs (track = all): the statements by total time,
and the pass's own time.  With --perf, `perf record` on the session's backend
meanwhile, and its top symbols.

  bench/profile.py [--kind broadcast|assigned|follower] [N] [R] [C]
  bench/profile.py [--setup-sql SQL] --kind pgbench [T] [R] [C]     (passes of T pgbench transactions' notes:
                                                   its four tables broadcast to R replicas)

It starts its own throw-away cluster, as bench/run does.
"""
import os
import subprocess
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
args = sys.argv[1:]
KIND = "broadcast"
PERF = "--perf" in args
if PERF:
    args.remove("--perf")
EXPLAIN = None
if "--explain" in args:     # the plans of the statements slower than this many ms
    i = args.index("--explain")
    EXPLAIN = args[i + 1]
    del args[i:i + 2]
SETUP_SQL = None
if "--setup-sql" in args:   # SQL run once the replicas hold their rows: an A/B of a catalog change
    i = args.index("--setup-sql")
    SETUP_SQL = args[i + 1]
    del args[i:i + 2]
if "--kind" in args:
    i = args.index("--kind")
    KIND = args[i + 1]
    del args[i:i + 2]
N = int(args[0]) if len(args) > 0 else 10_000
R = int(args[1]) if len(args) > 1 else 200
C = int(args[2]) if len(args) > 2 else 30

if not os.environ.get("MS_BENCH_INSIDE"):
    here = os.path.abspath(__file__)
    sys.exit(subprocess.call(
        ["sh", "-c", '. scripts/lib.sh && ms_ready && ms_cluster -o synchronous_commit=on'
         ' -o shared_buffers=256MB -o max_wal_size=4GB'
         ' -o shared_preload_libraries=magic_sync,pg_stat_statements -o pg_stat_statements.track=all'
         ' env MS_BENCH_INSIDE=1 /usr/bin/python3 "$0" "$@"', here] + sys.argv[1:], cwd=ROOT))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.argv = sys.argv[:1]     # incremental.py reads its own
import incremental  # noqa: E402
incremental.REPLICAS = R
connect = incremental.connect


def worker_like():
    """a session set as the worker's is (worker.c): no JIT, which the plan's temporary tables mislead"""
    c = connect()
    c.cursor().execute("SET jit = off")
    return c


incremental.connect = worker_like


def pgbench_setup():
    """pgbench's four tables (scale 1) broadcast to R replicas, provisioned and acknowledged."""
    db = os.environ.get("PGDATABASE", "postgres")
    subprocess.run(["pgbench", "-q", "-i", "-s", "1", db], check=True, capture_output=True)
    conn = incremental.connect()
    cur = conn.cursor()
    cur.execute("DROP EXTENSION IF EXISTS magic_sync CASCADE")
    cur.execute("CREATE EXTENSION magic_sync")
    cur.execute("ALTER TABLE pgbench_history ADD COLUMN id bigserial PRIMARY KEY")
    for t in ("branches", "tellers", "accounts", "history"):
        cur.execute(f"SELECT sync.mirror('pgbench_{t}', 'catalog', 'broadcast')")
    for i in range(R):
        cur.execute("SELECT sync.replica_add(%s)", (str(uuid.UUID(int=i + 1)),))
    cur.execute("SELECT * FROM sync.relay_pass()")
    cur.execute("UPDATE sync.replicas SET acked_number = last_number")
    cur.execute("SELECT count(*) FROM sync.held")
    held = cur.fetchone()[0]
    for q in (SETUP_SQL or "").split(";"):     # one by one: VACUUM runs outside a transaction
        if q.strip():
            cur.execute(q)
    cur.execute("VACUUM ANALYZE")
    conn.close()
    return db, held


def pgbench_main():
    """Passes of N pgbench transactions each (4 notes a transaction), as a relay under load makes."""
    db, held = pgbench_setup()
    conn = incremental.connect()
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")

    def load():
        subprocess.run(["pgbench", "-n", "-c", "4", "-t", str(max(1, N // 4)), db], check=True, capture_output=True)
    for _ in range(3):      # warm: kept plans
        load()
        cur.execute("SELECT * FROM sync.relay_pass()")
    cur.execute("SELECT pg_stat_statements_reset()")
    explain(cur, conn)
    perf = perf_start(cur)
    cur.execute("SELECT pg_backend_pid()")
    pid = cur.fetchone()[0]
    total, notes, cpu, prune_cpu = 0.0, 0, 0.0, 0.0
    for _ in range(C):
        load()
        cur.execute("SELECT count(*) FROM sync.notes WHERE NOT done")
        notes += cur.fetchone()[0]
        c0 = backend_cpu(pid)
        total += incremental.timed(cur, "SELECT * FROM sync.relay_pass()")
        c1 = backend_cpu(pid)
        cpu += c1 - c0
        # then the worker's housekeeping: the done notes pruned, 1,000 a transaction
        while True:
            cur.execute("SELECT notes + bodies + answers FROM sync.prune(1000)")
            if cur.fetchone()[0] == 0:
                break
        prune_cpu += backend_cpu(pid) - c1
    perf_end(perf)
    explained(cur, conn)
    print(f"pgbench: {C} passes of {N} transactions' notes, {R} replicas ({held:,} held):"
          f" mean pass {total / C * 1000:.2f} ms, {total / max(notes, 1) * 1e6:.1f} us a note;"
          f" the backend's CPU {cpu / C * 1000:.2f} ms a pass, {cpu / max(notes, 1) * 1e6:.1f} us a note;"
          f" pruning after it {prune_cpu / max(notes, 1) * 1e6:.1f} us a note")
    time.sleep(1)     # the statistics of the passes' commits, sent
    cur.execute("SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables"
                " WHERE schemaname = 'sync' AND relname IN ('held', 'notes', 'carried') ORDER BY relname")
    for name, ins, upd, hot, dele in cur.fetchall():
        print(f"  sync.{name}: {ins:,} inserted, {upd:,} updated ({hot:,} HOT), {dele:,} deleted, since its creation")
    statements(cur)


def backend_cpu(pid):
    """the CPU seconds (user and system) the backend has used: a figure the machine's other load leaves alone"""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def explain(cur, conn):
    """with --explain ms: the plans of the statements slower than that, as notices"""
    if EXPLAIN:
        cur.execute("LOAD 'auto_explain'")
        cur.execute("SET auto_explain.log_min_duration = %s", (EXPLAIN + "ms",))
        cur.execute("SET auto_explain.log_analyze = on")
        cur.execute("SET auto_explain.log_nested_statements = on")
        cur.execute("SET client_min_messages = log")
        conn.notices = []


def explained(cur, conn):
    if EXPLAIN:
        cur.execute("SET client_min_messages = warning")
        print("".join(conn.notices[-60:]))


def perf_start(cur):
    """perf record on the session's backend, with --perf"""
    if not PERF:
        return None
    cur.execute("SELECT pg_backend_pid()")
    pid = cur.fetchone()[0]
    perf = subprocess.Popen(["perf", "record", "-g", "-o", "/tmp/ms_profile.perf", "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    return perf


def perf_end(perf):
    if perf is None:
        return
    perf.send_signal(2)
    perf.wait()
    for children in ("--children", "--no-children"):
        out = subprocess.run(["perf", "report", "-i", "/tmp/ms_profile.perf", children, "--stdio",
                              "--sort", "symbol", "-g", "none", "--percent-limit", "1.5"],
                             capture_output=True, text=True).stdout
        print("\n".join(l for l in out.splitlines() if l and not l.startswith("#") and "0x0000" not in l))


def statements(cur):
    cur.execute("SELECT total_exec_time, calls, rows, query FROM pg_stat_statements"
                " WHERE query NOT LIKE '%%pg_stat_statements%%' AND query NOT LIKE '%%pgbench%%'"
                " ORDER BY total_exec_time DESC LIMIT 40")
    for tt, calls, rows, q in cur.fetchall():
        q = " ".join(q.split())
        print(f"  {tt / C:7.3f} ms/pass  {calls / C:5.1f} calls  {rows / C:7.1f} rows  {q[:260]}")
    # the rest of the list, and what the pass spends outside its statements
    cur.execute("SELECT coalesce(sum(total_exec_time) FILTER (WHERE query LIKE '%%relay_pass()%%'), 0),"
                " coalesce(sum(total_exec_time) FILTER (WHERE query NOT LIKE '%%relay_pass()%%'), 0),"
                " count(*) FILTER (WHERE query NOT LIKE '%%relay_pass()%%'),"
                " coalesce(sum(calls) FILTER (WHERE query NOT LIKE '%%relay_pass()%%'), 0)"
                " FROM pg_stat_statements WHERE query NOT LIKE '%%pg_stat_statements%%'"
                " AND query NOT LIKE '%%pgbench%%' AND query NOT LIKE 'UPDATE products%%'"
                " AND query NOT LIKE 'UPDATE items%%' AND query NOT LIKE 'UPDATE lines%%'")
    whole, inner, n, calls = cur.fetchone()
    print(f"  in all: {inner / C:.3f} ms/pass in {n} statements ({calls / C:.1f} calls a pass);"
          f" the pass outside them {(whole - inner) / C:.3f} ms")


def main():
    if KIND == "pgbench":
        return pgbench_main()
    ids, held, t = incremental.setup(N)
    conn = incremental.connect()
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    cur.execute("SELECT * FROM sync.relay_pass()")
    cur.execute("SELECT pg_backend_pid()")
    pid = cur.fetchone()[0]
    for i in range(3):      # warm: kept plans
        cur.execute("UPDATE products SET price = price + 1 WHERE id = %s", (500 + i,))
        cur.execute("SELECT * FROM sync.relay_pass()")
    cur.execute("SELECT pg_stat_statements_reset()")
    explain(cur, conn)
    perf = None
    if PERF:
        perf = subprocess.Popen(["perf", "record", "-g", "-o", "/tmp/ms_profile.perf", "-p", str(pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
    total = 0.0
    for i in range(C):
        if KIND == "broadcast":
            cur.execute("UPDATE products SET price = price + 1 WHERE id = %s", (1 + i,))
        elif KIND == "assigned":
            cur.execute("UPDATE items SET store = %s WHERE id = %s", (ids[(i * 31 + 5) % len(ids)], 1 + (i * 7919) % N))
        else:
            cur.execute("UPDATE lines SET qty = qty + 1 WHERE id = %s", (1 + (i * 104729) % N,))
        total += incremental.timed(cur, "SELECT * FROM sync.relay_pass()")
    explained(cur, conn)
    if perf:
        perf.send_signal(2)
        perf.wait()
    print(f"{KIND}: {C} passes, N={N:,}, {R} replicas ({held:,} held): mean pass {total / C * 1000:.2f} ms")
    statements(cur)
    if perf:
        out = subprocess.run(["perf", "report", "-i", "/tmp/ms_profile.perf", "--no-children", "--stdio",
                              "--sort", "dso,symbol", "-g", "none", "--percent-limit", "0.7"],
                             capture_output=True, text=True).stdout
        print("\n".join(l for l in out.splitlines() if l and not l.startswith("#")))


if __name__ == "__main__":
    main()
