#!/usr/bin/python3
"""What capturing changes costs the writer (issue 37).  Not a test: prints figures,
and ratios against baselines measured in the same run, on the same cluster.

pgbench's TPC-B-like script (C clients, S seconds, scale 10, fsync and synchronous_commit on)
in three databases of one cluster (wal_level = logical in every run):

  ms   its four tables mirrored (broadcast, bench/pgbench_mirror.sql) to one
       replica, with the preloaded relay worker and the real agent on a SQLite
       file; "off": the noting triggers disabled (nothing noted, nothing relayed)
  lr   the same tables published to a subscriber database by PostgreSQL's own
       logical replication (a walsender decoding, an apply worker writing);
       "off": the subscription disabled

Each round runs ms off and on and lr off and on (which goes first rotates).
Figures: each engine's TPS on / off (target: ms keeps at least lr's share); how long
after pgbench stopped the last note was relayed (target <= 100 ms) and a marker row
written then reached the replica / the subscriber; and, over the middle of each run,
CPU milliseconds per 1,000 changed rows (a TPC-B transaction changes 4) of:

  backends  pgbench's sessions (with the noting trigger, in ms on); "trigger" is
            what they cost on against off
  relay     the relay worker                     agent     the agent process
  sessions  the agent's server sessions (sync.pull, sync.file)
  walsender / apply   logical replication's two processes
  pgbench   the client                           other     the machine's rest
                                                           (autovacuum, walwriter, ...)

and the WAL each transaction wrote.  Wall-clock figures are noisy on a shared
machine: the load average is printed beside them; CPU figures decide.

PROFILE=1: pg_stat_statements tracks every statement (track = all) of the last
"ms on" run, printed by total time with the agent's sessions' calls, and perf
records the agent's sessions, one pgbench backend and the relay worker meanwhile
(their top symbols, /tmp/capture-{sessions,backend,relay}.perf).

WAL=1: the WAL of each "ms on" run's middle, by relation and record kind
(pg_waldump), in bytes a pgbench transaction, full-page images counted: what
the notes, their index, the held rows, the outbox and the bodies each write.

  bench/capture.py [rounds] [seconds] [clients]     (defaults 2, 30, 4)

It starts its own throw-away cluster (scripts/lib.sh), as bench/latency.py does, with
fsync on (a throw-away cluster has it off), as the side-by-side run's clusters have it.
"""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
SECONDS = int(sys.argv[2]) if len(sys.argv) > 2 else 30
CLIENTS = int(sys.argv[3]) if len(sys.argv) > 3 else 4
SCALE = 10
TABLES = ["pgbench_branches", "pgbench_tellers", "pgbench_accounts", "pgbench_history"]
REPLICA = "cccccccc-0000-0000-0000-000000000001"
PROFILE = bool(os.environ.get("PROFILE"))

if not os.environ.get("MS_BENCH_INSIDE"):
    here = os.path.abspath(__file__)
    sys.exit(subprocess.call(
        ["sh", "-c", '. scripts/lib.sh && ms_ready && ms_cluster -o fsync=on -o synchronous_commit=on'
         ' -o wal_level=logical -o max_wal_senders=10 -o max_replication_slots=10'
         ' -o shared_buffers=256MB -o max_wal_size=4GB -o checkpoint_timeout=30min'
         ' -o magic_sync.database=ms ${MS_BENCH_OPTS:-}'
         + (' -o shared_preload_libraries=magic_sync,pg_stat_statements -o pg_stat_statements.track=all'
            if os.environ.get("PROFILE") else '') +
         ' env MS_BENCH_INSIDE=1 /usr/bin/python3 "$0" "$@"', here] + sys.argv[1:], cwd=ROOT))

import psycopg2  # noqa: E402  (inside the cluster only)

TICK = os.sysconf("SC_CLK_TCK")
WORK = None


def connect(db):
    c = psycopg2.connect(dbname=db)
    c.autocommit = True
    return c


def val(cur, sql, args=None):
    cur.execute(sql, args)
    return cur.fetchone()[0]


def wait(what, predicate, timeout, nap=0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(nap)
    raise SystemExit(f"timed out waiting for {what}")


def load():
    return open("/proc/loadavg").read().split()[0]


def ticks(pid):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    except (OSError, IndexError):
        return 0


def busy():
    f = open("/proc/stat").readline().split()[1:]
    # user nice system (idle iowait) irq softirq steal
    return sum(int(f[i]) for i in (0, 1, 2, 5, 6, 7))


def pgbench_init(db, data=True):
    subprocess.run(["createdb", db], check=True)
    subprocess.run(["pgbench", "-q", "-i", "-s", str(SCALE)] + ([] if data else ["-I", "dtp"]) + [db],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def setup():
    global WORK
    WORK = subprocess.check_output(["mktemp", "-d"], text=True).strip()
    # ms: mirrored to one replica, with the real agent
    pgbench_init("ms")
    subprocess.run(["psql", "-q", "-X", "-v", "ON_ERROR_STOP=1", "-d", "ms", "-f",
                    os.path.join(ROOT, "bench/pgbench_mirror.sql")], check=True, stdout=subprocess.DEVNULL)
    ms = connect("ms")
    cur = ms.cursor()
    if PROFILE:
        cur.execute("CREATE EXTENSION pg_stat_statements")
    cur.execute("SELECT sync.wake()")
    wait("the declarations' notes", lambda: val(cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"),
         1800, 0.5)
    cur.execute("SELECT sync.replica_add(%s)", (REPLICA,))
    cur.execute("SELECT sync.wake()")
    agent = subprocess.Popen([os.path.join(ROOT, "magic_sync_agent"), "--server", "dbname=ms", "--listen",
                              "dbname=ms", "--replica", REPLICA, "--db", os.path.join(WORK, "replica.db"),
                              "--quiet"])
    wait("the replica's snapshot", lambda: ms_caught_up(cur), 1800, 0.5)
    # lr: published, and subscribed to from the database sub (the slot made
    # apart: CREATE SUBSCRIPTION to its own cluster cannot make one)
    pgbench_init("lr")
    pgbench_init("sub", data=False)
    lr = connect("lr")
    sub = connect("sub")
    for c in (lr, sub):
        c.cursor().execute("ALTER TABLE pgbench_history ADD COLUMN id bigserial PRIMARY KEY")
    lr.cursor().execute("CREATE PUBLICATION lpgb FOR TABLE " + ", ".join(TABLES))
    lr.cursor().execute("SELECT pg_create_logical_replication_slot('lpgb', 'pgoutput')")
    sub.cursor().execute("CREATE SUBSCRIPTION lpgb CONNECTION 'dbname=lr host=/var/run/postgresql port=" + os.environ.get("PGPORT", "5432") + "'"
                         " PUBLICATION lpgb WITH (create_slot = false, slot_name = 'lpgb')")
    wait("the subscription's copy", lambda: val(sub.cursor(), "SELECT NOT EXISTS (SELECT FROM pg_subscription_rel"
                                                " WHERE srsubstate <> 'r')"), 1800, 0.5)
    for c, db in ((ms, "ms"), (lr, "lr"), (sub, "sub")):
        c.cursor().execute("VACUUM ANALYZE")
    return ms, lr, sub, agent


def ms_caught_up(cur):
    return val(cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"
                    " AND NOT EXISTS (SELECT FROM sync.replicas WHERE provision OR acked_number < last_number)")


def ms_triggers(cur, on):
    for t in TABLES:
        # sync.retrigger writes them as sync.mirror did (ENABLE TRIGGER USER would enable them as ORIGIN)
        cur.execute(f"SELECT sync.retrigger('{t}')" if on else f"ALTER TABLE {t} DISABLE TRIGGER USER")


def lr_lag(lr):
    return val(lr.cursor(), "SELECT coalesce(pg_current_wal_lsn() - (SELECT confirmed_flush_lsn FROM"
                            " pg_replication_slots WHERE slot_name = 'lpgb'), 0)")


def lr_enable(lr, sub, on):
    sub.cursor().execute(f"ALTER SUBSCRIPTION lpgb {'ENABLE' if on else 'DISABLE'}")
    if on:
        # caught up with what it missed: a marker row reached the subscriber
        mark(lr, lambda v: sub_has(sub, v), 600)
    else:
        wait("the walsender gone", lambda: val(lr.cursor(), "SELECT NOT EXISTS (SELECT FROM pg_stat_replication)"),
             60)


MARKS = [0]


def mark(conn, shown, timeout):
    """a marker row written now, and the milliseconds until shown(value) says the target has it"""
    MARKS[0] += 1
    value = f"mark-{os.getpid()}-{MARKS[0]}"
    t = time.monotonic()
    conn.cursor().execute("UPDATE pgbench_branches SET filler = %s WHERE bid = 1", (value,))
    end = t + timeout
    while not shown(value):
        if time.monotonic() > end:
            raise SystemExit("a marker row never arrived")
        time.sleep(0.002)
    return (time.monotonic() - t) * 1000


def sub_has(sub, value):
    # filler is char(88): blank-padded
    return (val(sub.cursor(), "SELECT filler FROM pgbench_branches WHERE bid = 1") or "").rstrip() == value


def replica_has(value):
    import sqlite3
    try:
        f = sqlite3.connect(f"file:{os.path.join(WORK, 'replica.db')}?mode=ro", uri=True)
        got = f.execute("SELECT filler FROM pgbench_branches WHERE bid = 1").fetchone()
        f.close()
        return got is not None and got[0] is not None and got[0].rstrip() == value
    except sqlite3.Error:
        return False


def pids(cur, db):
    """the processes whose CPU is counted, by kind"""
    cur.execute("SELECT pid, backend_type, coalesce(application_name, ''), coalesce(datname, '')"
                " FROM pg_stat_activity")
    kinds = {}
    for pid, bt, app, dat in cur.fetchall():
        if bt == "magic_sync relay":
            k = "relay"
        elif app == "pgbench" and dat == db:
            k = "backends"
        elif app == "magic_sync_agent":
            k = "sessions"
        elif bt == "walsender":
            k = "walsender"
        elif bt == "logical replication worker":
            k = "apply"
        else:
            continue
        kinds.setdefault(k, []).append(pid)
    return kinds


def wal_by_relation(cur, start, end, tx):
    """the WAL between two LSNs by relation (its first block's) and record kind, in bytes a transaction"""
    import collections
    import re
    cur.execute("SELECT pg_relation_filenode(c.oid)::text, c.relname FROM pg_class c"
                " WHERE pg_relation_filenode(c.oid) IS NOT NULL")
    names = dict(cur.fetchall())
    data = val(cur, "SHOW data_directory")
    bindir = subprocess.check_output(["pg_config", "--bindir"], text=True).strip()
    dump = subprocess.run([os.path.join(bindir, "pg_waldump"), "-p", os.path.join(data, "pg_wal"), "-s", start,
                           "-e", end], capture_output=True, text=True).stdout
    size, count, fpw = collections.Counter(), collections.Counter(), collections.Counter()
    for line in dump.splitlines():
        m = re.search(r"rmgr: (\w+)\s+len \(rec/tot\):\s+\d+/\s*(\d+).*?desc: (\w+)", line)
        if not m:
            continue
        r = re.search(r"rel \d+/\d+/(\d+)", line)
        k = (names.get(r.group(1), r.group(1)) if r else "-", m.group(1) + "/" + m.group(3))
        size[k] += int(m.group(2))
        count[k] += 1
        fpw[k] += "FPW" in line
    print(f"  WAL by relation and record, {sum(size.values()) / tx:.0f} B a transaction in all:")
    for k, v in size.most_common(25):
        print(f"    {v / tx:8.1f} B  {count[k] / tx:5.2f} records ({fpw[k] / tx:4.2f} with a page image)  {k[0]} {k[1]}")


def run(engine, on, ctl, agent):
    """one pgbench run; its TPS and, over its middle, CPU by kind, transactions, WAL"""
    db = "ms" if engine == "ms" else "lr"
    conn = ctl[db]
    cur = conn.cursor()
    cur.execute("CHECKPOINT")
    p = subprocess.Popen(["pgbench", "-n", "-T", str(SECONDS), "-c", str(CLIENTS), "-j", "2", db],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(1.5)
    kinds = pids(cur, db)
    kinds["pgbench"] = [p.pid]
    if engine == "ms":
        kinds["agent"] = [agent.pid]

    perfs = []
    if PROFILE and engine == "ms" and on:
        cur.execute("SELECT pg_stat_statements_reset()")
        for name, ps in (("sessions", kinds.get("sessions", [])), ("backend", kinds.get("backends", [])[:1]),
                         ("relay", kinds.get("relay", []))):
            if ps:
                perfs.append((name, subprocess.Popen(
                    ["perf", "record", "-q", "-g", "-o", f"/tmp/capture-{name}.perf", "-p", ",".join(map(str, ps))],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))

    def sample():
        return ({k: sum(ticks(x) for x in v) for k, v in kinds.items()}, busy(),
                val(cur, "SELECT last_value FROM pgbench_history_id_seq"),
                val(cur, "SELECT pg_current_wal_lsn()::text"), time.monotonic(),
                # the passes that sent: one message each to the one replica
                val(cur, "SELECT last_value FROM sync.message_seq") if engine == "ms" else 0)
    a = sample()
    time.sleep(SECONDS - 3)
    b = sample()
    out, _ = p.communicate()
    stopped = time.monotonic()
    for name, pp in perfs:
        pp.send_signal(2)
        pp.wait()
    if perfs:
        cur.execute("SELECT calls, round(total_exec_time::numeric, 1), round((total_exec_time / calls)::numeric, 3),"
                    " rows, shared_blks_hit, left(regexp_replace(query, '\\s+', ' ', 'g'), 110)"
                    " FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'ms')"
                    " ORDER BY total_exec_time DESC LIMIT 40")
        print("  calls   total ms    ms/call     rows   blks hit  statement")
        for row in cur.fetchall():
            print("  %7d %10s %10s %8d %10d  %s" % row)
        for name, _ in perfs:
            subprocess.run(f"perf report -i /tmp/capture-{name}.perf --no-children --stdio -g none"
                           " --percent-limit 0.8 2>/dev/null | grep -v '^#' | grep -v '^$' | head -45", shell=True)
    tps = float([line for line in out.splitlines() if line.startswith("tps = ")][0].split()[2])
    tx = b[2] - a[2]
    wal = val(cur, "SELECT %s::pg_lsn - %s::pg_lsn", (b[3], a[3]))
    cpu = {k: (b[0][k] - a[0][k]) * 1000 / TICK for k in kinds}
    named = sum(cpu.values())
    cpu["other"] = (b[1] - a[1]) * 1000 / TICK - named
    r = {"tps": tps, "tx": tx, "wal": float(wal) / tx, "cpu": cpu, "load": load(),
         "changes": 4 * tx, "machine": (b[1] - a[1]) / TICK / (b[4] - a[4]) / os.cpu_count(),
         "passes": (b[5] - a[5]) / (b[4] - a[4]), "window": b[4] - a[4]}
    if engine == "ms" and on:
        # how far behind the relay and the replica were when pgbench stopped
        ms = ctl["ms"].cursor()
        pending = val(ms, "SELECT count(*) FROM sync.notes WHERE NOT done")
        while val(ms, "SELECT EXISTS (SELECT FROM sync.notes WHERE NOT done)"):
            time.sleep(0.002)
        r["relayed_ms"] = (time.monotonic() - stopped) * 1000
        r["pending"] = pending
        r["mark_ms"] = mark(ctl["ms"], replica_has, 600)
        wait("the replica caught up", lambda: ms_caught_up(ms), 600, 0.05)
        # once the relay's lag is measured: reading the WAL takes seconds
        if os.environ.get("WAL"):
            wal_by_relation(cur, a[3], b[3], tx)
    elif engine == "lr" and on:
        r["mark_ms"] = mark(ctl["lr"], lambda v: sub_has(ctl["sub"], v), 600)
    return r


def main():
    ms, lr, sub, agent = setup()
    ctl = {"ms": ms, "lr": lr, "sub": sub}
    mscur = ms.cursor()
    results = {(e, s): [] for e in ("ms", "lr") for s in ("off", "on")}
    try:
        lr_enable(lr, sub, False)
        for r in range(ROUNDS):
            engines = ["ms", "lr"] if r % 2 == 0 else ["lr", "ms"]
            for e in engines:
                states = ["off", "on"] if r % 2 == 0 else ["on", "off"]
                for s in states:
                    if e == "ms":
                        top = val(mscur, "SELECT coalesce(max(id), 0) FROM pgbench_history")
                        ms_triggers(mscur, s == "on")
                        if s == "on":
                            wait("the relay idle", lambda: ms_caught_up(mscur), 600, 0.05)
                    else:
                        lr_enable(lr, sub, s == "on")
                    res = run(e, s == "on", ctl, agent)
                    if e == "ms" and s == "off":
                        # its history rows were never noted: gone again, unnoted, as they came
                        mscur.execute("DELETE FROM pgbench_history WHERE id > %s", (top,))
                        ms_triggers(mscur, True)
                    if e == "lr" and s == "on":
                        lr_enable(lr, sub, False)
                    results[(e, s)].append(res)
                    extra = "".join(f", {k} {res[k]:.0f}" for k in ("relayed_ms", "pending", "mark_ms") if k in res)
                    print(f"round {r + 1} {e:2} {s:3} {res['tps']:8.1f} tps, load {res['load']}{extra}", flush=True)
    finally:
        agent.terminate()
        agent.wait()
    report(results)


def report(results):
    def med(xs):
        return statistics.median(xs) if xs else float("nan")

    print()
    print(f"pgbench -c {CLIENTS} -j 2 -T {SECONDS}, scale {SCALE}, fsync and synchronous_commit on, wal_level logical;"
          f" {ROUNDS} rounds (medians); load now {load()}")
    for e in ("ms", "lr"):
        on, off = results[(e, "on")], results[(e, "off")]
        ratios = [a["tps"] / b["tps"] for a, b in zip(on, off)]
        print(f"  {'magic_sync' if e == 'ms' else 'logical replication':20} on {med([x['tps'] for x in on]):8.1f} tps,"
              f" off {med([x['tps'] for x in off]):8.1f}: on / off {med(ratios):.3f}"
              f" (rounds {', '.join(f'{x:.3f}' for x in ratios)})")
    ms_ratio = med([a["tps"] / b["tps"] for a, b in zip(results[("ms", "on")], results[("ms", "off")])])
    lr_ratio = med([a["tps"] / b["tps"] for a, b in zip(results[("lr", "on")], results[("lr", "off")])])
    print(f"  magic_sync's share / logical replication's  {ms_ratio / lr_ratio:.3f}  (target >= 1)")
    on = results[("ms", "on")]
    def figures(rs, k):
        return ", ".join("%.0f" % x[k] for x in rs)
    print(f"  after pgbench stopped: last note relayed {figures(on, 'relayed_ms')} ms"
          f" (target <= 100; {figures(on, 'pending')} notes pending);"
          f" a marker reached the replica in {figures(on, 'mark_ms')} ms,"
          f" the subscriber in {figures(results[('lr', 'on')], 'mark_ms')} ms")
    kinds = ["backends", "trigger", "relay", "agent", "sessions", "walsender", "apply", "pgbench", "other"]
    print("  CPU ms per 1,000 changed rows (4 a transaction), medians:")
    print("    " + f"{'':10}" + "".join(f"{k:>10}" for k in kinds) + f"{'WAL B/tx':>10}{'machine':>9}")
    per = {}
    for (e, s), rs in results.items():
        per[(e, s)] = {k: med([x["cpu"].get(k, 0) * 1000 / x["changes"] for x in rs])
                       for k in kinds if k != "trigger"}
    for (e, s), rs in results.items():
        row = dict(per[(e, s)])
        row["trigger"] = row["backends"] - per[(e, "off")]["backends"]
        print("    " + f"{e + ' ' + s:10}" + "".join(f"{row[k]:10.1f}" for k in kinds) +
              f"{med([x['wal'] for x in rs]):10.0f}{med([x['machine'] for x in rs]):9.2f}")
    ms_cost = sum(per[("ms", "on")][k] for k in ("relay", "agent", "sessions")) + \
        per[("ms", "on")]["backends"] - per[("ms", "off")]["backends"]
    lr_cost = sum(per[("lr", "on")][k] for k in ("walsender", "apply")) + \
        per[("lr", "on")]["backends"] - per[("lr", "off")]["backends"]
    on = results[("ms", "on")]
    print(f"  the relay's passes that sent: {med([x['passes'] for x in on]):.1f} a second,"
          f" {med([x['changes'] / max(x['passes'] * x['window'], 1) for x in on]):.0f} changed rows each;"
          f" its CPU {med([x['cpu']['relay'] / max(x['passes'] * x['window'], 1) for x in on]):.1f} ms a pass;"
          f" the agent's sessions' {med([x['cpu'].get('sessions', 0) / max(x['passes'] * x['window'], 1) for x in on]):.1f} ms"
          " a message (its pull and the filing of its acknowledgement)")
    print(f"  capture's CPU per 1,000 changes (trigger + relay + agent + its sessions): {ms_cost:.1f} ms;"
          f" logical replication's (backends' extra + walsender + apply): {lr_cost:.1f} ms")


if __name__ == "__main__":
    main()
