#!/usr/bin/python3
"""magic_sync_agent import --db and export --db, the replica's side of sneakernet, with no
server: bundles (docs/protocol.md 11, written here by Python's own reading
of it) of the fuzz seeds' valid messages -- a snapshot's Begin (1), its end
(2), a Filed answer, a snapshot begun again (3) -- applied to real files.

Each refusal must exit 65, name its result, say why, and leave the file as
it was (sync_status, its rows, its notes): a bundle damaged (every prefix,
bit flips, a count or length that lies under a good check), of the wrong
kind, for another replica, applied already, out of order.  What applies
writes an upload bundle whose every Up is framed as section 7.1 says."""
import hashlib
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.join(here, "..", "..")
agent_bin = os.environ.get("AGENT", os.path.join(top, "magic_sync_agent"))  # AGENT: another build (ASan)
ext = os.path.join(top, "magic_sync_sqlite")
seeds = os.path.join(top, "tests", "fuzz", "seeds")
tmp = tempfile.mkdtemp(prefix="sneakernet.")

passed = 0
failed = 0


def check(name, got, expected):
    global passed, failed
    if got == expected:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {got!r} != {expected!r}")


REPLICA = bytes.fromhex("101112131415461718191a1b1c1d1e1f")
UUID = "10111213-1415-4617-1819-1a1b1c1d1e1f"
snapshot, end, filed, again = (open(os.path.join(seeds, f), "rb").read()
                               for f in ("00_snapshot.bin", "01_end.bin", "04_filed.bin", "05_begin_again.bin"))


def bundle(kind, msgs, replica=REPLICA):
    out = (b"MSBUNDLE" + b"\x00\x01" + bytes([kind, 0]) + replica + len(msgs).to_bytes(4, "big")
           + (1700000000000000).to_bytes(8, "big"))
    for m in msgs:
        out += len(m).to_bytes(4, "big") + m
    return out + hashlib.sha256(out).digest()


def read(b):
    assert b[:8] == b"MSBUNDLE" and hashlib.sha256(b[:-32]).digest() == b[-32:]
    pos, msgs = 40, []
    for _ in range(int.from_bytes(b[28:32], "big")):
        n = int.from_bytes(b[pos:pos + 4], "big")
        msgs.append(b[pos + 4:pos + 4 + n])
        pos += 4 + n
    assert pos == len(b) - 32
    return b[10], b[12:28], msgs


n_files = 0


def put(b):
    global n_files
    n_files += 1
    path = os.path.join(tmp, f"b{n_files}")
    open(path, "wb").write(b)
    return path


def agent(*args):
    p = subprocess.run([agent_bin] + list(args) + ["--json"], capture_output=True, text=True, timeout=60)
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    return p.returncode, lines[-1] if lines else {}


def state(db):
    if not os.path.exists(db):
        return None
    c = sqlite3.connect(db)
    c.enable_load_extension(True)
    c.load_extension(ext)
    try:
        s = c.execute("SELECT sync_status()").fetchone()[0]
        tables = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        rows = {t: c.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
        return json.loads(s), rows
    finally:
        c.close()


def refused(name, db, path, result, *extra):
    before = state(db)
    rc, out = agent("import", "--db", db, "--from", path, *extra)
    check(f"{name}: exit 65", rc, 65)
    check(f"{name}: result", out.get("result"), result)
    check(f"{name}: says why", bool(out.get("reason")), True)
    check(f"{name}: the file is as it was", state(db), before)
    return out


def up_whole(up):
    """an Up framed as section 7.1: field 12 (fixed64, its length) first, field 13 (its SHA-256) last"""
    return (up[0] == 0x61 and int.from_bytes(up[1:9], "little") == len(up) and up[-34:-32] == b"\x6a\x20"
            and hashlib.sha256(up[:-34]).digest() == up[-32:])


db = os.path.join(tmp, "van.db")
b1 = put(bundle(1, [snapshot, end]))

# a fresh file: only a bundle that begins with a snapshot applies
fresh = os.path.join(tmp, "fresh.db")
out = refused("the end alone on a new file", fresh, put(bundle(1, [end])), "out_of_order")
check("which says the snapshot must come first", "snapshot first" in out.get("reason", ""), True)
check("and makes no file", os.path.exists(fresh), False)

# damage: nothing of it is read, the file is not even opened
whole = bundle(1, [snapshot, end])
rng = random.Random(18)
for k in sorted(rng.sample(range(len(whole)), 12)):
    refused(f"a bundle cut to {k} bytes", db, put(whole[:k]), "damaged")
for _ in range(12):
    b = bytearray(whole)
    b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    refused("a bit flipped", db, put(bytes(b)), "damaged")
refused("a byte joined", db, put(whole + b"\x00"), "damaged")
refused("an empty file", db, put(b""), "damaged")
refused("another file", db, put(b"SQLite format 3\x00" + bytes(200)), "damaged")
lying = bytearray(whole[:-32])
lying[31] = 3                                     # a count of 3, two messages
refused("a count that lies under a good check", db, put(bytes(lying) + hashlib.sha256(lying).digest()), "damaged")
lying = bytearray(whole[:-32])
lying[40:44] = (len(snapshot) + 1).to_bytes(4, "big")
refused("a length that lies under a good check", db, put(bytes(lying) + hashlib.sha256(lying).digest()), "damaged")
check("no damaged bundle made a file", os.path.exists(db), False)

# applied: the snapshot, and an upload bundle
up1 = os.path.join(tmp, "up1")
rc, out = agent("import", "--db", db, "--from", b1, "--to", up1)
check("the first bundle applies", (rc, out.get("result"), out.get("messages"), out.get("applied")), (0, "applied", 2, 2))
kind, rep, ups = read(open(up1, "rb").read())
check("its upload bundle is from the replica, in its name", (kind, rep), (2, REPLICA))
check("and carries at least one upload, each whole", (len(ups) >= 1, all(up_whole(u) for u in ups)), (True, True))
check("the JSON says where the upload went", out.get("upload"), up1)

# twice, an older one after it, only part new
refused("the same bundle again", db, b1, "applied_already")
refused("an older bundle after it", db, put(bundle(1, [snapshot])), "applied_already")
up_again = os.path.join(tmp, "up-again")
refused("the same, with --to", db, b1, "applied_already", "--to", up_again)
check("applied already, the replica's upload is written all the same (what it applied must reach the server)",
      os.path.exists(up_again) and all(up_whole(u) for u in read(open(up_again, "rb").read())[2]), True)
refused("another replica's, with --to", db, put(bundle(1, [snapshot], replica=bytes(range(16)))), "wrong_replica",
        "--to", os.path.join(tmp, "never"))
check("another replica's bundle writes no upload", os.path.exists(os.path.join(tmp, "never")), False)

# another replica's, on either count
other = bytes(range(16))
refused("another replica's bundle", db, put(bundle(1, [snapshot], replica=other)), "wrong_replica")
refused("a bundle whose messages are sealed for another replica", db, put(bundle(1, [snapshot, end], replica=other)),
        "wrong_replica")
refused("--replica naming another", db, b1, "wrong_replica", "--replica", "00000000-0000-4000-8000-000000000000")
fresh2 = os.path.join(tmp, "fresh2.db")
out = refused("messages sealed for another replica than the bundle's", fresh2,
              put(bundle(1, [snapshot], replica=other)), "wrong_replica")

# the wrong kind, on either side
refused("an upload bundle on the file", db, up1, "wrong_kind")
rc, out = agent("import", "--server", "dbname=none host=/nonexistent", "--from", b1)
check("a bundle to the replica on the server's side: refused before connecting", (rc, out.get("result")),
      (65, "wrong_kind"))

kind, rep, ups = read(open(up1, "rb").read())
rc, out = agent("import", "--server", "dbname=none host=/nonexistent", "--from", put(bundle(2, ups, replica=other)))
check("an upload bundle whose head names another replica than its uploads: refused before connecting",
      (rc, out.get("result")), (65, "wrong_replica"))
rc, out = agent("import", "--server", "dbname=none host=/nonexistent", "--from", up1)
check("a good upload bundle and no server: exit 69", (rc, out.get("result")), (69, "unavailable"))

# out of order: a message that follows one the replica lacks
c = sqlite3.connect(db)
c.enable_load_extension(True)
c.load_extension(ext)
applied = json.loads(c.execute("SELECT sync_status()").fetchone()[0])["applied"]
c.close()
check("the replica applied through 2", applied, 2)

# answers only: applied, and again, changing nothing more
rc, out = agent("import", "--db", db, "--from", put(bundle(1, [filed])))
check("a bundle of an answer applies", (rc, out.get("result")), (0, "applied"))
rc, out = agent("import", "--db", db, "--from", put(bundle(1, [filed])))
check("and again: an answer applied again lets go of nothing more", (rc, out.get("result")), (0, "applied"))

# a snapshot begun again follows whatever came before
up2 = os.path.join(tmp, "up2")
rc, out = agent("import", "--db", db, "--from", put(bundle(1, [snapshot, end, again])), "--to", up2)
check("a bundle partly applied before: the rest applies", (rc, out.get("messages"), out.get("duplicates"),
                                                          out.get("applied")), (0, 1, 2, 3))
check("an empty bundle applies nothing and is no refusal",
      agent("import", "--db", db, "--from", put(bundle(1, [])))[0], 0)

# a message of a later protocol: sync_apply says so and applies nothing; the upload still goes
later = b"\x08\x02" + again[2:]
check("the seed begins with protocol 1", again[:2], b"\x08\x01")
up3 = os.path.join(tmp, "up3")
out = refused("a message of a later protocol", db, put(bundle(1, [later])), "later_protocol", "--to", up3)
check("its upload is written all the same", os.path.exists(up3), True)

# export on the replica's side: its upload, with no bundle to apply
only = os.path.join(tmp, "up-only")
rc, out = agent("export", "--db", db, "--replica", UUID, "--to", only)
check("export --db writes the replica's upload", (rc, out.get("result"), out.get("applied")), (0, "written", 3))
kind, rep, ups = read(open(only, "rb").read())
check("an upload bundle of whole uploads", (kind, rep, len(ups) >= 1, all(up_whole(u) for u in ups)),
      (2, REPLICA, True, True))
rc, out = agent("export", "--db", os.path.join(tmp, "none.db"), "--replica", UUID, "--to", only + "2")
check("export --db of no file: exit 66, no file made", (rc, os.path.exists(os.path.join(tmp, "none.db"))), (66, False))
rc, out = agent("export", "--db", db, "--replica", "00000000-0000-4000-8000-000000000000", "--to", only + "3")
check("export --db under another replica's uuid: refused", (rc, out.get("result"), os.path.exists(only + "3")),
      (65, "wrong_replica", False))

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
