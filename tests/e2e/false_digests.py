#!/usr/bin/python3
"""false_digests.py - a replica that reports false key digests costs a
bounded number of repairs (issue 40; magic_sync.digest_repair_interval,
docs/operations.md), and a real difference is still repaired.

  - Store 1 reports, every round, a key digest that does not match its file
    (one row more than it holds), and answers the range questions honestly.
    Before, the server asked it about ranges, found nothing, then provisioned
    it again, round after round: a snapshot every other round.  Now, within
    magic_sync.digest_repair_interval (5 min), one snapshot and at most two
    range questions; after that its digests that differ are "not repaired",
    and no match is recorded.
  - Store 2, honest, has a row lost in its file meanwhile: narrowed down by
    ranges and sent again at once (the bound is each replica's own).
  - The interval passed, store 1's real difference (a row lost) is repaired.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import tempfile

import wire
from harness import Replica, Server, check, finish, settle

S1 = "f0150000-1111-4111-8111-111111111111"
S2 = "f0150000-2222-4222-8222-222222222222"
DB = "false_digests"
tmp = tempfile.mkdtemp(prefix="false_digests.")
ROUNDS = 12

root = Server(DB)
for n in (1, 2):
    root.exec(f"DROP ROLE IF EXISTS liar_{n}")
    root.exec(f"CREATE ROLE liar_{n} LOGIN PASSWORD 'pw-liar_{n}'")
root.exec("""
CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL);
SELECT sync.mirror('products', 'catalog', 'broadcast');
INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, 200) g;
""")
root.exec("SELECT sync.replica_add(%s, role => 'liar_1')", (S1,))
root.exec("SELECT sync.replica_add(%s, role => 'liar_2')", (S2,))
stores = {n: Server(DB, create=False, user=f"liar_{n}", password=f"pw-liar_{n}") for n in (1, 2)}
r1 = Replica(stores[1], S1, os.path.join(tmp, "1.db"))
r2 = Replica(stores[2], S2, os.path.join(tmp, "2.db"))
settle(root, [r1, r2])
check("provisioned", [r.one("SELECT count(*) FROM products") for r in (r1, r2)], [200, 200])
# their own uploads carry a digest only when asked (a snapshot ended, or digest_due)
for r in (r1, r2):
    r.q("SELECT sync_config('digest_interval', 3600)")


def snapshots():
    return root.one("SELECT coalesce(snapshot_number, 0) FROM sync.replicas WHERE id = %s", (S1,))


def lie():
    """store 1's key digest, one row more than its file holds; it answers range questions"""
    d = r1.digest()
    body = wire.up(S1, ack=r1.applied(), check=False,
                   digests=[(t, v["count"] + 1, int(v["fnv"], 16)) for t, v in d.items()])
    return stores[1].file(S1, wire.checked(body + wire.field(20, 1)))["digests"]


def lost_row(r, key):
    """a row deleted in the file behind the replica's back: its triggers dropped, made again"""
    triggers = r.q("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'products'")
    for name, _ in triggers:
        r.q(f'DROP TRIGGER "{name}"')
    r.q("DELETE FROM products WHERE id = ?", (key,))
    for _, made in triggers:
        r.q(made)


def digest_round(r):
    r.q("UPDATE _sync_state SET digest_due = 1 WHERE id = 1")
    filed = r.upload()
    return filed["digests"] if filed else None


before = snapshots()
said = []
seen = {before}
for _ in range(ROUNDS):
    said.append(lie())
    r1.pull_apply()             # its range questions (the answer to the lie)
    r1.upload()                 # answered honestly
    root.relay()
    r1.pull_apply()
    seen.add(snapshots())
print("false_digests: store 1's false digests were met with:", said, flush=True)
provisioned = sum(1 for s in said if s == "differ")
asked = sum(1 for s in said if s == "differ: narrowed down by ranges")
check(f"{ROUNDS} rounds of false digests cost one snapshot", (provisioned, len(seen) - 1), (1, 1))
check("and at most two range questions", asked <= 2, True)
check("its digests that differ are then not repaired, and no match recorded",
      said[-1].startswith("keys differ; not repaired"), True)
check("store 1 holds what it should all along", root.held(S1), root.wanted(S1))


def lie_of(table):
    """a digest of a table the server does not mirror, holding a row"""
    body = wire.up(S1, ack=r1.applied(), check=False, digests=[(table, 1, 0)])
    return stores[1].file(S1, wire.checked(body + wire.field(20, 1)))["digests"]


said = [lie_of("nothing_here") for _ in range(3)]
check("a digest of a table not mirrored, three times: no snapshot",
      ([s.startswith("keys differ; not repaired") for s in said], len(seen), snapshots() in seen,
       root.one("SELECT provision FROM sync.replicas WHERE id = %s", (S1,))), ([True] * 3, 2, True, False))

# ---- an honest replica meanwhile: repaired at once -------------------------------
lost_row(r2, 7)
said2 = [digest_round(r2)]
for _ in range(6):
    root.relay()
    r2.pull_apply()
    said2.append(digest_round(r2))
    if said2[-1] == "match":
        break
check("store 2's lost row: narrowed down by ranges, then its digest matches",
      (said2[0], said2[-1]), ("differ: narrowed down by ranges", "match"))
check("store 2 holds the row again", r2.one("SELECT name FROM products WHERE id = 7"), "p7")

# ---- the interval passed: store 1's real difference is repaired --------------------
root.exec("UPDATE sync.replica_tables SET keys_repaired = now() - interval '1 hour' WHERE replica = %s", (S1,))
lost_row(r1, 9)
check("store 1's lost row: its digest differs", digest_round(r1).startswith("differ"), True)
settle(root, [r1])
for _ in range(4):
    if digest_round(r1) == "match":
        break
    settle(root, [r1])
check("store 1 holds the row again", r1.one("SELECT name FROM products WHERE id = 9"), "p9")
check("and its digest matches", digest_round(r1), "match")
finish()
