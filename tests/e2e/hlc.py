#!/usr/bin/python3
"""hlc.py - causal versions (issue 18.3, docs/protocol.md 12) with the real
agent and SQLite: a record table declared version => 'hlc', two replicas
writing it, one of whose clocks jumps back an hour (sync_test_clock_offset,
in a process with MAGIC_SYNC_TEST_CLOCK=1).

  - every write is stamped by the replica itself, in the writing
    transaction, and the server keeps the newest by the stamp;
  - a replica whose clock went back an hour still wins over its own older
    write: its stamps count on from the last;
  - and over another replica's older write it has seen (the table is
    broadcast: each till holds the others' rows): the server's clock, merged
    from that replica's upload, reaches the late replica with the message
    that brings the row, and its next stamp is after it, though its own
    clock is an hour behind;
  - the server's clock is never behind a stamp it filed, and a replica's is
    never behind the server's it heard;
  - an absurd clock (thirty days ahead) written into an upload by hand is
    not merged by the server, and the replicas' clocks stay sane.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import sqlite3
import subprocess
import tempfile
import time

from harness import EXTENSION, TOP, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
A = "a1a1a1a1-0000-4000-8000-00000000000a"
B = "b2b2b2b2-0000-4000-8000-00000000000b"
HOUR = 3600000
tmp = tempfile.mkdtemp(prefix="hlc_e2e.")
os.chmod(tmp, 0o755)
os.environ["MAGIC_SYNC_TEST_CLOCK"] = "1"

srv = Server("hlc")
srv.exec("""
CREATE TABLE tills (store uuid NOT NULL, id int NOT NULL, amount int NOT NULL,
	hlc bigint NOT NULL DEFAULT 0, PRIMARY KEY (store, id));
SELECT sync.mirror('tills', 'record', 'broadcast', key => '{store,id}', origin => 'store', version => 'hlc');
CREATE ROLE till_a LOGIN PASSWORD 'pw-a';
CREATE ROLE till_b LOGIN PASSWORD 'pw-b';
""")
srv.exec("SELECT sync.replica_add(%s, role => 'till_a')", (A,))
srv.exec("SELECT sync.replica_add(%s, role => 'till_b')", (B,))
path = {A: os.path.join(tmp, "a.db"), B: os.path.join(tmp, "b.db")}
role = {A: ("till_a", "pw-a"), B: ("till_b", "pw-b")}


def agent(r):
    """One agent run (--once) for replica r, as its own role: its exit code."""
    user, password = role[r]
    out = subprocess.run(
        [AGENT, "--server", f"host=localhost port={os.environ['PGPORT']} dbname=hlc user={user}",
         "--replica", r, "--db", path[r], "--once", "--json"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ, PGPASSWORD=password))
    if out.returncode != 0:
        print(out.stdout[-2000:], out.stderr[-2000:])
    return out.returncode


def rounds(n=3):
    codes = []
    for _ in range(n):
        srv.relay()
        for r in (A, B):
            codes.append(agent(r))
    return codes


def q(r, sql, args=()):
    """A host's write or read of a replica's file, the extension loaded (its own process: the test's)."""
    db = sqlite3.connect(path[r], timeout=30, isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(EXTENSION)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def stamp(r, store, id_):
    rows = q(r, "SELECT hlc FROM tills WHERE store = ? AND id = ?", (store, id_))
    return rows[0][0] if rows else None


def server_row(store, id_):
    return srv.one("SELECT row(amount, hlc)::text FROM tills WHERE store = %s AND id = %s", (store, id_))


def server_stamp(store, id_):
    return srv.one("SELECT hlc FROM tills WHERE store = %s AND id = %s", (store, id_))


def server_clock():
    """The server's clock as its messages carry it: sync.clock (no row before one is stored), or the
    physical time when that is later."""
    return srv.one("SELECT greatest((SELECT hlc FROM sync.clock),"
                   " (extract(epoch FROM clock_timestamp()) * 1000)::bigint << 16)")


def replica_clock(r):
    return q(r, "SELECT hlc FROM _sync_state")[0][0]


def ms(s):
    return s >> 16


def now_ms():
    return int(time.time() * 1000)


check("both replicas provisioned by their agents", rounds(2), [0, 0, 0, 0])
check("the snapshot told both the table is stamped by the clock",
      [q(r, "SELECT count(*) FROM sqlite_master WHERE name LIKE '_sync_hlc_%'")[0][0] for r in (A, B)], [2, 2])

# A writes; the replica stamps it, near its physical time
before = now_ms()
q(A, "INSERT INTO tills (store, id, amount) VALUES (?, 1, 10)", (A,))
a1 = stamp(A, A, 1)
check("A's write is stamped with its time", before - 1000 <= ms(a1) <= now_ms() + 1000, True)
rounds(1)
check("the server filed A's row with its stamp", server_row(A, 1), f"(10,{a1})")

# A's clock jumps back an hour: its next write still beats its own older one
check("A's clock jumps back an hour", q(A, "SELECT sync_test_clock_offset(?)", (-HOUR,))[0][0], -HOUR)
q(A, "UPDATE tills SET amount = 11 WHERE store = ? AND id = 1", (A,))
a2 = stamp(A, A, 1)
check("an hour back, A's stamp is still after its last", a2 > a1, True)
rounds(1)
check("the server keeps A's newer write, though A's clock is an hour behind", server_row(A, 1), f"(11,{a2})")

# B, its clock right, writes now
time.sleep(0.05)
q(B, "INSERT INTO tills (store, id, amount) VALUES (?, 1, 5)", (B,))
b1 = stamp(B, B, 1)
check("B's stamp is its time, after A's physical clock", ms(b1) > now_ms() - HOUR + 1000, True)
rounds(2)
check("the server filed B's row", server_row(B, 1), f"(5,{b1})")
check("A holds B's row, as B stamped it", stamp(A, B, 1), b1)
check("A heard the server's clock with the message: not behind B's write", replica_clock(A) >= b1, True)

# A, still an hour behind, writes after having heard of B's write: newer than it
q(A, "INSERT INTO tills (store, id, amount) VALUES (?, 2, 7)", (A,))
a3 = stamp(A, A, 2)
check("A's next stamp is after B's, an hour behind as it is", a3 > b1, True)
check("A's physical clock alone would have stamped it an hour before B's", ms(b1) - (now_ms() - HOUR) > HOUR // 2, True)
rounds(1)
check("on the server, A's later write orders after B's earlier one", server_stamp(A, 2) > server_stamp(B, 1), True)

# A's clock back to right, then forward: stamps keep growing
q(A, "SELECT sync_test_clock_offset(0)")
q(A, "UPDATE tills SET amount = 12 WHERE store = ? AND id = 2", (A,))
check("with its clock right again, A stamps after every earlier stamp", stamp(A, A, 2) > a3, True)
rounds(1)
check("and the server keeps it", server_row(A, 2), f"(12,{stamp(A, A, 2)})")

# An upload with an absurd clock (thirty days ahead) is filed, its clock not merged
clock_before = server_clock()
absurd = (now_ms() + 30 * 24 * HOUR) << 16
q(A, "UPDATE _sync_state SET hlc = ?", (absurd,))
q(A, "UPDATE tills SET amount = 13 WHERE store = ? AND id = 2", (A,))
forged_stamp = stamp(A, A, 2)
rounds(1)
check("the row of a replica whose clock says thirty days ahead is filed", server_row(A, 2), f"(13,{forged_stamp})")
after = server_clock()
check("but the server's clock does not take a clock thirty days ahead",
      clock_before <= after < absurd and ms(after) < now_ms() + 60000, True)
check("nor does sync.clock", srv.one("SELECT coalesce(max(hlc), 0) FROM sync.clock") < absurd, True)
check("B's clock is not poisoned", ms(replica_clock(B)) < now_ms() + HOUR, True)
q(B, "UPDATE tills SET amount = 6 WHERE store = ? AND id = 1", (B,))
check("B's next stamp is sane", ms(stamp(B, B, 1)) < now_ms() + HOUR and stamp(B, B, 1) > b1, True)
rounds(1)
check("the server keeps B's newer write", server_row(B, 1), f"(6,{stamp(B, B, 1)})")

finish()
