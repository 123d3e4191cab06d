#!/usr/bin/python3
"""reads.py - sync.overview, listing, progress, row_progress and health with
real SQLite replicas (issue 8).  The replicas go through every state as they
really do -- provisioned, applying without having said so, acknowledging,
behind a change, refusing a row, a row that cannot go, not heard from -- and
after every step the reads are checked against the replicas' files: progress
never counts a row the replica does not really hold, and once a replica
acknowledged everything, what it holds is exactly what progress says.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import tempfile
import time

from harness import Replica, Server, check, finish, settle

N1 = "11111111-1111-4111-8111-111111111111"
N2 = "22222222-2222-4222-8222-222222222222"
S1 = "33333333-3333-4333-8333-333333333333"

srv = Server("reads")
srv.exec("""
CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id bigint PRIMARY KEY, store uuid NOT NULL, customer bigint REFERENCES customers);
CREATE TABLE order_lines (order_id bigint REFERENCES orders ON DELETE CASCADE, line int,
                          product bigint NOT NULL REFERENCES products, qty int NOT NULL,
                          PRIMARY KEY (order_id, line));
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('customers', 'catalog');
SELECT sync.mirror('orders', 'catalog', 'assigned(store)');
SELECT sync.mirror('order_lines', 'catalog', 'follows(order_id)');
INSERT INTO products SELECT g, 'product ' || g FROM generate_series(1, 40) g;
INSERT INTO customers SELECT g, 'customer ' || g FROM generate_series(1, 10) g;
""")
srv.exec("INSERT INTO orders VALUES (1, %s, 1), (2, %s, 2), (3, %s, 3), (4, %s, 1)", (N1, N1, N2, S1))
srv.exec("INSERT INTO order_lines VALUES (1, 1, 1, 2), (1, 2, 2, 1), (2, 1, 3, 1), (3, 1, 4, 5), (4, 1, 5, 1)")
for rid, part in ((N1, "north"), (N2, "north"), (S1, "south")):
    srv.exec("SELECT sync.replica_add(%s, %s)", (rid, part))
tmp = tempfile.mkdtemp()
reps = {rid: Replica(srv, rid, os.path.join(tmp, f"{rid[:2]}.db")) for rid in (N1, N2, S1)}
KEYS = {"products": ["id"], "customers": ["id"], "orders": ["id"], "order_lines": ["order_id", "line"]}


def states():
    return dict(srv.rows("SELECT replica::text, state::text FROM sync.listing()"))


def overview_states(**scope):
    o = srv.one("SELECT sync.overview(%s::uuid[], %s)", (scope.get("replicas"), scope.get("partition")))
    return {s: n for s, n in o["states"].items() if n}


def progress(rid):
    cols = ["should", "holds", "outdated", "on_its_way", "set_aside", "lacks", "letting_go", "extra"]
    return {t: dict(zip(cols, rest)) for t, *rest in srv.rows(
        "SELECT t.name, " + ", ".join("p." + c for c in cols) +
        " FROM sync.progress(ARRAY[%s]::uuid[]) p JOIN sync.tables t ON t.relid = p.tab", (rid,))}


def really_holds(rid):
    """What the replica's file holds, per table (refused and retired rows left out)."""
    r = reps[rid]
    return {t: r.keys(t, k) for t, k in KEYS.items()}


def honest(name):
    """progress never runs ahead of the replica: every row the engine counts
    as held (acknowledged), the replica's file holds, and progress counts no
    more; once the replica acknowledged its last message and no change waits
    to be planned, the file holds exactly those rows, and progress counts
    each of them (as held, or held and no longer wanted)."""
    settled = srv.one("SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)")
    # (in the function's search_path: its jsonb names every table with its schema)
    srv.exec("SET search_path = pg_catalog, pg_temp")
    check(f"{name}: overview's tables are sync.overview_tables", srv.one(
        "SELECT sync.overview() -> 'tables' = (SELECT jsonb_agg(to_jsonb(x) - 'now' ORDER BY x.tab::text)"
        " FROM sync.overview_tables() x)"), True)
    srv.exec("RESET search_path")
    for rid, r in reps.items():
        p = progress(rid)
        files = really_holds(rid)
        refused = {}
        for t, k in r.q("SELECT tbl, key FROM _sync_refused"):
            refused.setdefault(t, set()).add(k)
        held = {t: set(k) for t, k in srv.rows(
            "SELECT t.name, array_agg(h.key) FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
            " JOIN sync.replicas r ON r.id = h.replica WHERE h.replica = %s AND h.number <= r.acked_number"
            " AND h.taken IS NULL AND h.refused IS NULL GROUP BY t.name", (rid,))}
        caught = srv.one("SELECT acked_number = last_number FROM sync.replicas WHERE id = %s", (rid,))
        for t in KEYS:
            h = held.get(t, set())
            check(f"{name}: {rid[:2]} {t}: what counts as held, the file holds", h <= files[t], True)
            check(f"{name}: {rid[:2]} {t}: progress counts no more", p[t]["holds"] <= len(h), True)
            if caught and settled:
                check(f"{name}: {rid[:2]} {t}: acknowledged, the file holds exactly that",
                      files[t] - refused.get(t, set()), h)
                check(f"{name}: {rid[:2]} {t}: and progress counts each", p[t]["holds"] + p[t]["extra"], len(h))


# --- provisioning: written, applied, acknowledged ----------------------------
check("added: provisioning", set(states().values()), {"provisioning"})
srv.relay()
check("snapshots written: still provisioning", set(states().values()), {"provisioning"})
check("nothing counts before the replica says it applied it",
      sum(v["holds"] for v in progress(N1).values()), 0)
reps[N1].pull_apply()
check("the replica applied its snapshot: the server cannot know yet", states()[N1], "provisioning")
check("... and counts nothing", sum(v["holds"] for v in progress(N1).values()), 0)
honest("applied, not acknowledged")
reps[N1].upload()
check("acknowledged: caught up", states()[N1], "caught_up")
check("progress: holds all of what it should", {t: (v["holds"], v["should"]) for t, v in progress(N1).items()},
      {"products": (40, 40), "customers": (2, 2), "orders": (2, 2), "order_lines": (3, 3)})
honest("one acknowledged")
settle(srv, list(reps.values()))
check("all caught up", overview_states(), {"caught_up": 3})
check("per table, all caught up",
      srv.rows("SELECT tab::text, caught_up FROM sync.overview_tables() ORDER BY 1"),
      [("customers", 3), ("order_lines", 3), ("orders", 3), ("products", 3)])
honest("settled")
check("healthy", srv.rows("SELECT kind FROM sync.health()"), [])

# --- a change: behind, on its way, applied, acknowledged ---------------------
srv.exec("UPDATE products SET name = 'green tea' WHERE id = 1")
check("a change not planned: every replica behind", overview_states(), {"behind": 3})
check("where the row is: an older version everywhere",
      [a for _, a in srv.rows("SELECT replica, answer FROM sync.row_progress('products', '{1}')")],
      ["holds an older version"] * 3)
check("progress: outdated", progress(N2)["products"]["outdated"], 1)
srv.relay()
check("planned and sent: on its way", overview_states(), {"on_its_way": 3})
reps[N2].pull_apply()
check("applied, not said: still on its way", states()[N2], "on_its_way")
check("the replica has it, progress does not count it yet",
      (reps[N2].one("SELECT name FROM products WHERE id = 1"), progress(N2)["products"]["holds"]),
      ("green tea", 39))
honest("applied, not acknowledged")
reps[N2].upload()
check("acknowledged", states()[N2], "caught_up")
check("listing pages through the others on their way",
      [r for r, in srv.rows("SELECT replica::text FROM sync.listing(state => 'on_its_way', \"limit\" => 1)")]
      + [r for r, in srv.rows("SELECT replica::text FROM sync.listing(state => 'on_its_way', after => %s)", (N1,))],
      [N1, S1])
settle(srv, list(reps.values()))

# --- a new order: the store lacks it and its customer until it goes ----------
srv.exec("INSERT INTO orders VALUES (5, %s, 7)", (S1,))
check("the store lacks the new order", srv.rows("SELECT replica::text, answer FROM sync.row_progress('orders', '{5}')"),
      [(S1, "lacks")])
check("progress: it lacks it and its customer",
      (progress(S1)["orders"]["lacks"], progress(S1)["customers"]["lacks"]), (1, 1))
settle(srv, list(reps.values()))
check("then it holds them", srv.rows("SELECT replica::text, answer FROM sync.row_progress('customers', '{7}')"),
      [(S1, "holds")])
honest("a new order")

# --- an order deleted: letting go until acknowledged -------------------------
srv.exec("DELETE FROM orders WHERE id = 2")
srv.relay()
check("letting go", srv.rows("SELECT replica::text, answer FROM sync.row_progress('orders', '{2}')"),
      [(N1, "letting go")])
check("progress: letting go of it and its line", (progress(N1)["orders"]["letting_go"],
                                                   progress(N1)["order_lines"]["letting_go"]), (1, 1))
settle(srv, list(reps.values()))
check("gone", srv.rows("SELECT replica FROM sync.row_progress('orders', '{2}')"), [])
check("and gone from the file", 2 in {int(k.split(":")[1]) for k in reps[N1].keys("orders", ["id"])}, False)

# --- a row the replica cannot take: refused, set aside -----------------------
reps[N2].q("CREATE TRIGGER local_rule BEFORE UPDATE ON products WHEN NEW.name = 'decaf'"
           " BEGIN SELECT RAISE(ABORT, 'the store does not sell decaf'); END")
srv.exec("UPDATE products SET name = 'decaf' WHERE id = 2")
settle(srv, list(reps.values()))
check("the replica refused it: set aside", states(), {N1: "caught_up", N2: "set_aside", S1: "caught_up"})
check("where the row is", srv.rows("SELECT replica::text, answer FROM sync.row_progress('products', '{2}')"),
      [(N1, "holds"), (N2, "set aside"), (S1, "holds")])
check("progress: set aside", progress(N2)["products"]["set_aside"], 1)
check("health: a fix", [(k, w, r) for k, w, r in srv.rows("SELECT kind, waits_on, replica::text FROM sync.health()")],
      [("rows refused", "a fix", N2)])
honest("a row refused")
reps[N2].q("DROP TRIGGER local_rule")          # the store deploys a fix; the row changes again
srv.exec("UPDATE products SET name = 'decaf, now sold' WHERE id = 2")
settle(srv, list(reps.values()))
check("taken once it changed", (states()[N2], reps[N2].one("SELECT name FROM products WHERE id = 2")),
      ("caught_up", "decaf, now sold"))

# --- a row that cannot go: quarantined; every replica set aside --------------
srv.exec("SET magic_sync.message_bytes = 1024")
srv.exec("UPDATE products SET name = repeat('x', 2000) WHERE id = 3")
settle(srv, list(reps.values()))
check("quarantined: all set aside", overview_states(), {"set_aside": 3})
check("only products is held back", srv.rows("SELECT tab::text FROM sync.overview_tables() WHERE set_aside > 0"),
      [("products",)])
check("the replicas let go of it", [3 in {int(k.split(":")[1]) for k in reps[r].keys("products", ["id"])} for r in reps],
      [False] * 3)
check("where it is: set aside everywhere",
      [a for _, a in srv.rows("SELECT replica, answer FROM sync.row_progress('products', '{3}')")], ["set aside"] * 3)
check("health: a fix", srv.rows("SELECT kind, waits_on FROM sync.health()"), [("rows quarantined", "a fix")])
honest("quarantined")
srv.exec("RESET magic_sync.message_bytes")
srv.exec("SELECT sync.quarantine_retry()")
settle(srv, list(reps.values()))
check("the fix lets it through", overview_states(), {"caught_up": 3})
honest("quarantine released")

# --- not heard from: unreachable; a scope sees its own -----------------------
# a replica with nothing to say files its digests when due (hourly): here, every second
for r in reps.values():
    r.q("SELECT sync_config('digest_interval', 1)")
srv.exec("SET magic_sync.unreachable_after = '1s'")
time.sleep(1.2)
reps[N1].sync()
reps[N2].sync()
check("the south store, not heard from: unreachable", states()[S1], "unreachable")
check("health: wait", srv.rows("SELECT kind, waits_on, replica::text FROM sync.health()"),
      [("unreachable", "infrastructure", S1)])
check("the north's overview does not see it", overview_states(partition="north"), {"caught_up": 2})
check("nor one of its replicas'", overview_states(replicas=[N1]), {"caught_up": 1})
reps[S1].sync()
check("heard from again", states()[S1], "caught_up")
for r in reps.values():
    r.q("SELECT sync_config('digest_interval', 3600)")
srv.exec("RESET magic_sync.unreachable_after")

# --- overview reads one snapshot and carries now ------------------------------
o = srv.one("SELECT sync.overview()")
check("overview: replicas, states, worst, tables", (o["replicas"], sum(o["states"].values()), len(o["worst"]),
                                                     len(o["tables"])), (3, 3, 3, 4))
check("overview carries the server's now", srv.one("SELECT sync.overview() ->> 'now' = to_jsonb(now()) ->> 0"), True)
finish()
