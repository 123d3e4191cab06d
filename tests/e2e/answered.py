#!/usr/bin/python3
"""answered.py - a write the server refuses is answered with the server's row
(issue 40): whatever the refusal, the replica that wrote it is sent the row
again as the server has it, to it alone, in the next pass (or its deletion,
when the server has no such row for it), and counted as outdated until then.

Each kind of refusal in turn: a record of another's origin deleted and
edited on the device; a catalog row deleted and edited, and one made up; a
two-way row deleted, its server column edited, one never sent edited; a
record of another's origin made up; a record of its own carrying a column
its table does not mirror.  Before the fix each left the device holding
what the server had refused, for good, while every read said caught up.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import tempfile

import wire
from harness import Replica, Server, check, finish, settle

S1 = "11111111-1111-4111-8111-111111111111"
S2 = "22222222-2222-4222-8222-222222222222"

srv = Server("answered")
srv.exec("""
CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE stock (store uuid, product bigint REFERENCES products, qty int NOT NULL, counted int,
                    PRIMARY KEY (store, product));
CREATE TABLE visits (store uuid, id int, note text NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('stock', 'catalog', 'assigned(store)', replica_owned => '{counted}');
SELECT sync.mirror('visits', 'record', 'broadcast', origin => 'store');
INSERT INTO products VALUES (1, 'tea'), (2, 'coffee'), (3, 'cocoa');
""")
srv.exec("INSERT INTO stock VALUES (%s, 1, 10, NULL), (%s, 2, 20, NULL), (%s, 3, 5, NULL)", (S1, S1, S2))
srv.exec("INSERT INTO visits VALUES (%s, 1, 'from two'), (%s, 2, 'also from two')", (S2, S2))
srv.exec("SELECT sync.replica_add(%s)", (S1,))
srv.exec("SELECT sync.replica_add(%s)", (S2,))
tmp = tempfile.mkdtemp()
r1 = Replica(srv, S1, os.path.join(tmp, "s1.db"))
r2 = Replica(srv, S2, os.path.join(tmp, "s2.db"))
settle(srv, [r1, r2])
check("both replicas hold what they should", (srv.held(S1), srv.held(S2)), (srv.wanted(S1), srv.wanted(S2)))


def outdated(table):
    return srv.one("SELECT outdated FROM sync.progress(ARRAY[%s]::uuid[]) WHERE tab = %s::regclass", (S1, table))


def answer_of(filed):
    """the reasons the Filed answer gives, as text"""
    msgs = srv.rows("SELECT message FROM sync.pull(%s, 0) WHERE number IS NULL", (S1,))
    return json.dumps([srv.one("SELECT sync.inspect(%s)", (m[0],)) for m in msgs])


def crafted(table, upserts=(), deletes=()):
    up = wire.up(S1, tables=[wire.rows(table, upserts=upserts, deletes=deletes)], seq=r1.take_seq())
    return srv.file(S1, up)


def relayed():
    """a pass, then what each replica applies of it: (r1's upserts, deletes), r2's upserts"""
    srv.relay()
    a1 = r1.pull_apply()
    a2 = r2.pull_apply()
    r1.upload()
    r2.upload()
    return ((sum(x.get("upserts", 0) for x in a1), sum(x.get("deletes", 0) for x in a1)),
            sum(x.get("upserts", 0) for x in a2))


# --- a record of another's origin, deleted on the device ---------------------
r1.q("DELETE FROM visits WHERE store = ? AND id = 1", (S2,))
filed = r1.upload()
check("deleting another's record is refused", filed["refused"], 1)
check("counted as outdated until it goes again", outdated("visits"), 1)
check("row_progress says it holds an older version",
      srv.one("SELECT answer FROM sync.row_progress('visits', ARRAY[%s, '1'], ARRAY[%s]::uuid[])", (S2, S1)),
      "holds an older version")
check("the next pass sends it to that replica alone", relayed(), ((1, 0), 0))
check("the device holds it again", r1.q("SELECT note FROM visits WHERE store = ? AND id = 1", (S2,)),
      [("from two",)])
check("no longer outdated", outdated("visits"), 0)
check("the server's record is whole", srv.one("SELECT note FROM visits WHERE store = %s AND id = 1", (S2,)), "from two")

# --- a record of another's origin, edited on the device ----------------------
r1.q("UPDATE visits SET note = 'mine now' WHERE store = ? AND id = 2", (S2,))
filed = r1.upload()
check("editing another's record is refused", filed["refused"], 1)
check("the edit is counted as outdated", outdated("visits"), 1)
check("the server's version goes back", relayed(), ((1, 0), 0))
check("the device has the server's version", r1.one("SELECT note FROM visits WHERE store = ? AND id = 2", (S2,)),
      "also from two")

# --- a record of another's origin made up on the device ----------------------
r1.q("INSERT INTO visits VALUES (?, 7, 'forged')", (S2,))
filed = r1.upload()
check("a record in another's name is refused", filed["refused"], 1)
got = relayed()
check("its deletion goes to the device", got[0], (0, 1))
check("the made-up record is gone from the device",
      r1.one("SELECT count(*) FROM visits WHERE store = ? AND id = 7", (S2,)), 0)
check("and nothing of it is recorded as held", "visits" in srv.held(S1)
      and any(k.endswith(":7") for k in srv.held(S1)["visits"]), False)

# --- a catalog's row, deleted and edited (an upload a guard would stop) ------
filed = crafted("products", deletes=[[1]])
check("a catalog's delete is refused", filed["refused"], 1)
check("and answered as a catalog's", "is a catalog" in answer_of(filed), True)
check("the catalog's row is outdated", outdated("products"), 1)
check("the server's row goes to the device alone", relayed(), ((1, 0), 0))
r1.q("DROP TRIGGER IF EXISTS \"_sync_guard_upd_products\"")
r1.q("UPDATE products SET name = 'not tea' WHERE id = 1")
filed = crafted("products", upserts=[([1], json.dumps({"id": 1, "name": "not tea"}))])
check("a catalog's edit is refused", filed["refused"], 1)
check("the server's row goes back", relayed(), ((1, 0), 0))
check("and replaces the device's", r1.one("SELECT name FROM products WHERE id = 1"), "tea")

# --- a catalog's row the server does not have ---------------------------------
r1.q("DROP TRIGGER IF EXISTS \"_sync_guard_ins_products\"")
r1.q("INSERT INTO products VALUES (99, 'made up')")
filed = crafted("products", upserts=[([99], json.dumps({"id": 99, "name": "made up"}))])
check("a catalog row made up is refused", filed["refused"], 1)
check("its deletion goes to the device", relayed()[0], (0, 1))
check("the made-up row is gone", r1.one("SELECT count(*) FROM products WHERE id = 99"), 0)

# --- two-way rows: deleted, a server column edited, one never sent ------------
filed = crafted("stock", deletes=[[S1, 1]])
check("a two-way row's delete is refused", filed["refused"], 1)
check("the server's row goes back", relayed(), ((1, 0), 0))
filed = crafted("stock", upserts=[([S1, 2], json.dumps({"store": S1, "product": 2, "qty": 999, "counted": 3}))])
check("an edit of a column the replica does not own is refused", filed["refused"], 1)
check("and not taken", srv.one("SELECT qty FROM stock WHERE store = %s AND product = 2", (S1,)), 20)
check("the server's row goes back", relayed(), ((1, 0), 0))
r1.q("DROP TRIGGER IF EXISTS \"_sync_guard_ins_stock\"")
r1.q("INSERT INTO stock VALUES (?, 3, 1, 99)", (S2,))
check("a replica makes no two-way row of its own", r1.upload(), None)
filed = crafted("stock", upserts=[([S2, 3], json.dumps({"store": S2, "product": 3, "counted": 99}))])
check("an edit of a row never sent is refused", filed["refused"], 1)
got = relayed()
check("the device is told to let go of it, never sent the row", got[0], (0, 1))
check("no held row stays for it", srv.one(
    "SELECT count(*) FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
    " WHERE h.replica = %s AND t.name = 'stock' AND h.key LIKE %s", (S1, f"%{S2}%")), 0)

# --- a record of its own, carrying a column its table does not mirror --------
r1.q("INSERT INTO visits VALUES (?, 1, 'mine')", (S1,))
check("its own record is filed", r1.upload()["filed"], 1)
filed = crafted("visits", upserts=[([S1, 1], json.dumps({"store": S1, "id": 1, "note": "x", "bogus": 1}))])
check("a column not mirrored is refused", filed["refused"], 1)
srv.relay()
a1 = r1.pull_apply()
check("the server's copy goes back to it (kept whole: its note is pending)",
      sum(x.get("upserts", 0) + x.get("kept", 0) for x in a1), 1)
check("and is marked to go again no more", srv.one(
    "SELECT count(*) FROM sync.held WHERE replica = %s AND replace", (S1,)), 0)

# --- everything agrees ---------------------------------------------------------
settle(srv, [r1, r2])
check("the devices hold what the server records", (
    r1.keys("visits", ["store", "id"]) | r1.keys("products", ["id"]) | r1.keys("stock", ["store", "product"]),
    r2.keys("visits", ["store", "id"]) | r2.keys("products", ["id"]) | r2.keys("stock", ["store", "product"])),
    (set().union(*srv.held(S1).values()), set().union(*srv.held(S2).values())))
check("what they hold is what they should", (srv.held(S1), srv.held(S2)), (srv.wanted(S1), srv.wanted(S2)))
check("nothing outdated", srv.one("SELECT sum(outdated) FROM sync.progress()"), 0)
finish()
