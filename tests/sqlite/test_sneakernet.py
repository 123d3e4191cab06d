#!/usr/bin/python3
"""magic_sync_agent import --db and export --db, the replica's side of sneakernet, with no
server: bundles (docs/protocol.md 11, written here by Python's own reading
of it) of the fuzz seeds' valid messages -- a snapshot's Begin (1), its end
(2), a Filed answer, a snapshot begun again (3) -- applied to real files.

Each refusal must exit 65, name its result, say why, and leave the file as
it was (sync_status, its rows, its notes): a bundle damaged (every prefix,
bit flips, a count or length that lies under a good check), of the wrong
kind, for another replica, applied already, out of order, forged (a
message the server's key did not sign, a Filed answer made from the van's
own upload bundle included), or on a file that trusts no server key.  What
applies writes an upload bundle whose every Up is framed as section 7.1
says.  A file that is no bundle is refused from its head, before the rest is
read; an upload is never written through a link planted at FILE.part."""
import hashlib
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import threading

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.join(here, "..", "..")
agent_bin = os.environ.get("AGENT", os.path.join(top, "magic_sync_agent"))  # AGENT: another build (ASan)
ext = os.path.join(top, "magic_sync_sqlite")
seeds = os.path.join(top, "tests", "fuzz", "seeds")
sys.path.insert(0, os.path.join(top, "tests", "unit"))
import make_vectors  # noqa: E402  (its own Ed25519, to sign as the server does)
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


# the seeds are signed by the vectors' key (tests/sqlite/seal.c): what the van's operator pins
KEY = make_vectors.ed_public(make_vectors.SIGN_SEED).hex()


def agent(*args, key=True):
    """the agent with --json; import --db pins the server's key (--server-key) unless key is False"""
    args = list(args)
    if key and args[:2] == ["import", "--db"]:
        args += ["--server-key", KEY]
    p = subprocess.run([agent_bin] + args + ["--json"], capture_output=True, text=True, timeout=60)
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


def refused(name, db, path, result, *extra, key=True, code=65):
    before = state(db)
    rc, out = agent("import", "--db", db, "--from", path, *extra, key=key)
    check(f"{name}: exit {code}", rc, code)
    check(f"{name}: result", out.get("result"), result)
    check(f"{name}: says why", bool(out.get("reason")), True)
    check(f"{name}: the file is as it was", state(db), before)
    return out


def up_whole(up):
    """an Up framed as section 7.1: field 12 (fixed64, its length) first, field 13 (its SHA-256) last"""
    return (up[0] == 0x61 and int.from_bytes(up[1:9], "little") == len(up) and up[-34:-32] == b"\x6a\x20"
            and hashlib.sha256(up[:-34]).digest() == up[-32:])


# ---- signatures (docs/protocol.md 2.4), written here as the server writes them ----

def unsigned(m):
    """a signed message's head and body: the bytes before and after its signature field (0x72 0x40, 64 bytes)"""
    pos = 0
    while pos < len(m):
        start = pos
        tag, pos = varint(m, pos)
        if tag == 0x72:
            return m[:start], m[pos + 1 + 64:]
        pos = skip(m, pos, tag & 7)
    raise ValueError("not signed")


def resign(head, body, seed=make_vectors.SIGN_SEED):
    d = hashlib.sha256(make_vectors.SIGN_DOMAIN + hashlib.sha256(head).digest() + hashlib.sha256(body).digest()).digest()
    return head + b"\x72\x40" + make_vectors.ed_sign(seed, d) + body


def varint(b, pos):
    v, shift = 0, 0
    while True:
        c = b[pos]
        pos += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if c < 0x80:
            return v, pos


def skip(b, pos, wt):
    if wt == 0:
        return varint(b, pos)[1]
    if wt == 1:
        return pos + 8
    if wt == 5:
        return pos + 4
    n, pos = varint(b, pos)
    return pos + n


def fields(b):
    """top-level fields of a protobuf message: (number, value) with value an int or bytes"""
    out, pos = [], 0
    while pos < len(b):
        tag, pos = varint(b, pos)
        if tag & 7 == 0:
            v, pos = varint(b, pos)
        elif tag & 7 == 2:
            n, pos = varint(b, pos)
            v, pos = b[pos:pos + n], pos + n
        elif tag & 7 == 1:
            v, pos = b[pos:pos + 8], pos + 8
        else:
            v, pos = b[pos:pos + 4], pos + 4
        out.append((tag >> 3, v))
    return out


def pb(num, v):
    if isinstance(v, int):
        return make_vectors.field(num, 0, v)
    return make_vectors.field(num, 2, v)


def notes(db):
    c = sqlite3.connect(db)
    c.enable_load_extension(True)
    c.load_extension(ext)
    try:
        return c.execute("SELECT count(*) FROM _sync_notes WHERE send_id IS NOT NULL").fetchone()[0]
    finally:
        c.close()


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

# a message of a later protocol, signed by the server: sync_apply says so and applies nothing; the upload still goes
later = resign(b"\x08\x02" + unsigned(again)[0][2:], unsigned(again)[1])
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

# ---- trust nothing unsealed (issue 38) ------------------------------------------

# a file that trusts no key takes no bundle: a bundle cannot be how a replica learns the key
fresh3 = os.path.join(tmp, "fresh3.db")
out = refused("a new file and no --server-key", fresh3, b1, "untrusted", key=False, code=78)
check("which says how to pin it", "--server-key" in out.get("reason", ""), True)
check("and makes no file", os.path.exists(fresh3), False)
rc, out = agent("import", "--db", fresh3, "--from", b1, "--server-key", "00" * 31, key=False)
check("--server-key takes 64 hexadecimal digits", rc, 64)

# a van provisioned by files, with three sales it has not sent
van = os.path.join(tmp, "forged-van.db")
rc, out = agent("import", "--db", van, "--from", b1)
check("the van is provisioned", (rc, out.get("result")), (0, "applied"))
c = sqlite3.connect(van)
c.enable_load_extension(True)
c.load_extension(ext)
for i in (1, 2, 3):
    c.execute("INSERT INTO orders(origin, id, customer, total, note) VALUES (?, ?, 1, ?, 'sale')", (UUID, i, 10.0 * i))
c.commit()
c.close()
vup = os.path.join(tmp, "van-up")
rc, out = agent("export", "--db", van, "--replica", UUID, "--to", vup)
check("its upload bundle is written", (rc, out.get("result")), (0, "written"))
check("it carries the three sales, stamped as sent", notes(van), 3)

# the forgery of the issue: a Filed answer built from what the van's own upload bundle carries
_, _, vups = read(open(vup, "rb").read())
up = dict((k, v) for k, v in fields(vups[0]))
# per table the send carried: its name and its rows (upserts and deletes), all filed
carried = [(dict(r)[1], sum(1 for k, _ in r if k in (2, 4))) for r in (fields(v) for k, v in fields(vups[0]) if k == 5)]
check("the upload carries the three sales", sum(n for _, n in carried), 3)
head_fields = dict(fields(unsigned(snapshot)[0]))
answer = (pb(1, up[3]) + pb(2, sum(n for _, n in carried))
          + b"".join(pb(4, pb(1, t) + pb(2, n)) for t, n in carried))
forged_head = pb(1, 1) + pb(2, head_fields[2]) + pb(8, REPLICA) + pb(12, head_fields.get(12, 0))
forged_body = pb(11, answer)
for what, msg in (("unsigned", forged_head + forged_body),
                  ("signed by another key", resign(forged_head, forged_body, bytes(32))),
                  ("with a random signature", forged_head + b"\x72\x40" + os.urandom(64) + forged_body)):
    out = refused(f"a forged Filed answer, {what}", van, put(bundle(1, [msg])), "forged")
    check(f"a forged Filed answer, {what}: says why", "not the server's" in out.get("reason", ""), True)
    check(f"a forged Filed answer, {what}: the van keeps its three unsent sales", notes(van), 3)
# the same answer signed by the server lets go of them
rc, out = agent("import", "--db", van, "--from", put(bundle(1, [resign(forged_head, forged_body)])))
check("the server's own answer lets go of them", (rc, out.get("answers"), notes(van)), (0, 1, 0))

# a forged Down with a random seal: the next in the chain, a product's price changed
c = sqlite3.connect(van)
c.enable_load_extension(True)
c.load_extension(ext)
price = c.execute("SELECT price FROM products WHERE id = 1").fetchone()[0]
applied = dict(fields(c.execute("SELECT sync_applied()").fetchone()[0]))
c.close()
down = pb(2, pb(1, b"products") + pb(2, b'{"id":1,"name":"tea","price":999}') + pb(3, pb(1, b"1")))
fhead = (pb(1, 1) + pb(2, applied[1]) + pb(3, applied[2] + 1) + pb(4, os.urandom(16)) + pb(5, applied[2])
         + pb(6, applied[3]) + pb(7, os.urandom(32)) + pb(8, REPLICA) + pb(12, applied.get(5, 0)))
out = refused("a forged Down with a random seal", van, put(bundle(1, [fhead + pb(9, down)])), "forged")
c = sqlite3.connect(van)
c.enable_load_extension(True)
c.load_extension(ext)
check("the price is the server's", c.execute("SELECT price FROM products WHERE id = 1").fetchone()[0], price)
c.close()
# a bundle of the server's messages with one forged among them: refused whole, nothing of it applied
out = refused("one forged message among the server's", van,
              put(bundle(1, [filed, resign(fhead, pb(9, down), bytes(range(32)))])), "forged")
check("which names the message", "message 2 of the bundle" in out.get("reason", ""), True)
# a file that trusts another key: the server's own bundle is refused, until an operator pins the key
c = sqlite3.connect(van)
c.enable_load_extension(True)
c.load_extension(ext)
c.execute("SELECT sync_trust_key(zeroblob(32), 'replace')").fetchone()
c.close()
refused("a file that trusts another key", van, put(bundle(1, [filed])), "forged", key=False)
rc, out = agent("import", "--db", van, "--from", put(bundle(1, [filed])))
check("--server-key pins the server's in its place", (rc, out.get("result")), (0, "applied"))

# a file that is no bundle is refused from its head: 1 GiB of nothing, and a pipe that never ends
junk = os.path.join(tmp, "junk")
with open(junk, "wb") as f:
    f.truncate(1 << 30)                        # sparse: no disk
rc, out = agent("import", "--db", van, "--from", junk)
check("1 GiB of junk: refused as damaged, not read whole", (rc, out.get("result")), (65, "damaged"))
check("which says it is no bundle", "not a magic_sync bundle" in out.get("reason", ""), True)
os.unlink(junk)
fifo = os.path.join(tmp, "fifo")
os.mkfifo(fifo)


def feed():
    try:
        with open(fifo, "wb") as f:
            while True:
                f.write(bytes(65536))          # until the reader goes
    except (BrokenPipeError, OSError):
        pass


t = threading.Thread(target=feed, daemon=True)
t.start()
try:
    rc, out = agent("import", "--db", van, "--from", fifo)
    check("a pipe of junk that never ends: refused from its head", (rc, out.get("result")), (65, "damaged"))
except subprocess.TimeoutExpired:
    check("a pipe of junk that never ends: refused from its head", "read on until the timeout", "refused")
    open(fifo, "rb").close()

# an upload is never written through a link planted where it is written first
victim = os.path.join(tmp, "victim")
open(victim, "w").write("precious")
vup2 = os.path.join(tmp, "van-up2")
os.symlink(victim, vup2 + ".part")
rc, out = agent("export", "--db", van, "--replica", UUID, "--to", vup2)
check("a link at FILE.part: the upload is written all the same", (rc, out.get("result")), (0, "written"))
check("not through the link", open(victim, "rb").read(), b"precious")
check("the upload is a file of its own", (os.path.islink(vup2), read(open(vup2, "rb").read())[0]), (False, 2))

# the one line --json prints is JSON, UTF-8 whatever bytes a path holds: a byte that is not is U+FFFD
odd = os.path.join(os.fsencode(tmp), b"van-up-\xff\xfe-\xc3\xa9")
p = subprocess.run([os.fsencode(agent_bin), b"export", b"--db", os.fsencode(van), b"--replica", UUID.encode(),
                    b"--to", odd, b"--json"], capture_output=True, timeout=60)
try:
    said = json.loads(p.stdout.decode("utf-8"))
except ValueError as e:  # UnicodeDecodeError included
    said = {"not JSON": f"{e}: {p.stdout!r}"}
check("a path that is not UTF-8: the JSON line is UTF-8, each odd byte U+FFFD, the rest as it is",
      (p.returncode, said.get("result"), said.get("bundle")),
      (0, "written", tmp + "/van-up-\ufffd\ufffd-\u00e9"))
check("... and the file is written under the path as given", os.path.exists(odd), True)

# both command lines read options one way (getopt_long): --name VALUE or --name=VALUE; a
# wrong command line is exit 64 before anything is read or written
rc, out = agent("export", "--db=" + van, "--replica=" + UUID, "--to=" + os.path.join(tmp, "van-up-eq"))
check("export --name=VALUE as --name VALUE", (rc, out.get("result")), (0, "written"))
for args, why in ((["export", "--db", van, "--replica", UUID, "--to"], "a value missing"),
                  (["export", "--db", van, "--repl", UUID, "--to", os.path.join(tmp, "nx")], "an abbreviation"),
                  (["export", "--db", van, "--replica", UUID, "--to", os.path.join(tmp, "nx"), "--bogus"], "unknown"),
                  (["export", "--db", van, "--replica", UUID, "--to", os.path.join(tmp, "nx"), "extra"], "an argument"),
                  (["export", "--db", van, "--replica", UUID, "--to", os.path.join(tmp, "nx"), "--json=1"], "a value given"),
                  (["export", "--db", van, "--replica", "nope", "--to", os.path.join(tmp, "nx")], "no uuid"),
                  (["--server=", "--replica=" + UUID, "--db", os.path.join(tmp, "nx.db"), "--interval", "5"], "a bound"),
                  (["--server=", "--replica", UUID, "--db"], "the agent: a value missing"),
                  (["--server=", "--replica", UUID, "--db", os.path.join(tmp, "nx.db"), "--onc"], "the agent: an abbreviation"),
                  (["--server=", "--replica", UUID, "--db", os.path.join(tmp, "nx.db"), "-x"], "the agent: a short option"),
                  (["--server=", "--replica", "nope", "--db", os.path.join(tmp, "nx.db")], "the agent: no uuid")):
    p = subprocess.run([agent_bin] + args, capture_output=True, text=True, timeout=60)
    check(f"command line, {why}: exit 64, saying so, nothing written",
          (p.returncode, p.stderr.startswith("magic_sync_agent: "), os.path.exists(os.path.join(tmp, "nx")),
           os.path.exists(os.path.join(tmp, "nx.db"))), (64, True, False, False))
for args in (["--help"], ["export", "--help"], ["import", "-h"]):
    p = subprocess.run([agent_bin] + args, capture_output=True, text=True, timeout=60)
    check(f"{' '.join(args)}: the help, exit 0", (p.returncode, p.stdout.startswith("Usage: magic_sync_agent")), (0, True))

# one version: the agent's and the replica extension's are magic_sync.control's
control = open(os.path.join(top, "magic_sync.control")).read()
version = control.split("default_version = '")[1].split("'")[0]
p = subprocess.run([agent_bin, "--version"], capture_output=True, text=True, timeout=60)
check("--version prints magic_sync.control's default_version",
      (p.returncode, p.stdout.split()[:2]), (0, ["magic_sync_agent", version]))
rc, out = agent("export", "--db", van, "--replica", UUID, "--to", os.path.join(tmp, "van-up3"))
builds = {" ".join(v.decode().split()[:2]) for m in read(open(os.path.join(tmp, "van-up3"), "rb").read())[2]
          for n, v in fields(m) if n == 14}
check("an upload's build names magic_sync.control's version", (rc, builds), (0, {f"magic_sync_sqlite {version}"}))

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
