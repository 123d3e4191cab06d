#!/bin/sh
# commit_cost.sh: what noting adds to a writer's one-row UPDATE, in
# instructions (issue 37, the `commit` hop of bench/hops.py): no clock, so
# the machine's load does not matter.  bench/hops.py's table (items: id
# bigint key, store uuid, name text; N rows) mirrored, and an unmirrored copy
# (plain); a single-user backend (postgres --single: no relay worker, no
# wake) runs U one-row UPDATEs of one, then 2U, under callgrind, each
# statement its own transaction (synchronous_commit off, fsync off: the
# flush is not counted here; bench/hops.py times it).  Per UPDATE
# (the 2U run less the U run, over U): mirrored, plain, and the functions
# whose inclusive cost differs most between them.
#
#   scripts/isolated bench/commit_cost.sh [N] [U]      (defaults 100000, 200)
set -eu
cd "$(dirname "$0")/.."
n=${1:-100000}
u=${2:-200}
. scripts/lib.sh
ms_ready
work=$(mktemp -d /tmp/ms_commit_cost.XXXXXX)
trap 'su postgres -c "$bin/pg_ctl -D $work/pg -w stop" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
chown postgres "$work"
bin=/usr/lib/postgresql/15/bin
su postgres -c "$bin/initdb -D $work/pg -A trust" >/dev/null
su postgres -c "$bin/pg_ctl -D $work/pg -o '-k $work -c listen_addresses=' -w start" >/dev/null
su postgres -c "psql -h $work -d postgres -qc 'CREATE DATABASE w'"
su postgres -c "psql -h $work -d w -q -v n=$n" >/dev/null <<'SQL'
CREATE TABLE items (id bigint PRIMARY KEY, store uuid NOT NULL, name text NOT NULL);
INSERT INTO items SELECT g, ('00000000-0000-0000-0000-' || lpad(to_hex(1 + g % 200), 12, '0'))::uuid, 'i' || g
  FROM generate_series(1, :n) g;
CREATE TABLE plain (LIKE items INCLUDING ALL);
INSERT INTO plain SELECT * FROM items;
VACUUM ANALYZE items, plain;
CREATE EXTENSION magic_sync;
SELECT sync.mirror('items', 'catalog', 'broadcast');
SQL
su postgres -c "$bin/pg_ctl -D $work/pg -w stop" >/dev/null
for table in items plain; do
	for count in "$u" "$((2 * u))"; do
		# each its own copy of the data directory: the runs start alike
		rm -rf "$work/run"
		cp -a "$work/pg" "$work/run"
		awk -v t="$table" -v c="$count" -v n="$n" 'BEGIN {
			print "SET synchronous_commit = off"
			for (i = 0; i < c; i++)
				printf "UPDATE %s SET name = '\''v%dx'\'' WHERE id = %d\n", t, i, 1 + (i * 7919) % n
		}' >"$work/in.sql"
		chown -R postgres "$work"
		su postgres -c "valgrind --tool=callgrind --callgrind-out-file=$work/cg.$table.$count \
			$bin/postgres --single -D $work/run -c fsync=off w <$work/in.sql" >/dev/null 2>"$work/vg.$table.$count"
		callgrind_annotate --inclusive=yes --threshold=100 "$work/cg.$table.$count" 2>/dev/null |
			sed -nE 's/^ *([0-9,]+) \([^)]*\)  [^ :]*:([A-Za-z_][A-Za-z_0-9]*) .*/\2 \1/p' | tr -d , >"$work/inc.$table.$count"
	done
done
python3 - "$work" "$u" <<'PY'
import sys
work, u = sys.argv[1], int(sys.argv[2])

def per_update(table):
    def load(count):
        out = {}
        for line in open(f"{work}/inc.{table}.{count}"):
            name, value = line.split()
            out[name] = max(out.get(name, 0), int(value))
        return out
    one, two = load(u), load(2 * u)
    return {k: (two.get(k, 0) - one.get(k, 0)) / u for k in set(one) | set(two)}

mirrored, plain = per_update("items"), per_update("plain")
print(f"instructions a one-row UPDATE ({u} more UPDATEs, callgrind, a single-user backend):"
      f" mirrored {mirrored['main']:,.0f}, plain {plain['main']:,.0f},"
      f" noting {mirrored['main'] - plain['main']:+,.0f} ({(mirrored['main'] / plain['main'] - 1) * 100:+.1f} %)")
print("  the functions whose inclusive cost differs most (mirrored - plain, mirrored, plain):")
rows = sorted(((mirrored.get(k, 0) - plain.get(k, 0), k) for k in set(mirrored) | set(plain)), reverse=True)
for d, k in [r for r in rows if r[1] not in ("main", "PostgresSingleUserMain", "PostgresMain")][:25]:
    print(f"    {d:8,.0f} {mirrored.get(k, 0):9,.0f} {plain.get(k, 0):9,.0f}  {k}")
PY
