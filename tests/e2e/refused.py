#!/usr/bin/python3
"""refused.py - a row a replica refused comes back by itself (issue 19 item
6), with magic_sync_agent as a real process and real SQLite files:

  - the app on store 2 guards its products table with a trigger of its own
    that raises for a price over 100; the server raises a price to 150: store
    1 takes it, store 2 refuses it, and says so in its upload;
  - not before it is due: a relay pass sends it nothing, and sync.health
    says when it goes again;
  - when due (the recorded time moved back, as superuser), it goes to store 2
    alone, rebuilt from the current row, and is refused again: the wait
    doubles;
  - the fix is deployed on store 2 (the trigger dropped) and its app's build
    raised (sync_config('app_build', 2): the build its uploads carry, Up
    field 14, changes): the row is sent again at once, and arrives, without
    the server's row changing; refused no more, its count over.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import subprocess
import tempfile

from harness import TOP, Replica, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
S1 = "61616161-0000-4000-8000-000000000001"
S2 = "61616161-0000-4000-8000-000000000002"
tmp = tempfile.mkdtemp(prefix="refused.")
paths = {S1: os.path.join(tmp, "1.db"), S2: os.path.join(tmp, "2.db")}

srv = Server("refused")
srv.exec("""
CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price int NOT NULL);
SELECT sync.mirror('products', 'catalog', 'broadcast');
INSERT INTO products VALUES (1, 'tea', 10), (2, 'coffee', 20), (3, 'cocoa', 30);
""")
for s in (S1, S2):
    srv.exec("SELECT sync.replica_add(%s)", (s,))


def agent(replica):
    """magic_sync_agent --once for one store: its exit code"""
    p = subprocess.run([AGENT, "--server", "dbname=refused", "--replica", replica, "--db", paths[replica],
                        "--once", "--json"], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        print(p.stdout + p.stderr)
    return p.returncode


def store(replica):
    return Replica(srv, replica, paths[replica])


def price(replica, id_):
    r = store(replica)
    v = r.one("SELECT price FROM products WHERE id = ?", (id_,))
    r.close()
    return v


def backoff():
    """times refused, and whether due, of product 2 at store 2"""
    return srv.rows("SELECT r.times, r.due <= now() FROM sync.refused_rows r"
                    " WHERE r.replica = %s AND r.key = sync.key('{2}')", (S2,))


def pending(replica):
    """whether the server wrote it a message it has not acknowledged"""
    return srv.one("SELECT last_number > acked_number FROM sync.replicas WHERE id = %s", (replica,))


srv.relay()                                    # a pass by hand: the snapshots are written
check("both stores are provisioned", [agent(S1), agent(S2)], [0, 0])
check("both hold the coffee at 20", [price(S1, 2), price(S2, 2)], [20, 20])

# the app on store 2 guards its table with a trigger of its own
r = store(S2)
r.q("CREATE TRIGGER app_guard BEFORE UPDATE ON products WHEN NEW.price > 100"
    " BEGIN SELECT RAISE(ABORT, 'this app sells nothing over 100'); END")
r.close()

srv.exec("UPDATE products SET price = 150 WHERE id = 2")
srv.relay()
check("the change is relayed: store 1 takes it, store 2 refuses it", [agent(S1), agent(S2)], [0, 0])
check("store 1 holds 150, store 2 keeps 20", [price(S1, 2), price(S2, 2)], [150, 20])
r = store(S2)
check("store 2 recorded its refusal, with the trigger's reason",
      "over 100" in (r.one("SELECT reason FROM _sync_refused WHERE tbl = 'products'") or ""), True)
r.close()
check("the server knows it refused it", srv.one(
    "SELECT refused IS NOT NULL FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
    " WHERE h.replica = %s AND t.name = 'products' AND h.key = sync.key('{2}')", (S2,)), True)
check("counted once, due in a minute", backoff(), [(1, False)])
health = srv.rows("SELECT replica::text, reason FROM sync.health() WHERE kind = 'rows refused'")
check("sync.health lists it, and when it goes again",
      [(h[0], "sent to it again at" in h[1]) for h in health], [(S2, True)])
notes = srv.one("SELECT count(*) FROM sync.notes")
row_version = srv.one("SELECT xmin::text FROM products WHERE id = 2")

# not before it is due
check("a pass before it is due sends nothing", srv.relay()["rows_sent"], 0)
check("store 2 still keeps 20", (agent(S2), price(S2, 2)), (0, 20))

# due: to store 2 alone, refused again (the trigger is still there), the wait doubles
srv.exec("UPDATE sync.refused_rows SET due = now() - interval '1 second'")
check("when due, it goes to store 2 alone", (srv.relay()["rows_sent"], pending(S1), pending(S2)), (1, False, True))
check("store 2 refuses it again", (agent(S2), price(S2, 2)), (0, 20))
check("refused twice: the wait doubles", srv.one(
    "SELECT (times, date_trunc('second', due - refused_at))::text FROM sync.refused_rows WHERE replica = %s",
    (S2,)), '(2,00:02:00)')

# the fix is deployed on store 2, and its app reports a new build
r = store(S2)
r.q("DROP TRIGGER app_guard")
check("the test knob: the app's build", r.one("SELECT sync_config('app_build', 2)"), 2)
r.close()
check("its next upload says the new build", agent(S2), 0)
build = srv.one("SELECT build FROM sync.replicas WHERE id = %s", (S2,))
check("the server records the build, the app's among it", build is not None and build.endswith(" app 2"), True)
check("its refused row is due at once", backoff(), [(0, True)])
check("sent to store 2 alone", (srv.relay()["rows_sent"], pending(S1), pending(S2)), (1, False, True))
check("it arrives", (agent(S2), price(S2, 2)), (0, 150))
check("without the server's row changing",
      (srv.one("SELECT count(*) FROM sync.notes"), srv.one("SELECT xmin::text FROM products WHERE id = 2")),
      (notes, row_version))
check("taken: refused no more, its count over",
      (srv.one("SELECT count(*) FROM sync.held WHERE refused IS NOT NULL"),
       srv.one("SELECT count(*) FROM sync.refused_rows"),
       srv.one("SELECT count(*) FROM sync.health() WHERE kind = 'rows refused'")), (0, 0, 0))
r = store(S2)
check("store 2 refuses nothing any more", r.one("SELECT count(*) FROM _sync_refused"), 0)
check("and its progress says it holds every row", json.loads(r.one("SELECT sync_progress()")).get("products", {}).get("refused", 0), 0)
r.close()
check("the digests agree: nothing is provisioned again",
      srv.one("SELECT count(*) FROM sync.replicas WHERE provision"), 0)

finish()
