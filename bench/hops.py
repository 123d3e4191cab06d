#!/usr/bin/python3
"""Write to device, hop by hop (issue 37).  Not a test: prints figures.

The table of the side-by-side run (/work/shared/peer): items (id bigint key, store
uuid, name text), N rows broadcast to one replica, the preloaded relay worker with
default settings and the real agent (--listen) on a SQLite file.  WRITES one-row
UPDATEs, each alone (200 ms apart); each one's time runs from before the UPDATE until
the file shows the new value (read every half millisecond).  With `perf trace`
watching the writing backend, the relay worker, the agent and its two sessions, each
write's time is cut at the system calls that end a hop:

  commit   the UPDATE received .. the writer's commit flushed (its kill(SIGURG)
           setting the worker's latch)
  wake     .. the worker leaves its wait
  pass     .. the pass committed (its kill(SIGUSR1) of the listening session: the NOTIFY)
  notify   .. the agent reads the notification
  agent    .. the agent sends sync.pull
  pull     .. the agent has its answer (the pull flushes the pass's WAL first)
  apply    .. the agent's last write to the replica's WAL before its first fdatasync:
           sync_apply's COMMIT, when a reader of the file sees the rows (the agent's
           commits wait for no fsync: synchronous = NORMAL)
  upload   .. its last write before its next request: the acknowledgement's
           sync_upload and the one fdatasync that makes both durable before it leaves

and p50 / p90 of each over the writes.  Wall-clock figures: the load average is
printed beside them.  Targets (issue 37): write to file p50 <= 5 ms, p90 <= 10 ms.
Beside them, what does not depend on the load: the agent's requests to the server
a write (its sendto calls, pulls and filings) and the CPU a write of the agent and
of its server sessions (/proc, over the writes).

  bench/hops.py [N] [writes]        (defaults 10^6, 40)

MS_HOPS_AGENT=path runs another build of the agent (an A/B).

It starts its own throw-away cluster, as bench/latency.py does, with fsync on (a
throw-away cluster has it off), as the side-by-side run's clusters have it.
"""
import json
import os
import re
import shutil
import signal
import statistics
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
WRITES = int(sys.argv[2]) if len(sys.argv) > 2 else 40
DB = "hops"

if not os.environ.get("MS_BENCH_INSIDE"):
    here = os.path.abspath(__file__)
    sys.exit(subprocess.call(
        ["sh", "-c", '. scripts/lib.sh && ms_ready && ms_cluster -o fsync=on -o synchronous_commit=on'
         ' -o shared_buffers=256MB -o max_wal_size=4GB -o magic_sync.database=' + DB +
         ' env MS_BENCH_INSIDE=1 /usr/bin/python3 "$0" "$@"', here] + sys.argv[1:], cwd=ROOT))

import psycopg2  # noqa: E402  (inside the cluster only)

HOPS = ["commit", "wake", "pass", "notify", "agent", "pull", "apply", "upload"]


def connect(db=DB):
    c = psycopg2.connect(dbname=db)
    c.autocommit = True
    return c


def wait(what, predicate, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def val(cur, sql, args=None):
    cur.execute(sql, args)
    return cur.fetchone()[0]


def setup(path):
    admin = connect("postgres")
    admin.cursor().execute(f"CREATE DATABASE {DB}")
    admin.close()
    conn = connect()
    cur = conn.cursor()
    cur.execute("CREATE TABLE items (id bigint PRIMARY KEY, store uuid NOT NULL, name text NOT NULL)")
    cur.execute("INSERT INTO items SELECT g, ('00000000-0000-0000-0000-' || lpad(to_hex(1 + g %% 200), 12, '0'))::uuid,"
                " 'i' || g FROM generate_series(1, %s) g", (N,))
    cur.execute("VACUUM ANALYZE items")
    cur.execute("CREATE EXTENSION magic_sync")
    cur.execute("SELECT sync.mirror('items', 'catalog', 'broadcast')")
    cur.execute("SELECT sync.wake()")
    wait("the declaration's notes", lambda: val(cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"), 1800)
    replica = str(uuid.uuid4())
    cur.execute("SELECT sync.replica_add(%s)", (replica,))
    cur.execute("SELECT sync.wake()")
    agent = subprocess.Popen([os.environ.get("MS_HOPS_AGENT") or os.path.join(ROOT, "magic_sync_agent"),
                              "--server", f"dbname={DB}",
                              "--listen", f"dbname={DB}", "--replica", replica, "--db", path, "--quiet"])
    wait("the replica's snapshot",
         lambda: val(cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"
                          " AND NOT EXISTS (SELECT FROM sync.replicas WHERE provision OR acked_number < last_number)"),
         1800)
    return conn, agent


def roles(cur, agent):
    cur.execute("SELECT pg_backend_pid()")
    procs = {str(cur.fetchone()[0]): "writer", str(agent.pid): "agent"}
    cur.execute("SELECT pid, backend_type, query FROM pg_stat_activity"
                " WHERE backend_type = 'magic_sync relay' OR application_name = 'magic_sync_agent'")
    for pid, kind, query in cur.fetchall():
        procs[str(pid)] = ("relay" if kind == "magic_sync relay"
                           else "listener" if query.upper().startswith("LISTEN") else "session")
    return procs


LINE = re.compile(r'^\s*([\d.]+) \(\s*([\d.]*)\s*(?:ms)?\s*\): (\S+)/(\d+)\s+'
                  r'(?:\.\.\. \[continued\]: )?(\w+)\((.*?)\)\s*(?:=\s*(-?\d+))?')


def events(trace, procs):
    """(end, start, role, call, fd, result, line) of every finished system call, by their end"""
    out = []
    for line in trace.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        start, took, _, pid, call, args, ret = m.groups()
        if "..." in line and "[continued]" not in line and ret is None:
            continue    # begun here, ended on a line of its own
        role = procs.get(pid)
        if role is None:
            continue
        fd = re.search(r'fd: (\d+)', args)
        start = float(start)
        out.append((start + (float(took) if took else 0.0), start, role, call,
                    int(fd.group(1)) if fd else None, int(ret) if ret else None, line))
    out.sort()
    return out


def hops(ev):
    """each write's hops, cut at the system calls that end them"""
    writes = [e for e in ev if e[2] == "writer" and e[3] == "recvfrom" and (e[5] or 0) > 0]
    rows = []
    for i, w in enumerate(writes):
        end = writes[i + 1][0] if i + 1 < len(writes) else float("inf")
        seg = [e for e in ev if w[0] <= e[0] < end]

        def first(pred, after):
            return next((e for e in seg if e[0] >= after and pred(e)), None)
        woke = first(lambda e: e[2] == "writer" and e[3] == "kill" and "URG" in e[6], w[0])
        if woke is None:
            continue
        left = first(lambda e: e[2] == "relay" and e[3] == "epoll_wait", woke[1])
        notified = first(lambda e: e[2] == "relay" and e[3] == "kill" and "USR1" in e[6], woke[0])
        if notified is None:
            continue
        sent = first(lambda e: e[2] == "listener" and e[3] == "sendto", notified[0])
        read = first(lambda e: e[2] == "agent" and e[3] == "recvfrom" and (e[5] or 0) > 0,
                     sent[0] if sent else notified[0])
        pull = read and first(lambda e: e[2] == "agent" and e[3] == "sendto", read[0])
        answer = pull and first(lambda e: e[2] == "agent" and e[3] == "recvfrom" and (e[5] or 0) > 0
                                and e[4] == pull[4], pull[0])
        after = answer and first(lambda e: e[2] == "agent" and e[3] == "sendto", answer[0])
        writes_after = [e for e in seg if answer and e[2] == "agent" and e[3] in ("pwrite64", "fdatasync")
                        and e[0] >= answer[0] and (after is None or e[0] <= after[0])]
        if not (read and pull and answer and writes_after):
            continue
        left_at = left[0] if left and left[0] <= notified[0] else woke[0]
        synced = next((i for i, e in enumerate(writes_after) if e[3] == "fdatasync"), None)
        applied = writes_after[synced - 1] if synced else writes_after[-1]
        rows.append({"commit": woke[0] - w[0], "wake": left_at - woke[0], "pass": notified[0] - left_at,
                     "notify": read[0] - notified[0], "agent": pull[1] - read[0], "pull": answer[0] - pull[1],
                     "apply": applied[0] - answer[0], "upload": writes_after[-1][0] - applied[0], "traced": writes_after[-1][0] - w[0],
                     "requests": sum(1 for e in seg if e[2] == "agent" and e[3] == "sendto")})
    return rows


def cpu(pid):
    """CPU seconds (user + system) of a process so far, 0 once it is gone"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    work = tempfile.mkdtemp(prefix="ms_hops_")
    path = os.path.join(work, "replica.db")
    conn, agent = setup(path)
    cur = conn.cursor()
    trace_file = os.path.join(work, "trace.txt")
    perf = None
    if shutil.which("perf"):
        procs = roles(cur, agent)
        perf = subprocess.Popen(["perf", "trace", "-p", ",".join(procs), "-e",
                                 "sendto,recvfrom,fdatasync,fsync,kill,epoll_wait,poll,pwrite64"],
                                stdout=open(trace_file, "w"), stderr=subprocess.STDOUT)
        time.sleep(2)
    f = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    shown = []
    sessions = [int(p) for p, r in roles(cur, agent).items() if r == "session"]
    cpu0 = cpu(agent.pid), sum(cpu(p) for p in sessions)
    try:
        for i in range(3 + WRITES):
            key = 1 + i * (N // (3 + WRITES)) + 17
            value = f"w{i}-{os.getpid()}"
            time.sleep(0.2)
            t = time.monotonic()
            cur.execute("UPDATE items SET name = %s WHERE id = %s", (value, key))
            while True:
                got = f.execute("SELECT name FROM items WHERE id = ?", (key,)).fetchone()
                if got and got[0] == value:
                    break
                if time.monotonic() - t > 30:
                    raise SystemExit(f"write {i} never showed in the file")
                time.sleep(0.0005)
            if i >= 3:
                shown.append((time.monotonic() - t) * 1000)
        time.sleep(0.2)
        cpu1 = cpu(agent.pid), sum(cpu(p) for p in sessions)
    finally:
        if perf:
            time.sleep(0.5)
            perf.send_signal(signal.SIGINT)
            perf.wait()
        agent.terminate()
        agent.wait()
    load = open("/proc/loadavg").read().split()[0]
    print(f"write to replica file: items of {N:,} rows broadcast to one replica, {WRITES} writes, load {load}")
    print(f"  shown in the file  p50 {pct(shown, 50):6.2f} ms  p90 {pct(shown, 90):6.2f} ms"
          f"  (targets 5 / 10 ms)")
    print(f"  CPU a write: the agent {(cpu1[0] - cpu0[0]) * 1000 / (3 + WRITES):.2f} ms,"
          f" its sessions {(cpu1[1] - cpu0[1]) * 1000 / (3 + WRITES):.2f} ms (/proc, in clock ticks)")
    if perf:
        rows = hops(events(open(trace_file).read(), procs))
        print(f"  hop by hop, {len(rows)} writes traced (perf trace slows each call a little):")
        for k in HOPS + ["traced"]:
            xs = [r[k] for r in rows]
            if xs:
                print(f"    {k:7} p50 {pct(xs, 50):6.2f} ms  p90 {pct(xs, 90):6.2f} ms")
        if rows:
            print(f"  the agent's requests to the server a write: {statistics.mean(r['requests'] for r in rows):.2f}"
                  f" (p50 {pct([r['requests'] for r in rows], 50)})")
        with open(os.path.join(work, "hops.json"), "w") as out:
            json.dump(rows, out)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
