#!/usr/bin/python3
"""lost.py - a replica's writes survive its provisioning again (issue 19
item 4; design 5.1, 5.3): record rows a replica wrote and sent, whose upload
never reached the server, are neither deleted nor forgotten when the replica
is provisioned again, and every one of them reaches the server.

  - S1 writes sales; the upload carrying them is lost on the way (a van's
    bundle left behind); a message to it is lost too, so it opens a gap,
    says so, and is provisioned again.  The snapshot's end keeps the rows
    (its own records with notes) and their notes, stamped still with the
    lost send; the reads count them as on their way up (unfiled).  Then the
    lost upload turns up after a later one: a duplicate of this replica's,
    and its rows go again at once, and are filed.
  - S2 the same, provisioned by the operator (sync.replica_reprovision), and
    its lost upload never turns up: once resend_after passes the rows go
    again by themselves and are filed.

Until then nothing about those rows is final: they wait for an answer to
their send, as any upload not answered does (docs/design.md 5.1).

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import tempfile

from harness import Replica, Server, check, finish, settle

S1 = "11111111-1111-4111-8111-111111111111"
S2 = "22222222-2222-4222-8222-222222222222"
tmp = tempfile.mkdtemp()

srv = Server("lost")
srv.exec("""
CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE sales (store uuid, id int, product int NOT NULL REFERENCES products, total int NOT NULL,
                    v bigint NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('sales', 'record', origin => 'store', version => 'v');
INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, 3) g;
""")
for s in (S1, S2):
    srv.exec("SELECT sync.replica_add(%s)", (s,))
r1 = Replica(srv, S1, os.path.join(tmp, "1.db"))
r2 = Replica(srv, S2, os.path.join(tmp, "2.db"))
settle(srv, [r1, r2])
check("both replicas are provisioned", [r.status()["applied"] > 0 for r in (r1, r2)], [True, True])
next_product = [10]


def sell(r, ids):
    for i in ids:
        r.q("INSERT INTO sales VALUES (?, ?, ?, ?, 1)", (r.id, i, 1 + i % 3, 10 * i))


def server_sales(r):
    return {i for (i,) in srv.rows("SELECT id FROM sales WHERE store = %s", (r.id,))}


def file_sales(r):
    return {i for (i,) in r.q("SELECT id FROM sales WHERE store = ?", (r.id,))}


def progress(r):
    return json.loads(r.one("SELECT sync_progress()")).get("sales", {})


def server_change():
    """a product at the server, relayed: one message more for each replica"""
    next_product[0] += 1
    srv.exec("INSERT INTO products VALUES (%s, 'new')", (next_product[0],))
    srv.relay()


def lost_upload(r, ids):
    """the replica sells, and the upload carrying the sales is lost on the way"""
    sell(r, ids)
    up = bytes(r.one("SELECT sync_upload()"))
    check(f"{r.id[:2]}: the lost upload carried the sales (stamped with its send)",
          r.one("SELECT count(*) FROM _sync_notes WHERE tbl = 'sales' AND send_id IS NOT NULL"), len(ids))
    return up


def provisioned_again(r, how):
    """the replica provisioned again, its unfiled sales as they were"""
    before = file_sales(r)
    if how == "gap":
        # a message to it is lost: the next does not follow, a gap opens, its upload says so
        server_change()
        server_change()
        msgs = srv.pull(r.id, r.status()["applied"], 1 << 24, r.applied())
        check(f"{r.id[:2]}: two messages wait for it", len(msgs) >= 2, True)
        res = r.apply(bytes(msgs[1][1]))
        check(f"{r.id[:2]}: the second, without the first, opens a gap", res["result"], "gap")
        # lost for good: were it still in the outbox, it would go again and close the
        # gap without a snapshot (docs/protocol.md 8.1, range.py)
        srv.exec("DELETE FROM sync.outbox WHERE replica = %s AND number = %s", (r.id, msgs[0][0]))
        r.upload()
        check(f"{r.id[:2]}: the server provisions it again, for the gap",
              srv.one("SELECT provision FROM sync.replicas WHERE id = %s", (r.id,)), True)
    else:
        srv.exec("SELECT sync.replica_reprovision(%s)", (r.id,))
    epoch_before = r.status()["applied"]
    srv.relay()
    results = r.pull_apply()
    check(f"{r.id[:2]}: a snapshot began and ended", [x.get("snapshot") for x in results if x.get("snapshot") in ("begin", "end")],
          ["begin", "end"])
    check(f"{r.id[:2]}: the snapshot is numbered beyond what it applied", r.status()["applied"] > epoch_before, True)
    check(f"{r.id[:2]}: its unfiled sales are in its file after the snapshot", file_sales(r), before)
    check(f"{r.id[:2]}: their notes stay, stamped with the lost send",
          r.one("SELECT count(*) FROM _sync_notes WHERE tbl = 'sales' AND send_id IS NOT NULL"), len(before - server_sales(r)))
    p = progress(r)
    check(f"{r.id[:2]}: the reads count them on their way up (unfiled)", (p.get("unsent"), p.get("unfiled")),
          (0, len(before - server_sales(r))))


# ---- S1: a gap, and the lost upload turns up later ----------------------------
sell(r1, [1, 2])
r1.sync()
check("S1: its first sales are filed", server_sales(r1), {1, 2})
lost1 = lost_upload(r1, [3, 4, 5, 6, 7])
provisioned_again(r1, "gap")
check("S1: the server lacks the sales of the lost upload", server_sales(r1), {1, 2})
# within resend_after the rows wait for their send's answer: not carried again yet
settle(srv, [r1])
check("S1: within resend_after, they wait for the lost send's answer", server_sales(r1), {1, 2})
check("S1: and stay in its file", file_sales(r1), {1, 2, 3, 4, 5, 6, 7})
# the van's bundle turns up after later uploads: filed as a duplicate of this replica's send
ans = srv.file(r1.id, lost1)
check("S1: the late upload is a duplicate (numbered before a later one)", ans.get("duplicate"), True)
settle(srv, [r1])
check("S1: every sale it wrote reached the server", server_sales(r1), {1, 2, 3, 4, 5, 6, 7})
check("S1: nothing of them is left to send", r1.one("SELECT count(*) FROM _sync_notes"), 0)

# ---- S2: the operator provisions it, and the lost upload never turns up -------
sell(r2, [11])
r2.sync()
lost_upload(r2, [12, 13, 14, 15, 16])
provisioned_again(r2, "operator")
settle(srv, [r2])
check("S2: within resend_after, they wait for the lost send's answer", server_sales(r2), {11})
check("S2: and stay in its file", file_sales(r2), {11, 12, 13, 14, 15, 16})
# resend_after passes (0 here, instead of 300 seconds): they go again by themselves
r2.one("SELECT sync_config('resend_after', 0)")
settle(srv, [r2])
check("S2: once resend_after passed, every sale it wrote reached the server", server_sales(r2), {11, 12, 13, 14, 15, 16})
check("S2: nothing of them is left to send", r2.one("SELECT count(*) FROM _sync_notes"), 0)

# ---- both: held as wanted, digests agree, no provisioning after ---------------
digested = {r.id: srv.one("SELECT digests_at FROM sync.replicas WHERE id = %s", (r.id,)) for r in (r1, r2)}
for r in (r1, r2):
    r.q("UPDATE _sync_state SET digest_due = 1 WHERE id = 1")
settle(srv, [r1, r2])
for r in (r1, r2):
    check(f"{r.id[:2]}: the server records it holding what it should", srv.held(r.id), srv.wanted(r.id))
    check(f"{r.id[:2]}: it holds every sale it wrote, as the server does", file_sales(r), server_sales(r))
    check(f"{r.id[:2]}: its digests match the server's", srv.one(
        "SELECT digests_at > %s FROM sync.replicas WHERE id = %s", (digested[r.id], r.id)), True)
check("no replica is to be provisioned again", srv.one("SELECT count(*) FROM sync.replicas WHERE provision"), 0)
finish()
