#!/usr/bin/python3
"""filing.py - sync.file with real SQLite replicas (issue 6): acknowledgement
makes rows held; refusals; records kept from their first delivery or newest
by version; two-way columns taken, dropped, refused; catalog uploads refused;
a record deleted with a message still on its way; the inbox and its retry
after a fix; duplicate filing; another replica's role refused; digests that
drift provision the replica again; records in the proto codec, walked by
the same code on both sides (src/shared/row.c), a field given twice refused.
Restores are in restore.py.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import struct
import subprocess
import tempfile

import psycopg2

import wire
from harness import Replica, Server, check, finish, settle

S1 = "11111111-1111-4111-8111-111111111111"
S2 = "22222222-2222-4222-8222-222222222222"

srv = Server("filing")
srv.exec("""
CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL, price numeric(10,2) NOT NULL);
CREATE TABLE stock (store uuid, product bigint REFERENCES products, qty int NOT NULL, counted int,
                    PRIMARY KEY (store, product));
CREATE TABLE sales (store uuid, id int, product bigint NOT NULL REFERENCES products, total numeric(10,2) NOT NULL,
                    v bigint NOT NULL, filed_at timestamptz, sender jsonb, PRIMARY KEY (store, id));
CREATE TABLE visits (store uuid, id int, note text NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('stock', 'catalog', 'assigned(store)', replica_owned => '{counted}');
SELECT sync.mirror('sales', 'record', origin => 'store', version => 'v', created => 'filed_at', sender => 'sender');
SELECT sync.mirror('visits', 'record', origin => 'store');
INSERT INTO products VALUES (1, 'tea', 2.50), (2, 'coffee', 4.00), (3, 'cocoa', 3.20);
""")
srv.exec("INSERT INTO stock VALUES (%s, 1, 10, NULL), (%s, 2, 20, NULL), (%s, 1, 5, NULL)", (S1, S1, S2))
srv.exec("SELECT sync.replica_add(%s)", (S1,))
srv.exec("SELECT sync.replica_add(%s)", (S2,))
tmp = tempfile.mkdtemp()
r1 = Replica(srv, S1, os.path.join(tmp, "s1.db"))
r2 = Replica(srv, S2, os.path.join(tmp, "s2.db"))

# --- acknowledgement makes rows held ---------------------------------------
srv.relay()
check("before any acknowledgement nothing counts as held", srv.held(S1), {})
r1.pull_apply()
check("the snapshot applies", [x["result"] for x in r1.last][-1], "applied")
filed = r1.upload()
check("the acknowledgement is filed", filed["acknowledged"] > 0, True)
check("what it carried is held", srv.held(S1), srv.wanted(S1))
check("the outbox is trimmed through it",
      srv.one("SELECT count(*) FROM sync.outbox WHERE replica = %s", (S1,)), 0)
check("the replica holds what the server records",
      r1.keys("products", ["id"]) | r1.keys("stock", ["store", "product"]),
      srv.held(S1)["products"] | srv.held(S1)["stock"])
r2.sync()
settle(srv, [r1, r2])

# --- records: newest wins by version; first delivery without one -------------
r1.q("INSERT INTO sales (store, id, product, total, v) VALUES (?, 1, 1, 5.00, 1)", (S1,))
r1.q("INSERT INTO visits (store, id, note) VALUES (?, 1, 'first')", (S1,))
filed = r1.upload()
check("two records filed", filed["filed"], 2)
check("the record is on the server", srv.rows("SELECT total, v FROM sales WHERE id = 1"), [(5.00, 1)])
check("created is stamped by the server", srv.one("SELECT filed_at IS NOT NULL FROM sales WHERE id = 1"), True)
check("a filed record is held at once, not sent back", srv.held(S1).get("sales"), {f"36:{S1}1:1"})
srv.relay()
check("nothing goes back down for it", [x["result"] for x in r1.pull_apply() if x.get("upserts")], [])
r1.q("UPDATE sales SET total = 6.00, v = 3 WHERE id = 1")
r1.upload()
check("a newer version wins", srv.rows("SELECT total, v FROM sales WHERE id = 1"), [(6.00, 3)])
# an older version (the replica's clock went back) is filed as older and dropped
r1.q("UPDATE sales SET total = 1.00, v = 2 WHERE id = 1")
r1.upload()
check("an older version loses", srv.rows("SELECT total, v FROM sales WHERE id = 1"), [(6.00, 3)])
settle(srv, [r1])
# numeric travels as text, exact (docs/protocol.md 4)
check("and the replica is sent the server's version", r1.q("SELECT total, v FROM sales WHERE id = 1"), [("6.00", 3)])
r1.q("UPDATE visits SET note = 'second' WHERE id = 1")
r1.upload()
check("without a version, the first delivery is kept",
      srv.one("SELECT note FROM visits WHERE id = 1"), "first")
settle(srv, [r1])
check("and the replica converges to it", r1.one("SELECT note FROM visits WHERE id = 1"), "first")
# the sender stamp: what the host knows of the sender, never what the rows claim
r1.q("INSERT INTO sales (store, id, product, total, v) VALUES (?, 2, 2, 8.00, 1)", (S1,))
up = bytes(r1.one("SELECT sync_upload()"))
srv.file(S1, up, {"device": "till 3"})
check("the sender stamp", srv.one("SELECT sender->>'device' FROM sales WHERE id = 2"), "till 3")
settle(srv, [r1, r2])

# --- two-way: the replica's own columns --------------------------------------
r1.q("UPDATE stock SET counted = 9 WHERE product = 1")
filed = r1.upload()
check("a replica-owned edit is taken", srv.one("SELECT counted FROM stock WHERE store = %s AND product = 1", (S1,)), 9)
check("only the owned column", srv.one("SELECT qty FROM stock WHERE store = %s AND product = 1", (S1,)), 10)
# edited on the replica while the server deletes the row: the server's change wins
srv.exec("DELETE FROM stock WHERE store = %s AND product = 2", (S1,))
r1.q("UPDATE stock SET counted = 18 WHERE product = 2")
filed = r1.upload()
check("an edit of a row the server deleted is dropped", filed["dropped"], 1)
settle(srv, [r1])
check("and the replica lets the row go", r1.one("SELECT count(*) FROM stock WHERE product = 2"), 0)
# a two-way row the replica was never sent (crafted: a replica never creates one)
srv.exec("INSERT INTO stock VALUES (%s, 3, 1, NULL)", (S2,))
crafted = wire.up(S1, tables=[wire.rows("stock", upserts=[((S2, 3), json.dumps({"store": S2, "product": 3, "counted": 99}))])])
filed = srv.file(S1, crafted)
check("an edit of a row never sent is refused", filed["refused"], 1)
check("and not taken", srv.one("SELECT counted FROM stock WHERE store = %s AND product = 3", (S2,)), None)
answer = srv.rows("SELECT message FROM sync.pull(%s, 0) WHERE number IS NULL", (S1,))
check("the answer says why", "never sent" in json.dumps(
    [srv.one("SELECT sync.inspect(%s)", (m[0],)) for m in answer]), True)

# --- a row the server deletes and makes again while the store edits it ------
def counted():
    return (srv.one("SELECT counted FROM stock WHERE store = %s AND product = 1", (S1,)),
            r1.one("SELECT counted FROM stock WHERE product = 1"))


settle(srv, [r1])
# (a) the edit reaches the server after the row was made again: it belonged to the old row
r1.q("UPDATE stock SET counted = 71 WHERE product = 1")
srv.exec("DELETE FROM stock WHERE store = %s AND product = 1", (S1,))
srv.relay()
srv.exec("INSERT INTO stock VALUES (%s, 1, 10, NULL)", (S1,))
srv.relay()
filed = r1.upload()
check("an edit of a row made again since is dropped", filed["dropped"], 1)
settle(srv, [r1])
check("store and server agree on the store's own column, after a delete and a re-make", counted(), (None, None))
# (b) the edit is dropped while the row is gone; the row comes back as an update of the store's copy
r1.q("UPDATE stock SET counted = 72 WHERE product = 1")
srv.exec("DELETE FROM stock WHERE store = %s AND product = 1", (S1,))
filed = r1.upload()
check("an edit of a row the server deleted is dropped", filed["dropped"], 1)
srv.exec("INSERT INTO stock VALUES (%s, 1, 10, 5)", (S1,))
settle(srv, [r1])
check("the row made again replaces the store's copy, its own column too", counted(), (5, 5))
r1.q("UPDATE stock SET counted = 6 WHERE product = 1")
r1.upload()
check("and the store's next edit is taken", counted(), (6, 6))
settle(srv, [r1, r2])

# --- what a replica may never write ----------------------------------------
crafted = wire.up(S1, tables=[wire.rows("products", upserts=[((1,), json.dumps({"id": 1, "name": "free tea"}))])])
filed = srv.file(S1, crafted)
check("a catalog upload is refused", (filed["refused"], srv.one("SELECT name FROM products WHERE id = 1")), (1, "tea"))
crafted = wire.up(S1, tables=[wire.rows("stock", upserts=[((S1, 1), json.dumps({"store": S1, "product": 1, "qty": 1000}))])])
filed = srv.file(S1, crafted)
check("a catalog's other columns are refused", (filed["refused"], srv.one("SELECT qty FROM stock WHERE store = %s AND product = 1", (S1,))), (1, 10))
crafted = wire.up(S1, tables=[wire.rows("sales", upserts=[((S2, 7), json.dumps({"store": S2, "id": 7, "product": 1, "total": 1, "v": 1}))])])
filed = srv.file(S1, crafted)
check("another replica's record is refused", (filed["refused"], srv.one("SELECT count(*) FROM sales WHERE id = 7")), (1, 0))
crafted = wire.up(S1, tables=[wire.rows("nope", upserts=[((1,), "{}")]), wire.rows("sales", upserts=[((S1, 8), json.dumps(
    {"store": S1, "id": 8, "product": 1, "total": 1, "v": 1, "colour": "red"}))])])
filed = srv.file(S1, crafted)
check("an unknown table and an unknown column are refused, nothing else lost", filed["refused"], 2)
crafted = wire.up(S1, tables=[wire.rows("sales", upserts=[((S1, 9), b"{not json")]),
                             wire.rows("sales", upserts=[((S1, 10), json.dumps({"store": S1, "id": 10, "product": 1, "total": 2, "v": 1}))])])
filed = srv.file(S1, crafted)
check("a row that does not decode is refused; the rest is filed", (filed["refused"], filed["filed"]), (1, 1))
# a column given twice is refused, as a replica refuses it (jsonb would keep the last)
crafted = wire.up(S1, tables=[wire.rows("sales", upserts=[((S1, 12), '{"store": "%s", "id": 12, "product": 1,'
                                                          ' "total": 1, "total": 2, "v": 1}' % S1)])])
filed = srv.file(S1, crafted)
check("a json row giving a column twice is refused", (filed["refused"], filed["filed"]), (1, 0))
check("and not filed", srv.one("SELECT count(*) FROM sales WHERE id = 12"), 0)
answer = srv.rows("SELECT message FROM sync.pull(%s, 0) WHERE number IS NULL", (S1,))
check("the answer says why", 'column \\"total\\" is given twice' in json.dumps(
    [srv.one("SELECT sync.inspect(%s)", (m[0],)) for m in answer]), True)
# noise never begins with 0x08: that is an old library's unframed Up, refused as such (0A000)
noise = bytes([os.urandom(1)[0] | 0x80]) + os.urandom(63)
for bad, why in [(b"", "empty"), (b"\x0a\x05ab", "truncated"), (noise, "noise")]:
    try:
        srv.file(S1, bad)
        check(f"an upload that does not decode ({why}) is an error", "filed", "error")
    except psycopg2.Error as e:
        check(f"an upload that does not decode ({why}) is an error", e.pgcode, "22P03")
srv.exec("SET magic_sync.upload_bytes = 1024")
try:
    srv.file(S1, wire.up(S1, tables=[wire.rows("sales", upserts=[((S1, 11), "x" * 2000)])]))
    check("an upload over the bound is an error", "filed", "error")
except psycopg2.Error as e:
    check("an upload over the bound is an error", e.pgcode, "54000")
srv.exec("RESET magic_sync.upload_bytes")
try:
    srv.file(S1, wire.up(S2))
    check("an upload naming another replica is an error", "filed", "error")
except psycopg2.Error as e:
    check("an upload naming another replica is an error", e.pgcode, "42501")
settle(srv, [r1, r2])

# --- duplicate filing -----------------------------------------------------
r1.q("INSERT INTO sales (store, id, product, total, v) VALUES (?, 3, 1, 1.50, 1)", (S1,))
up = bytes(r1.one("SELECT sync_upload()"))
first = srv.file(S1, up)
r1.q("UPDATE sales SET total = 99 WHERE id = 3")  # locally only: the same bytes are filed again below
again = srv.file(S1, up)
check("filing the same upload twice changes nothing the second time", (first["filed"], again), (1, {"duplicate": True}))
check("one answer for it", srv.one("SELECT count(*) FROM sync.answers WHERE replica = %s AND send_id = substring(%s from 1 for 0) IS NULL", (S1, b"")), 0)
settle(srv, [r1])

# --- a record deleted with a message still on its way ------------------------
srv.exec("UPDATE sales SET total = 7.50, v = 10 WHERE store = %s AND id = 3", (S1,))
srv.relay()                                    # the new version is on its way to r1 ...
r1.q("DELETE FROM sales WHERE id = 3")         # ... when r1 deletes the row
crafted_ack = None
filed = r1.upload()                            # r1 has not applied that message
check("the delete is not taken while a message carrying the row is on its way", filed["dropped"], 1)
check("the server keeps its copy", srv.one("SELECT count(*) FROM sales WHERE store = %s AND id = 3", (S1,)), 1)
settle(srv, [r1])
check("the replica takes the row again from the message on its way",
      r1.one("SELECT total FROM sales WHERE id = 3"), "7.50")
r1.q("DELETE FROM sales WHERE id = 3")
filed = r1.upload()
check("once every message carrying it is applied, the delete is taken", filed["filed"], 1)
check("the server lets go of its copy", srv.one("SELECT count(*) FROM sales WHERE store = %s AND id = 3", (S1,)), 0)
settle(srv, [r1])

# --- the inbox: a row that fails for good is set aside, retried after a fix ---
srv.exec("ALTER TABLE sales ADD CONSTRAINT no_big_sales CHECK (total < 100)")
r1.q("INSERT INTO sales (store, id, product, total, v) VALUES (?, 4, 1, 150, 1)", (S1,))
r1.q("INSERT INTO sales (store, id, product, total, v) VALUES (?, 5, 1, 15, 1)", (S1,))
filed = r1.upload()
check("a row a constraint refuses is set aside; the other is filed", (filed["set_aside"], filed["filed"]), (1, 1))
check("the inbox says why", srv.rows("SELECT sqlstate, reason LIKE '%no_big_sales%' FROM sync.inbox"), [("23514", True)])
check("a retry before the fix leaves it there", srv.one("SELECT sync.inbox_retry()"), 0)
srv.exec("ALTER TABLE sales DROP CONSTRAINT no_big_sales")
srv.exec("UPDATE sync.inbox SET last_at = now() - interval '1 day'")   # its backoff has passed
check("after the fix, the retry files it", srv.one("SELECT sync.inbox_retry()"), 1)
check("the row is there", srv.one("SELECT total FROM sales WHERE store = %s AND id = 4", (S1,)), 150)
check("the inbox is empty", srv.one("SELECT count(*) FROM sync.inbox"), 0)
settle(srv, [r1])

# --- refusals: a row the replica could not take is not held, and goes again ---
# a rule of the store's own refuses it on the replica
r1.q("CREATE TRIGGER local_rule BEFORE INSERT ON visits WHEN NEW.note = 'server side'"
     " BEGIN SELECT RAISE(ABORT, 'the store does not take it'); END")
srv.exec("INSERT INTO visits VALUES (%s, 2, 'server side')", (S1,))
settle(srv, [r1])
refused = "SELECT h.refused FROM sync.held h JOIN sync.tables t ON t.id = h.tab WHERE t.name = 'visits' AND h.key = %s"
check("the replica refused it, and said why", "does not take it" in (srv.one(refused, (f"36:{S1}1:2",)) or ""), True)
check("a refused row is not held", f"36:{S1}1:2" in srv.held(S1).get("visits", set()), False)
check("nor sent again while it is as it was", srv.relay()["rows_sent"], 0)
r1.q("DROP TRIGGER local_rule")                # the store deploys a fix ...
srv.exec("UPDATE visits SET note = 'server side, again' WHERE id = 2")   # ... and the row changes
settle(srv, [r1])
check("a refused row goes again as it is then, and is taken", r1.one("SELECT note FROM visits WHERE id = 2"), "server side, again")
check("and is held", f"36:{S1}1:2" in srv.held(S1).get("visits", set()), True)

# --- a table declared later reaches every replica's schema ------------------
srv.exec("CREATE TABLE promos (id int PRIMARY KEY, text text NOT NULL)")
srv.exec("SELECT sync.mirror('promos', 'catalog', 'broadcast')")
srv.exec("INSERT INTO promos VALUES (1, 'two for one')")
settle(srv, [r1, r2])
check("a new table: replicas are provisioned with it", (r1.keys("promos", ["id"]), r2.keys("promos", ["id"])), ({"1:1"}, {"1:1"}))

# --- the proto codec: the same walker on both sides (src/shared/row.c) -------
srv.exec("CREATE TABLE readings (store uuid, id int, temp double precision, label text, raw bytea, ok boolean,"
         " PRIMARY KEY (store, id))")
srv.exec("SELECT sync.mirror('readings', 'record', origin => 'store', codec => 'proto')")
settle(srv, [r1, r2])
fields = srv.one("SELECT fields FROM sync.tables WHERE name = 'readings'")
reading = "SELECT temp, label, encode(raw, 'hex'), ok FROM readings WHERE store = %s AND id = %s"
r1.q("INSERT INTO readings VALUES (?, 1, -2.5, 'h\u00e9', X'00ff', 1)", (S1,))
filed = r1.upload()
check("a record in the proto codec is filed", (filed["filed"], filed["refused"]), (1, 0))
check("as the replica wrote it", srv.rows(reading, (S1, 1)), [(-2.5, "h\u00e9", "00ff", True)])
# the server's change goes down in the relay's encoding, and the replica walks it to the same row
srv.exec("UPDATE readings SET temp = 1e300, label = 'server''s', raw = '\\x', ok = false WHERE store = %s AND id = 1", (S1,))
settle(srv, [r1])
check("the server's version, as the replica holds it",
      r1.q("SELECT temp, label, hex(raw), ok FROM readings WHERE id = 1"), [(1e300, "server's", "", 0)])


def pb_int(name, v):
    """a sint64 field of a column of readings"""
    return wire.varint(fields[name] << 3) + wire.varint((v << 1) ^ (v >> 63))


def pb_double(name, v):
    return wire.fixed64(fields[name], struct.unpack("<Q", struct.pack("<d", v))[0])


def pb_bytes(name, v):
    return wire.field(fields[name], v)


def reading_row(i, *extra):
    return pb_bytes("store", S1) + pb_int("id", i) + b"".join(extra)


def refused_for(row_id, row):
    """file one crafted reading; (refused, filed) and the reason the answer gives"""
    filed = srv.file(S1, wire.up(S1, tables=[wire.rows("readings", upserts=[((S1, row_id), row)])]))
    answers = [srv.one("SELECT sync.inspect(%s)", (m[0],))
               for m in srv.rows("SELECT message FROM sync.pull(%s, 0) WHERE number IS NULL", (S1,))]
    reasons = [r["reason"] for a in answers for r in a.get("filed", {}).get("refused", [])
               if r["key"] == [S1, str(row_id)]]
    return (filed["refused"], filed["filed"]), reasons


got, _ = refused_for(2, reading_row(2, pb_double("temp", 0.5), pb_bytes("label", "by hand"),
                                    pb_bytes("raw", b"\x01"), pb_int("ok", 1)))
check("a proto row written by hand, as the relay writes one, is filed", got, (0, 1))
check("and is what it says", srv.rows(reading, (S1, 2)), [(0.5, "by hand", "01", True)])
for row_id, extra, reason in [
        (3, [pb_double("temp", 1.0), pb_double("temp", 2.0)], "given twice"),
        (4, [pb_bytes("label", "a"), pb_bytes("label", "a")], "given twice"),
        (5, [wire.varint(99 << 3) + wire.varint(1)], "field 99 of the row is not a column"),
        (6, [wire.varint(fields["label"] << 3) + wire.varint(1)], "is not length-delimited"),
        (7, [pb_bytes("label", b"\xc3")], "not valid UTF-8"),
        (8, [wire.varint(fields["temp"] << 3 | 1) + b"\x00\x00"], "truncated or malformed")]:
    got, reasons = refused_for(row_id, reading_row(row_id, *extra))
    check(f"reading {row_id} is refused", got, (1, 0))
    check(f"reading {row_id}: the answer says why ({reason})", any(reason in r for r in reasons), True)
    check(f"reading {row_id} is not filed", srv.rows(reading, (S1, row_id)), [])
settle(srv, [r1, r2])

# --- digests: drift is repaired by its rows, no snapshot, and it converges ---
settle(srv, [r1, r2])
snapshot_before = srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (S2,))
# by hand, behind the engine's back (and its guard, as sync_apply steps around it)
r2.q("UPDATE _sync_state SET applying = 1")
r2.q("DELETE FROM products WHERE id = 3")
r2.q("UPDATE _sync_state SET applying = 0")
r2.q("UPDATE _sync_state SET digest_due = 1")  # digests go up now rather than within the hour
r2.sync()
check("the drift provisions nothing", srv.one("SELECT provision FROM sync.replicas WHERE id = %s", (S2,)), False)
settle(srv, [r1, r2])
check("and it converges", r2.keys("products", ["id"]), srv.wanted(S2)["products"])
check("with no snapshot (a small table's differing key is asked for by itself)",
      srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (S2,)), snapshot_before)
r2.q("UPDATE _sync_state SET digest_due = 1")
r2.sync()
check("its digests now match", srv.one("SELECT digests_at IS NOT NULL AND NOT provision FROM sync.replicas WHERE id = %s", (S2,)), True)

# --- a replica's role files for its own uuid only ----------------------------
srv.exec("CREATE ROLE store_one LOGIN PASSWORD 'store one'")
srv.exec("UPDATE sync.replicas SET role = 'store_one' WHERE id = %s", (S1,))
as_one = Server("filing", create=False, user="store_one", password="store one")
check("its own uuid", "acknowledged" in as_one.file(S1, wire.up(S1)), True)
try:
    as_one.file(S2, wire.up(S2))
    check("another replica's uuid is refused", "filed", "error")
except psycopg2.Error as e:
    check("another replica's uuid is refused", e.pgcode, "42501")
try:
    as_one.one("SELECT count(*) FROM sync.held")
    check("a replica's role reads nothing else", "read", "error")
except psycopg2.Error as e:
    check("a replica's role reads nothing else", e.pgcode, "42501")

finish()
