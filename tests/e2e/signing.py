#!/usr/bin/python3
"""signing.py - a replica believes only its server (issue 38.4, docs/protocol.md
2.4), with magic_sync_agent as a real process:

  - a new file learns the server's key over the agent's connection, before it
    applies anything (a `trust` line), and every message it is sent verifies
    under it; a file of an earlier build (no key) learns it at its next pull;
  - a message changed in the outbox (its row, under its signature) is refused
    by sync_apply, saying why: the replica's rows stay the server's, and once
    the outbox holds the server's bytes again it applies;
  - a server installed anew (another key): the agent applies nothing, stops
    (exit 78) and says how to pin the new key; with --server-key it pins it,
    and the new installation provisions the replica;
  - the Filed answers the agent pulls are signed too: rows it wrote are let go
    of once the server's answer comes, and are at the server.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import subprocess
import tempfile

from harness import TOP, Replica, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
S1 = "5151e000-0000-4000-8000-000000000001"
S2 = "5151e000-0000-4000-8000-000000000002"
tmp = tempfile.mkdtemp(prefix="signing.")
paths = {S1: os.path.join(tmp, "1.db"), S2: os.path.join(tmp, "2.db")}
SCHEMA = """
CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price int NOT NULL);
CREATE TABLE sales (store uuid, id int, product int NOT NULL REFERENCES products, total int NOT NULL,
                    v bigint NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('sales', 'record', origin => 'store', version => 'v');
INSERT INTO products SELECT g, 'p' || g, 10 * g FROM generate_series(1, 5) g;
"""
srv = Server("signing")
srv.exec(SCHEMA)
for s in (S1, S2):
    srv.exec("SELECT sync.replica_add(%s)", (s,))


def agent(replica, *extra):
    """magic_sync_agent --once --json for one store: its exit code and its JSON lines"""
    p = subprocess.run([AGENT, "--server", "dbname=signing", "--replica", replica, "--db", paths[replica], "--once",
                        "--json"] + list(extra), capture_output=True, text=True, timeout=180)
    lines = []
    for line in p.stdout.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            pass
    return p.returncode, lines


def key():
    return srv.one("SELECT encode(sync.signing_key(), 'hex')")


def trusted(replica):
    r = Replica(srv, replica, paths[replica])
    k = r.one("SELECT sync_trust_key()")
    r.close()
    return k


def prices(replica):
    r = Replica(srv, replica, paths[replica])
    out = dict(r.q("SELECT id, price FROM products ORDER BY id"))
    r.close()
    return out


# a new file learns the key over the connection, before it applies anything
srv.relay()
check("every message the server wrote for it is signed, and verifies under the server's key",
      srv.one("SELECT bool_and((sync.inspect(message) ->> 'signed')::boolean) FROM sync.pull(%s, 0)", (S1,)), True)
rc, lines = agent(S1)
check("the agent settles", rc, 0)
trust = [x for x in lines if x.get("event") == "trust"]
check("it says it trusts the server's key, learnt over its connection",
      [(x.get("key"), "connection" in x.get("how", "")) for x in trust], [(key(), True)])
applying = next((i for i, x in enumerate(lines) if x.get("event") in ("snapshot", "round")), None)
check("before anything applied", bool(trust) and applying is not None and lines.index(trust[0]) < applying, True)
check("the file pins it", trusted(S1), key())
check("it holds the catalog", prices(S1), {g: 10 * g for g in range(1, 6)})

# a file of an earlier build: provisioned with no key (sync_apply alone), it learns it at its next pull
r2 = Replica(srv, S2, paths[S2])
r2.sync()
check("a file provisioned without the agent trusts no key", r2.one("SELECT sync_trust_key()"), None)
r2.close()
srv.exec("UPDATE products SET price = 11 WHERE id = 1")
srv.relay()
rc, lines = agent(S2)
check("its agent's next pull pins the key", (rc, trusted(S2)), (0, key()))
check("and the first store takes the change too", (agent(S1)[0], prices(S1)[1]), (0, 11))

# a message changed in the outbox, under its signature: refused, saying why, nothing applied
srv.exec("UPDATE products SET price = 12 WHERE id = 1")
srv.relay()
number, body = srv.rows("SELECT number, body FROM sync.outbox WHERE replica = %s ORDER BY number DESC LIMIT 1",
                        (S1,))[0]
good = bytes(srv.one("SELECT bytes FROM sync.bodies WHERE id = %s", (body,)))
srv.exec("UPDATE sync.bodies SET bytes = %s WHERE id = %s", (good.replace(b'"price":12', b'"price":99'), body))
before = prices(S1)
rc, lines = agent(S1)
errors = [x.get("error", "") for x in lines if x.get("event") == "error"]
check("the agent does not settle on a message its server did not sign", rc, 70)
check("and says why", any("does not verify" in e for e in errors), True)
check("the file is as it was", prices(S1), before)
srv.exec("UPDATE sync.bodies SET bytes = %s WHERE id = %s", (good, body))
rc, lines = agent(S1)
check("the server's own bytes apply", (rc, prices(S1)[1]), (0, 12))

# the answers are signed too: the store's sales are let go of once filed
r1 = Replica(srv, S1, paths[S1])
for i in range(3):
    r1.q("INSERT INTO sales VALUES (?, ?, 1, 5, 1)", (S1, i + 1))
r1.close()
rc, lines = agent(S1)
r1 = Replica(srv, S1, paths[S1])
check("its sales are filed, and let go of on the server's signed answer",
      (rc, srv.one("SELECT count(*) FROM sales WHERE store = %s", (S1,)), r1.one("SELECT count(*) FROM _sync_notes")),
      (0, 3, 0))
r1.close()

# a server installed anew: another key; the agent applies nothing and says how to pin it
old = key()
srv.exec("DROP EXTENSION magic_sync CASCADE")
srv.exec("DROP TABLE sales, products")
srv.exec("CREATE EXTENSION magic_sync")
# numbered beyond what the replica applied of the old installation: pulls ask for
# what comes after it (a new installation numbering below it is not this test's)
srv.exec("SELECT setval('sync.message_seq', 1000)")
srv.exec(SCHEMA)
srv.exec("UPDATE products SET price = 7 WHERE id = 2")
for s in (S1, S2):
    srv.exec("SELECT sync.replica_add(%s)", (s,))
srv.relay()
new = key()
check("the new installation has another key", new != old and new is not None, True)
before = prices(S1)
rc, lines = agent(S1)
errors = [x.get("error", "") for x in lines if x.get("event") == "error"]
check("the agent stops: the server signs with another key (exit 78)", rc, 78)
check("saying how to pin it", any(f"--server-key {new}" in e for e in errors), True)
check("nothing of the new server applied", (prices(S1), trusted(S1)), (before, old))
rc, lines = agent(S1, "--server-key", new)
check("pinned by an operator", (rc, trusted(S1)), (0, new))
# it said where it was, a message of the old installation: the next pass provisions it again
srv.relay()
rc, lines = agent(S1)
check("the new installation provisions it", (rc, prices(S1)[2]), (0, 7))
rc, lines = agent(S2, "--server-key", "00" * 32)
check("a --server-key the server does not sign with: exit 78", (rc, trusted(S2)), (78, "00" * 32))
finish()
