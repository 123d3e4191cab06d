#!/usr/bin/python3
"""range.py - repair by range, not by snapshot (issue 40, docs/protocol.md 8.1).

  - D1 a replica's copy drifted behind the engine's back (its guards
    dropped): a row deleted, a row made up.  Its digest differs; the
    server narrows the difference down by bucket digests, asks for the keys
    of the few buckets that differ, and sends the lost row again and the
    deletion of the made-up one.  No snapshot: snapshot_number unchanged,
    never provisioned, and the replica holds exactly its wanted set.
  - D3 the buckets of the whole table match while its digest differed (the
    row put back meanwhile), then it differs again: what differs is beyond
    what ranges see, and the replica is provisioned again.
  - L1 a message to it is lost: the next opens a gap.  Its outbox still
    holds what follows what it acknowledged: the server does not provision
    it; its next pull brings the lost message again, which closes the gap,
    and the one after.  No snapshot.  sync.replicas.gap says the gap while
    it is open, and is cleared by the acknowledgement that closes it.
  - R1 its file is restored from an older copy, after which rows were
    changed, made and deleted: the server takes its record back to the
    copy's last message and sends what went after it (the deletions found
    by the next digest, by ranges).  No snapshot, and the chain follows on
    from the copy's last message.
  - L2 a snapshot's own message is lost (the storm's snapshots beyond the
    first): its Begin, for a new replica; a message in its middle, for one
    provisioned again.  The outbox still holds the snapshot whole: the gap
    provisions nothing, the next pull brings the snapshot again, no second
    one is written.
  - K1 a small table (short keys share a bucket or two, so its differing
    buckets hold most of it): one key lost, one made up -- the table's rows
    are asked for one by one and only those two repaired; most of it lost --
    its rows go again, not a snapshot of the whole replica.
  - V1 a value drifted (its keys agree): narrowed down by ranges of values
    hashes; the first answer compared with the buckets the digest's read
    kept, each later round reading only the rows of the buckets it asks
    about (looked up by key), not the whole table; that row goes again.
    V2: the same of a table whose key is a text and an int.
  - D2 most of a table differs: the tree says so, and the replica is
    provisioned again (the fallback).

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import tempfile

from harness import Replica, Server, check, finish, settle

S1 = "40404040-1111-4111-8111-111111111111"
N = 3000

srv = Server("range")
srv.exec(f"""
CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL);
SELECT sync.mirror('products', 'catalog', 'broadcast');
INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, {N}) g;
""")
srv.exec("SELECT sync.replica_add(%s)", (S1,))
r1 = Replica(srv, S1, os.path.join(tempfile.mkdtemp(), "s1.db"))
settle(srv, [r1])
check("provisioned", r1.one("SELECT count(*) FROM products"), N)
r1.q("SELECT sync_config('digest_interval', 0)")


def snapshots():
    return srv.one("SELECT coalesce(snapshot_number, 0) FROM sync.replicas WHERE id = %s", (S1,))


def provisioned():
    return srv.one("SELECT provision FROM sync.replicas WHERE id = %s", (S1,))


def repair(rounds=8):
    """upload (digests, then answers), relay, pull: until the digests match; what each filing said of them"""
    said = []
    for _ in range(rounds):
        filed = r1.upload()
        said.append(filed.get("digests") if filed else None)
        srv.relay()
        r1.pull_apply()
        if filed and filed.get("digests") == "match":
            break
    return said


# ---- D1: a row lost, a row made up ------------------------------------------
for (name,) in r1.q("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'products'"):
    r1.q(f'DROP TRIGGER "{name}"')
r1.q("DELETE FROM products WHERE id = 1234")
r1.q("INSERT INTO products VALUES (99999, 'made up')")
before = snapshots()
said = repair()
check("D1: the digest differed, was narrowed down, then matched",
      (said[0], said[-1]), ("differ: narrowed down by ranges", "match"))
check("D1: no snapshot was taken", (snapshots(), provisioned()), (before, False))
check("D1: the lost row is back", r1.one("SELECT name FROM products WHERE id = 1234"), "p1234")
check("D1: the made-up row is gone", r1.one("SELECT count(*) FROM products WHERE id = 99999"), 0)
check("D1: the replica holds its wanted set", r1.one("SELECT count(*) FROM products"), N)
check("D1: the server records it so", srv.held(S1), srv.wanted(S1))
check("D1: no question stays open", srv.one("SELECT count(*) FROM sync.ranges"), 0)

# ---- D3: ranges find nothing, yet the digest differs again: a snapshot ---------
# (what differs then is what a row's hash does not cover: never narrowed down for good)
before = snapshots()
r1.q("DELETE FROM products WHERE id = 77")
r1.upload()                                   # the digest differs: the first question
r1.pull_apply()                               # its answer carries it
r1.q("INSERT INTO products VALUES (77, 'p77')")   # put back behind the engine's back
r1.upload()                                   # the answer: every bucket matches
check("D3: the narrowing found nothing, and said so",
      srv.one("SELECT split FROM sync.ranges WHERE replica = %s", (S1,)), -1)
check("D3: not provisioned for it", (snapshots(), provisioned()), (before, False))
r1.q("DELETE FROM products WHERE id = 77")
r1.upload()                                   # differs again
check("D3: its digest differs again: provisioned again", provisioned(), True)
settle(srv, [r1])
check("D3: the snapshot brought the row back", r1.one("SELECT name FROM products WHERE id = 77"), "p77")
check("D3: no question stays open", srv.one("SELECT count(*) FROM sync.ranges"), 0)
for (name,) in r1.q("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'products'"):
    r1.q(f'DROP TRIGGER "{name}"')

# ---- L1: a lost message, a gap: sent again from the outbox -----------------
settle(srv, [r1])
before = snapshots()
srv.exec("UPDATE products SET name = 'lost ' || id WHERE id BETWEEN 1 AND 40")
srv.relay()
srv.exec("UPDATE products SET name = 'later ' || id WHERE id BETWEEN 41 AND 50")
srv.relay()
msgs = [m for m in srv.pull(S1, r1.status()["applied"], 1 << 24, r1.applied()) if m[0]]
check("L1: two messages wait for it", len(msgs), 2)
res = r1.apply(bytes(msgs[1][1]))
check("L1: the second, without the first, opens a gap", res["result"], "gap")
r1.upload()
check("L1: the server does not provision it for the gap", provisioned(), False)
check("L1: the server records the gap it reported",
      srv.one("SELECT gap FROM sync.replicas WHERE id = %s", (S1,)), msgs[1][0])
results = r1.pull_apply()
check("L1: its next pull brings the lost message again, then the next",
      [x["result"] for x in results if x["result"] != "filed"], ["applied", "applied"])
check("L1: the gap is closed", r1.status()["gap"], 0)
check("L1: the lost rows are in its file", r1.one("SELECT count(*) FROM products WHERE name LIKE 'lost %'"), 40)
check("L1: and the later ones", r1.one("SELECT count(*) FROM products WHERE name LIKE 'later %'"), 10)
said = repair()
check("L1: its digest matches", said[-1], "match")
check("L1: the acknowledgement that closed the gap cleared it on the server",
      srv.one("SELECT gap FROM sync.replicas WHERE id = %s", (S1,)), None)
check("L1: no snapshot was taken", (snapshots(), provisioned()), (before, False))
check("L1: the server records what it should hold", srv.held(S1), srv.wanted(S1))

# ---- R1: its file restored from an older copy --------------------------------
copy = os.path.join(tempfile.mkdtemp(), "copy.db")
r1.q("VACUUM INTO ?", (copy,))
srv.exec("UPDATE products SET name = 'newer ' || id WHERE id BETWEEN 100 AND 129")
srv.exec("DELETE FROM products WHERE id BETWEEN 200 AND 204")
srv.exec(f"INSERT INTO products SELECT g, 'new ' || g FROM generate_series({N + 1}, {N + 10}) g")
settle(srv, [r1])
check("R1: the replica took the changes", r1.one("SELECT count(*) FROM products"), N + 5)
acked = srv.one("SELECT acked_number FROM sync.replicas WHERE id = %s", (S1,))
before = snapshots()
r1.close()
os.replace(copy, r1.path)
r1.open()
check("R1: the copy says less than it acknowledged", r1.status()["applied"] < acked, True)
said = repair()
check("R1: its digest matches at last", said[-1], "match")
check("R1: no snapshot was taken", (snapshots(), provisioned()), (before, False))
check("R1: the changed rows are as the server has them",
      r1.one("SELECT count(*) FROM products WHERE name LIKE 'newer %'"), 30)
check("R1: the deleted rows are gone", r1.one("SELECT count(*) FROM products WHERE id BETWEEN 200 AND 204"), 0)
check("R1: the new rows came", r1.one("SELECT count(*) FROM products WHERE id > ?", (N,)), 10)
check("R1: it holds what the server has", r1.one("SELECT count(*) FROM products"), N + 5)
check("R1: the server records what it should hold", srv.held(S1), srv.wanted(S1))
N += 5

# ---- L2: a message of a snapshot lost: the snapshot goes again, not another ----
def lose(r, i, why):
    """the replica's next pull with its i-th message lost: what it applied, and the gap said"""
    msgs = [m for m in srv.pull(r.id, r.status()["applied"], 1 << 24, r.applied()) if m[0]]
    results = []
    for n, (_, m) in enumerate(msgs):
        if n == i:
            continue
        results.append(r.apply(bytes(m)))
        if results[-1]["result"] == "gap":
            break
    check(f"L2: {why}: the message after it opens a gap", results[-1]["result"], "gap")
    return len(msgs)


S2 = "40404040-2222-4222-8222-222222222222"
srv.exec("SELECT sync.replica_add(%s)", (S2,))
r2 = Replica(srv, S2, os.path.join(tempfile.mkdtemp(), "s2.db"))
srv.exec("SET magic_sync.message_bytes = 16384")   # a snapshot of several messages
srv.relay()
first = srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (S2,))
check("L2: a new replica's snapshot is several messages", lose(r2, 0, "its Begin lost") > 2, True)
check("L2: no snapshot yet, the gap said so", r2.status()["epoch"], None)
r2.upload()
check("L2: the gap in its first snapshot provisions nothing",
      srv.one("SELECT (snapshot_number, provision) FROM sync.replicas WHERE id = %s", (S2,)), f"({first},f)")
results = r2.pull_apply()
check("L2: the next pull brings that snapshot whole, from its Begin",
      ([x.get("snapshot") for x in results if x["result"] == "applied"][0], results[-1].get("snapshot")), ("begin", "end"))
settle(srv, [r2])
check("L2: it holds its wanted set, with no other snapshot",
      (srv.held(S2) == srv.wanted(S2), r2.one("SELECT count(*) FROM products"),
       srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (S2,))), (True, N, first))
srv.exec("SELECT sync.replica_reprovision(%s)", (S2,))
srv.relay()
second = srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (S2,))
lose(r2, 2, "a message in the middle of its snapshot lost")
r2.upload()
check("L2: the gap within a snapshot provisions nothing",
      srv.one("SELECT (snapshot_number, provision) FROM sync.replicas WHERE id = %s", (S2,)), f"({second},f)")
results = [x for x in r2.pull_apply() if x["result"] != "filed"]
check("L2: the next pull brings the lost message, then the rest of the snapshot",
      (results[0]["result"], results[-1].get("snapshot"), r2.status()["gap"]), ("applied", "end", 0))
r2.q("UPDATE _sync_state SET digest_due = 1")
settle(srv, [r2])
check("L2: its digest matches, no other snapshot",
      (srv.one("SELECT (snapshot_number, provision, digests_at IS NOT NULL) FROM sync.replicas WHERE id = %s", (S2,)),
       srv.held(S2) == srv.wanted(S2), r2.one("SELECT count(*) FROM products")), (f"({second},f,t)", True, N))
srv.exec("RESET magic_sync.message_bytes")

# ---- K1: a small table's keys differ: its rows, not a snapshot ----------------
SMALL = 40
srv.exec(f"""
CREATE TABLE shelves (id int PRIMARY KEY, name text NOT NULL);
SELECT sync.mirror('shelves', 'catalog', 'broadcast');
INSERT INTO shelves SELECT g, 's' || g FROM generate_series(1, {SMALL}) g;
""")
settle(srv, [r1])
check("K1: the small table came", r1.one("SELECT count(*) FROM shelves"), SMALL)
for (name,) in r1.q("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'shelves'"):
    r1.q(f'DROP TRIGGER "{name}"')
r1.q("DELETE FROM shelves WHERE id = 27")   # in the bucket holding 31 of its 40 keys
r1.q("INSERT INTO shelves VALUES (999, 'made up')")
before = snapshots()
said = repair()
check("K1: one key lost, one made up: narrowed down, then matched",
      (said[0], said[-1]), ("differ: narrowed down by ranges", "match"))
check("K1: no snapshot was taken", (snapshots(), provisioned()), (before, False))
check("K1: the lost row is back, the made-up one gone",
      r1.q("SELECT id, name FROM shelves WHERE id IN (27, 999)"), [(27, "s27")])
check("K1: the server records it so", srv.held(S1), srv.wanted(S1))
r1.q("DELETE FROM shelves WHERE id > 10")
said = repair()
check("K1: most of the small table lost: repaired, matched", said[-1], "match")
check("K1: by its rows, not a snapshot", (snapshots(), provisioned()), (before, False))
check("K1: it holds the table again", r1.one("SELECT count(*) FROM shelves"), SMALL)
check("K1: no question stays open", srv.one("SELECT count(*) FROM sync.ranges"), 0)

# ---- V1: a value drifted: a round reads the rows of the buckets it asks about ----
def table_reads(table="products"):
    """rows of table the server's session has read so far (scanned, fetched by index)"""
    srv.exec("SELECT pg_stat_force_next_flush()")
    srv.exec("SELECT pg_stat_clear_snapshot()")
    return srv.one("SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables"
                   " WHERE relid = %s::regclass", (table,))


settle(srv, [r1])
for (name,) in r1.q("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'products'"):
    r1.q(f'DROP TRIGGER "{name}"')
r1.q("UPDATE products SET name = 'drifted' WHERE id = 2345")
before = snapshots()
rounds = []                                   # (what the filing said, what of ranges it asked, rows read)
for _ in range(6):
    read = table_reads()
    filed = r1.upload()
    asked = srv.rows("SELECT depth, split, cardinality(buckets) FROM sync.ranges WHERE replica = %s", (S1,))
    rounds.append((filed.get("digests") if filed else None, asked, table_reads() - read))
    if len(rounds) == 1:
        # what the Filed answer asks, as sync.inspect shows it
        first = [a for (j,) in srv.rows("SELECT sync.inspect(message) FROM sync.answers WHERE replica = %s", (S1,))
                 for a in j["filed"].get("ranges", []) if a["values"]]
    srv.relay()
    r1.pull_apply()
    if r1.one("SELECT name FROM products WHERE id = 2345") == "p2345":
        break
check("V1: the drift was narrowed down by ranges of values", rounds[0][0], "differ: narrowed down by ranges")
check("V1: sync.inspect shows the Filed answer's question: the whole table's values, split by 6 bits",
      [(a["table"], a["round"], a["depth"], a["split"], a["buckets"]) for a in first], [("products", 1, 0, 6, [0])])
check("V1: the drifted value is back", r1.one("SELECT name FROM products WHERE id = 2345"), "p2345")
check("V1: no snapshot was taken", (snapshots(), provisioned()), (before, False))
# the digest reads the table; the first question's answer (the whole table's buckets) is
# compared with the buckets that very read kept; a round asking about buckets at a depth
# reads only their rows (N / 64 at depth 6), by key
check(f"V1: the digest read the table ({rounds})", rounds[0][2] >= N, True)
deeper = [read for (_, asked, read) in rounds[1:]]
check(f"V1: each round after it reads its buckets' rows at most, not the table's {N} ({rounds})",
      bool(deeper) and max(deeper) < N // 10, True)
check("V1: no question stays open", srv.one("SELECT count(*) FROM sync.ranges WHERE split >= 0"), 0)
srv.exec("DELETE FROM sync.ranges")

# V2: a key of two parts, a text under a collation of its own and an int: each row of the
# buckets asked about is looked up by its key's parts as their own types
srv.exec("""
CREATE TABLE tagged (store text COLLATE "C", n int, label text NOT NULL, PRIMARY KEY (store, n));
SELECT sync.mirror('tagged', 'catalog', 'broadcast');
INSERT INTO tagged SELECT 'store ' || (g % 7), g, 'label ' || g FROM generate_series(1, 700) g;
""")
settle(srv, [r1])
for (name,) in r1.q("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'tagged'"):
    r1.q(f'DROP TRIGGER "{name}"')
r1.q("UPDATE tagged SET label = 'drifted' WHERE store = 'store 3' AND n = 346")
before = snapshots()
rounds = []
for _ in range(6):
    read = table_reads("tagged")
    r1.upload()
    rounds.append(table_reads("tagged") - read)
    srv.relay()
    r1.pull_apply()
    if r1.one("SELECT label FROM tagged WHERE store = 'store 3' AND n = 346") == "label 346":
        break
check("V2: a two-part key's drifted value is back, no snapshot",
      (r1.one("SELECT label FROM tagged WHERE store = 'store 3' AND n = 346"), snapshots(), provisioned()),
      ("label 346", before, False))
check(f"V2: each round after the digest's reads its buckets' rows at most ({rounds})",
      len(rounds) > 2 and max(rounds[1:]) < 700 // 4, True)
srv.exec("DELETE FROM sync.ranges")

# ---- D2: most of it differs: a snapshot is the fallback ----------------------
for (name,) in r1.q("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'products'"):
    r1.q(f'DROP TRIGGER "{name}"')
r1.q("DELETE FROM products WHERE id % 3 <> 0")
before = snapshots()
said = repair()
check("D2: most of it differs: provisioned again", snapshots() > before, True)
settle(srv, [r1])
check("D2: the snapshot brought it back", r1.one("SELECT count(*) FROM products"), N)
finish()
