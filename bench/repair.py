#!/usr/bin/python3
"""What a repair costs, by range against by snapshot (issue 40).  Not a test:
prints figures.

One replica holding ROWS rows of a broadcast catalog (about 70 bytes of JSON
a row).  The baseline is a snapshot of it: sync.replica_reprovision, what the
replica pulls and uploads until it is caught up.  Each repair is counted from
the fault until the replica's digest matches (every upload carrying its
digests: digest_interval 0), in bytes down (messages and answers pulled),
bytes up (uploads) and rows applied; snapshots taken are counted too.

  lost     one message of LOST rows changed is lost: the next (10 rows)
           opens a gap.  Target: rows applied <= 2 x the lost message's.
  drift    one row of the replica's deleted behind the engine's back.
           Target: bytes <= 1 % of a snapshot's.
  value    one value of one row of the replica's changed behind the engine's
           back (its keys agree: its values digest differs, narrowed down by
           ranges of values hashes).  Target: bytes <= 1 % of a snapshot's.
  restore  the replica's file restored from a copy in which 1 % of rows are
           older (changed on the server since the copy).  Target: bytes
           <= 5 % of a snapshot's.

  snaplost the replica provisioned again, and one message in the middle of
           its snapshot lost: the next opens a gap.  Target: bytes <= 1.1 x a
           snapshot's (the snapshot goes on, the lost message again: not a
           second snapshot).
  smallkey a small table beside (SMALL rows, short keys: most share one bucket)
           one row of it deleted behind the engine's back.  Target: bytes
           <= 1 % of a snapshot's (not a snapshot of the replica).

Beyond the targets, what the tree of ranges costs when it must find many
rows: drift1% (1 % of the rows deleted behind the engine's back), and
restore+del (a copy 1 % older, 0.1 % of rows since deleted on the server).

  bench/run repair.py [ROWS]      (default 100000)
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from harness import Replica, Server, settle  # noqa: E402

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
LOST = 1000
SMALL = 40
S1 = "70707070-1111-4111-8111-111111111111"


class Counted(Replica):
    """A replica whose traffic is counted: bytes down and up, rows applied."""

    def reset(self):
        self.down = self.up = self.rows = 0

    def apply(self, message):
        self.down += len(message)
        r = super().apply(message)
        self.rows += r.get("upserts", 0) + r.get("deletes", 0) + r.get("let_go", 0)
        return r

    def upload(self):
        up = self.one("SELECT sync_upload()")
        if up is None:
            return None
        self.up += len(up)
        return self.server.file(self.id, bytes(up))


srv = Server("bench_repair")
srv.exec(f"""
CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL, price numeric(10,2) NOT NULL,
                       stock int NOT NULL, note text NOT NULL);
SELECT sync.mirror('products', 'catalog', 'broadcast');
INSERT INTO products SELECT g, 'product ' || g, (g % 1000) / 10.0, g % 97, md5(g::text)
  FROM generate_series(1, {ROWS}) g;
CREATE TABLE shelves (id int PRIMARY KEY, name text NOT NULL);
SELECT sync.mirror('shelves', 'catalog', 'broadcast');
INSERT INTO shelves SELECT g, 'shelf ' || g FROM generate_series(1, {SMALL}) g;
""")
srv.exec("SELECT sync.replica_add(%s)", (S1,))
r = Counted(srv, S1, os.path.join(tempfile.mkdtemp(), "r.db"))
r.reset()
settle(srv, [r])
r.q("SELECT sync_config('digest_interval', 0)")
# a values repair's table compared again at once, so that its digest can say "match"
srv.exec("SET magic_sync.values_repair_interval = 0")
settle(srv, [r])


def snapshots():
    return srv.one("SELECT coalesce(snapshot_number, 0) FROM sync.replicas WHERE id = %s", (S1,))


def table_reads():
    """the rows of products read so far: by sequential scans and fetched by index"""
    srv.exec("SELECT pg_stat_force_next_flush()")
    srv.exec("SELECT pg_stat_clear_snapshot()")
    return srv.one("SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables"
                   " WHERE relid = 'products'::regclass")


def backend_cpu_ms():
    with open(f"/proc/{srv.one('SELECT pg_backend_pid()')}/schedstat") as f:
        return int(f.read().split()[0]) / 1e6


def until_match(rounds=12):
    for _ in range(rounds):
        filed = r.upload()
        srv.relay()
        r.pull_apply()
        if filed and filed.get("digests") == "match":
            return True
    return False


def snapshot_run():
    r.reset()
    srv.exec("SELECT sync.replica_reprovision(%s)", (S1,))
    settle(srv, [r])
    until_match()
    return r.down, r.up, r.rows


base_down, base_up, base_rows = snapshot_run()
base = base_down + base_up
print(f"rows held: {ROWS}; load average {os.getloadavg()[0]:.2f}")
print(f"snapshot:  {base_down:>10} bytes down {base_up:>8} up {base_rows:>7} rows applied")


def report(name, snaps_before, ok, figure, target, unit):
    took = snapshots() - snaps_before
    total = r.down + r.up
    print(f"{name:11s} {r.down:>10} bytes down {r.up:>8} up {r.rows:>7} rows applied;"
          f" {total / base * 100:6.3f} % of the snapshot's bytes, {r.rows / base_rows * 100:6.3f} % of its rows;"
          f" snapshots taken: {'yes' if took else 'none'}; digest matches: {ok}")
    print(f"          {unit}: {figure:.3f} (target <= {target}) -> {'met' if figure <= target else 'NOT met'}")


# ---- lost: one message lost, the next opens a gap ------------------------------
settle(srv, [r])
snaps = snapshots()
srv.exec(f"UPDATE products SET stock = stock + 1 WHERE id <= {LOST}")
srv.relay()
srv.exec(f"UPDATE products SET stock = stock + 1 WHERE id BETWEEN {ROWS // 2 + 1} AND {ROWS // 2 + 10}")
srv.relay()
msgs = srv.pull(S1, r.status()["applied"], 1 << 26, r.applied())
r.reset()
res = r.apply(bytes(msgs[-1][1]))
assert res["result"] == "gap", res
ok = until_match()
report("lost", snaps, ok, r.rows / LOST, 2, "rows applied / the lost message's rows")

# ---- drift: one row deleted behind the engine's back ---------------------------
settle(srv, [r])
snaps = snapshots()
for (name,) in r.q("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'products'"):
    r.q(f'DROP TRIGGER "{name}"')
r.q("DELETE FROM products WHERE id = 4242")
r.reset()
ok = until_match()
report("drift", snaps, ok, (r.down + r.up) / base * 100, 1, "% of a snapshot's bytes")

# ---- value: one value changed behind the engine's back -------------------------
settle(srv, [r])
snaps = snapshots()
for (name,) in r.q("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'products'"):
    r.q(f'DROP TRIGGER "{name}"')
r.q("UPDATE products SET note = 'drifted' WHERE id = 4343")
r.reset()
# What the server reads of the table until the row is found: its values digest, then
# each round of the question.  With values_repair_interval as it ships, a question
# started rests the table's values digest, so its rounds alone read it; the final
# "match" is compared with the interval 0 again.
srv.exec("RESET magic_sync.values_repair_interval")
read0, cpu0 = table_reads(), backend_cpu_ms()
for rounds in range(1, 13):
    r.upload()
    srv.relay()
    r.pull_apply()
    if r.rows > 0 and not srv.one("SELECT count(*) FROM sync.ranges WHERE replica = %s AND split >= 0", (S1,)):
        break
read, cpu = table_reads() - read0, backend_cpu_ms() - cpu0
srv.exec("SET magic_sync.values_repair_interval = 0")
ok = until_match()
report("value", snaps, ok, (r.down + r.up) / base * 100, 1, "% of a snapshot's bytes")
print(f"          server: {read} rows of the table read ({read / ROWS:.3f} x its rows) and {cpu:.0f} ms"
      f" of its backend's CPU in {rounds} uploads until the row was sent")

# ---- restore: a copy in which 1 % of rows are older ----------------------------
settle(srv, [r])
copy = os.path.join(tempfile.mkdtemp(), "copy.db")
r.q("VACUUM INTO ?", (copy,))
srv.exec(f"UPDATE products SET price = price + 1 WHERE id % 100 = 7")
settle(srv, [r])
snaps = snapshots()
r.close()
os.replace(copy, r.path)
r.open()
r.reset()
ok = until_match()
report("restore", snaps, ok, (r.down + r.up) / base * 100, 5, "% of a snapshot's bytes")

# ---- snaplost: a message in the middle of a snapshot lost -----------------------
settle(srv, [r])
srv.exec("SELECT sync.replica_reprovision(%s)", (S1,))
srv.relay()
snaps = snapshots()
msgs = [m for m in srv.pull(S1, r.status()["applied"], 1 << 30, r.applied()) if m[0]]
r.reset()
for i, (_, m) in enumerate(msgs):
    if i == len(msgs) // 2:
        continue
    if r.apply(bytes(m))["result"] == "gap":
        break
ok = until_match()
took = snapshots() - snaps
print(f"snaplost    {len(msgs)} messages in the snapshot, message {len(msgs) // 2 + 1} lost;"
      f" snapshots after it: {'another' if took else 'none'}")
report("snaplost", snaps, ok, (r.down + r.up) / base, 1.1, "bytes / a snapshot's")

# ---- smallkey: a small table's key lost behind the engine's back ------------------
settle(srv, [r])
snaps = snapshots()
for (name,) in r.q("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'shelves'"):
    r.q(f'DROP TRIGGER "{name}"')
r.q("DELETE FROM shelves WHERE id = 27")   # its bucket holds 31 of the 40 keys at depth 6
r.reset()
ok = until_match()
report("smallkey", snaps, ok, (r.down + r.up) / base * 100, 1, "% of a snapshot's bytes")

# ---- beyond the targets: what the tree of ranges costs when it must find many rows ----
# drift1%: 1 % of the rows deleted behind the engine's back (found by ranges alone)
settle(srv, [r])
snaps = snapshots()
for (name,) in r.q("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'products'"):
    r.q(f'DROP TRIGGER "{name}"')
r.q("DELETE FROM products WHERE id % 100 = 42")
r.reset()
ok = until_match()
report("drift1%", snaps, ok, (r.down + r.up) / base * 100, 5, "% of a snapshot's bytes")

# restore+del: a copy in which 1 % of rows are older and 0.1 % since deleted on the server
# (the changed rows by the record, the deleted ones found by ranges)
settle(srv, [r])
copy = os.path.join(tempfile.mkdtemp(), "copy.db")
r.q("VACUUM INTO ?", (copy,))
srv.exec("UPDATE products SET price = price + 1 WHERE id % 100 = 8")
srv.exec("DELETE FROM products WHERE id % 1000 = 9")
settle(srv, [r])
snaps = snapshots()
r.close()
os.replace(copy, r.path)
r.open()
r.reset()
ok = until_match()
report("restore+del", snaps, ok, (r.down + r.up) / base * 100, 5, "% of a snapshot's bytes")
print(f"load average {os.getloadavg()[0]:.2f}")
