#!/usr/bin/python3
"""values_settings.py - a values digest does not depend on the settings of
the session that files it, and one replica's false digests cost the server
one repair at a time (docs/protocol.md 8).

  - The replica's role files with another TimeZone, extra_float_digits and
    IntervalStyle than the relay's session: timestamptz, float8 and interval
    columns are compared as the relay sends them (both pin the settings
    output functions read), so the digests match round after round and
    nothing is sent again.
  - One replica's weight: a false values digest starts a repair of the
    table; another right after it, while the rows are on their way, is not
    compared (the table is not read) and starts none; once they are
    acknowledged, none is started again within
    magic_sync.values_repair_interval either, nor the table read.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import re
import tempfile
import uuid

import wire

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

# ---- one replica's weight: false values digests ------------------------------


def lie(values=True):
    """an upload whose digest of readings has the right keys and false values (or none:
    a build before values digests); what the filing said, and the rows its values digests read"""
    d = r.digest()["readings"]
    body = (wire.field(1, 1) + wire.field(2, uuid.UUID(S1).bytes) + wire.field(3, os.urandom(16))
            + wire.field(4, r.applied()))
    body += wire.field(7, wire.field(1, "readings") + wire.field(2, d["count"]) + wire.fixed64(3, int(d["fnv"], 16))
                       + (wire.field(4, os.urandom(8)) if values else b""))
    body += wire.field(11, wire.now_seq())
    del store.conn.notices[:]
    store.exec("SET client_min_messages = debug1")
    try:
        filed = store.file(S1, wire.checked(body))
    finally:
        store.exec("SET client_min_messages = error")
    # values.c says each comparison and the rows it read
    reads = sum(int(re.search(r": (\d+) rows read", n).group(1)) for n in store.conn.notices
                if 'values of table "readings" compared' in n)
    return filed["digests"] if filed else None, reads


said, reads = lie(values=False)
check("keys alone: they match", said, "match")
check("keys alone: the values are not read", reads, 0)
said, reads = lie()
check("a false values digest starts a repair of the table", said, "values differ: rows sent again")
check("which read the table", reads, 10)
check("its rows are marked to go again", due(), 10)
said, reads = lie()
check("another right after it is not compared", said, "not compared: rows of a values repair are on their way")
check("and reads nothing of the table", reads, 0)
check("nor marks anything more", srv.one(
    "SELECT count(*) FROM sync.refused_rows WHERE replica = %s AND due IS NOT NULL", (S1,)), 10)
settle(srv, [r])
check("the repair is acknowledged", srv.one(
    "SELECT count(*) FROM sync.held WHERE replica = %s AND refused IS NOT NULL", (S1,)), 0)
matched = srv.one("SELECT digests_at FROM sync.replicas WHERE id = %s", (S1,))
said, reads = lie()
check("within magic_sync.values_repair_interval the values are not compared", said,
      "keys match; values not compared: repaired less than magic_sync.values_repair_interval ago")
check("nor the table read", reads, 0)
check("nor anything marked", due(), 0)
check("nor a match recorded", srv.one("SELECT digests_at FROM sync.replicas WHERE id = %s", (S1,)), matched)
# after the interval (0 here: a new session of the role), a false digest repairs again
srv.exec("ALTER ROLE vs_store SET magic_sync.values_repair_interval = 0")
store = Server("values_settings", create=False, user="vs_store", password="store-pw")
r.server = store
said, reads = lie()
check("after the interval a false digest is compared again", said, "values differ: rows sent again")
check("and reads the table", reads, 10)
settle(srv, [r])
check("the honest digest matches", digest_round(), "match")
finish()
