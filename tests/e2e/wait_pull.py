#!/usr/bin/python3
"""wait_pull.py - a pull that waits on the server for the relay's next pass
(CALL sync.pull_wait, src/pg/transport/pull_wait.c; the agent's, src/agent/poll.c):

  - it ends when a worker's pass that wrote for the replica commits, well
    before its timeout; it times out, empty, when nothing is written; it
    returns at once when a message past `after` waits already;
  - while it waits its backend holds no snapshot (backend_xmin NULL);
  - a cancel and statement_timeout end it (57014); a role that may not pull
    for the replica gets 42501 at once; inside a transaction block it refuses;
  - the agent with --listen waits on its listening session between writes,
    each write reaches the file, and the file ends exact; the session that
    holds its pull terminated, it connects again and holds its pulls there;
  - a held pull's batch ends the agent's round: a write costs it one held
    pull (its CALL and its pull) and the acknowledgement's filing, no pull
    after to find nothing (its requests counted in the server's log); the pull
    prepared once on the listening session, executed by name;
  - a write the relay sends in more messages than a pull takes (--pull-bytes
    1024, magic_sync.message_bytes 2048): the held pull takes the first, and
    the rest are pulled at once, not left for the next write or the interval;
  - a server without sync.pull_wait (an earlier version): the agent says so
    once, the notifications wake it, and writes still reach the file, those
    of many messages too.
"""
import atexit
import os
import subprocess
import tempfile
import threading
import time

import psycopg2

from harness import TOP, Server, check, file_exact, file_value, finish, json_lines, server_log_count, wait_until

DB = "wait_pull"
AGENT = os.path.join(TOP, "magic_sync_agent")
PORT = os.environ.get("PGPORT", "5432")
R1 = "77616974-0000-4000-8000-000000000001"
R2 = "77616974-0000-4000-8000-000000000002"
tmp = tempfile.mkdtemp(prefix="wait_pull.")

srv = Server(DB)
# the agents' requests counted in the server's log (each an extended-protocol execute)
srv.exec(f"ALTER DATABASE {DB} SET log_min_duration_statement = 0")
srv.exec("""
CREATE ROLE watcher LOGIN PASSWORD 'pw-watcher';
CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL);
INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 50) g;
SELECT sync.mirror('items', 'catalog', 'broadcast');
""")
srv.exec(f"SELECT sync.replica_add('{R1}')")
srv.exec(f"SELECT sync.replica_add('{R2}')")
srv.exec("SELECT sync.relay_start()")
check("the relay writes R2's snapshot", wait_until(60, lambda: srv.one(
    "SELECT count(*) > 0 FROM sync.outbox WHERE replica = %s", (R2,))), True)


def connect(**kw):
    c = psycopg2.connect(dbname=DB, **kw)
    c.autocommit = True
    return c


def last(r):
    return srv.one("SELECT coalesce(max(number), 0) FROM sync.outbox WHERE replica = %s", (r,))


def call(conn, r, after, timeout_ms, out, sql="CALL sync.pull_wait(%s, %s, %s)"):
    """the CALL on conn: how long it took, and its SQLSTATE (None when it returned)"""
    began = time.monotonic()
    try:
        with conn.cursor() as c:
            c.execute(sql, (r, after, timeout_ms))
        out["state"] = None
    except psycopg2.Error as e:
        out["state"] = e.pgcode
        conn.rollback()
    out["took"] = time.monotonic() - began


def pid_of(conn):
    with conn.cursor() as c:
        c.execute("SELECT pg_backend_pid()")
        return c.fetchone()[0]


waiter = connect()
wpid = pid_of(waiter)

# ---- at once when something waits; empty at its timeout -----------------------------
out = {}
call(waiter, R2, 0, 10000, out)
check("a message past `after` waits: it returns at once", (out["state"], out["took"] < 2), (None, True))
end = last(R2)
out = {}
call(waiter, R2, end, 500, out)
check("nothing written: it returns at its timeout, empty", (out["state"], 0.4 < out["took"] < 5), (None, True))

# ---- a pass that writes for the replica ends it; no snapshot held meanwhile -----------
out = {}
t = threading.Thread(target=call, args=(waiter, R2, end, 60000, out))
t.start()
check("it waits", wait_until(10, lambda: srv.one(
    "SELECT state = 'active' AND query LIKE 'CALL sync.pull_wait%%' FROM pg_stat_activity WHERE pid = %s",
    (wpid,))), True)
time.sleep(0.3)
xmins = [srv.one("SELECT backend_xmin IS NULL AND backend_xid IS NULL FROM pg_stat_activity WHERE pid = %s",
                 (wpid,)) for _ in range(5)]
check("while it waits its backend holds no snapshot (backend_xmin NULL)", xmins, [True] * 5)
check("it waits on its condition variable", srv.one(
    "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (wpid,)), "Extension")
srv.exec("UPDATE items SET v = 'woken' WHERE id = 1")
t.join(60)
check("a worker's pass that wrote for it ends the wait, long before its timeout",
      (out.get("state"), out.get("took", 99) < 30), (None, True))
check("and the message is there to pull", last(R2) > end, True)

# ---- a cancel, statement_timeout ------------------------------------------------------
end = last(R2)
out = {}
t = threading.Thread(target=call, args=(waiter, R2, end, 60000, out))
t.start()
check("it waits again", wait_until(10, lambda: srv.one(
    "SELECT state = 'active' AND query LIKE 'CALL sync.pull_wait%%' FROM pg_stat_activity WHERE pid = %s",
    (wpid,))), True)
srv.exec("SELECT pg_cancel_backend(%s)", (wpid,))
t.join(30)
check("a cancel ends it (57014)", (out.get("state"), out.get("took", 99) < 10), ("57014", True))
with waiter.cursor() as c:
    c.execute("SET statement_timeout = 300")
out = {}
call(waiter, R2, end, 60000, out)
check("statement_timeout ends it (57014)", (out.get("state"), out.get("took", 99) < 10), ("57014", True))
with waiter.cursor() as c:
    c.execute("RESET statement_timeout")

# ---- who may wait, and where ----------------------------------------------------------
other = connect(host="localhost", port=PORT, user="watcher", password="pw-watcher")
out = {}
call(other, R2, end, 60000, out)
check("a role that may not pull for the replica: 42501, at once", (out["state"], out["took"] < 5),
      ("42501", True))
other.close()
tx = psycopg2.connect(dbname=DB)
out = {}
call(tx, R2, end, 60000, out)
check("inside a transaction block it refuses (25001)", (out["state"], out["took"] < 5), ("25001", True))
tx.close()
check("PUBLIC may call it (each call checks the replica)", srv.one(
    "SELECT has_function_privilege('watcher', 'sync.pull_wait(uuid, bigint, integer)', 'EXECUTE')"), True)
waiter.close()

# ---- the agent waits on its listening session ----------------------------------------
agents = []


@atexit.register
def stop_all():
    for agent in agents:
        if agent.poll() is None:
            agent.kill()


def file_of(r):
    return os.path.join(tmp, f"{r}.db")


def start(r, name, *more):
    log = open(os.path.join(tmp, f"{name}.log"), "w")
    agents.append(subprocess.Popen([AGENT, "--server", f"dbname={DB} application_name={name}_main", "--replica", r,
                                    "--db", file_of(r), "--json", "--interval", "600000",
                                    "--listen", f"dbname={DB} application_name={name}_listen"] + list(more),
                                   stdout=log, stderr=subprocess.STDOUT))
    return agents[-1]


def value(r, key):
    return file_value(file_of(r), key)


def exact(r):
    return file_exact(file_of(r), srv)


def session(app):
    rows = srv.rows("SELECT pid, state, query, backend_xmin IS NULL FROM pg_stat_activity"
                    " WHERE application_name = %s", (app,))
    return rows[0] if rows else (None, None, "", None)


def write(key, v, r):
    srv.exec("UPDATE items SET v = %s WHERE id = %s", (v, key))
    return wait_until(30, lambda: value(r, key) == v)


a1 = start(R1, "a1")
check("the snapshot applies", wait_until(60, lambda: value(R1, 50) is not None), True)
check("between writes its listening session waits in sync.pull_wait", wait_until(30, lambda: session("a1_listen")[2]
      .startswith("CALL sync.pull_wait")), True)
for i in range(8):
    check(f"write {i} reaches the file", write(i % 5 + 2, f"w{i}", R1), True)
    check(f"write {i}: the listening session waits again, holding no snapshot", wait_until(
        10, lambda: session("a1_listen")[2].startswith("CALL sync.pull_wait") and session("a1_listen")[3]), True)
check("the file is exact", wait_until(30, lambda: exact(R1)), True)


def requests():
    """the agents' requests the server's log shows ended so far: pulls, waits, all, and the
    pulls of the statement prepared on the listening session (src/agent/server.c)"""
    counts = [server_log_count(srv, "execute " + what)
              for what in ("<unnamed>: SELECT p.number, p.message FROM", "<unnamed>: CALL sync.pull_wait", "",
                           "magic_sync_pull: SELECT p.number, p.message FROM")]
    return counts if None in counts else [counts[0] + counts[3]] + counts[1:]


WRITES = 10
before = requests()
for i in range(WRITES):
    check(f"counted write {i} reaches the file", write(i % 5 + 2, f"c{i}", R1), True)
    check(f"counted write {i}: the listening session waits again", wait_until(
        10, lambda: session("a1_listen")[2].startswith("CALL sync.pull_wait")), True)
    time.sleep(0.3)
after = requests()
if None in before or None in after:
    print("no server log found: the agent's requests are not counted")
else:
    pulls, waits, every, prepared = (b - a for a, b in zip(before, after))
    print(f"a write: {pulls / WRITES:.2f} pulls, {waits / WRITES:.2f} held pulls, {every / WRITES:.2f} requests")
    # a session of its own, proven --server's database: the pull is parsed once, not at each write
    check("the pulls on the listening session go through the statement prepared there",
          prepared == pulls and prepared >= WRITES, True)
    check("a write, one pull: the held one's, none after it to find nothing", pulls <= WRITES + 1, True)
    check("a write, one held pull", waits <= WRITES + 1, True)
    # the CALL, its pull and the acknowledgement's filing; the upload bound looked at every 5 s
    check("a write, three requests (was four)", every <= 3 * WRITES + 4, True)

# ---- more messages than a pull takes: none is left for the next write -------------------
srv.exec("ALTER SYSTEM SET magic_sync.message_bytes = 2048")
srv.exec("SELECT pg_reload_conf()")
a2 = start(R2, "a2", "--pull-bytes", "1024")
check("R2's snapshot applies, a message a pull", wait_until(60, lambda: exact(R2)), True)
check("R2's listening session waits in sync.pull_wait", wait_until(30, lambda: session("a2_listen")[2]
      .startswith("CALL sync.pull_wait")), True)
written = "SELECT last_number, acked_number FROM sync.replicas WHERE id = %s"
end = srv.rows(written, (R2,))[0][0]
srv.exec("UPDATE items SET v = repeat('m', 300) || id")
check("the write reaches both files whole, every message of it pulled at once",
      wait_until(30, lambda: exact(R1) and exact(R2)), True)
check("the relay wrote it in many messages", srv.rows(written, (R2,))[0][0] - end > 3, True)
check("R2 acknowledged every message", wait_until(10, lambda: len(set(srv.rows(written, (R2,))[0])) == 1), True)
a2.terminate()
check("R2's agent stops cleanly", a2.wait(timeout=30), 0)
check("the relay's pulls on --server's session: none (they went on the listening one)",
      "sync.pull(" in session("a1_main")[2], False)
old = session("a1_listen")[0]
check("the session holding its pull is terminated", srv.one("SELECT pg_terminate_backend(%s)", (old,)), True)
check("it connects it again, and holds its pull there", wait_until(30, lambda: session("a1_listen")[0] not in (None, old)
      and session("a1_listen")[2].startswith("CALL sync.pull_wait")), True)
check("a write after reaches the file", write(9, "after", R1), True)
check("a terminated session is no refusal: it does not stop holding its pulls",
      [e for e in json_lines(os.path.join(tmp, "a1.log")) if "cannot hold a pull" in e.get("what", "")], [])
a1.terminate()
check("the agent stops cleanly, its wait on the way", a1.wait(timeout=30), 0)
check("and its waiting backend goes", wait_until(10, lambda: session("a1_listen")[0] is None), True)

# ---- a server without sync.pull_wait: the notifications ------------------------------
srv.exec("ALTER EXTENSION magic_sync DROP PROCEDURE sync.pull_wait(uuid, bigint, integer);"
         " DROP PROCEDURE sync.pull_wait(uuid, bigint, integer)")
a1 = start(R1, "a1b", "--pull-bytes", "1024")
check("started again, it listens", wait_until(30, lambda: session("a1b_listen")[0]), True)
for i in range(4):
    check(f"no sync.pull_wait: write {i} reaches the file", write(20 + i, f"old{i}", R1), True)
srv.exec("UPDATE items SET v = repeat('o', 300) || id")
check("no sync.pull_wait: a write of many messages reaches the file whole", wait_until(30, lambda: exact(R1)), True)
srv.exec("ALTER SYSTEM RESET magic_sync.message_bytes")
srv.exec("SELECT pg_reload_conf()")
said = [e for e in json_lines(os.path.join(tmp, "a1b.log"))
        if e.get("event") == "error" and "cannot hold a pull" in e.get("what", "")]
check("the agent says once that the server cannot wait", len(said), 1)
check("it waits for notifications: its listening session is idle", wait_until(
    10, lambda: session("a1b_listen")[1] == "idle"), True)
check("the file is exact", wait_until(30, lambda: exact(R1)), True)
a1.terminate()
check("it stops cleanly", a1.wait(timeout=30), 0)
stopped = [e for e in json_lines(os.path.join(tmp, "a1.log")) + json_lines(os.path.join(tmp, "a1b.log"))
           if e.get("event") == "round" and e.get("stopped")]
check("no round stopped at a gap", stopped, [])
finish()
