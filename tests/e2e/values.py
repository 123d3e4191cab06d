#!/usr/bin/python3
"""values.py - a value that drifted in a replica's file is caught by its
next digest and repaired by sending the rows whose values differ, found by
range repair of values hashes (issue 40, "Value digests", "Repair by
range"; docs/protocol.md 8, 8.1).

  - A replica's digest covers each row's values (json and proto codecs, every
    kind of value: numeric, timestamptz, jsonb, bytea, real, boolean, NULL),
    and the server computes the same: the first digests match.
  - A value written in the file behind the replica's back (no note) is
    caught by the next digest, narrowed down by ranges of values hashes
    (RangeAsk.values), and only the rows whose values differ go to it again
    as upserts, by the path a refused row takes (one row of 20, where a
    whole-table repair sent 20): after one more round the file holds the
    server's value again, and the digests match.  No snapshot.
  - A column the replica owns is its own: its value counts in no digest. A
    row it wrote and has not sent yet keeps its write through a repair of
    its table: the repair is an upsert, which leaves the columns it owns.
  - An upload of a replica before values digests (keys only) is compared by
    keys, as before; a values digest of another length than 8 bytes is refused.
  - A replica before values range answers (RangeAnswer without values)
    answering a values question: its table's rows all go again, as before.
    A file whose table of asks is from before values asks gains the column.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import tempfile
import uuid

import psycopg2

import wire
from harness import Replica, Server, check, finish, settle

S1 = "11111111-1111-4111-8111-111111111111"
tmp = tempfile.mkdtemp()

srv = Server("values")
# as roles, not a superuser: the tables' owner, and the replica's role filing
srv.exec("CREATE ROLE values_owner LOGIN PASSWORD 'owner-pw' IN ROLE sync_admin")
srv.exec("CREATE ROLE values_store LOGIN PASSWORD 'store-pw'")
srv.exec("GRANT CREATE ON SCHEMA public TO values_owner")
owner = Server("values", create=False, user="values_owner", password="owner-pw")
owner.exec("""
CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price numeric, made timestamptz,
                       tags jsonb, photo bytea, weight real, ok boolean, n bigint);
CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price numeric, made timestamptz,
                    tags jsonb, photo bytea, weight real, ok boolean, n bigint);
CREATE TABLE shelves (id int PRIMARY KEY, label text NOT NULL, counted int);
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('items', 'catalog', 'broadcast', codec => 'proto');
SELECT sync.mirror('shelves', 'catalog', 'broadcast', replica_owned => '{counted}');
INSERT INTO products SELECT g, 'p' || g, g * 1.50, '2024-01-02 03:04:05.5+02'::timestamptz + g * interval '1 day',
                            jsonb_build_object('g', g, 'a', jsonb_build_array(1, 'x', null)),
                            decode(lpad(to_hex(g), 4, '0'), 'hex'), g / 3.0, g % 2 = 0,
                            CASE WHEN g % 3 = 0 THEN NULL ELSE g * 1000000000000 END
  FROM generate_series(1, 20) g;
INSERT INTO items SELECT * FROM products;
INSERT INTO shelves SELECT g, 'shelf ' || g, NULL FROM generate_series(1, 5) g;
""")
srv.exec("SELECT sync.replica_add(%s)", (S1,))
srv.exec("UPDATE sync.replicas SET role = 'values_store' WHERE id = %s", (S1,))
# a table's values repaired again at once (values_settings.py bounds how often)
srv.exec("ALTER DATABASE values SET magic_sync.values_repair_interval = 0")
store = Server("values", create=False, user="values_store", password="store-pw")
r = Replica(store, S1, os.path.join(tmp, "1.db"))
settle(srv, [r])
check("the replica is provisioned", r.status()["applied"] > 0, True)
snapshot = srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (S1,))


def digest_round():
    """the replica's digests are due: what the server made of them"""
    r.q("UPDATE _sync_state SET digest_due = 1 WHERE id = 1")
    filed = r.upload()
    return filed["digests"] if filed else None


def behind_its_back(table, sql):
    """a write in the file under the replica's triggers disabled: dropped, written, made again"""
    triggers = r.q("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", (table,))
    for name, _ in triggers:
        r.q(f'DROP TRIGGER "{name}"')
    r.q(sql)
    for _, made in triggers:
        r.q(made)


def refused(table):
    """the rows of table marked to go again to the replica"""
    return srv.one("SELECT count(*) FROM sync.refused_rows x JOIN sync.tables t ON t.id = x.tab"
                   " WHERE x.replica = %s AND t.name = %s", (S1, table))


def narrow(table, rounds=6):
    """digests due, then uploads (the answers) until rows of table are marked to go again:
    what the first filing said of the digests, and how many rows are marked"""
    first = digest_round()
    for _ in range(rounds):
        if refused(table) > 0:
            break
        srv.relay()
        r.pull_apply()
        # digests in every upload too: the one that carries the rows' answer must not take
        # the rows marked in its own filing for a difference of keys
        r.q("UPDATE _sync_state SET digest_due = 1 WHERE id = 1")
        r.upload()
    return first, refused(table)


def no_snapshot():
    check("nothing is provisioned again", srv.one(
        "SELECT provision OR snapshot_number IS DISTINCT FROM %s FROM sync.replicas WHERE id = %s", (snapshot, S1)), False)


d = r.digest()
check("every table's digest carries its values", sorted(t for t, v in d.items() if len(v.get("values", "")) == 16),
      ["items", "products", "shelves"])
check("the first digests match the server's, values included", digest_round(), "match")

# ---- json: a price drifted in the file ---------------------------------------
before = srv.one("SELECT price::text FROM products WHERE id = 7")
behind_its_back("products", "UPDATE products SET price = '99.99' WHERE id = 7")
check("the drift left no note: nothing of it goes up", r.one("SELECT count(*) FROM _sync_notes"), 0)
check("its keys still agree", {t: (v["count"], v["fnv"]) for t, v in r.digest().items()} ==
      {t: (v["count"], v["fnv"]) for t, v in d.items()}, True)
check("the next digest catches it, narrowed down by ranges; only that row goes again, as refused rows do",
      narrow("products"), ("differ: narrowed down by ranges", 1))
check("the row marked is the drifted one", srv.one(
    "SELECT x.key FROM sync.refused_rows x JOIN sync.tables t ON t.id = x.tab"
    " WHERE x.replica = %s AND t.name = 'products' AND x.due <= now()", (S1,)), "1:7")
settle(srv, [r])
check("the file holds the server's price again", r.one("SELECT price FROM products WHERE id = 7"), before)
check("and the digests match again", digest_round(), "match")
check("no question stays open, of values or keys", srv.one("SELECT count(*) FROM sync.ranges"), 0)
check("the rows sent again are held, refused no more", srv.one(
    "SELECT count(*) FROM sync.held WHERE replica = %s AND refused IS NOT NULL", (S1,)), 0)
no_snapshot()

# ---- proto: a blob and a real drifted, a NULL filled -----------------------
behind_its_back("items", "UPDATE items SET photo = x'ffff', weight = 0.5 WHERE id = 3")
behind_its_back("items", "UPDATE items SET n = 1 WHERE id = 6")
check("proto: the next digest catches it; the two rows alone go again", narrow("items"),
      ("differ: narrowed down by ranges", 2))
settle(srv, [r])
check("proto: the file holds the server's rows again", r.q("SELECT hex(photo), n FROM items WHERE id IN (3, 6) ORDER BY id"),
      [("0003", None), ("0006", None)])
check("proto: the digests match again", digest_round(), "match")
no_snapshot()

# ---- a column it owns, and a write not sent yet ------------------------------
r.q("UPDATE shelves SET counted = 12 WHERE id = 1")
settle(srv, [r])
check("its count went up", srv.one("SELECT counted FROM shelves WHERE id = 1"), 12)
check("a column it owns counts in no digest: the digests match", digest_round(), "match")
behind_its_back("shelves", "UPDATE shelves SET label = 'drifted' WHERE id = 2")
check("a label drifted: caught, that row alone goes again", narrow("shelves"), ("differ: narrowed down by ranges", 1))
srv.relay()
# the replica counts shelf 2 before the rows sent again reach it, and has not sent it yet
r.q("UPDATE shelves SET counted = 42 WHERE id = 2")
check("its write waits to go up", r.one("SELECT count(*) FROM _sync_notes WHERE tbl = 'shelves'"), 1)
r.pull_apply()
check("the rows sent again put the label back", r.one("SELECT label FROM shelves WHERE id = 2"), "shelf 2")
check("and leave its write, not sent yet, as it is", r.one("SELECT counted FROM shelves WHERE id = 2"), 42)
settle(srv, [r])
check("its write reached the server", srv.one("SELECT counted FROM shelves WHERE id = 2"), 42)
check("the digests match", digest_round(), "match")
no_snapshot()

# ---- a replica before values digests: keys only --------------------------------
behind_its_back("products", "UPDATE products SET name = 'drifted' WHERE id = 9")
d = r.digest()
old = wire.up(S1, ack=r.applied(),
              digests=[(t, v["count"], int(v["fnv"], 16)) for t, v in d.items()])
check("keys only: compared by keys, as before (the drift unseen)",
      store.file(S1, old)["digests"], "match")
body = (wire.field(1, 1) + wire.field(2, uuid.UUID(S1).bytes) + wire.field(3, os.urandom(16))
        + wire.field(4, r.applied())
        + wire.field(7, wire.field(1, "products") + wire.field(2, d["products"]["count"])
                     + wire.fixed64(3, int(d["products"]["fnv"], 16)) + wire.field(4, b"\x01\x02\x03\x04"))
        + wire.field(11, wire.now_seq()))
try:
    store.file(S1, wire.checked(body))
    refusal = None
except psycopg2.Error as e:
    refusal = str(e)
check("a values digest of 4 bytes is refused", refusal is not None and "not 8" in refusal, True)
check("the replica's own next digest catches the name", narrow("products"), ("differ: narrowed down by ranges", 1))
settle(srv, [r])
check("and it is repaired", r.one("SELECT name FROM products WHERE id = 9"), "p9")
no_snapshot()

# ---- a replica before values range answers: the whole table, as before ---------
settle(srv, [r])
check("the digests match", digest_round(), "match")
behind_its_back("products", "UPDATE products SET name = 'drifted' WHERE id = 11")
check("the drift is caught and a values question asked", digest_round(), "differ: narrowed down by ranges")
asked = srv.rows("SELECT round, depth + split, of_values FROM sync.ranges WHERE replica = %s", (S1,))
check("the question is of values", [a[2] for a in asked], [True])
# its answer as a build before values answers would give it: of keys, no values field
answer = wire.field(1, "products") + wire.field(2, asked[0][0]) + wire.field(3, asked[0][1])
body = wire.up(S1, ack=r.applied(), check=False) + wire.field(19, answer) + wire.field(20, 1)
store.file(S1, wire.checked(body))
check("an answer without values: every row of the table goes again", refused("products"), 20)
check("and the question is forgotten", srv.one("SELECT count(*) FROM sync.ranges WHERE replica = %s", (S1,)), 0)
settle(srv, [r])
check("and it is repaired", r.one("SELECT name FROM products WHERE id = 11"), "p11")
check("the digests match", digest_round(), "match")
no_snapshot()

# ---- a file from before values asks: its table of asks without their kind ------
r.q("DROP TABLE IF EXISTS _sync_range_asks")
r.q("CREATE TABLE _sync_range_asks (tbl TEXT PRIMARY KEY, round INTEGER NOT NULL,"
    " depth INTEGER NOT NULL, split INTEGER NOT NULL, buckets BLOB NOT NULL)")
r.upload()   # reads the old table of asks (none kept): no error
behind_its_back("products", "UPDATE products SET name = 'drifted' WHERE id = 13")
check("old asks table: the drift narrowed down to its row", narrow("products"), ("differ: narrowed down by ranges", 1))
check("the column of values asks is added", "vals" in [c[1] for c in r.q("PRAGMA table_info(_sync_range_asks)")], True)
settle(srv, [r])
check("and it is repaired", r.one("SELECT name FROM products WHERE id = 13"), "p13")
no_snapshot()
finish()
