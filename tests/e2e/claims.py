#!/usr/bin/python3
"""claims.py - a replica's file deleted, or edited by hand, with the agent
(issue 19, items 3 and 12): what the replica says of itself is a claim the
server checks, and a file that says the impossible is provisioned again,
never wedged.

  - a replica caught up (nothing left in its outbox) loses its file: its
    agent starts again on a blank file, says it applied nothing, and is
    provisioned again, instead of receiving nothing while the server says it
    is caught up;
  - an operator provisions one replica again (sync.replica_reprovision);
  - the last applied number set to -1 in _sync_state (every message would be
    a duplicate for good), and a negative max_message_bytes in _sync_config
    (every message would be refused): each is reported, the replica asks to
    be provisioned again, and later changes reach it;
  - a replica's own role pulls after the greatest bigint: refused, nothing
    shared moves, and the other replica goes on.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import sqlite3
import subprocess
import tempfile
import time

from harness import EXTENSION, TOP, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
S1 = "d1d1d1d1-0000-4000-8000-000000000001"
S2 = "d2d2d2d2-0000-4000-8000-000000000002"
tmp = tempfile.mkdtemp(prefix="claims_e2e.")
os.chmod(tmp, 0o755)

srv = Server("claims")
srv.exec("""
CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL);
SELECT sync.mirror('products', 'catalog', 'broadcast');
INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, 30) g;
CREATE ROLE store_one LOGIN PASSWORD 'pw-one';
CREATE ROLE store_two LOGIN PASSWORD 'pw-two';
""")
srv.exec("SELECT sync.replica_add(%s, role => 'store_one')", (S1,))
srv.exec("SELECT sync.replica_add(%s, role => 'store_two')", (S2,))
path = {S1: os.path.join(tmp, "one.db"), S2: os.path.join(tmp, "two.db")}
role = {S1: ("store_one", "pw-one"), S2: ("store_two", "pw-two")}


def agent(r):
    """One agent run (--once) for replica r, as its own role: its exit code and JSON lines."""
    user, password = role[r]
    out = subprocess.run(
        [AGENT, "--server", f"host=localhost port={os.environ['PGPORT']} dbname=claims user={user}",
         "--replica", r, "--db", path[r], "--once", "--json"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ, PGPASSWORD=password))
    lines = []
    for line in out.stdout.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            pass
    return out.returncode, lines


def settle(rounds=6):
    """Relay passes and agent runs until nothing moves."""
    codes = []
    for _ in range(rounds):
        srv.relay()
        for r in (S1, S2):
            codes.append(agent(r)[0])
        if not srv.one("SELECT count(*) FROM sync.replicas WHERE provision") and \
                not srv.one("SELECT count(*) FROM sync.notes WHERE NOT done") and \
                srv.one("SELECT bool_and(acked_number = last_number) FROM sync.replicas"):
            break
    return codes


def file_q(r, sql, args=()):
    db = sqlite3.connect(path[r], timeout=30, isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(EXTENSION)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def holds(r):
    try:
        return dict(file_q(r, "SELECT id, name FROM products"))
    except sqlite3.OperationalError:
        return {}


def server_rows():
    return dict(srv.rows("SELECT id, name FROM products"))


def state(r):
    return srv.rows("SELECT provision, snapshot_number, acked_number, last_number, last_error"
                    " FROM sync.replicas WHERE id = %s", (r,))[0]


settle()
check("both replicas hold the products", [holds(r) == server_rows() for r in (S1, S2)], [True, True])
check("caught up: nothing left in the outboxes",
      srv.one("SELECT count(*) FROM sync.outbox o JOIN sync.replicas r ON r.id = o.replica"
              " WHERE NOT o.dropped AND o.number > r.acked_number"), 0)

# --- a blank file: the file is deleted, the agent starts again ------------------
snapshot = state(S1)[1]
other = state(S2)[1]
for suffix in ("", "-wal", "-shm"):
    if os.path.exists(path[S1] + suffix):
        os.remove(path[S1] + suffix)
codes = settle()
check("the agent on a blank file ran", all(c == 0 for c in codes), True)
check("the blank file was provisioned again", state(S1)[1] > snapshot, True)
check("for the reason: it applied nothing, less than it acknowledged",
      "applied nothing" in (state(S1)[4] or ""), True)
check("the blank file holds the products again", holds(S1), server_rows())
check("the other replica was not provisioned", state(S2)[1], other)

# --- an operator provisions one replica again ----------------------------------
before = {r: state(r)[1] for r in (S1, S2)}
srv.exec("SELECT sync.replica_reprovision(%s)", (S2,))
settle()
check("sync.replica_reprovision provisioned that replica", state(S2)[1] > before[S2], True)
check("and only that one", state(S1)[1], before[S1])
check("it holds the products", holds(S2), server_rows())

# --- a file whose last applied number was set to -1 -----------------------------
snapshot = state(S1)[1]
file_q(S1, "UPDATE _sync_state SET number = -1")
codes = settle()
check("the agent ran on the tampered file", all(c == 0 for c in codes), True)
status = json.loads(file_q(S1, "SELECT sync_status()")[0][0])
check("the replica said its state was impossible", "impossible" in (status.get("last_error") or ""), True)
check("it was provisioned again", state(S1)[1] > snapshot, True)
srv.exec("UPDATE products SET name = 'after the tampering' WHERE id = 1")
settle()
check("later changes reach it: it is not wedged", holds(S1), server_rows())
check("its last applied number is a number again", file_q(S1, "SELECT number > 0 FROM _sync_state")[0][0], 1)

# --- a negative max_message_bytes in _sync_config ---------------------------------
snapshot = state(S2)[1]
file_q(S2, "INSERT OR REPLACE INTO _sync_config VALUES ('max_message_bytes', -5)")
srv.exec("UPDATE products SET name = 'after the setting' WHERE id = 2")
codes = settle()
check("the agent ran on the file with a negative setting", all(c == 0 for c in codes), True)
status = json.loads(file_q(S2, "SELECT sync_status()")[0][0])
check("the replica said which setting was impossible", "max_message_bytes" in (status.get("last_error") or ""), True)
check("it was provisioned again", state(S2)[1] > snapshot, True)
check("its setting is back to the default", file_q(S2, "SELECT sync_config('max_message_bytes')")[0][0], 64 << 20)
check("later changes reach it", holds(S2), server_rows())

# --- a replica's role claims the greatest bigint ----------------------------------
seq = srv.one("SELECT last_value FROM sync.message_seq")
attack = subprocess.run(["psql", "-XAtq", "-h", "localhost", "-U", "store_one", "-d", "claims", "-c",
                         f"SELECT count(*) FROM sync.pull('{S1}', 9223372036854775807, 1048576)"],
                        capture_output=True, text=True, env=dict(os.environ, PGPASSWORD="pw-one"))
check("the claim is refused", attack.returncode != 0, True)
check("with a clear error", "is not believed: this server never wrote message" in attack.stderr, True)
check("nothing shared moved", srv.one("SELECT last_value FROM sync.message_seq"), seq)
for _ in range(200):   # recorded apart, by a worker of its own: the refused call rolled back
    refused = srv.rows("SELECT claim, reason FROM sync.refused_claims WHERE replica = %s", (S1,))
    if refused:
        break
    time.sleep(0.05)
check("recorded on that replica", [c for c, _ in refused], ["sync.pull after message 9223372036854775807"])
check("sync.health lists it", srv.one("SELECT count(*) FROM sync.health() WHERE kind = 'claim refused'"
                                      " AND replica = %s", (S1,)), 1)
srv.exec("UPDATE products SET name = 'after the attack' WHERE id = 3")
settle()
check("every replica goes on", [holds(r) == server_rows() for r in (S1, S2)], [True, True])

finish()
