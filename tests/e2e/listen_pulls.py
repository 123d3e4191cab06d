#!/usr/bin/python3
"""listen_pulls.py - the agent pulls on its --listen connection (src/agent/poll.c):
the session that just sent the relay's notification is awake, where --server's
has slept since the last round.

  - with --listen, the pulls go on the listening connection, and its session
    stays out of a transaction between them (or in the pull the server holds,
    with no snapshot: wait_pull.py), so that the notifications keep coming:
    writes reach the file with --interval far longer than the test;
  - --listen-only keeps them on --server's connection;
  - a listening role that may not pull (it is not the replica's: 42501) is
    said once, its pulls go on --server's connection, and the file ends exact;
  - the listening session killed (pg_terminate_backend) between writes: the
    agent connects it again, later writes still reach the file, and pull on
    the new session;
  - the listening session killed in the middle of a snapshot, while the agent
    pulls ahead on it: the snapshot goes on on --server's connection, exact.
A standby given (--pull) keeps the pulls: tests/e2e/standby.py.
"""
import atexit
import json
import os
import signal
import sqlite3
import subprocess
import tempfile
import time

from harness import TOP, Server, check, file_exact, file_value, finish, json_lines, wait_until

DB = "listen_pulls"
AGENT = os.path.join(TOP, "magic_sync_agent")
PORT = os.environ.get("PGPORT", "5432")
R1 = "6c697374-0000-4000-8000-000000000001"
R2 = "6c697374-0000-4000-8000-000000000002"
R3 = "6c697374-0000-4000-8000-000000000003"
ROWS = 20000
tmp = tempfile.mkdtemp(prefix="listen_pulls.")

srv = Server(DB)
# many small messages: a snapshot spans many pulls, each sent ahead while the last applies
srv.exec(f"ALTER DATABASE {DB} SET magic_sync.message_bytes = 4096")
srv.exec(f"""
CREATE ROLE watcher LOGIN PASSWORD 'pw-watcher';
CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL);
INSERT INTO items SELECT g, repeat('x', 100) || g FROM generate_series(1, {ROWS}) g;
SELECT sync.mirror('items', 'catalog', 'broadcast');
SELECT sync.replica_add('{R1}');
SELECT sync.replica_add('{R2}');
SELECT sync.replica_add('{R3}');
""")
srv.exec("SELECT sync.relay_start()")


def file_of(r):
    return os.path.join(tmp, f"{r}.db")


agents = []


@atexit.register
def stop_all():
    """a check that raised leaves no agent behind"""
    for agent in agents:
        if agent.poll() is None:
            agent.kill()


def start(r, name, *more):
    """an agent; its sessions named name_main and name_listen; its JSON lines in a log"""
    log = open(os.path.join(tmp, f"{name}.log"), "w")
    agents.append(subprocess.Popen([AGENT, "--server", f"dbname={DB} application_name={name}_main", "--replica", r,
                             "--db", file_of(r), "--json", "--interval", "600000"] + list(more),
                            stdout=log, stderr=subprocess.STDOUT))
    return agents[-1]


def events(name):
    return json_lines(os.path.join(tmp, f"{name}.log"))


def value(r, key):
    return file_value(file_of(r), key)


def exact(r):
    return file_exact(file_of(r), srv)


def session(app):
    """(pid, state, query) of the backend named app, or Nones"""
    rows = srv.rows("SELECT pid, state, query FROM pg_stat_activity WHERE application_name = %s", (app,))
    return rows[0] if rows else (None, None, "")


def acked(r):
    return srv.one("SELECT acked_number >= last_number FROM sync.replicas WHERE id = %s", (r,))


def write(key, v, replicas):
    """a write, and each replica's file showing it, acknowledged (no relay pass by hand: the
    worker's NOTIFY is what wakes the agents)"""
    srv.exec("UPDATE items SET v = %s WHERE id = %s", (v, key))
    return all(wait_until(30, lambda r=r: value(r, key) == v and acked(r)) for r in replicas)


# ---- --listen-only alone is a usage error ------------------------------------------
bad = subprocess.run([AGENT, "--server", f"dbname={DB}", "--replica", R1, "--db", file_of(R1), "--listen-only"],
                     capture_output=True, text=True)
check("--listen-only without --listen: exit 64, saying why", (bad.returncode, "needs --listen" in bad.stderr),
      (64, True))

# ---- pulls on the listening connection; --listen-only keeps them off it -------------
a1 = start(R1, "a1", "--listen", f"dbname={DB} application_name=a1_listen")
a3 = start(R3, "a3", "--listen", f"dbname={DB} application_name=a3_listen", "--listen-only")
check("the snapshots apply", wait_until(60, lambda: value(R1, ROWS) and value(R3, ROWS)), True)
check("the agents listen", wait_until(30, lambda: session("a1_listen")[0] and session("a3_listen")[0]), True)
for i in range(5):
    check(f"write {i} reaches both files, woken by the notification", write(1, f"w{i}", [R1, R3]), True)
    time.sleep(0.3)     # the round's end
    listen, main = session("a1_listen"), session("a1_main")
    # between rounds the server holds its next pull there (CALL sync.pull_wait: wait_pull.py)
    check(f"write {i}: the agent's last pull went on its listening session",
          "sync.pull(" in listen[2] or "sync.pull_wait(" in listen[2], True)
    check(f"write {i}: its --server session did not pull last (it filed the acknowledgement)",
          main[0] is not None and "sync.pull(" not in main[2], True)
    check(f"write {i}: the listening session is out of any transaction, or holds a pull (no snapshot)",
          listen[1] == "idle" or srv.one("SELECT query LIKE 'CALL sync.pull_wait%%' AND backend_xmin IS NULL"
                                         " FROM pg_stat_activity WHERE pid = %s", (listen[0],)), True)
    check(f"write {i}: --listen-only: its listening session only listened", session("a3_listen")[2],
          "LISTEN magic_sync")
check("--listen-only: its pulls went on --server's session", "sync.pull(" in session("a3_main")[2], True)
a3.terminate()
check("the --listen-only agent stops cleanly", a3.wait(timeout=30), 0)

# ---- a listening role that may not pull --------------------------------------------
a2 = start(R2, "a2", "--listen",
           f"host=localhost port={PORT} dbname={DB} user=watcher password=pw-watcher application_name=a2_listen")
check("its snapshot applies", wait_until(60, lambda: value(R2, ROWS)), True)
check("it listens", wait_until(30, lambda: session("a2_listen")[0]), True)
for i in range(4):
    check(f"refused: write {i} reaches the file", write(2, f"r{i}", [R1, R2]), True)
check("refused: the file is exact", exact(R2), True)
said = [e for e in events("a2") if e.get("event") == "error" and "may not pull" in e.get("what", "")]
check("the refusal is said once", len(said), 1)
check("with its reason", any('role \\"watcher\\" may not' in json.dumps(e) for e in said), True)
check("and not tried again: the listening session's last statement is the refused pull's, or LISTEN",
      session("a2_listen")[1], "idle")
check("the refusing role's agent still runs", a2.poll(), None)

# ---- the listening session killed between writes -----------------------------------
old = session("a1_listen")[0]
check("its listening session is terminated", srv.one("SELECT pg_terminate_backend(%s)", (old,)), True)
time.sleep(0.5)
for i in range(3):
    check(f"killed: write {i} still reaches the file", write(3, f"k{i}", [R1]), True)
check("it connected its listening session again", wait_until(30, lambda: session("a1_listen")[0]
                                                         not in (None, old)), True)
check("a write after reaches the file", write(3, "after", [R1]), True)
time.sleep(0.3)
check("and pulls on the new listening session", "sync.pull" in session("a1_listen")[2], True)
check("the loss is said", any(e.get("event") == "error" and "lost" in e.get("what", "") for e in events("a1")), True)

# ---- killed in the middle of a snapshot pulled ahead on it --------------------------
a1.terminate()
check("the agent stops cleanly", a1.wait(timeout=30), 0)
# one message a pull
a1 = start(R1, "a1b", "--listen", f"dbname={DB} application_name=a1_listen", "--pull-bytes", "1024")
check("started again, it listens", wait_until(30, lambda: session("a1_listen")[0]), True)
check("a write reaches the file", write(5, "before", [R1]), True)
snap = srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (R1,))
db = sqlite3.connect(file_of(R1), timeout=10)
db.enable_load_extension(True)
db.load_extension(os.path.join(TOP, "magic_sync_sqlite"))
check("the device asks to be provisioned again", db.execute("SELECT sync_resync()").fetchone()[0], 1)
db.commit()
db.close()
# the agent sees its file written, files the gap; the relay's snapshot wakes it
check("the server provisions it again", wait_until(60, lambda: srv.one(
    "SELECT snapshot_number > %s FROM sync.replicas WHERE id = %s", (snap, R1))), True)
a1.send_signal(signal.SIGSTOP)
killed = srv.one("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'a1_listen'")
mid = not acked(R1)
numbers = srv.one("SELECT count(*) FROM sync.outbox WHERE replica = %s AND NOT dropped", (R1,))
print(f"the snapshot: {numbers} messages", flush=True)
a1.send_signal(signal.SIGCONT)
check("of many messages", numbers > 100, True)
check("killed in the middle of the snapshot", killed and mid, True)
check("the snapshot ends, acknowledged", wait_until(120, lambda: acked(R1) and srv.one(
    "SELECT NOT provision FROM sync.replicas WHERE id = %s", (R1,))), True)
check("the loss is said", any(e.get("event") == "error" and "lost" in e.get("what", "") for e in events("a1b")), True)
check("the file is exact", wait_until(30, lambda: exact(R1)), True)
check("the agent still runs", a1.poll(), None)
check("a write after reaches the file", write(4, "end", [R1]), True)
for name, agent in (("a1", a1), ("a2", a2)):
    agent.terminate()
    check(f"{name} stops cleanly", agent.wait(timeout=30), 0)
failed = [e for e in events("a1b") + events("a2") if e.get("event") == "round" and e.get("stopped")]
check("no round stopped at a gap", failed, [])
finish()
