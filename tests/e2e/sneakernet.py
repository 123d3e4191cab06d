#!/usr/bin/python3
"""sneakernet.py - two replicas that exchange only files (issue 18 item 4),
with magic_sync_agent as a real process and real SQLite files:

  export --server --replica --to B   what waits for the replica, into a bundle
  import --db --from B --to U        applied on the replica, its upload into U
  import --server --from U           filed on the server, acknowledging
  export --db --replica --to U       the replica's upload alone, now and then

A seeded walk of 200 steps (walk.py's shop: server-side changes and replica
writes) where, now and then, a replica makes a trip: an export, an import,
an upload filed.  Trips go wrong as they do on the road, and each must
change nothing and say why (exit 65, and the JSON result):

  - a bundle imported twice, or an older one after a newer (applied_already);
  - a bundle with its first new message taken out (out_of_order: applied,
    it would open a gap and have the replica provisioned again);
  - another replica's bundle on a file (wrong_replica), an upload bundle
    filed under another --replica, either kind on the wrong side (wrong_kind);
  - an upload bundle filed twice, or after a later one (applied_already);
    one under another --replica (wrong_replica), one damaged (a flipped
    bit: damaged), one lost on the way (what it carried goes again).

Then the forgeries of issue 38, by whoever holds the stick: a Filed answer
made from what the van's own upload bundle carries (the van keeps its unsent
sales: they reach the head office at the next trip), a Down with a random
seal (the catalog's price stays the server's), an upload bundle relabelled
for the other replica, its uploads too, filed under the operator's role
without --replica (refused: nothing is filed as the other's).

Then a few clean trips: each file equals its wanted set by files alone; then
the normal agent online: still equal, held == wanted, no orphans, every sale
the stores wrote at the server, and only the first provisioning.

Bundles are read and written here by Python's own reading of
docs/protocol.md 11, to craft the damaged and out-of-order ones.

    tests/e2e/run sneakernet.py        (SEED=n STEPS=n to vary)
"""
import hashlib
import json
import os
import random
import subprocess
import tempfile
import uuid

import walk
from harness import TOP, check, finish

walk.STORES = walk.STORES[:2]  # two replicas, both on the road
from walk import STORES, Shop  # noqa: E402

AGENT = os.path.join(TOP, "magic_sync_agent")
SEED = int(os.environ.get("SEED", "20261201"))
STEPS = int(os.environ.get("STEPS", "200"))
rng = random.Random(SEED)
shop = Shop("sneakernet", rng)
srv, replicas = shop.srv, shop.replicas
tmp = tempfile.mkdtemp(prefix="sneakernet.")
CONN = "dbname=sneakernet"


KEY = None   # the server's signing key, which the vans' operator pins (--server-key): known after the first pass


def agent(*args):
    """magic_sync_agent with --json: its exit code and its one JSON object (or None).  import --db pins the
    server's key (a van's file trusts no key until an operator pins it); import --server as the operator's
    role names the replica (the bundle's, unless the caller names one)"""
    args = list(args)
    if args[:2] == ["import", "--db"]:
        args += ["--server-key", KEY]
    if args[:2] == ["import", "--server"] and "--replica" not in args:
        head = open(args[args.index("--from") + 1], "rb").read(28)    # whatever its check says
        args += ["--replica", str(uuid.UUID(bytes=head[12:28].ljust(16, b"\0")))]
    p = subprocess.run([AGENT] + args + ["--json"], capture_output=True, text=True, timeout=120)
    out = None
    for line in p.stdout.splitlines():
        try:
            out = json.loads(line)
        except ValueError:
            check(f"the agent's line is JSON: {line!r}", False, True)
    if out is None:
        print(f"agent {args}: exit {p.returncode}, no JSON: {p.stdout!r} {p.stderr!r}", flush=True)
    return p.returncode, out or {}


# ---- bundles, read and written as docs/protocol.md 11 says -------------------

def read_bundle(path):
    b = open(path, "rb").read()
    assert b[:8] == b"MSBUNDLE" and b[8:10] == b"\x00\x01" and hashlib.sha256(b[:-32]).digest() == b[-32:]
    kind, replica, count = b[10], b[12:28], int.from_bytes(b[28:32], "big")
    pos, msgs = 40, []
    for _ in range(count):
        n = int.from_bytes(b[pos:pos + 4], "big")
        msgs.append(b[pos + 4:pos + 4 + n])
        pos += 4 + n
    assert pos == len(b) - 32
    return kind, replica, int.from_bytes(b[32:40], "big"), msgs


def write_bundle(path, kind, replica, written, msgs):
    out = b"MSBUNDLE" + b"\x00\x01" + bytes([kind, 0]) + replica + len(msgs).to_bytes(4, "big") + written.to_bytes(8, "big")
    for m in msgs:
        out += len(m).to_bytes(4, "big") + m
    open(path, "wb").write(out + hashlib.sha256(out).digest())


def number(msg):
    """A ToReplica's number (field 3), read from its top-level fields: 0 for a Filed answer."""
    pos = 0

    def varint():
        nonlocal pos
        v, shift = 0, 0
        while True:
            c = msg[pos]
            pos += 1
            v |= (c & 0x7f) << shift
            shift += 7
            if c < 0x80:
                return v
    while pos < len(msg):
        tag = varint()
        field, wt = tag >> 3, tag & 7
        if wt == 0:
            v = varint()
            if field == 3:
                return v
        elif wt == 2:
            n = varint()       # read before pos is: varint() moves it
            pos += n
        elif wt == 1:
            pos += 8
        elif wt == 5:
            pos += 4
    return 0


# ---- trips --------------------------------------------------------------------

n_files = 0
made = {s: [] for s in STORES}       # every bundle exported for each replica, in order
uploads = {s: [] for s in STORES}    # every upload bundle each replica wrote, in order
seen = {"applied_already": 0, "out_of_order": 0, "wrong_replica": 0, "wrong_kind": 0, "damaged": 0,
        "upload_again": 0, "upload_lost": 0, "upload_wrong_replica": 0, "upload_damaged": 0, "upload_relabelled": 0, "early_upload": 0, "trips": 0}
resent = 0                           # bundles of what the replica applied already: its upload bundle was lost
bad = []                             # refusals that were not what they should have been


def name(what):
    global n_files
    n_files += 1
    return os.path.join(tmp, f"{n_files:04d}-{what}")


def state(r):
    """What a refused import must leave as it was: the replica's status and its rows."""
    return r.status(), shop.holds(r), r.one("SELECT count(*) FROM _sync_notes")


def export(s):
    path = name(f"to-{s[:8]}")
    rc, out = agent("export", "--server", CONN, "--replica", s, "--to", path)
    if rc != 0 or out.get("result") != "written":
        bad.append(("export", rc, out))
        return None
    made[s].append(path)
    return path


def refused(what, want, r, *args):
    """an import that must change nothing: exit 65, the result named, the replica as it was"""
    before = state(r) if r is not None else None
    rc, out = agent("import", *args)
    after = state(r) if r is not None else None
    if rc != 65 or out.get("result") != want or before != after or not out.get("reason"):
        bad.append((what, want, rc, out, before == after))
    else:
        seen[what] += 1


def file_up(s, path):
    rc, out = agent("import", "--server", CONN, "--from", path)
    if rc == 65 and out.get("result") == "applied_already":
        return out
    if rc != 0 or out.get("result") != "filed":
        bad.append(("file", rc, out))
    return out


def trip(i):
    """A replica's trip: its bundle exported, imported, its upload filed; now and then, a mishap."""
    s = STORES[i]
    r = replicas[i]
    other = STORES[1 - i]
    path = export(s)
    if path is None:
        return
    seen["trips"] += 1
    mishap = rng.randrange(10)
    if mishap == 0 and len(made[s]) >= 2 and r.status()["applied"] > 0:
        # an older bundle after a newer one: every message of it applied before, or it is refused
        old = made[s][-2]
        _, _, _, msgs = read_bundle(old)
        if any(number(m) > 0 for m in msgs) and max(number(m) for m in msgs) <= r.status()["applied"]:
            refused("applied_already", "applied_already", r, "--db", r.path, "--from", old)
    elif mishap == 1 and made[other]:
        refused("wrong_replica", "wrong_replica", r, "--db", r.path, "--from", made[other][-1])
    elif mishap == 2:
        # the first message the replica lacks taken out: out of order
        kind, rep, written, msgs = read_bundle(path)
        applied = r.status()["applied"]
        new = [k for k, m in enumerate(msgs) if number(m) > applied]
        if len(new) >= 2:
            crafted = name(f"gap-{s[:8]}")
            write_bundle(crafted, kind, rep, written, msgs[:new[0]] + msgs[new[0] + 1:])
            refused("out_of_order", "out_of_order", r, "--db", r.path, "--from", crafted)
    elif mishap == 3:
        kind, rep, written, msgs = read_bundle(path)
        raw = bytearray(open(path, "rb").read())
        raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        damaged = name(f"damaged-{s[:8]}")
        open(damaged, "wb").write(bytes(raw))
        refused("damaged", "damaged", r, "--db", r.path, "--from", damaged)
    elif mishap == 4:
        refused("wrong_kind", "wrong_kind", None, "--server", CONN, "--from", path)
    elif mishap == 5:
        # the van's writes go first, before the head office's bundle is imported
        early = name(f"early-{s[:8]}")
        rc, out = agent("export", "--db", r.path, "--replica", s, "--to", early)
        if rc != 0 or out.get("result") != "written":
            bad.append(("export --db", rc, out))
        else:
            seen["early_upload"] += 1
            file_up(s, early)
    up = name(f"up-{s[:8]}")
    rc, out = agent("import", "--db", r.path, "--from", path, "--to", up)
    if rc == 65 and out.get("result") == "applied_already" and out.get("upload") == up:
        # its last upload bundle was lost: the server sent again what it applied; its upload says so
        global resent
        resent += 1
    elif rc != 0 or out.get("result") != "applied":
        bad.append(("import", rc, out))
        return
    uploads[s].append(up)
    if rc == 0 and rng.randrange(2) == 0:
        # imported twice: every chained message applied before, if it had any
        _, _, _, msgs = read_bundle(path)
        if any(number(m) > 0 for m in msgs):
            refused("applied_already", "applied_already", r, "--db", r.path, "--from", path)
    fate = rng.randrange(10)
    if fate == 0:
        seen["upload_lost"] += 1            # lost on the way: what it carried goes again
        return
    if fate == 1:
        refused("upload_wrong_replica", "wrong_replica", None, "--server", CONN, "--from", up, "--replica", other)
    if fate == 5:
        # the head says another replica, its check made again: an upload in it names this one
        kind, rep, written, msgs = read_bundle(up)
        relabelled = name(f"relabelled-up-{s[:8]}")
        write_bundle(relabelled, kind, uuid.UUID(other).bytes, written, msgs)
        refused("upload_relabelled", "wrong_replica", None, "--server", CONN, "--from", relabelled)
    if fate == 4:
        raw = bytearray(open(up, "rb").read())
        raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        damaged = name(f"damaged-up-{s[:8]}")
        open(damaged, "wb").write(bytes(raw))
        refused("upload_damaged", "damaged", None, "--server", CONN, "--from", damaged)
    if fate == 2 and len(uploads[s]) >= 2:
        # the newer upload filed first, then the older: a duplicate that changes nothing
        file_up(s, up)
        out = file_up(s, uploads[s][-2])
        if out.get("result") == "applied_already":
            seen["upload_again"] += 1
        return
    file_up(s, up)
    if fate == 3:
        before = srv.rows("SELECT * FROM sync.sends ORDER BY replica")
        refused("upload_again", "applied_already", None, "--server", CONN, "--from", up)
        check_same = srv.rows("SELECT * FROM sync.sends ORDER BY replica")
        if before != check_same:
            bad.append(("upload again changed sync.sends", before, check_same))


def settled():
    failures = []
    for r in replicas:
        wanted = srv.wanted(r.id)
        held = srv.held(r.id)
        has = shop.holds(r)
        orphans = shop.orphans(r)
        if not (held == wanted and has == wanted and orphans == 0):
            failures.append(r.id[:8])
            for t in set(wanted) | set(held) | set(has):
                w, h, f = wanted.get(t, set()), held.get(t, set()), has.get(t, set())
                if w != h or w != f:
                    print(f"   {r.id[:8]} {t}: wanted-held {w - h} held-wanted {h - w} file-wanted {f - w}"
                          f" wanted-file {w - f}", flush=True)
    return failures


def sales_everywhere():
    return (srv.one("SELECT count(*) FROM sales"),
            sum(r.one("SELECT count(*) FROM sales WHERE store = ?", (r.id,)) for r in replicas))


def counted():
    """what the stores counted, at the server and in their files"""
    at_server = {(str(s), p): c for s, p, c in srv.rows("SELECT store, product, counted FROM stock WHERE counted IS NOT NULL")}
    in_files = {}
    for r in replicas:
        for p, c in r.q("SELECT product, counted FROM stock WHERE counted IS NOT NULL AND store = ?", (r.id,)):
            in_files[(r.id, p)] = c
    return at_server, in_files


# ---- forgeries (issue 38) -----------------------------------------------------

def pb(num, v):
    """a protobuf field: a varint, or length-delimited bytes"""
    def varint(n):
        out = b""
        while True:
            out += bytes([(n & 0x7f) | (0x80 if n > 0x7f else 0)])
            n >>= 7
            if not n:
                return out
    if isinstance(v, int):
        return varint(num << 3) + varint(v)
    return varint(num << 3 | 2) + varint(len(v)) + v


def top_fields(b):
    """the top-level fields of a protobuf message, (number, int or bytes)"""
    out, pos = [], 0

    def varint():
        nonlocal pos
        v, shift = 0, 0
        while True:
            c = b[pos]
            pos += 1
            v |= (c & 0x7f) << shift
            shift += 7
            if c < 0x80:
                return v
    while pos < len(b):
        tag = varint()
        if tag & 7 == 0:
            out.append((tag >> 3, varint()))
        elif tag & 7 == 2:
            n = varint()
            out.append((tag >> 3, b[pos:pos + n]))
            pos += n
        else:
            n = 8 if tag & 7 == 1 else 4
            out.append((tag >> 3, b[pos:pos + n]))
            pos += n
    return out


def forgeries(i):
    """the stick's holder forges what the van would believe, and files as the other store"""
    s, r, other = STORES[i], replicas[i], STORES[1 - i]
    products = [p for (p,) in r.q("SELECT id FROM products ORDER BY id LIMIT 1")]
    if not products:
        bad.append(("forgeries: the van holds no product", s))
        return
    base = r.one("SELECT coalesce(max(id), 0) FROM sales WHERE store = ?", (s,)) + 1000
    for k in range(3):
        r.q("INSERT INTO sales (store, id, product, total, v) VALUES (?, ?, ?, ?, 1)", (s, base + k, products[0], 7))
    unsent = r.one("SELECT count(*) FROM _sync_notes WHERE tbl = 'sales'")
    up = name(f"forge-up-{s[:8]}")
    rc, out = agent("export", "--db", r.path, "--replica", s, "--to", up)
    check("forgeries: the van's upload bundle is written", (rc, out.get("result")), (0, "written"))
    _, rep, written, ups = read_bundle(up)
    # a Filed answer accounting for every row of the van's first upload, as the server's would
    f = top_fields(ups[0])
    send_id = dict(f)[3]
    carried = [(dict(top_fields(v))[1], sum(1 for k, _ in top_fields(v) if k in (2, 4))) for k, v in f if k == 5]
    st = r.status()
    filed = pb(1, send_id) + pb(2, sum(n for _, n in carried)) + b"".join(pb(4, pb(1, t) + pb(2, n)) for t, n in carried)
    head = pb(1, 1) + pb(2, bytes.fromhex(st["epoch"])) + pb(8, rep) + pb(12, st["generation"])
    forged = name(f"forged-filed-{s[:8]}")
    write_bundle(forged, 1, rep, written, [head + pb(11, filed), head + b"\x72\x40" + os.urandom(64) + pb(11, filed)])
    before = state(r)
    rc, out = agent("import", "--db", r.path, "--from", forged)
    check("a Filed answer forged from the van's own upload: refused, saying why",
          (rc, out.get("result"), "not the server's" in out.get("reason", "")), (65, "forged", True))
    check("the van keeps its unsent sales", (state(r) == before, r.one("SELECT count(*) FROM _sync_notes WHERE tbl = 'sales'")),
          (True, unsent))
    # a Down with a random seal, next in the van's chain: a product's name changed
    applied = dict(top_fields(bytes(r.one("SELECT sync_applied()"))))
    was = r.one("SELECT name FROM products WHERE id = ?", (products[0],))
    row = dict(r.q("SELECT 'x', json_object('id', id, 'category', category, 'name', 'FORGED', 'discontinued',"
                   " discontinued, 'label', label) FROM products WHERE id = ?", (products[0],)))["x"]
    down = pb(2, pb(1, b"products") + pb(2, row.encode()) + pb(3, pb(1, str(products[0]).encode())))
    mhead = (pb(1, 1) + pb(2, applied[1]) + pb(3, applied[2] + 1) + pb(4, os.urandom(16)) + pb(5, applied[2])
             + pb(6, applied[3]) + pb(7, os.urandom(32)) + pb(8, rep) + pb(12, applied.get(5, 0)))
    forged = name(f"forged-down-{s[:8]}")
    write_bundle(forged, 1, rep, written, [mhead + pb(9, down)])
    before = state(r)
    rc, out = agent("import", "--db", r.path, "--from", forged)
    check("a Down with a random seal: refused", (rc, out.get("result")), (65, "forged"))
    check("the product is the server's", (state(r) == before, r.one("SELECT name FROM products WHERE id = ?",
                                                                        (products[0],))), (True, was))
    # the van's upload bundle relabelled for the other store, its uploads too: the replica named, what it
    # applied left out (its seal is the van's), the length and check made again, as anyone can
    relabelled = []
    for u in ups:
        body = b"".join(pb(k, uuid.UUID(other).bytes if k == 2 else v)
                        for k, v in top_fields(u) if k not in (4, 12, 13))
        head = b"\x61" + (9 + len(body) + 34).to_bytes(8, "little") + body
        relabelled.append(head + b"\x6a\x20" + hashlib.sha256(head).digest())
    forged = name(f"forged-up-{s[:8]}")
    write_bundle(forged, 2, uuid.UUID(other).bytes, written, relabelled)
    sends = srv.rows("SELECT * FROM sync.sends ORDER BY replica")
    p = subprocess.run([AGENT, "import", "--server", CONN, "--from", forged, "--json"], capture_output=True, text=True,
                       timeout=120)
    out = json.loads(p.stdout.splitlines()[-1]) if p.stdout.strip() else {}
    check("the operator's role files no bundle without --replica", (p.returncode, out.get("result")), (64, "no_replica"))
    rc, out = agent("import", "--server", CONN, "--from", forged, "--replica", s)
    check("nor one naming another replica than --replica", (rc, out.get("result")), (65, "wrong_replica"))
    check("nothing was filed as the other store's", srv.rows("SELECT * FROM sync.sends ORDER BY replica"), sends)
    # the van's real upload: its sales reach the head office
    file_up(s, up)


# ---- the walk -----------------------------------------------------------------

srv.relay()
KEY = srv.one("SELECT encode(sync.signing_key(), 'hex')")
for i in range(2):
    trip(i)                                  # provisioned by a file
check("each replica is provisioned by its first bundle", [r.status()["applied"] > 0 for r in replicas], [True, True])
for n in range(STEPS):
    shop.step()
    srv.relay()
    if rng.randrange(3) == 0:
        trip(rng.randrange(2))
for line in bad[:10]:
    print("unexpected:", line, flush=True)
check(f"every trip and mishap of {STEPS} steps did what it should", len(bad), 0)
for what, n in seen.items():
    check(f"the walk made some of: {what} ({n})", n > 0, True)
print("trips and mishaps: " + ", ".join(f"{k} {v}" for k, v in seen.items()), flush=True)
print(f"{resent} bundles carried only what their replica had applied (an upload bundle lost): refused, the upload"
      " written all the same", flush=True)

for i in range(2):
    srv.relay()
    trip(i)
    forgeries(i)

# a few clean trips: files alone bring each replica to its wanted set
for _ in range(6):
    srv.relay()
    for i in range(2):
        s, r = STORES[i], replicas[i]
        path = export(s)
        up = name(f"up-{s[:8]}")
        rc, out = agent("import", "--db", r.path, "--from", path, "--to", up)
        if os.path.exists(up):
            file_up(s, up)
check("what each replica applied reached the server in its upload bundles (Up.applied)",
      [srv.one("SELECT acked_number FROM sync.replicas WHERE id = %s", (r.id,)) for r in replicas],
      [r.status()["applied"] for r in replicas])
srv.relay()
for i in range(2):
    path = export(STORES[i])
    agent("import", "--db", replicas[i].path, "--from", path)
check("by files alone, each replica holds exactly what it should", settled(), [])
check("by files alone, every sale reached the head office", len(set(sales_everywhere())), 1)
at_server, in_files = counted()
check("by files alone, every count a store made reached the head office", at_server, in_files)

# online: the normal agent takes over where the files left off
for _ in range(4):
    srv.relay()
    for i in range(2):
        rc = subprocess.run([AGENT, "--server", CONN, "--replica", STORES[i], "--db", replicas[i].path, "--once",
                             "--quiet"], timeout=120).returncode
        check(f"the agent online settles for replica {i + 1}", rc, 0)
check("online, each replica holds exactly what it should", settled(), [])
sales = sales_everywhere()
check(f"online, every sale reached the head office ({sales[0]})", sales[0] == sales[1] and sales[0] > 0, True)
at_server, in_files = counted()
check("online, every count a store made reached the head office", at_server, in_files)
check("provisionings were rare: only the first", srv.one("SELECT count(*) FROM sync.epoch"), 1)
check("no replica is to be provisioned again", srv.one("SELECT count(*) FROM sync.replicas WHERE provision"), 0)
# a bundle out of order, applied, would have opened a gap: the server provisions such a replica again, saying so
check("no replica was provisioned again (no bundle opened a gap)",
      srv.rows("SELECT id, last_error FROM sync.replicas WHERE last_error IS NOT NULL"), [])
finish()
