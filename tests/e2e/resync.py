#!/usr/bin/python3
"""resync.py - a device asks to re-sync everything (sync_resync(), issue 40):
its copy drifted behind the engine's back (a row deleted, a value changed,
with its triggers dropped), and it holds a record it has not sent.  It asks;
its next upload says a gap after its last message, the server provisions it
again, and the snapshot brings back what drifted while the record it had not
sent is kept and filed.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import tempfile

from harness import Replica, Server, check, finish, settle

S1 = "51515151-1111-4111-8111-111111111111"

srv = Server("resync")
srv.exec("""
CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE visits (store uuid, id int, note text NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('visits', 'record', 'broadcast', origin => 'store');
INSERT INTO products VALUES (1, 'tea'), (2, 'coffee'), (3, 'cocoa');
""")
srv.exec("SELECT sync.replica_add(%s)", (S1,))
r1 = Replica(srv, S1, os.path.join(tempfile.mkdtemp(), "s1.db"))
check("nothing applied yet: nothing to ask", r1.one("SELECT sync_resync()"), 0)
settle(srv, [r1])
check("provisioned", r1.q("SELECT id, name FROM products ORDER BY id"), [(1, "tea"), (2, "coffee"), (3, "cocoa")])

# drift behind the engine's back: its triggers gone, a row deleted, a value changed
for (name,) in r1.q("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'products'"):
    r1.q(f'DROP TRIGGER "{name}"')
r1.q("DELETE FROM products WHERE id = 2")
r1.q("UPDATE products SET name = 'not tea' WHERE id = 1")
check("nothing of it goes up", r1.upload(), None)
# and a record of its own it has not sent
r1.q("INSERT INTO visits VALUES (?, 5, 'kept')", (S1,))

check("the device asks to re-sync everything", r1.one("SELECT sync_resync()"), 1)
check("asked once: a second call finds the gap open", r1.one("SELECT sync_resync()"), 0)
filed = r1.upload()
check("its upload carries the record", filed["filed"], 1)
check("and the server provisions it again", srv.one("SELECT provision FROM sync.replicas WHERE id = %s", (S1,)), True)
settle(srv, [r1])
check("the snapshot brings back what drifted",
      r1.q("SELECT id, name FROM products ORDER BY id"), [(1, "tea"), (2, "coffee"), (3, "cocoa")])
check("the record it had not sent is kept on the device",
      r1.q("SELECT note FROM visits WHERE store = ? AND id = 5", (S1,)), [("kept",)])
check("and filed on the server", srv.one("SELECT note FROM visits WHERE store = %s AND id = 5", (S1,)), "kept")
check("the gap is closed", r1.status()["gap"], 0)
check("it holds what it should", srv.held(S1), srv.wanted(S1))
finish()
