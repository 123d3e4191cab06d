#!/usr/bin/python3
"""upgrade.py - the upgrade path, kept honest (issue 17).  The extension is
created as 0.1 was shipped (sql/magic_sync--0.1.sql, frozen) and filled as a
server in use is: mirrored tables, two replicas holding rows, messages in the
outbox not yet acknowledged, a sale filed.  ALTER EXTENSION magic_sync UPDATE
must then leave exactly what a fresh install of the newest version makes:
pg_dump --schema-only of schema sync, the extension's members, its
configuration tables.  And the replicas sync across it without being
provisioned again.

A difference means sql/magic_sync--0.1--0.2.sql misses a change made to the
parts in src/pg/sql (or makes one they do not): the diff says which.  Note
that the 0.1 catalog is filled by this build's library, as it is on a server
whose package was upgraded before ALTER EXTENSION ran.

Run by tests/e2e/run (inside pg_virtualenv)."""
import difflib
import os
import re
import subprocess
import tempfile

from harness import Replica, Server, check, finish, settle

S1 = "aaaaaaaa-1111-4111-8111-111111111111"
S2 = "bbbbbbbb-2222-4222-8222-222222222222"
tmp = tempfile.mkdtemp()
NEWEST = "0.2"


def same_text(name, got, expected):
    """check() for long texts: a difference is shown as a unified diff."""
    diff = list(difflib.unified_diff(expected.splitlines(), got.splitlines(),
                                     f"a fresh {NEWEST}", "0.1 updated", lineterm="", n=2))
    if diff:
        print(f"FAIL {name}: the updated 0.1 differs from a fresh {NEWEST}"
              " (missing from sql/magic_sync--0.1--0.2.sql, or not as the parts make it):")
        print("\n".join(diff[:400]))
    check(name, len(diff), 0)


def schema_dump(db):
    """pg_dump --schema-only of schema sync, its objects as the extension's
    members: --binary-upgrade is the mode that dumps them (each with its ALTER
    EXTENSION ... ADD and its initial privileges), and only of a whole
    database, so the entries of other schemas are left out here.  So is what
    only names this cluster's objects: oids, transaction ids, sequence
    positions, the dump's key."""
    out = subprocess.run(["pg_dump", "--schema-only", "--binary-upgrade", db],
                         check=True, capture_output=True, text=True).stdout
    kept = []
    for e in re.split(r"\n(?=--\n-- Name: )", out)[1:]:
        m = re.match(r"--\n-- Name: (.*?); Type: (.*?); Schema: (.*?); Owner:", e)
        if m is None:
            continue
        name, kind, schema = m.groups()
        if schema == "sync" or name in ("sync", "SCHEMA sync", "magic_sync", "EXTENSION magic_sync"):
            kept.append("\n".join(line for line in e.splitlines() if not re.search(
                r"binary_upgrade_set_next_|pg_catalog\.setval\(|binary_upgrade_create_empty_extension"
                r"|^\\(un)?restrict |^SET relfrozenxid = |^WHERE oid = '[0-9]+';$", line)))
    return "\n".join(kept) + "\n"


def members(srv):
    """The extension's members, and which of its tables pg_dump keeps the data of."""
    objs = [o for (o,) in srv.rows(
        "SELECT pg_describe_object(classid, objid, objsubid) FROM pg_depend"
        " WHERE deptype = 'e' AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'magic_sync')"
        " ORDER BY 1")]
    config = [f"configuration table {t} {c!r}" for t, c in srv.rows(
        "SELECT c::regclass::text, coalesce(w, '') FROM pg_extension,"
        " unnest(extconfig, extcondition) AS x(c, w) WHERE extname = 'magic_sync' ORDER BY 1")]
    return "\n".join(objs + config) + "\n"


def shop(srv):
    srv.exec("""
    CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL);
    CREATE TABLE orders (id bigint PRIMARY KEY, store uuid NOT NULL, product bigint NOT NULL REFERENCES products);
    CREATE TABLE order_lines (order_id bigint NOT NULL REFERENCES orders, line int NOT NULL, qty int NOT NULL,
                              PRIMARY KEY (order_id, line));
    CREATE TABLE sales (store uuid, id int, total int NOT NULL, PRIMARY KEY (store, id));
    SELECT sync.mirror('products', 'catalog', 'broadcast');
    SELECT sync.mirror('orders', 'catalog', 'assigned(store)');
    SELECT sync.mirror('order_lines', 'catalog', 'follows(order_id)');
    SELECT sync.mirror('sales', 'record', origin => 'store');
    INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, 20) g;
    """)
    srv.exec("INSERT INTO orders VALUES (1, %s, 1), (2, %s, 2)", (S1, S2))
    srv.exec("INSERT INTO order_lines VALUES (1, 1, 3), (2, 1, 4)")
    srv.exec("SELECT sync.replica_add(%s)", (S1,))
    srv.exec("SELECT sync.replica_add(%s)", (S2,))


def holds_what_it_should(name, srv, replica):
    w = srv.wanted(replica.id)
    got = {
        "products": replica.keys("products", ["id"]),
        "orders": replica.keys("orders", ["id"]),
        "order_lines": replica.keys("order_lines", ["order_id", "line"]),
        "sales": replica.keys("sales", ["store", "id"]),
    }
    check(f"{name}: {replica.id[:8]} holds its wanted set", got, {t: w.get(t, set()) for t in got})
    check(f"{name}: {replica.id[:8]} has the server's rows",
          dict(replica.q("SELECT id, name FROM products")), dict(srv.rows("SELECT id, name FROM products")))


# --- 0.1 as shipped, in use ----------------------------------------------------
srv = Server("shop")
# Server() created the newest version: the shipped one instead
srv.exec("DROP EXTENSION magic_sync")
srv.exec("CREATE EXTENSION magic_sync VERSION '0.1'")
check("the shipped version is created", srv.one("SELECT extversion FROM pg_extension WHERE extname = 'magic_sync'"), "0.1")
shop(srv)
r1 = Replica(srv, S1, os.path.join(tmp, "s1.db"))
r2 = Replica(srv, S2, os.path.join(tmp, "s2.db"))
settle(srv, [r1, r2])
r1.q("INSERT INTO sales VALUES (?, 1, 10)", (S1,))
settle(srv, [r1, r2])
check("under 0.1, the sale was filed", srv.one("SELECT total FROM sales WHERE store = %s AND id = 1", (S1,)), 10)
holds_what_it_should("under 0.1", srv, r1)
# messages recorded and not yet acknowledged go across the upgrade
srv.exec("UPDATE products SET name = 'renamed under 0.1' WHERE id = 3")
did = srv.relay()
check("under 0.1, a pass recorded a message", did["messages"] > 0, True)
waiting = srv.one("SELECT count(*) FROM sync.outbox o JOIN sync.replicas r ON r.id = o.replica"
                  " WHERE NOT o.dropped AND o.number > r.acked_number")
check("the outbox holds messages not yet acknowledged", waiting >= 2, True)
snapshots = dict(srv.rows("SELECT id::text, snapshot_number FROM sync.replicas"))
epochs = srv.one("SELECT count(*) FROM sync.epoch")

# --- ALTER EXTENSION magic_sync UPDATE -------------------------------------------
srv.exec("ALTER EXTENSION magic_sync UPDATE")
check("updated to the newest version", srv.one("SELECT extversion FROM pg_extension WHERE extname = 'magic_sync'"),
      NEWEST)
fresh = Server("fresh")
check("a fresh install is the newest version",
      fresh.one("SELECT extversion FROM pg_extension WHERE extname = 'magic_sync'"), NEWEST)
dumped = schema_dump("fresh")
check("the dump holds the extension's objects", "CREATE TABLE sync.outbox" in dumped and
      "ALTER EXTENSION magic_sync ADD FUNCTION sync.pull" in dumped, True)
same_text("pg_dump --schema-only of schema sync", schema_dump("shop"), dumped)
same_text("the extension's members and configuration tables", members(srv), members(fresh))

# --- across the upgrade: no replica is provisioned again ------------------------------
srv.exec("UPDATE products SET name = 'renamed under the update' WHERE id = 4")
srv.exec("INSERT INTO orders VALUES (3, %s, 5)", (S2,))
did = srv.relay()
check("the first pass after the update provisions nobody", did["provisioned"], 0)
applied = r1.pull_apply()
check("a replica pulls what was recorded before the update and after it",
      [a["result"] for a in applied], ["applied"] * len(applied))
check("two messages at least: one from 0.1, one after the update", len(applied) >= 2, True)
check("the replica took both changes",
      r1.q("SELECT id, name FROM products WHERE id IN (3, 4) ORDER BY id"),
      [(3, "renamed under 0.1"), (4, "renamed under the update")])
r2.q("INSERT INTO sales VALUES (?, 1, 20)", (S2,))
settle(srv, [r1, r2])
check("the sale written after the update was filed",
      srv.one("SELECT total FROM sales WHERE store = %s AND id = 1", (S2,)), 20)
check("no replica was provisioned again",
      dict(srv.rows("SELECT id::text, snapshot_number FROM sync.replicas")), snapshots)
check("no epoch began", srv.one("SELECT count(*) FROM sync.epoch"), epochs)
check("nothing provisions or errs",
      srv.rows("SELECT id::text, provision, last_error FROM sync.replicas WHERE provision OR last_error IS NOT NULL"), [])
holds_what_it_should("after the update", srv, r1)
holds_what_it_should("after the update", srv, r2)

# --- a replica 0.1 provisioned meeting a schema change it was never sent: provisioned
# again, saying why.  The first pass after the update listed what each replica holds
# (sync.replica_tables); one it has not listed yet (a schema changed before that pass)
# is made so by forgetting r1's list.
srv.exec("DELETE FROM sync.replica_tables WHERE replica = %s", (r1.id,))
srv.exec("ALTER TABLE products ADD COLUMN note text")
srv.relay()
check("a replica 0.1 provisioned is provisioned again for a schema change, and says why",
      [(i == r1.id, "predates schema changes" in (e or ""))
       for i, e in srv.rows("SELECT id::text, last_error FROM sync.replicas ORDER BY id")],
      [(True, True), (False, False)])                     # S1 sorts first
settle(srv, [r1, r2])
holds_what_it_should("after the schema change", srv, r1)
finish()
