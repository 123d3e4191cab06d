#!/usr/bin/python3
"""Write to device, hop by hop (issue 37).  Not a test: prints figures.

The table of the side-by-side run (/work/shared/peer): items (id bigint key, store
uuid, name text), N rows broadcast to one replica, the preloaded relay worker with
default settings and the real agent (--listen) on a SQLite file.  WRITES one-row
UPDATEs, each alone (200 ms apart); each one's time runs from before the UPDATE until
the file shows the new value to a reader (below).  With `perf trace`
watching the writing backend, the relay worker, the WAL writer, the agent and its
two sessions (the listening one pulls too: the agent's pulls to the primary go on
it; MS_HOPS_LISTEN_ONLY=1 keeps them on the other, --listen-only), each write's time
is cut at the system calls that end a hop:

  commit   the UPDATE received .. the writer's commit flushed (its kill(SIGURG)
           setting the worker's latch)
  wake     .. the worker leaves its wait
  pass     .. the pass committed (its kill(SIGUSR1) of the listening session: the NOTIFY;
           or before it its kill(SIGURG) of that session, the wake of a held pull)
  notify   .. the agent reads the notification
  agent    .. the agent sends sync.pull
  pull     .. the agent has its answer (the pull flushes the pass's WAL first)
           (a pull the server held, CALL sync.pull_wait, src/agent/poll.c: the answer is
           the agent's last read on that connection before it writes the replica, the
           NOTIFY read before it; notify and agent are 0 and pull runs from the NOTIFY:
           the held backend's wake, its look, its NOTIFY sent, the pull)
  apply    .. the agent's last write to the replica's WAL before its first fdatasync:
           sync_apply's COMMIT, when a reader of the file sees the rows (the agent's
           commits wait for no fsync: synchronous = NORMAL)
  upload   .. its last write before its next request: the acknowledgement's
           sync_upload and the one fdatasync that makes both durable before it leaves

and p50 / p90 of each over the writes.  Wall-clock figures: the load average is
printed beside them.

The headline is write -> device, the issue's measure (targets p50 <= 5 ms, p90 <=
10 ms): from before the UPDATE until a reader of the replica file sees the row, that
is until sync_apply's commit (the end of the `apply` hop).  The reader
(bench/hops_reader.c, MS_HOPS_READER=c) is a SQLite connection kept open on the
file that runs its query when the file's WAL index changed, looking at it when the
WAL is written (inotify) and then every MS_HOPS_POLL_US (50) until it changes;
MS_HOPS_READER=cpoll looks every MS_HOPS_POLL_US always, MS_HOPS_READER=py is the
reader before session 11 (the query every 0.5 ms, in Python).  Its CPU a write is
printed.  Beside the headline, traced: the UPDATE's way to the writer (the client's
sendto .. the writer's read), write -> sync_apply's commit (commit .. apply), the
reader's lag after that commit and its query (it marks both with a kill(.., 0)),
and write -> acknowledged (.. upload: the acknowledgement's fdatasync, after which
the server hears of it), which the device does not wait for.

Inside the hops: the writer's statement (received .. answered) and its WAL
fdatasync, beside the same UPDATE on an unmirrored copy of the table, run twice a
write: right after the mirrored one's round (200 ms after it, just as the WAL
writer's cycle that the pass's commit began writes), and 200 ms later, in the
mirrored one's own place (200 ms after an unmirrored commit, nothing written
since): that one is the like-for-like comparison (the trigger and the wake's share
of `commit`); for each, how long no process wrote WAL before it; the pull
on its way to its session, its time there (request read .. answer sent) and its
answer's way back; the worker's time from the NOTIFY until it waits again; the
flush of the pass's WAL (by the worker, or by the WAL writer woken at its
commit), when it began after the NOTIFY, and how long it lasted after the pull
came (what the pull waited for); a write whose flush was over before the NOTIFY
has none.  Also what does not depend on the load: the agent's requests to the
server a write (its sendto calls, pulls and filings) and the CPU a write of the
agent and of its server sessions (/proc, over the writes).

  bench/hops.py [N] [writes]        (defaults 10^6, 40)

MS_HOPS_AGENT=path runs another build of the agent (an A/B); MS_HOPS_KEEP=dir
keeps the trace, the processes' roles and each write's hops there; MS_HOPS_SCHED=1
traces the scheduler's switches and wakes of the same processes into it too.

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

# the device reader: "c", bench/hops_reader.c (the query when the WAL index changed: looked at when the
# WAL is written, then every POLL_US until it changes), "cpoll" (the same, looked at every POLL_US
# always), or "py", the bench's reader before session 11 (the query every 0.5 ms, in Python)
READER = os.environ.get("MS_HOPS_READER", "c")
POLL_US = int(os.environ.get("MS_HOPS_POLL_US", "50"))

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
    # the same table unmirrored: its writes' commits, beside the mirrored ones' (no trigger, no wake)
    cur.execute("CREATE TABLE plain (LIKE items INCLUDING ALL)")
    cur.execute("INSERT INTO plain SELECT * FROM items")
    cur.execute("VACUUM ANALYZE items, plain")
    cur.execute("CREATE EXTENSION magic_sync")
    cur.execute("SELECT sync.mirror('items', 'catalog', 'broadcast')")
    cur.execute("SELECT sync.wake()")
    wait("the declaration's notes", lambda: val(cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"), 1800)
    replica = str(uuid.uuid4())
    cur.execute("SELECT sync.replica_add(%s)", (replica,))
    cur.execute("SELECT sync.wake()")
    agent = subprocess.Popen([os.environ.get("MS_HOPS_AGENT") or os.path.join(ROOT, "magic_sync_agent"),
                              "--server", f"dbname={DB}",
                              # named, so that roles() knows its backend once it pulls too
                              "--listen", f"dbname={DB} application_name='magic_sync_agent listen'",
                              "--replica", replica, "--db", path, "--quiet"]
                             + (["--listen-only"] if os.environ.get("MS_HOPS_LISTEN_ONLY") else []))
    wait("the replica's snapshot",
         lambda: val(cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"
                          " AND NOT EXISTS (SELECT FROM sync.replicas WHERE provision OR acked_number < last_number)"),
         1800)
    return conn, agent


def roles(cur, agent):
    cur.execute("SELECT pg_backend_pid()")
    procs = {str(cur.fetchone()[0]): "writer", str(agent.pid): "agent"}
    cur.execute("SELECT pid, backend_type, query, application_name FROM pg_stat_activity"
                " WHERE backend_type IN ('magic_sync relay', 'walwriter')"
                " OR application_name IN ('magic_sync_agent', 'magic_sync_agent listen')")
    for pid, kind, query, name in cur.fetchall():
        procs[str(pid)] = ("relay" if kind == "magic_sync relay" else "walwriter" if kind == "walwriter"
                           else "listener" if name.endswith(" listen") or query.upper().startswith("LISTEN")
                           else "session")
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


def flushes(ev):
    """(start, end) of the WAL flushes of the relay worker and the WAL writer"""
    return [(e[1], e[0]) for e in ev if e[2] in ("relay", "walwriter") and e[3] in ("fdatasync", "fsync")]


def quiet(ev, w, seg):
    """how long no process wrote WAL before the writer's statement w began writing its own"""
    mine = next((e for e in seg if e[2] == "writer" and e[3] == "pwrite64"), None)
    if mine is None:
        return None
    last = None
    for e in ev:
        if e[0] >= mine[1]:
            break
        if e[2] != "agent" and e[3] in ("pwrite64", "fdatasync", "fsync"):
            last = e
    return mine[1] - last[0] if last else None


def target(e):
    m = re.search(r'pid: (\d+)', e[6].split("kill(", 1)[-1])
    return m and m.group(1)


def hops(ev, reader=None):
    """each write's hops, cut at the system calls that end them; and the unmirrored writes' rounds,
    each marked "after" (the first after a mirrored write's round) or "alike" (after an unmirrored one)"""
    writes = [e for e in ev if e[2] == "writer" and e[3] == "recvfrom" and (e[5] or 0) > 0]
    listeners = {re.search(r'/(\d+) ', e[6]).group(1) for e in ev if e[2] == "listener"}
    flushed = flushes(ev)
    rows, plain = [], []
    before = None
    for i, w in enumerate(writes):
        end = writes[i + 1][0] if i + 1 < len(writes) else float("inf")
        seg = [e for e in ev if w[0] <= e[0] < end]

        def first(pred, after):
            return next((e for e in seg if e[0] >= after and pred(e)), None)
        reply = first(lambda e: e[2] == "writer" and e[3] == "sendto", w[0])
        woke = first(lambda e: e[2] == "writer" and e[3] == "kill" and "URG" in e[6], w[0])
        # the writer's own statement: received .. its answer sent, and its fsyncs of the WAL
        own = {"round": reply[0] - w[0] if reply else None,
               "wal_sync": sum(e[0] - e[1] for e in seg if e[2] == "writer" and e[3] in ("fdatasync", "fsync")
                               and (reply is None or e[0] <= reply[0])),
               "quiet": quiet(ev, w, seg)}
        if woke is None:
            if reply and not any(e[2] == "relay" and e[3] == "kill" for e in seg):
                own["place"] = "after" if before == "mirrored" else "alike"
                plain.append(own)
            before = "plain"
            continue
        before = "mirrored"
        left = first(lambda e: e[2] == "relay" and e[3] == "epoll_wait", woke[1])
        # the pass's commit: its NOTIFY (kill SIGUSR1), or before it the wake of the listening session's
        # held pull (the condition variable's broadcast, kill SIGURG of that session): under load the
        # held pull may answer before the worker gets the CPU back to send the NOTIFY
        notified = first(lambda e: e[2] == "relay" and e[3] == "kill" and ("USR1" in e[6] or target(e) in listeners),
                         woke[0])
        if notified is None:
            continue
        sent = first(lambda e: e[2] == "listener" and e[3] == "sendto", notified[0])
        read = first(lambda e: e[2] == "agent" and e[3] == "recvfrom" and (e[5] or 0) > 0,
                     sent[0] if sent else notified[0])
        pull = read and first(lambda e: e[2] == "agent" and e[3] == "sendto", read[0])
        # a held pull's answer: the replica written before the agent's next request
        held = pull and any(e[2] == "agent" and e[3] == "pwrite64" and read[0] <= e[0] <= pull[1] for e in seg)
        if held:
            # the answer: the agent's last read there before it writes the replica (the
            # NOTIFY goes out first, between the wait's end and the pull)
            wrote = first(lambda e: e[2] == "agent" and e[3] == "pwrite64", read[0])
            read = [e for e in seg if e[2] == "agent" and e[3] == "recvfrom" and (e[5] or 0) > 0
                    and e[4] == read[4] and read[0] <= e[0] <= wrote[1]][-1]
            pull = (read[0], notified[0]) + read[2:]
        answer = read if held else pull and first(lambda e: e[2] == "agent" and e[3] == "recvfrom"
                                                   and (e[5] or 0) > 0 and e[4] == pull[4], pull[0])
        after = answer and first(lambda e: e[2] == "agent" and e[3] == "sendto", answer[0])
        writes_after = [e for e in seg if answer and e[2] == "agent" and e[3] in ("pwrite64", "fdatasync")
                        and e[0] >= answer[0] and (after is None or e[0] <= after[0])]
        if not (read and pull and answer and writes_after):
            continue
        left_at = left[0] if left and left[0] <= notified[0] else woke[0]
        synced = next((i for i, e in enumerate(writes_after) if e[3] == "fdatasync"), None)
        applied = writes_after[synced - 1] if synced else writes_after[-1]
        # the pull, server side: its session reads the request .. sends the answer
        got = first(lambda e: e[2] in ("session", "listener") and e[3] == "recvfrom" and (e[5] or 0) > 0, pull[1])
        answered = got and first(lambda e: e[2] == got[2] and e[3] == "sendto", got[0])
        sent_by = [e for e in ev if e[2] == "client" and e[3] == "sendto" and e[1] <= w[0]]
        row = {"commit": woke[0] - w[0], "wake": left_at - woke[0], "pass": notified[0] - left_at,
               "notify": 0.0 if held else read[0] - notified[0], "agent": 0.0 if held else pull[1] - read[0],
               "pull": answer[0] - pull[1], "held": 1 if held else 0,
               "apply": applied[0] - answer[0], "upload": writes_after[-1][0] - applied[0],
               "device": applied[0] - w[0], "acked": writes_after[-1][0] - w[0],
               "requests": sum(1 for e in seg if e[2] == "agent" and e[3] == "sendto"),
               "writer_round": own["round"], "writer_wal_sync": own["wal_sync"], "writer_quiet": own["quiet"]}
        if sent_by and w[0] - sent_by[-1][1] < 50:
            # the client's UPDATE sent .. the writer has read it (the writer woken from its idle wait)
            row["to_writer"] = w[0] - sent_by[-1][1]
        if reader:
            # the reader's marks: a query begun on a changed WAL index (kill of itself), and the one
            # that returned the value (kill of its parent)
            seen = first(lambda e: e[2] == "reader" and e[3] == "kill" and target(e) != reader, w[0])
            looked = seen and [e for e in seg if e[2] == "reader" and e[3] == "kill" and target(e) == reader
                               and e[0] <= seen[1]]
            if seen and looked:
                row["seen"] = seen[1] - w[0]
                row["reader_lag"] = looked[-1][1] - applied[0]
                row["reader_query"] = seen[1] - looked[-1][0]
        if got and answered and not held:
            # the pull's request on its way (and its session's wake), its work, its answer on the way back
            row["pull_to_session"] = got[0] - pull[0]
            row["pull_server"] = answered[0] - got[0]
            row["pull_back"] = answer[0] - answered[0]
        # the worker's work after the pass's commit: its flush and what follows (until it waits again)
        idle = first(lambda e: e[2] == "relay" and e[3] == "epoll_wait", notified[0])
        if idle:
            row["relay_after_commit"] = idle[1] - notified[0]
        # the pass's flushes (the worker's, and the WAL writer's its asynchronous commit woke): those
        # ending after its NOTIFY and before the pull answered
        mine = [(s, e) for s, e in flushed if notified[0] <= e and (answered is None or e <= answered[0])]
        row["flushes"] = len(mine)
        if mine:
            row["flush_took"] = mine[-1][1] - mine[0][0]
            row["flush_from_commit"] = mine[0][0] - notified[0]
            if got:
                # how long the pass's flush outlasted the pull's arrival (0: done before it came)
                row["flush_after_pull"] = max(0.0, mine[-1][1] - got[0])
        rows.append(row)
    return rows, plain


def cpu(pid):
    """CPU seconds (user + system) of a process so far, 0 once it is gone"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def schedstat(pid):
    """(on a CPU, waiting for one) of a process so far, in seconds (/proc/<pid>/schedstat), 0 once gone"""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            ran, waited = f.read().split()[:2]
        return int(ran) / 1e9, int(waited) / 1e9
    except (OSError, ValueError):
        return 0.0, 0.0


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    work = tempfile.mkdtemp(prefix="ms_hops_")
    path = os.path.join(work, "replica.db")
    conn, agent = setup(path)
    cur = conn.cursor()
    reader = None
    if READER in ("c", "cpoll"):
        binary = os.path.join(work, "hops_reader")
        subprocess.check_call(["gcc", "-O2", "-o", binary, os.path.join(ROOT, "bench", "hops_reader.c"), "-lsqlite3"])
        reader = subprocess.Popen([binary, path, str(POLL_US)] + (["poll"] if READER == "cpoll" else []),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    else:
        f = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    trace_file = os.path.join(work, "trace.txt")
    perf = None
    if shutil.which("perf"):
        procs = roles(cur, agent)
        if reader:
            procs[str(reader.pid)] = "reader"
        # this process: its sendto of each UPDATE
        procs[str(os.getpid())] = "client"
        perf = subprocess.Popen(["perf", "trace", "-p", ",".join(procs), "-e",
                                 "sendto,recvfrom,fdatasync,fsync,kill,epoll_wait,poll,pwrite64"
                                 # MS_HOPS_SCHED=1: the scheduler's switches and wakes of these processes too,
                                 # kept in the trace (MS_HOPS_KEEP) for reading; the hops ignore them
                                 + (",sched:sched_switch,sched:sched_wakeup" if os.environ.get("MS_HOPS_SCHED") else "")],
                                stdout=open(trace_file, "w"), stderr=subprocess.STDOUT)
        time.sleep(2)
    shown, front, polls, queries = [], [], [], []
    reader_cpu = 0.0
    # the listener's too: the agent pulls on it (src/agent/poll.c)
    sessions = [int(p) for p, r in roles(cur, agent).items() if r in ("session", "listener")]
    cpu0 = cpu(agent.pid), sum(cpu(p) for p in sessions)
    # the server's processes on the path: their time on a CPU and waiting for one (runnable, not running)
    path = {r: int(p) for p, r in roles(cur, agent).items() if r in ("relay", "walwriter", "listener", "session")}
    sched0 = {r: schedstat(p) for r, p in path.items()}
    try:
        for i in range(3 + WRITES):
            key = 1 + i * (N // (3 + WRITES)) + 17
            value = f"w{i}-{os.getpid()}"
            time.sleep(0.2)
            if reader:
                reader.stdin.write(f"{key} {value}\n")
                reader.stdin.flush()
            t = time.monotonic()
            cur.execute("UPDATE items SET name = %s WHERE id = %s", (value, key))
            answered = time.monotonic()
            if reader:
                at, n, q = reader.stdout.readline().split()
                seen = int(at) / 1e9
            else:
                c0 = time.process_time()
                n = q = 0
                while True:
                    n = q = n + 1
                    got = f.execute("SELECT name FROM items WHERE id = ?", (key,)).fetchone()
                    if got and got[0] == value:
                        break
                    if time.monotonic() - t > 30:
                        raise SystemExit(f"write {i} never showed in the file")
                    time.sleep(0.0005)
                seen = time.monotonic()
                reader_cpu += time.process_time() - c0
            if i >= 3:
                shown.append((seen - t) * 1000)
                front.append((answered - t) * 1000)
                polls.append(int(n))
                queries.append(int(q))
            # the same write to the unmirrored table: once the mirrored one's hops are over (as the
            # bench always did: right after the WAL writer's cycle the pass's commit began), then
            # again 200 ms later, in the mirrored one's place (200 ms after an unmirrored commit)
            for _ in range(2):
                time.sleep(0.2)
                cur.execute("UPDATE plain SET name = %s WHERE id = %s", (value, key))
        time.sleep(0.2)
        cpu1 = cpu(agent.pid), sum(cpu(p) for p in sessions)
        sched1 = {r: schedstat(p) for r, p in path.items()}
        if reader:
            reader.stdin.close()
            user, system, setup_cpu = reader.stdout.readline().split()[1:]
            reader_cpu = (int(user) + int(system) - int(setup_cpu)) / 1e9
            reader.wait()
    finally:
        if reader and reader.poll() is None:
            reader.kill()
        if perf:
            time.sleep(0.5)
            perf.send_signal(signal.SIGINT)
            perf.wait()
        agent.terminate()
        agent.wait()
    load = open("/proc/loadavg").read().split()[0]
    print(f"write to device: items of {N:,} rows broadcast to one replica, {WRITES} writes, load {load}")
    how = {"c": "the C reader (bench/hops_reader.c): the query when the WAL index changed, looked at when the WAL"
                f" is written, then every {POLL_US / 1000:g} ms until it changes",
           "cpoll": f"the C reader (bench/hops_reader.c): the query when the WAL index changed, looked at every"
                    f" {POLL_US / 1000:g} ms"}.get(READER, "the query every 0.5 ms, in Python")
    print(f"  write -> device  p50 {pct(shown, 50):6.2f} ms  p90 {pct(shown, 90):6.2f} ms  (targets 5 / 10 ms):"
          " from before the UPDATE until a reader of the replica file sees the row (sync_apply committed),"
          f" polled by {how}")
    print(f"    the reader: {reader_cpu * 1000 / (3 + WRITES):.3f} ms CPU a write (opening the file aside)"
          f" ({reader_cpu * 1000 / max(1, sum(shown) / len(shown) * (3 + WRITES)) * 100:.1f} % of a core while it"
          f" waits); polls p50 {pct(polls, 50)}, queries p50 {pct(queries, 50)} a write;"
          f" the UPDATE sent .. answered, client side, p50 {pct(front, 50):.2f} ms")
    rows, plain = hops(events(open(trace_file).read(), procs), reader and str(reader.pid)) if perf else ([], [])
    if rows:
        print(f"  traced ({len(rows)} writes, from the UPDATE's arrival; perf trace slows each call a little):")
        for k, what in (("to_writer", "the UPDATE sent .. the writer read it (before the hops)"),
                        ("device", "write -> device (sync_apply's commit)"),
                        ("seen", "write -> the reader's query returned the value"),
                        ("reader_lag", "  sync_apply's commit .. the reader's query began"),
                        ("reader_query", "  that query, begun .. returned the value"),
                        ("acked", "write -> acknowledged (+ the upload and its fdatasync)")):
            xs = [r[k] for r in rows if r.get(k) is not None]
            if xs:
                print(f"    {what:55} p50 {pct(xs, 50):6.2f} ms  p90 {pct(xs, 90):6.2f} ms")
    print(f"  CPU a write: the agent {(cpu1[0] - cpu0[0]) * 1000 / (3 + WRITES):.2f} ms,"
          f" its sessions {(cpu1[1] - cpu0[1]) * 1000 / (3 + WRITES):.2f} ms (/proc, in clock ticks)")
    print("  the server's processes a write, on a CPU / waiting for one (/proc/<pid>/schedstat): " + ", ".join(
        f"{r} {(sched1[r][0] - sched0[r][0]) * 1000 / (3 + WRITES):.2f} / {(sched1[r][1] - sched0[r][1]) * 1000 / (3 + WRITES):.2f} ms"
        for r in sorted(path)))
    if rows:
        print("  hop by hop (device = commit .. apply; acked = device + upload):")
        for k in HOPS:
            xs = [r[k] for r in rows]
            print(f"    {k:7} p50 {pct(xs, 50):6.2f} ms  p90 {pct(xs, 90):6.2f} ms")
        print("  inside the hops:")
        for k, what in (("writer_round", "the mirrored UPDATE, received .. answered"),
                        ("writer_wal_sync", "  its fdatasync of the WAL"),
                        ("pull_to_session", "the pull sent .. its session reads it"),
                        ("pull_server", "the pull, its session's request .. answer"),
                        ("pull_back", "the answer sent .. the agent reads it"),
                        ("relay_after_commit", "the worker busy after the NOTIFY (flush, bounds)"),
                        ("flush_took", "the pass's WAL flushes, first begun .. last done"),
                        ("flush_from_commit", "  begun after the NOTIFY (< 0: before)"),
                        ("flush_after_pull", "  lasting after the pull came")):
            xs = [r[k] for r in rows if r.get(k) is not None]
            if xs:
                print(f"    {what:45} p50 {pct(xs, 50):6.2f} ms  p90 {pct(xs, 90):6.2f} ms  ({len(xs)} writes)")
        xs = [r["writer_quiet"] for r in rows if r.get("writer_quiet") is not None]
        if xs:
            print(f"      no WAL written by anyone before it for      p50 {pct(xs, 50):6.2f} ms  ({len(xs)})")
        for place, where in (("alike", "in the mirrored one's place (200 ms after an unmirrored commit)"),
                             ("after", "right after the mirrored round (the WAL writer's cycle)")):
            print(f"    the same UPDATE unmirrored, {where}:")
            for k, what in (("round", "  received .. answered"), ("wal_sync", "  its fdatasync of the WAL"),
                            ("quiet", "  no WAL written by anyone before it for")):
                xs = [r[k] for r in plain if r.get(k) is not None and r["place"] == place]
                if xs:
                    print(f"    {what:45} p50 {pct(xs, 50):6.2f} ms  p90 {pct(xs, 90):6.2f} ms  ({len(xs)})")
        print(f"  the pass's WAL flushes before the pull answered, a write: {statistics.mean(r['flushes'] for r in rows):.2f}"
              f" (writes with two: {sum(1 for r in rows if r['flushes'] > 1)})")
        print(f"  the agent's requests to the server a write: {statistics.mean(r['requests'] for r in rows):.2f}"
              f" (p50 {pct([r['requests'] for r in rows], 50)});"
              f" pulls the server held: {sum(r['held'] for r in rows)} of {len(rows)}")
        with open(os.path.join(work, "hops.json"), "w") as out:
            json.dump({"mirrored": rows, "plain": plain}, out)
    keep = os.environ.get("MS_HOPS_KEEP")
    if keep:
        os.makedirs(keep, exist_ok=True)
        for name in ("trace.txt", "hops.json"):
            if os.path.exists(os.path.join(work, name)):
                shutil.copy(os.path.join(work, name), keep)
        with open(os.path.join(keep, "procs.json"), "w") as out:
            json.dump(procs if perf else {}, out)
    shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    main()
