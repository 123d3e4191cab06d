#!/bin/sh
# chains.sh - the worker copies its passes' chains into sync.replicas in C
# (src/pg/relay/chains.c), as the statement would (issue 37).
#
# Under magic_sync.full_plan the worker locks each row and computes in C
# what it is to become, runs the statement, and fails its transaction (an
# ERROR in the log) if the statement made anything else; without it, C
# writes the rows, and the log says so (DEBUG1).  Both ways, each replica's
# row then says where its chain is (its outbox's last message) and what it
# is owed (its messages past its snapshot), and nothing failed.
set -u
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/../.." || exit 2
. tests/e2e/lib.sh
in_cluster "$self" -o logging_collector=on -o log_directory=log -o magic_sync.naptime=3600000
DB=chains
logfile() { psql -XAtq -d postgres -c "SELECT pg_read_file(pg_current_logfile())"; }
R1=c4a10000-0000-4000-8000-000000000001
R2=c4a10000-0000-4000-8000-000000000002

q postgres "CREATE DATABASE $DB" >/dev/null
q postgres "ALTER DATABASE $DB SET magic_sync.full_plan = on" >/dev/null
q postgres "ALTER DATABASE $DB SET log_min_messages = debug1" >/dev/null
q $DB "CREATE EXTENSION magic_sync" >/dev/null
q $DB "CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL)"
q $DB "INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 50) g"
q $DB "SELECT sync.mirror('items', 'catalog', 'broadcast')" >/dev/null
q $DB "SELECT sync.replica_add('$R1')" >/dev/null
q $DB "SELECT sync.replica_add('$R2')" >/dev/null
q $DB "SELECT sync.relay_start()" >/dev/null
q $DB "SELECT sync.wake()" >/dev/null
wait_for 30 $DB "SELECT bool_and(NOT provision) FROM sync.replicas" || true
check "provisioned" "$(q $DB "SELECT bool_and(NOT provision) FROM sync.replicas")" "t"

# chains: each replica's row says its outbox's last message, and its owed messages and bytes
CHAINS="SELECT bool_and(r.last_number = (SELECT max(o.number) FROM sync.outbox o WHERE o.replica = r.id)
          AND r.last_nonce = (SELECT o.nonce FROM sync.outbox o WHERE o.replica = r.id ORDER BY o.number DESC LIMIT 1)
          AND r.owed_messages = (SELECT count(*) FROM sync.outbox o WHERE o.replica = r.id AND NOT o.dropped
                                  AND o.number > coalesce(r.snapshot_end, 0))
          AND r.owed_bytes = (SELECT coalesce(sum(o.bytes), 0) FROM sync.outbox o WHERE o.replica = r.id AND NOT o.dropped
                               AND o.number > coalesce(r.snapshot_end, 0)))
          FROM sync.replicas r"
SETTLED="SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"

# writes: n one-row updates, each passed alone, then one of ten rows
writes() {
	for i in $(seq 1 "$1"); do
		q $DB "UPDATE items SET v = v || '.' WHERE id = $i"
		wait_for 10 $DB "$SETTLED" || true
	done
	q $DB "UPDATE items SET v = v || '+' WHERE id > 40"
	wait_for 10 $DB "$SETTLED" || true
	# the copy follows the pass's commit: a pass that wrote nothing more does no copy
	wait_for 10 $DB "$CHAINS" || true
}

writes 8
check "full plan: every chain copied, owed counted" "$(q $DB "$CHAINS")" "t"
# passes may take several writes at once under load: as many messages as passes that wrote
OWED="SELECT min(owed_messages) FROM sync.replicas HAVING min(owed_messages) = max(owed_messages)"
owed1=$(q $DB "$OWED")
check "full plan: the replicas owed alike, something" "$([ "${owed1:-0}" -gt 0 ] && echo yes)" "yes"
check "full plan: C and the statement agreed (no ERROR)" "$(logfile | grep -c 'copied in C differ')" "0"
check "full plan: the statement ran (no copy in C)" "$(logfile | grep -c 'chains of .* replicas copied in C')" "0"

# the worker again, without the full plan: C writes the rows
q postgres "ALTER DATABASE $DB RESET magic_sync.full_plan" >/dev/null
q $DB "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'" >/dev/null
sleep 1
q $DB "SELECT sync.relay_start()" >/dev/null
writes 8
check "in C: every chain copied, owed counted" "$(q $DB "$CHAINS")" "t"
owed2=$(q $DB "$OWED")
check "in C: the replicas owed alike, more" "$([ "${owed2:-0}" -gt "${owed1:-0}" ] && echo yes)" "yes"
check "in C: copied by C after a pass that wrote" \
	"$([ "$(logfile | grep -c 'chains of 2 replicas copied in C')" -ge 1 ] && echo yes)" "yes"
check "no error in the log" "$(logfile | grep -c ' ERROR: ')" "0"
finish
