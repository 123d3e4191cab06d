#!/usr/bin/python3
"""values_settings.py - a values digest does not depend on the settings of
the session that files it, and one replica's false digests cost the server
one repair at a time (docs/protocol.md 8).

  - The replica's role files with another TimeZone, extra_float_digits and
    IntervalStyle than the relay's session: timestamptz, float8 and interval
    columns are compared as the relay sends them (both pin the settings
    output functions read), so the digests match round after round and
    nothing is sent again.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import tempfile

from harness import Replica, Server, check, finish, settle

S1 = "21111111-1111-4111-8111-111111111111"
tmp = tempfile.mkdtemp()

srv = Server("values_settings")
srv.exec("CREATE ROLE vs_owner LOGIN PASSWORD 'owner-pw' IN ROLE sync_admin")
srv.exec("CREATE ROLE vs_store LOGIN PASSWORD 'store-pw'")
srv.exec("GRANT CREATE ON SCHEMA public TO vs_owner")
owner = Server("values_settings", create=False, user="vs_owner", password="owner-pw")
owner.exec("""
CREATE TABLE readings (id int PRIMARY KEY, at timestamptz, v float8, took interval);
SELECT sync.mirror('readings', 'catalog', 'broadcast');
INSERT INTO readings SELECT g, '2024-01-02 03:04:05.5+02'::timestamptz + g * interval '1 hour',
                            g / 3.0, g * interval '1 day 2 hours 3.25 seconds'
  FROM generate_series(1, 10) g;
""")
srv.exec("SELECT sync.replica_add(%s)", (S1,))
srv.exec("UPDATE sync.replicas SET role = 'vs_store' WHERE id = %s", (S1,))
store = Server("values_settings", create=False, user="vs_store", password="store-pw")
r = Replica(store, S1, os.path.join(tmp, "1.db"))
settle(srv, [r])
check("the replica is provisioned", r.one("SELECT count(*) FROM readings"), 10)
snapshot = srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (S1,))


def digest_round():
    r.q("UPDATE _sync_state SET digest_due = 1 WHERE id = 1")
    filed = r.upload()
    return filed["digests"] if filed else None


def due():
    return srv.one("SELECT count(*) FROM sync.refused_rows WHERE replica = %s", (S1,))


check("the first digests match", digest_round(), "match")
# the filing session of this replica's role formats otherwise than the relay's
store.exec("SET TimeZone = 'America/New_York'")
store.exec("SET extra_float_digits = 0")
store.exec("SET IntervalStyle = 'sql_standard'")
srv.exec("SET TimeZone = 'Asia/Kolkata'")
for i in range(3):
    check(f"round {i + 1}: the digests still match, whatever the filing session's settings",
          digest_round(), "match")
    check(f"round {i + 1}: nothing is marked to send again", due(), 0)
    settle(srv, [r])
check("nothing is provisioned again", srv.one(
    "SELECT provision OR snapshot_number IS DISTINCT FROM %s FROM sync.replicas WHERE id = %s", (snapshot, S1)), False)
finish()
