#!/bin/bash
# wanted.sh: how long the wanted set of a fleet takes from scratch:
# 200 replicas each wanting ~15k rows (a broadcast catalog, assigned orders
# with following lines, their customers as parents), all at once.
#
#   bench/wanted.sh [replicas] [products]
set -eu
cd "$(dirname "$0")/.."
replicas=${1:-200}
products=${2:-15000}
if [ -z "${MS_BENCH_INSIDE:-}" ]; then
	. scripts/lib.sh
	ms_ready
	ms_cluster env MS_BENCH_INSIDE=1 "$0" "$replicas" "$products"
	exit $?
fi
createdb bench
psql -q -X -v ON_ERROR_STOP=1 -d bench <<SQL
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
SELECT sync.replica_add(('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid)
  FROM generate_series(1, $replicas) g;
INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, $products) g;
INSERT INTO customers SELECT g, 'c' || g FROM generate_series(1, 20000) g;
INSERT INTO orders SELECT g, ('00000000-0000-0000-0000-' || lpad((g % $replicas + 1)::text, 12, '0'))::uuid,
	g % 20000 + 1 FROM generate_series(1, 20000) g;
INSERT INTO order_lines SELECT o, l, (o * 7 + l) % $products + 1
  FROM generate_series(1, 20000) o, generate_series(1, 3) l;
TRUNCATE sync.notes;
VACUUM ANALYZE;
\timing on
SELECT sync.wanted_fill() AS rows;
SELECT sync.wanted_fill() AS rows_again;
\timing off
SELECT count(*) / $replicas AS rows_per_replica FROM pg_temp.ms_wanted;
SQL
