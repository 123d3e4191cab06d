#!/usr/bin/python3
"""pull_ahead.py - the agent's pulls: sent ahead mid-snapshot, and no more
than a message needs while the relay's notifications wake it (src/agent/main.c).

  - a snapshot of many small messages, one a pull: mid-snapshot the agent
    asks for the next batch before the one it holds applies.  One message's
    body is broken (its signature no longer verifies): the agent applies
    every message before it and none after it, with the next already asked
    for; the server records nothing acknowledged; killed then (SIGKILL, the
    next batch on its way), and started again once the body is mended, it
    finishes the snapshot and acknowledges it, not provisioned again;
  - one-row writes, each woken by the relay's NOTIFY (--listen): per write,
    one pull for the message and one for the answer to its acknowledgement,
    one filing -- not a third pull to find nothing (the pulls counted in the
    server's log, the filings by pg_stat_user_functions, track_functions = all).
"""
import os
import signal
import sqlite3
import subprocess
import tempfile
import time

from harness import TOP, Server, check, finish, server_log_count

AGENT = os.path.join(TOP, "magic_sync_agent")
R = "61686561-0000-4000-8000-000000000001"
ROWS = 3000
WRITES = 8
tmp = tempfile.mkdtemp(prefix="pull_ahead.")
path = os.path.join(tmp, "r.db")

srv = Server("pull_ahead")
srv.exec("ALTER DATABASE pull_ahead SET track_functions = 'all'")
# the pulls counted in the server's log: a session the server holds a pull on (sync.pull_wait)
# reports its counts to pg_stat_user_functions only now and then
srv.exec("ALTER DATABASE pull_ahead SET log_min_duration_statement = 0")
srv.exec(f"""
CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL);
INSERT INTO items SELECT g, repeat('x', 100) || g FROM generate_series(1, {ROWS}) g;
SELECT sync.mirror('items', 'catalog', 'broadcast');
SELECT sync.replica_add('{R}');
""")
# many small messages: the snapshot spans many pulls
srv.exec("SET magic_sync.message_bytes = 4096")
srv.relay()
srv.relay()
numbers = [n for (n,) in srv.rows("SELECT number FROM sync.outbox WHERE replica = %s AND NOT dropped"
                                  " ORDER BY number", (R,))]
check("the snapshot is many messages", len(numbers) > 30, True)
snapshot = srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (R,))
broken = numbers[len(numbers) // 2]
body = srv.one("SELECT body FROM sync.outbox WHERE replica = %s AND number = %s", (R, broken))
good = bytes(srv.one("SELECT bytes FROM sync.bodies WHERE id = %s", (body,)))
# one byte of a row's text changed: the message decodes, its signature does not verify
bad = bytearray(good)
bad[-2] ^= 0x01
srv.exec("UPDATE sync.bodies SET bytes = %s WHERE id = %s", (bytes(bad), body))


def applied():
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        db.enable_load_extension(True)
        db.load_extension(os.path.join(TOP, "magic_sync_sqlite"))
        try:
            return db.execute("SELECT json_extract(sync_status(), '$.applied')").fetchone()[0] or 0
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def start(*more):
    return subprocess.Popen([AGENT, "--server", "dbname=pull_ahead", "--replica", R, "--db", path,
                             "--pull-bytes", "1024", "--quiet"] + list(more),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


before = numbers[numbers.index(broken) - 1]
agent = start("--interval", "200")
deadline = time.time() + 120
while time.time() < deadline and applied() < before and agent.poll() is None:
    time.sleep(0.05)
check("the messages before the broken one applied", applied(), before)
# it tries again, backing off: the broken one never applies, nor anything after it
time.sleep(3)
check("none from the broken one on, the next asked for ahead", applied(), before)
check("the server records nothing acknowledged", srv.one("SELECT acked_number FROM sync.replicas WHERE id = %s", (R,)), 0)
agent.send_signal(signal.SIGKILL)
agent.wait()
check("killed mid-snapshot: still nothing acknowledged",
      srv.one("SELECT acked_number FROM sync.replicas WHERE id = %s", (R,)), 0)

srv.exec("UPDATE sync.bodies SET bytes = %s WHERE id = %s", (good, body))
# listening: the wait between rounds is --interval, longer than the test
agent = start("--listen", "dbname=pull_ahead", "--interval", "600000")
end = numbers[-1]
deadline = time.time() + 120
while time.time() < deadline and agent.poll() is None and \
        srv.one("SELECT acked_number FROM sync.replicas WHERE id = %s", (R,)) < end:
    time.sleep(0.1)
check("started again, it acknowledges the snapshot",
      srv.one("SELECT acked_number FROM sync.replicas WHERE id = %s", (R,)), end)
check("from the snapshot it began with, not provisioned again",
      srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (R,)), snapshot)
db = sqlite3.connect(path)
check("the file holds every row", db.execute("SELECT count(*) FROM items").fetchone()[0], ROWS)
db.close()


# --- one-row writes, woken by the relay's NOTIFY -------------------------------------
def calls():
    """sync.pull's and sync.file's calls so far, once the agent's sessions reported them
    (an idle session reports within 10 s: PostgreSQL's PGSTAT_IDLE_INTERVAL)"""
    last, same = None, 0
    for _ in range(60):
        srv.exec("SELECT pg_stat_clear_snapshot()")
        now = tuple(srv.one("SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions"
                            " WHERE schemaname = 'sync' AND funcname = %s", (f,)) for f in ("pull", "file"))
        same = same + 1 if now == last else 0
        if same == 6:
            return now
        last = now
        time.sleep(2)
    return last


def logged_pulls():
    """the pulls the server's log shows run so far (None: no log found)"""
    return server_log_count(srv, "execute <unnamed>: SELECT p.number, p.message FROM")


def file_value():
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute("SELECT v FROM items WHERE id = 1").fetchone()[0]
    finally:
        db.close()


def write(i):
    srv.exec("UPDATE items SET v = %s WHERE id = 1", (f"write {i}",))
    srv.relay()
    last = srv.one("SELECT last_number FROM sync.replicas WHERE id = %s", (R,))
    deadline = time.time() + 30
    while time.time() < deadline and (file_value() != f"write {i}" or srv.one(
            "SELECT acked_number FROM sync.replicas WHERE id = %s", (R,)) < last):
        time.sleep(0.02)
    # the round's end: what the agent does after the acknowledgement's filing
    time.sleep(0.5)


srv.exec("RESET magic_sync.message_bytes")
pulls0, files0 = calls()
logged0 = logged_pulls()
for i in range(WRITES):
    write(i)
check("every write reached the file, acknowledged", file_value(), f"write {WRITES - 1}")
pulls1, files1 = calls()
logged1 = logged_pulls()
if logged0 is not None and logged1 is not None:
    pulls0, pulls1 = logged0, logged1
print(f"per write: {(pulls1 - pulls0) / WRITES:.2f} pulls, {(files1 - files0) / WRITES:.2f} filings")
check("at most two pulls a write (the message, the answer)", pulls1 - pulls0 <= 2 * WRITES + 1, True)
check("one filing a write (its acknowledgement)", files1 - files0 <= WRITES + 1, True)
agent.send_signal(signal.SIGTERM)
check("the agent stops cleanly", agent.wait(timeout=30), 0)
finish()
