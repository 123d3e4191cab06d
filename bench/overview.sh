#!/bin/bash
# overview.sh: what sync.overview costs a fleet of 200 replicas holding
# 15,000 rows each (3M held rows), against SELECT count(*) FROM sync.held in
# the same run, while every replica is caught up and while every replica has
# every row unacknowledged.  Targets: caught up <= 0.05 (it reads only what the
# engine records, never every held row), all unacknowledged <= 1.0.
#
# The held rows, messages and acknowledgements are synthesized directly in
# sync.held, sync.outbox and sync.replicas, as the relay and filing write them
# (held rows numbered by the message that carried them, 1,000 a message).
#
#   bench/overview.sh [replicas] [rows per replica] [runs]
set -eu
cd "$(dirname "$0")/.."
replicas=${1:-200}
rows=${2:-15000}
runs=${3:-7}
if [ -z "${MS_BENCH_INSIDE:-}" ]; then
	. scripts/lib.sh
	ms_ready
	ms_cluster -o shared_buffers=1GB \
		-o max_wal_size=4GB -o checkpoint_timeout=30min \
		env MS_BENCH_INSIDE=1 "$0" "$replicas" "$rows" "$runs"
	exit $?
fi

sql() { psql -q -X -v ON_ERROR_STOP=1 -d bench "$@"; }

createdb bench
sql <<SQL
CREATE EXTENSION magic_sync;
CREATE TABLE products (id int PRIMARY KEY, name text);
CREATE TABLE customers (id int PRIMARY KEY, name text);
CREATE TABLE orders (id int PRIMARY KEY, store uuid, customer int REFERENCES customers);
CREATE TABLE order_lines (order_id int NOT NULL REFERENCES orders, line int NOT NULL,
	product int REFERENCES products, PRIMARY KEY (order_id, line));
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('customers', 'catalog');
SELECT sync.mirror('orders', 'catalog', 'assigned(store)');
SELECT sync.mirror('order_lines', 'catalog', 'follows(order_id)');
SELECT count(sync.replica_add(('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid))
  FROM generate_series(1, $replicas) g;
-- as a pass leaves them: observed, provisioned, heard from
UPDATE sync.replicas SET seen_live = true, provision = false, heard_at = now();
-- each replica's rows over the four tables, 1,000 a message, numbered in order
CREATE TEMP TABLE r AS
	SELECT id, row_number() OVER (ORDER BY id) AS i FROM sync.replicas;
INSERT INTO sync.held (replica, tab, key, note, number)
SELECT r.id, t.id, sync.key(ARRAY[k::text]), k, (r.i - 1) * 1000 + (k - 1) / 1000 + 1
  FROM r CROSS JOIN generate_series(1, $rows) k
  JOIN sync.tables t ON t.name = (ARRAY['products', 'customers', 'orders', 'order_lines'])[k % 4 + 1];
INSERT INTO sync.outbox (replica, number, epoch, nonce, head, bytes)
SELECT r.id, (r.i - 1) * 1000 + m, '\x00000000000000000000000000000000', '\x00', '\x00', 200000
  FROM r CROSS JOIN generate_series(1, ($rows + 999) / 1000) m;
UPDATE sync.replicas x SET last_number = (r.i - 1) * 1000 + ($rows + 999) / 1000,
	snapshot_number = (r.i - 1) * 1000 + 1, snapshot_end = (r.i - 1) * 1000 + ($rows + 999) / 1000
  FROM r WHERE r.id = x.id;
TRUNCATE sync.notes;
SQL
sql -c "VACUUM ANALYZE"

# time_of SQL: the best of $runs runs of a statement in one session, in ms
time_of() {
	{ echo '\timing on'; for _ in $(seq "$runs"); do echo "$1;"; done; } | sql -o /dev/null 2>&1 |
		sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | sort -n | head -1
}
count_sql='SELECT count(*) FROM sync.held'
overview_sql='SELECT sync.overview()'
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

# caught up: every replica acknowledged its last message; the outbox is trimmed
sql -c "UPDATE sync.replicas SET acked_number = last_number, acked_at = now()" \
	-c "DELETE FROM sync.outbox" -c "VACUUM ANALYZE sync.replicas, sync.outbox"
sql -Atc "SELECT sync.overview() -> 'states'"
count_ms=$(time_of "$count_sql")
caught_ms=$(time_of "$overview_sql")
# a session's first call plans its statements (plpgsql keeps the plans)
caught_first_ms=$(runs=1 time_of "$overview_sql")

# all unacknowledged: every replica has every row on its way
sql -c "UPDATE sync.replicas SET acked_number = 0, acked_at = NULL" \
	-c "INSERT INTO sync.outbox (replica, number, epoch, nonce, head, bytes)
	    SELECT r.id, n, '\x00000000000000000000000000000000', '\x00', '\x00', 200000
	      FROM sync.replicas r, generate_series(r.snapshot_number, r.last_number) n" \
	-c "VACUUM ANALYZE sync.replicas, sync.outbox"
sql -Atc "SELECT sync.overview() -> 'states'"
count2_ms=$(time_of "$count_sql")
unacked_ms=$(time_of "$overview_sql")
unacked_first_ms=$(runs=1 time_of "$overview_sql")

held=$(sql -Atc "$count_sql")
echo "held rows: $held over $replicas replicas"
echo "best of $runs runs in one session; a new session's first call (which plans) in brackets"
echo "caught up:          overview ${caught_ms} ms [${caught_first_ms} ms], count(*) ${count_ms} ms, ratio $(ratio "$caught_ms" "$count_ms") [$(ratio "$caught_first_ms" "$count_ms")] (target <= 0.05)"
echo "all unacknowledged: overview ${unacked_ms} ms [${unacked_first_ms} ms], count(*) ${count2_ms} ms, ratio $(ratio "$unacked_ms" "$count2_ms") [$(ratio "$unacked_first_ms" "$count2_ms")] (target <= 1.0)"
