#!/usr/bin/python3
"""The first sync of a replica, end to end (issue 37), against PostgreSQL's own.
Not a test: prints figures, where the time went, and the ratio against a floor
measured in the same run.

The table of /work/shared/peer/peer.sh: items (id bigint key, store uuid, name
text), N rows, broadcast.  Each round, in turns:

  magic_sync   a new replica registered (sync.replica_add, sync.wake) and the real
               agent (magic_sync_agent --listen) started on a fresh SQLite file,
               timed until the file holds every row (its last id, then a count,
               polled every 10 ms), as peer.sh times it; the CPU seconds of the
               relay worker, of the agent's backends, of the agent, and of the
               rest of the server meanwhile (/proc), and when the pass committed
               (its replica's provision flag polled every 5 ms)
  split        the same, in steps one after another, each alone: a replica
               added with no agent, its provisioning pass (the worker's
               statements by pg_stat_statements, track = all); every message
               pulled by sync.pull as the agent pulls (4 MB at a time), in this
               backend; then applied to a fresh file by sync_apply (the replica
               extension in this process), one transaction each, as the agent
               applies them
  floor        PostgreSQL's logical replication: CREATE SUBSCRIPTION (copy_data)
               into an empty table of another database of the cluster, timed
               until the table holds every row, polled alike

The ratio is magic_sync's median over the floor's median.  Targets (issue 37):
magic_sync <= 2 x the floor, and <= 0.5 x Zero's first sync in the same run
(peer.sh measures Zero; 2026-12-06: Zero 6.46 s, the floor 2.37 s at 10^6).

  bench/firstsync.py [N] [ROUNDS]           (defaults 10^6, 3)

MS_FIRSTSYNC_SET="magic_sync.held_later=off" sets the server's settings first (an
A/B); MS_FIRSTSYNC_SQL="statement; ..." runs statements once set up (an A/B of the
catalog); MS_FIRSTSYNC_PERF=file records the worker's provisioning pass with perf;
MS_FIRSTSYNC_AGENT_PERF=file runs the agent under perf record (its CPU figure is
then perf's);
MS_FIRSTSYNC_PULL_PERF=file records the split round's pulls' backend so;
MS_FIRSTSYNC_STRACE=file strace's the worker's pass likewise (MS_FIRSTSYNC_STRACE_HOW="-tt": each
call, not the table);
MS_FIRSTSYNC_AGENT_WRAP="strace -tt -o file" runs the agent under such a tool;
MS_FIRSTSYNC_DUMP=dir keeps the messages pulled, one file each (build/bench_apply_dump
applies them alone, as the agent does: bench/apply_dump.c).

It starts its own throw-away cluster (the worker preloaded, magic_sync.database
set, wal_level logical), holding the machine's lock (scripts/lib.sh), as
bench/run does; run it through scripts/isolated.
"""
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
DB = "firstsync"
SUB = "subscriber"
PULL_BYTES = 4 << 20        # the agent's --pull-bytes default

if not os.environ.get("MS_BENCH_INSIDE"):
    here = os.path.abspath(__file__)
    sys.exit(subprocess.call(
        ["sh", "-c", '. scripts/lib.sh && ms_ready && ms_cluster -o synchronous_commit=on'
         ' -o shared_buffers=256MB -o max_wal_size=4GB -o checkpoint_timeout=30min'
         ' -o wal_level=logical -o max_wal_senders=10 -o max_replication_slots=10'
         ' -o shared_preload_libraries=magic_sync,pg_stat_statements -o pg_stat_statements.track=all'
         ' -o magic_sync.database=' + DB +
         ' env MS_BENCH_INSIDE=1 /usr/bin/python3 "$0" "$@"', here] + sys.argv[1:], cwd=ROOT))

import psycopg2  # noqa: E402  (inside the cluster only)

TICK = os.sysconf("SC_CLK_TCK")


def connect(db=DB):
    c = psycopg2.connect(dbname=db)
    c.autocommit = True
    return c


def one(cur, sql, args=None):
    cur.execute(sql, args)
    return cur.fetchone()[0]


def wait(what, predicate, timeout, nap=0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return time.monotonic()
        time.sleep(nap)
    raise SystemExit(f"timed out waiting for {what}")


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_of(pid):
    """CPU seconds (user + system) of a process so far, 0 once it is gone"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except OSError:
        return 0.0


def state_of(pid):
    """a process's state: R running or runnable, S sleeping (waiting on the server, a lock,
    a notification), D in the disk (fsync)"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "-"


class States(threading.Thread):
    """how often a process was found in each state, sampled every 20 ms; each sample kept with
    its time, for the same counts over a stretch of the round (between())"""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.done, self.seen, self.samples = pid, False, {}, []

    def run(self):
        while not self.done:
            st = state_of(self.pid)
            self.seen[st] = self.seen.get(st, 0) + 1
            self.samples.append((time.monotonic(), st))
            time.sleep(0.02)

    def stop(self):
        self.done = True
        self.join()
        n = sum(self.seen.values()) or 1
        return " ".join(f"{k} {100 * v / n:.0f}%" for k, v in sorted(self.seen.items()))

    def between(self, t0, t1):
        """the states sampled from t0 to t1, as counts of 20 ms"""
        seen = {}
        for t, st in self.samples:
            if t0 <= t < t1:
                seen[st] = seen.get(st, 0) + 1
        return seen


def shares(seen):
    n = sum(seen.values()) or 1
    return " ".join(f"{k} {100 * v / n:.0f}%" for k, v in sorted(seen.items(), key=lambda kv: -kv[1]))


class Snapshot(threading.Thread):
    """the agent's --json lines as they come: when its snapshot began (its first message
    applied: the Begin, placed first in the chain) and when it ended"""

    def __init__(self, out):
        super().__init__(daemon=True)
        self.out, self.begun, self.ended = out, None, None

    def run(self):
        for line in self.out:
            now = time.monotonic()
            if '"event":"snapshot"' not in line.replace(" ", ""):
                continue
            if self.begun is None:
                self.begun = now
            if '"done":true' in line.replace(" ", ""):
                self.ended = now


class Waits(threading.Thread):
    """what the relay worker and the agent's backends were doing, sampled every 20 ms
    (pg_stat_activity): running, idle (waiting on the agent), or the wait event they
    waited on (a lock, the WAL, I/O); each sample kept with its time (between())"""

    def __init__(self):
        super().__init__(daemon=True)
        self.done, self.seen, self.last, self.t0 = False, {}, {}, time.monotonic()
        self.samples = []

    def run(self):
        c = connect()
        cur = c.cursor()
        while not self.done:
            cur.execute("SELECT CASE WHEN backend_type = 'magic_sync relay' THEN 'worker' ELSE 'agent backends' END,"
                        " CASE WHEN state = 'idle' THEN 'idle' WHEN wait_event IS NULL THEN 'running'"
                        " WHEN wait_event_type = 'Lock' THEN 'Lock (' || left(regexp_replace(query, '\\s+', ' ', 'g'), 40) || ')'"
                        " ELSE wait_event_type || '/' || wait_event END"
                        "  FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'"
                        "    OR application_name = 'magic_sync_agent'")
            now = time.monotonic()
            for who, what in cur.fetchall():
                self.samples.append((now, who, what.split(" (")[0]))
                d = self.seen.setdefault(who, {})
                d[what] = d.get(what, 0) + 1
                self.last[(who, what)] = time.monotonic() - self.t0
            time.sleep(0.02)
        c.close()

    def between(self, who, t0, t1):
        """what `who` was found doing from t0 to t1, as counts of 20 ms"""
        seen = {}
        for t, w, what in self.samples:
            if w == who and t0 <= t < t1:
                seen[what] = seen.get(what, 0) + 1
        return seen

    def stop(self):
        self.done = True
        self.join()
        out = []
        for who, d in sorted(self.seen.items()):
            n = sum(d.values()) or 1
            top = sorted(d.items(), key=lambda kv: -kv[1])[:4]
            out.append(who + " " + " ".join(f"{k} {100 * v / n:.0f}%"
                                            + (f" (last at {self.last[(who, k)]:.1f} s)" if k.startswith("Lock") else "")
                                            for k, v in top))
        return "; ".join(out)


def children(ppid):
    """the processes whose parent is ppid: the postmaster's are the server's"""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == ppid:
                        out.append(int(d))
            except OSError:
                pass
    return out


class ServerCpu:
    """CPU seconds of the server's processes between start() and stop(), by role:
    sampled every 50 ms meanwhile, so that a process that ends (a table
    synchronisation worker) counts what it used until its last sample"""

    def __init__(self, cur, postmaster):
        self.cur, self.postmaster = cur, postmaster
        self.roles = {}

    def sample(self):
        return {p: cpu_of(p) for p in children(self.postmaster)}

    def run(self):
        while not self.done:
            for p, s in self.sample().items():
                if s > 0:
                    self.last[p] = s
            if self.who is not None:
                try:
                    self.roles.update(roles(self.who))
                except psycopg2.Error:
                    pass
            time.sleep(0.05)

    def start(self, who=None):
        """who: a cursor of a connection of its own, to name the processes as they come"""
        self.before = self.sample()
        self.last = dict(self.before)
        self.done, self.who = False, who
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def stop(self, named):
        """named: pid -> name (pids not named are 'server, other'); seconds by name"""
        self.done = True
        self.thread.join()
        for p, s in self.sample().items():
            self.last[p] = s
        self.roles.update(named)
        out = {}
        for p, s in self.last.items():
            name = self.roles.get(p, "server, other")
            out[name] = out.get(name, 0.0) + s - self.before.get(p, 0.0)
        return out


def roles(cur):
    """the worker's pid, and the backends of the agent (its application name)"""
    cur.execute("SELECT pid, CASE WHEN backend_type = 'magic_sync relay' THEN 'relay worker'"
                " WHEN application_name = 'magic_sync_agent' THEN 'agent backends'"
                " WHEN backend_type LIKE 'logical replication%%' OR backend_type = 'walsender'"
                " THEN 'replication' END FROM pg_stat_activity")
    return {p: r for p, r in cur.fetchall() if r}


def setup():
    admin = connect("postgres")
    for d in (DB, SUB):
        admin.cursor().execute(f"CREATE DATABASE {d}")
    # MS_FIRSTSYNC_SET="name=value ...": settings for the server and its worker (an A/B of one)
    for setting in os.environ.get("MS_FIRSTSYNC_SET", "").split():
        name, value = setting.split("=", 1)
        admin.cursor().execute(f"ALTER SYSTEM SET {name} = %s", (value,))
    admin.cursor().execute("SELECT pg_reload_conf()")
    admin.close()
    conn = connect()
    cur = conn.cursor()
    cur.execute("CREATE TABLE items (id bigint PRIMARY KEY, store uuid NOT NULL, name text NOT NULL)")
    cur.execute("INSERT INTO items SELECT g, ('00000000-0000-0000-0000-' || lpad(to_hex(1 + g %% 200), 12, '0'))::uuid,"
                " 'i' || g FROM generate_series(1, %s) g", (N,))
    cur.execute("VACUUM ANALYZE items")
    cur.execute("CREATE EXTENSION magic_sync")
    cur.execute("CREATE EXTENSION pg_stat_statements")
    cur.execute("SELECT sync.mirror('items', 'catalog', 'broadcast')")
    # MS_FIRSTSYNC_SQL="statement; ...": run once set up, before the rounds (an A/B of the catalog,
    # e.g. "DROP INDEX sync.held_row" for what one index fewer would save the held rows)
    for statement in filter(None, (s.strip() for s in os.environ.get("MS_FIRSTSYNC_SQL", "").split(";"))):
        cur.execute(statement)
    cur.execute("SELECT sync.wake()")
    wait("the declaration's notes", lambda: one(cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"), 1800)
    cur.execute("CREATE PUBLICATION lpub FOR TABLE items")
    sub = connect(SUB)
    sub.cursor().execute("CREATE TABLE items (id bigint PRIMARY KEY, store uuid NOT NULL, name text NOT NULL)")
    sub.close()
    return conn


def holds_all(path):
    """a check that the SQLite file holds every row, as peer.sh's waitrows.mjs does it"""
    state = {"db": None}

    def check():
        try:
            if state["db"] is None:
                if not os.path.exists(path):
                    return False
                state["db"] = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            db = state["db"]
            return (db.execute("SELECT 1 FROM items WHERE id = ?", (N,)).fetchone() is not None
                    and db.execute("SELECT count(*) FROM items").fetchone()[0] == N)
        except sqlite3.Error:
            return False

    def close():
        if state["db"] is not None:
            state["db"].close()
    return check, close


class Watch(threading.Thread):
    """when predicate first held, polled every `nap` s on a connection of its own;
    and the CPU seconds of process `pid` then"""

    def __init__(self, sql, args, pid=None, nap=0.02):
        super().__init__(daemon=True)
        self.sql, self.args, self.nap, self.at, self.done = sql, args, nap, None, False
        self.pid, self.cpu = pid, None

    def run(self):
        c = connect()
        cur = c.cursor()
        while not self.done and self.at is None:
            if one(cur, self.sql, self.args):
                self.at = time.monotonic()
                self.cpu = cpu_of(self.pid) if self.pid else None
            time.sleep(self.nap)
        c.close()


def drop_replica(cur, rid):
    cur.execute("SELECT sync.replica_drop(%s)", (rid,))
    cur.execute("SELECT sync.wake()")
    wait(f"replica {rid} forgotten", lambda: one(cur, "SELECT NOT EXISTS (SELECT FROM sync.replicas WHERE id = %s)", (rid,)), 600)
    cur.execute("VACUUM ANALYZE sync.held, sync.outbox, sync.replicas, sync.bodies")


def statements(cur, top=8):
    """the relay's statements of the pass, by time (pg_stat_statements): the worker runs
    them through SPI outside any statement, so they are top-level"""
    cur.execute("SELECT total_exec_time, calls, rows, regexp_replace(left(query, 110), '\\s+', ' ', 'g')"
                "  FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = %s)"
                "   AND query NOT LIKE '%%pg_stat_statements%%' AND query NOT LIKE '%%sync.replicas WHERE id = $1%%'"
                " ORDER BY total_exec_time DESC LIMIT %s", (DB, top))
    return cur.fetchall()


HELD = "SELECT NOT provision AND held_due IS NULL FROM sync.replicas WHERE id = %s"


def ms_round(cur, cpu, tmp):
    rid = str(uuid.uuid4())
    path = os.path.join(tmp, f"ms_{rid}.db")
    check, close = holds_all(path)
    cur.execute("CHECKPOINT")
    committed = Watch("SELECT NOT provision FROM sync.replicas WHERE id = %s", (rid,))
    held = Watch(HELD, (rid,))
    cpu.start()
    t0 = time.monotonic()
    cur.execute("SELECT sync.replica_add(%s)", (rid,))
    committed.start()
    held.start()
    cur.execute("SELECT sync.wake()")
    # MS_FIRSTSYNC_AGENT_PERF=file: the agent recorded with perf (perf report -i file)
    wrap = ["perf", "record", "-F", "999", "-g", "-o", os.environ["MS_FIRSTSYNC_AGENT_PERF"], "--"] \
        if os.environ.get("MS_FIRSTSYNC_AGENT_PERF") else []
    # MS_FIRSTSYNC_AGENT_WRAP="strace -tt -o file": the agent run under another such tool
    wrap = wrap or os.environ.get("MS_FIRSTSYNC_AGENT_WRAP", "").split()
    # --json: its snapshot's first message applied, and its last, timed as they are told
    agent = subprocess.Popen(wrap + [os.path.join(ROOT, "magic_sync_agent"), "--server", f"dbname={DB}",
                                     "--listen", f"dbname={DB}", "--replica", rid, "--db", path, "--json"],
                             stdout=subprocess.PIPE, text=True)
    told = Snapshot(agent.stdout)
    told.start()
    states = States(agent.pid)
    states.start()
    waits = Waits()
    waits.start()
    try:
        t1 = wait("the file to hold every row", check, 1800, nap=0.01)
        agent_cpu = cpu_of(agent.pid)
        by = cpu.stop(roles(cur))
        by["agent states"] = states.stop()
        by["waits"] = waits.stop()
    finally:
        close()
        committed.done = True
        for pid in (children(agent.pid) if wrap else []):
            os.kill(pid, 15)    # the agent under perf: perf then writes its file and ends
        agent.terminate() if not wrap else None
        agent.wait()
        told.join()
        committed.join()
        held.join()
    by["agent"] = agent_cpu
    by["timeline"] = timeline(t0, committed.at, told, t1, states, waits)
    drop_replica(cur, rid)
    for f in (path, path + "-wal", path + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    return t1 - t0, (committed.at - t0) if committed.at else None, held.at - t0, by


def timeline(t0, committed, told, t1, states, waits):
    """where a round's wall clock went after the pass's commit: until the agent applied its
    first message (the Begin), then while it applied the snapshot (its states: R running,
    S waiting, on the server's answer mostly; its backends': ClientWrite, a batch pulled
    ahead waiting for the agent, idle, the agent has asked nothing)"""
    if committed is None or told.begun is None:
        return "no timeline (the pass's commit or the snapshot's first message not seen)"
    ended = told.ended or t1
    return (f"commit {committed - t0:.2f} s, first message applied {told.begun - t0:.2f} s,"
            f" last {ended - t0:.2f} s, file holds every row {t1 - t0:.2f} s;"
            f" while it applied: the agent {shares(states.between(told.begun, ended))},"
            f" its backends {shares(waits.between('agent backends', told.begun, ended))};"
            f" before: the agent {shares(states.between(committed, told.begun))}")


def split_round(cur, cpu, tmp):
    """the provisioning pass, the pulls, the applies, one after another"""
    rid = str(uuid.uuid4())
    cur.execute("CHECKPOINT")
    cur.execute("SELECT pg_stat_statements_reset()")
    worker = one(cur, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'")
    committed = Watch("SELECT NOT provision FROM sync.replicas WHERE id = %s", (rid,), worker)
    held = Watch(HELD, (rid,), worker)
    perf = None
    if os.environ.get("MS_FIRSTSYNC_PERF"):
        # a profile of the worker's pass (perf record), for perf report -i $MS_FIRSTSYNC_PERF
        perf = subprocess.Popen(["perf", "record", "-F", "999", "-g", "-o", os.environ["MS_FIRSTSYNC_PERF"],
                                 "-p", str(worker)], stderr=subprocess.DEVNULL)
        time.sleep(1)
    elif os.environ.get("MS_FIRSTSYNC_STRACE"):
        # the worker's system calls in its pass and after (strace -c's table, or -tt's lines: "-tt")
        perf = subprocess.Popen(["strace", "-f", os.environ.get("MS_FIRSTSYNC_STRACE_HOW", "-c"),
                                 "-o", os.environ["MS_FIRSTSYNC_STRACE"], "-p", str(worker)], stderr=subprocess.DEVNULL)
        time.sleep(1)
    cpu.start()
    w0 = cpu_of(worker)
    t0 = time.monotonic()
    cur.execute("SELECT sync.replica_add(%s)", (rid,))
    committed.start()
    held.start()
    cur.execute("SELECT sync.wake()")
    committed.join()
    held.join()
    relay, relay_held = committed.at - t0, held.at - t0
    if perf is not None:
        perf.send_signal(2)
        perf.wait()
    by = cpu.stop(roles(cur))
    stmts = statements(cur)
    cur.execute("SELECT count(*), sum(bytes) FROM sync.outbox WHERE replica = %s", (rid,))
    messages, size = cur.fetchone()

    # the pulls, in this backend, as the agent's (their statements apart from the pass's)
    cur.execute("SELECT pg_stat_statements_reset()")
    pid = one(cur, "SELECT pg_backend_pid()")
    pull_perf = None
    if os.environ.get("MS_FIRSTSYNC_PULL_PERF"):
        # a profile of the pulls' backend (perf record), for perf report -i $MS_FIRSTSYNC_PULL_PERF
        pull_perf = subprocess.Popen(["perf", "record", "-F", "999", "-g", "-o", os.environ["MS_FIRSTSYNC_PULL_PERF"],
                                      "-p", str(pid)], stderr=subprocess.DEVNULL)
        time.sleep(1)
    c0, t = cpu_of(pid), time.monotonic()
    after, pulled, each = 0, [], []
    while True:
        p0 = time.monotonic()
        cur.execute("SELECT number, message FROM sync.pull(%s, %s, %s)", (rid, after, PULL_BYTES))
        rows = [(n, bytes(m)) for n, m in cur.fetchall() if n is not None]
        each.append(time.monotonic() - p0)
        if not rows:
            break
        pulled.extend(rows)
        after = rows[-1][0]
    pull = time.monotonic() - t
    pull_cpu = cpu_of(pid) - c0
    if pull_perf is not None:
        pull_perf.send_signal(2)
        pull_perf.wait()
    pull_stmts = statements(cur, 5)
    if os.environ.get("MS_FIRSTSYNC_DUMP"):
        # the messages, for a look at their apply without a cluster (perf, callgrind)
        d = os.environ["MS_FIRSTSYNC_DUMP"]
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "replica"), "w") as f:
            f.write(rid)
        for n, m in pulled:
            with open(os.path.join(d, f"{n:012d}.msg"), "wb") as f:
                f.write(m)

    # the applies, as the agent's: WAL, one transaction each
    path = os.path.join(tmp, f"split_{rid}.db")
    db = sqlite3.connect(path, isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(os.path.join(ROOT, "magic_sync_sqlite"))
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("SELECT sync_init(?)", (rid,))
    r0, t = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    for _, m in pulled:
        db.execute("BEGIN IMMEDIATE")
        db.execute("SELECT sync_apply(?)", (m,))
        db.execute("COMMIT")
    apply = time.monotonic() - t
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    rows = db.execute("SELECT count(*) FROM items").fetchone()[0]
    db.close()
    assert rows == N, (rows, N)
    for f in (path, path + "-wal", path + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    drop_replica(cur, rid)
    apply_cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"relay": relay, "relay_held": relay_held, "pass_cpu": committed.cpu - w0,
            "held_cpu": held.cpu - committed.cpu, "relay_cpu": by.get("relay worker", 0.0), "pull": pull, "pull_cpu": pull_cpu,
            "apply": apply, "apply_cpu": apply_cpu,
            "pulls": len(each) - 1, "first_pull": each[0], "other_pulls": statistics.mean(each[1:-1] or [0.0]), "messages": messages, "bytes": size, "statements": stmts, "pull_statements": pull_stmts}


def floor_round(cur, cpu):
    sub = connect(SUB)
    scur = sub.cursor()
    scur.execute("TRUNCATE items")
    cur.execute("CHECKPOINT")
    # a subscription to the same cluster needs its slot made apart (CREATE SUBSCRIPTION docs)
    cur.execute("SELECT pg_create_logical_replication_slot('lsub', 'pgoutput')")
    conninfo = f"host={os.environ.get('PGHOST', 'localhost')} port={os.environ.get('PGPORT', '5432')} dbname={DB}" \
               f" user={os.environ.get('PGUSER', 'postgres')}"
    if os.environ.get("PGPASSWORD"):
        conninfo += f" password={os.environ['PGPASSWORD']}"
    watcher = connect()
    cpu.start(watcher.cursor())
    t0 = time.monotonic()
    scur.execute(f"CREATE SUBSCRIPTION lsub CONNECTION '{conninfo}' PUBLICATION lpub"
                 " WITH (create_slot = false, slot_name = 'lsub', copy_data = true)")
    t1 = wait("the subscriber to hold every row",
              lambda: one(scur, "SELECT EXISTS (SELECT FROM items WHERE id = %s)", (N,))
              and one(scur, "SELECT count(*) FROM items") == N, 1800, nap=0.01)
    by = cpu.stop(roles(cur))
    watcher.close()
    scur.execute("ALTER SUBSCRIPTION lsub DISABLE")
    scur.execute("ALTER SUBSCRIPTION lsub SET (slot_name = NONE)")
    scur.execute("DROP SUBSCRIPTION lsub")
    wait("the slot inactive", lambda: one(cur, "SELECT NOT active FROM pg_replication_slots WHERE slot_name = 'lsub'"), 60)
    cur.execute("SELECT pg_drop_replication_slot('lsub')")
    scur.execute("TRUNCATE items")
    sub.close()
    return t1 - t0, by


def main():
    conn = setup()
    cur = conn.cursor()
    cur.execute("SHOW data_directory")
    with open(os.path.join(one(cur, "SHOW data_directory"), "postmaster.pid")) as f:
        postmaster = int(f.readline())
    cpu = ServerCpu(cur, postmaster)
    tmp = tempfile.mkdtemp(prefix="ms_firstsync_")
    ms, floors, splits, f_cpu = [], [], [], []
    print(f"first sync of {N:,} rows (items: id bigint, store uuid, name text), {ROUNDS} rounds;"
          f" load {load()}")
    for r in range(ROUNDS):
        order = ["ms", "floor"] if r % 2 == 0 else ["floor", "ms"]
        for what in order:
            if what == "ms":
                total, committed, held, by = ms_round(cur, cpu, tmp)
                ms.append(total)
                states = by.pop("agent states")
                waits = by.pop("waits")
                line = by.pop("timeline")
                print(f"  round {r + 1} magic_sync  {total:6.2f} s  (pass committed at {committed or 0:5.2f} s,"
                      f" held rows at {held:5.2f} s)"
                      f"  CPU s: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(by.items()))
                      + f"; the agent: {states}  load {load()}")
                print(f"    sampled (pg_stat_activity): {waits}")
                print(f"    timeline: {line}")
            else:
                total, by = floor_round(cur, cpu)
                floors.append(total)
                f_cpu.append(sum(by.values()))
                print(f"  round {r + 1} floor       {total:6.2f} s  CPU s: "
                      + ", ".join(f"{k} {v:.2f}" for k, v in sorted(by.items())) + f"  load {load()}")
        s = split_round(cur, cpu, tmp)
        splits.append(s)
        print(f"  round {r + 1} split: relay pass {s['relay']:5.2f} s, held rows at {s['relay_held']:5.2f} s"
              f" (worker CPU {s['pass_cpu']:.2f} + {s['held_cpu']:.2f}),"
              f" pull {s['pull']:5.2f} s (backend CPU {s['pull_cpu']:.2f}; {s['pulls']} pulls of"
              f" {PULL_BYTES >> 20} MB, the first {1000 * s['first_pull']:.0f} ms, the others"
              f" {1000 * s['other_pulls']:.0f} ms each),"
              f" apply {s['apply']:5.2f} s (CPU {s['apply_cpu']:.2f});"
              f" {s['messages']} messages, {s['bytes'] / 1e6:.1f} MB  load {load()}")
        # where the CPU went, step by step: the pass (the worker's CPU until it committed; its
        # statements' time by pg_stat_statements beside it, wall clock: the read of the table,
        # the bodies and outbox written), the held rows after it, the pull, the apply
        # the read: its key spelled in the query, or (integer keys) written from the row, its key NULL
        read = sum(t for t, _, _, q in s["statements"]
                   if q.startswith("SELECT") and ("octet_length" in q or "uuid[]" in q)) / 1000
        write = sum(t for t, _, _, q in s["statements"] if "sync.bodies" in q or "sync.outbox" in q) / 1000
        total = s["pass_cpu"] + s["held_cpu"] + s["pull_cpu"] + s["apply_cpu"]
        floor_cpu = statistics.median(f_cpu) if f_cpu else 0.0
        print(f"  round {r + 1} where the CPU went (s): the pass {s['pass_cpu']:.2f} (its statements' time: the read"
              f" {read:.2f}, bodies and outbox {write:.2f}), held rows {s['held_cpu']:.2f},"
              f" pull {s['pull_cpu']:.2f}, apply {s['apply_cpu']:.2f}; in all {total:.2f},"
              f" {total / floor_cpu if floor_cpu else 0:.2f} x the floor's {floor_cpu:.2f} (its server's CPU)")
    print("  the provisioning pass's statements (last split round, pg_stat_statements):")
    for ms_, calls, rows, q in splits[-1]["statements"]:
        print(f"    {ms_ / 1000:6.2f} s  {calls:6} calls  {rows:8} rows  {q}")
    print("  the pulls' statements (last split round, pg_stat_statements):")
    for ms_, calls, rows, q in splits[-1]["pull_statements"]:
        print(f"    {ms_ / 1000:6.2f} s  {calls:6} calls  {rows:8} rows  {q}")
    m, f = statistics.median(ms), statistics.median(floors)
    print(f"magic_sync median {m:.2f} s, floor (logical replication's COPY) median {f:.2f} s,"
          f" ratio {m / f:.2f}  (target <= 2; <= 0.5 x Zero's, peer.sh)  load {load()}")


if __name__ == "__main__":
    main()
