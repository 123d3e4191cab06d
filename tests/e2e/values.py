#!/usr/bin/python3
"""values.py - a value that drifted in a replica's file is caught by its
next digest and repaired by sending the table's rows again (issue 40,
"Value digests"; docs/protocol.md 8).

  - A replica's digest covers each row's values (json and proto codecs, every
    kind of value: numeric, timestamptz, jsonb, bytea, real, boolean, NULL),
    and the server computes the same: the first digests match.
  - A value written in the file behind the replica's back (no note) is
    caught by the next digest ("values differ"), and the table's rows go to
    it again as upserts, by the path a refused row takes: after one more
    round the file holds the server's value again, and the digests match.
    Nothing is provisioned again: no snapshot.
  - A column the replica owns is its own: its value counts in no digest. A
    row it wrote and has not sent yet keeps its write through a repair of
    its table: the repair is an upsert, which leaves the columns it owns.
  - An upload of a replica before values digests (keys only) is compared by
    keys, as before; a values digest of another length than 8 bytes is refused.

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
check("the next digest catches it", digest_round(), "values differ: rows sent again")
check("the table's rows go to it again, as refused rows do", srv.one(
    "SELECT count(*) FROM sync.refused_rows x JOIN sync.tables t ON t.id = x.tab"
    " WHERE x.replica = %s AND t.name = 'products' AND x.due <= now()", (S1,)), 20)
settle(srv, [r])
check("the file holds the server's price again", r.one("SELECT price FROM products WHERE id = 7"), before)
check("and the digests match again", digest_round(), "match")
check("the rows sent again are held, refused no more", srv.one(
    "SELECT count(*) FROM sync.held WHERE replica = %s AND refused IS NOT NULL", (S1,)), 0)
no_snapshot()

# ---- proto: a blob and a real drifted, a NULL filled -----------------------
behind_its_back("items", "UPDATE items SET photo = x'ffff', weight = 0.5 WHERE id = 3")
behind_its_back("items", "UPDATE items SET n = 1 WHERE id = 6")
check("proto: the next digest catches it", digest_round(), "values differ: rows sent again")
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
check("a label drifted: caught", digest_round(), "values differ: rows sent again")
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
    refused = None
except psycopg2.Error as e:
    refused = str(e)
check("a values digest of 4 bytes is refused", refused is not None and "not 8" in refused, True)
check("the replica's own next digest catches the name", digest_round(), "values differ: rows sent again")
settle(srv, [r])
check("and it is repaired", r.one("SELECT name FROM products WHERE id = 9"), "p9")
no_snapshot()
finish()
