#!/usr/bin/python3
"""agent_killed.py - the agent killed in the middle of a first sync (issue 37).

The agent applies a snapshot's messages without a sync of the file each and
acknowledges nothing until the snapshot ends (src/agent/replica.c
replica_lazy, replica_sync): acknowledging must never run ahead of what the file holds.

  - magic_sync_agent, a real process on a real SQLite file, pulls a snapshot
    of many small messages, one a pull; once the file holds some of its rows
    a session holds the rest back (sync.bodies locked), and the agent is
    killed (SIGKILL) mid-snapshot: the file holds part of the rows, the
    snapshot open, and the server records nothing acknowledged;
  - rows change meanwhile; the agent started again finishes the snapshot,
    then the change, and the file holds exactly the replica's wanted set,
    which the server records as held and acknowledged.
"""
import os
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time

import psycopg2

from harness import TOP, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
R = "6b696c6c-0000-4000-8000-000000000001"
ROWS = 20000
tmp = tempfile.mkdtemp(prefix="agent_killed.")
path = os.path.join(tmp, "r.db")

srv = Server("agent_killed")
srv.exec(f"""
CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL);
INSERT INTO items SELECT g, repeat('x', 100) || g FROM generate_series(1, {ROWS}) g;
SELECT sync.mirror('items', 'catalog', 'broadcast');
SELECT sync.replica_add('{R}');
""")
# many small messages: the snapshot spans many pulls
srv.exec("SET magic_sync.message_bytes = 16384")
srv.relay()
srv.relay()
messages = srv.one("SELECT count(*) FROM sync.outbox WHERE replica = %s AND NOT dropped", (R,))
check("the snapshot is many messages", messages > 50, True)
snapshot = srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (R,))


def file_rows():
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute("SELECT count(*) FROM items").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def start():
    return subprocess.Popen([AGENT, "--server", "dbname=agent_killed", "--replica", R, "--db", path,
                             "--pull-bytes", "1024", "--interval", "200", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


# the session that holds the rest of the snapshot back, once the file has some of it
hold = psycopg2.connect(dbname="agent_killed")
agent = start()
deadline = time.time() + 60
while file_rows() == 0 and time.time() < deadline and agent.poll() is None:
    time.sleep(0.005)
if agent.poll() is not None:
    print(agent.communicate()[0])
with hold.cursor() as c:
    # the pulls wait (they read the bodies), not the filings
    c.execute("LOCK TABLE sync.bodies IN ACCESS EXCLUSIVE MODE")
deadline = time.time() + 30
while time.time() < deadline and not srv.one(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%sync.pull%'"):
    time.sleep(0.05)
time.sleep(0.5)
agent.send_signal(signal.SIGKILL)
agent.wait()
held_back = file_rows()
check("killed mid-snapshot: the file holds part of it", 0 < held_back < ROWS, True)
check("the server records nothing acknowledged", srv.one("SELECT acked_number FROM sync.replicas WHERE id = %s", (R,)), 0)
hold.rollback()
hold.close()

# a change meanwhile, relayed behind the snapshot
srv.exec("DELETE FROM items WHERE id <= 10; UPDATE items SET v = 'changed' WHERE id = 11;"
         f" INSERT INTO items VALUES ({ROWS + 1}, 'new')")
srv.relay()

agent = start()
end = srv.one("SELECT last_number FROM sync.replicas WHERE id = %s", (R,))
deadline = time.time() + 120
while time.time() < deadline and agent.poll() is None and \
        srv.one("SELECT acked_number FROM sync.replicas WHERE id = %s", (R,)) < end:
    time.sleep(0.1)
agent.send_signal(signal.SIGTERM)
agent.communicate(timeout=30)
check("started again, it acknowledges the snapshot and the change",
      srv.one("SELECT acked_number FROM sync.replicas WHERE id = %s", (R,)), end)

db = sqlite3.connect(path)
have = {r[0] for r in db.execute("SELECT id FROM items")}
changed = db.execute("SELECT v FROM items WHERE id = 11").fetchone()
db.close()
wanted = set(range(11, ROWS + 2))
check("the file holds exactly the rows wanted", have == wanted, True)
check("the change meanwhile included", changed, ("changed",))
check("held and acknowledged as the server records",
      srv.one("SELECT count(*) FROM sync.held h JOIN sync.replicas r ON r.id = h.replica"
              " WHERE h.replica = %s AND h.taken IS NULL AND h.number <= r.acked_number", (R,)), len(wanted))
check("from the snapshot it began with, not provisioned again",
      srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (R,)), snapshot)
finish()
