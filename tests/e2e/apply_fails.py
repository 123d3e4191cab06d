#!/usr/bin/python3
"""apply_fails.py - a message that fails to apply while the next pull is on
its way loses nothing (issue 37).

In the middle of a snapshot the agent sends the next pull before it applies
the batch it holds (src/agent/main.c, server_pull_ahead).  A message of that
batch that fails to apply (here: its body altered on the server, so that
its signature fails) must stop the pass there: what was pulled ahead is let
go, nothing after the failed message is applied, nothing is acknowledged,
and the agent tries again from the last message it applied.

  - magic_sync_agent, a real process on a real SQLite file, pulls a snapshot
    of many small messages, several a pull; the sixth message's body is
    altered: the agent applies the five before it, and no more, however
    often it tries; the server records nothing acknowledged;
  - the body is put back: the agent finishes the same snapshot (not
    provisioned again: no message was skipped, no gap opened), and the file
    holds every row, held and acknowledged as the server records.
"""
import os
import sqlite3
import subprocess
import tempfile
import time

from harness import TOP, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
R = "6661696c-0000-4000-8000-000000000001"
ROWS = 8000
tmp = tempfile.mkdtemp(prefix="apply_fails.")
path = os.path.join(tmp, "r.db")

srv = Server("apply_fails")
srv.exec(f"""
CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL);
INSERT INTO items SELECT g, repeat('x', 100) || g FROM generate_series(1, {ROWS}) g;
SELECT sync.mirror('items', 'catalog', 'broadcast');
SELECT sync.replica_add('{R}');
""")
# many small messages, several a pull (--pull-bytes below): a batch's later
# messages apply while the next pull is on its way
srv.exec("SET magic_sync.message_bytes = 16384")
srv.relay()
srv.relay()
snapshot = srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (R,))
end = srv.one("SELECT last_number FROM sync.replicas WHERE id = %s", (R,))
check("the snapshot is many messages", end - snapshot > 20, True)
bad = snapshot + 5
body = srv.one("SELECT body FROM sync.outbox WHERE replica = %s AND number = %s", (R, bad))
original = bytes(srv.one("SELECT bytes FROM sync.bodies WHERE id = %s", (body,)))
check("the altered body is this message's alone",
      srv.one("SELECT count(*) FROM sync.outbox WHERE body = %s", (body,)), 1)
# one byte of a row's text changed: the message still decodes, its signature does not hold
at = original.rindex(b"x" * 50)
srv.exec("UPDATE sync.bodies SET bytes = %s WHERE id = %s",
         (original[:at] + b"y" + original[at + 1:], body))


def applied():
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute("SELECT number FROM _sync_state WHERE id = 1").fetchone()[0]
        finally:
            db.close()
    except (sqlite3.Error, TypeError):
        return 0


agent = subprocess.Popen([AGENT, "--server", "dbname=apply_fails", "--replica", R, "--db", path,
                          "--pull-bytes", "120000", "--interval", "200"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
# it applies the five before the altered message, then fails on it, and again
deadline = time.time() + 60
while time.time() < deadline and agent.poll() is None and applied() < bad - 1:
    time.sleep(0.05)
time.sleep(3)
check("the agent applies up to the altered message, and no further", applied(), bad - 1)
check("it keeps running", agent.poll(), None)
check("the server records nothing acknowledged",
      srv.one("SELECT acked_number FROM sync.replicas WHERE id = %s", (R,)), 0)

srv.exec("UPDATE sync.bodies SET bytes = %s WHERE id = %s", (original, body))
deadline = time.time() + 120
while time.time() < deadline and agent.poll() is None and \
        srv.one("SELECT acked_number FROM sync.replicas WHERE id = %s", (R,)) < end:
    time.sleep(0.1)
agent.terminate()
out = agent.communicate(timeout=30)[0]
check("the agent said the message failed", "signature" in out or "seal" in out, True)
check("the agent exits 0 on SIGTERM", agent.returncode, 0)
check("the body back, it acknowledges the whole snapshot",
      srv.one("SELECT acked_number FROM sync.replicas WHERE id = %s", (R,)), end)
check("the same snapshot: no message skipped, no gap, not provisioned again",
      (srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (R,)), applied()), (snapshot, end))
db = sqlite3.connect(path)
have = {r[0] for r in db.execute("SELECT id FROM items")}
db.close()
check("the file holds every row", have == set(range(1, ROWS + 1)), True)
check("held and acknowledged as the server records",
      srv.one("SELECT count(*) FROM sync.held h JOIN sync.replicas r ON r.id = h.replica"
              " WHERE h.replica = %s AND h.taken IS NULL AND h.number <= r.acked_number", (R,)), ROWS)
finish()
