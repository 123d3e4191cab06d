#!/bin/sh
# The relay's background worker: it starts with the server and relays, wakes
# at once on sync.wake(), holds the relay lock, reloads its settings on
# SIGHUP, ends on SIGTERM and comes back, survives a crash of the server's
# processes, and keeps its memory flat across passes.  A dynamic worker
# starts with sync.relay_start().
set -u
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/../.." || exit 2
. tests/e2e/lib.sh
in_cluster "$self" -o magic_sync.database=postgres -o magic_sync.naptime=200
DB=postgres
worker_pid() { q $DB "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay' AND datname = '$1'"; }

q $DB "CREATE EXTENSION magic_sync" >/dev/null
q $DB "CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL)"
q $DB "SELECT sync.mirror('items', 'catalog', 'broadcast')" >/dev/null
q $DB "SELECT sync.replica_add('dddddddd-0000-0000-0000-000000000001')" >/dev/null

# it starts with the server and relays on its own
wait_for 20 $DB "SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'" || echo "the worker did not start"
check "the worker runs" "$(q $DB "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'")" "1"
q $DB "INSERT INTO items VALUES (1, 'one')"
wait_for 10 $DB "SELECT count(*) = 1 FROM sync.held WHERE key = '1:1'" || true
check "it provisions and relays without being asked" "$(q $DB "SELECT count(*) FROM sync.held")" "1"

# it holds the relay lock: a manual pass is refused
check "a manual pass is refused while it relays" \
	"$(q $DB "SELECT sync.relay_pass()" 2>&1 | grep -c 'another relay holds the relay lock')" "1"

# woken, it runs a pass at once, well before its naptime
q $DB "ALTER SYSTEM SET magic_sync.naptime = '60s'" && q $DB "SELECT pg_reload_conf()" >/dev/null
sleep 1
pid=$(worker_pid $DB)
q $DB "INSERT INTO items VALUES (2, 'two')"
check "sync.wake() finds it" "$(q $DB "SELECT sync.wake()")" "t"
wait_for 5 $DB "SELECT count(*) = 2 FROM sync.held" || true
check "woken, it relays at once (naptime 60s)" "$(q $DB "SELECT count(*) FROM sync.held")" "2"
check "SIGHUP reloads, the same process goes on" "$(worker_pid $DB)" "$pid"
q $DB "ALTER SYSTEM RESET magic_sync.naptime" && q $DB "SELECT pg_reload_conf()" >/dev/null
sleep 1

# a pass tells the replicas it wrote to (NOTIFY magic_sync, their ids), and
# copies their chains, and what they are owed, into sync.replicas after its
# commit (record.c hands them to the worker: no pg_temp.ms_written)
told=$( (echo 'LISTEN magic_sync;'; sleep 1; q $DB "UPDATE items SET v = 'uno' WHERE id = 1" >/dev/null
	wait_for 5 $DB "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)" || true; sleep 0.5; echo 'SELECT 1;') |
	psql -XAt -d $DB 2>&1 | grep -c 'notification "magic_sync" with payload "dddddddd-0000-0000-0000-000000000001"')
check "the pass notifies the replica it wrote to" "$told" "1"
wait_for 5 $DB "SELECT r.last_number = (SELECT max(o.number) FROM sync.outbox o WHERE o.replica = r.id) FROM sync.replicas r" || true
check "its chain is copied after the pass" \
	"$(q $DB "SELECT (r.last_number, r.last_nonce) = (SELECT o.number, o.nonce FROM sync.outbox o WHERE o.replica = r.id
		ORDER BY o.number DESC LIMIT 1) FROM sync.replicas r")" "t"
check "and what it is owed" \
	"$(q $DB "SELECT r.owed_messages = (SELECT count(*) FROM sync.outbox o WHERE o.replica = r.id AND NOT o.dropped
		AND o.number > coalesce(r.snapshot_end, 0)) AND r.owed_messages > 0 FROM sync.replicas r")" "t"

# memory: once warm (its temp tables' local buffers fill up to temp_buffers),
# many passes later its private memory has not grown.  passes N TAG: N
# passes, each one committed write, woken and waited for (its note done) in
# one session: a psql and a fixed sleep per write were most of this
# script's time, and did not make sure each write had its pass
passes() {
	q $DB "DO \$\$
	DECLARE
		n int := 0;
		bound timestamptz := pg_catalog.clock_timestamp() + interval '120 s';
	BEGIN
		WHILE n < $1 AND pg_catalog.clock_timestamp() < bound LOOP
			UPDATE items SET v = v || '$2';
			COMMIT;
			PERFORM sync.wake();
			WHILE EXISTS (SELECT FROM sync.notes WHERE NOT done) AND pg_catalog.clock_timestamp() < bound LOOP
				PERFORM pg_catalog.pg_sleep(0.002);
			END LOOP;
			IF NOT EXISTS (SELECT FROM sync.notes WHERE NOT done) THEN
				n := n + 1;
			END IF;
		END LOOP;
		RAISE NOTICE 'passes: %', n;
	END \$\$" 2>&1 | sed -n 's/^NOTICE:  passes: //p'
}
rss() { awk '/^RssAnon/ {print $2}' "/proc/$(worker_pid $DB)/status"; }
check "150 writes relayed, each by a pass of its own" "$(passes 150 x)" "150"
before=$(rss)
check "150 more" "$(passes 150 y)" "150"
after=$(rss)
echo "worker RssAnon: ${before} kB after 150 passes, ${after} kB after 300"
check "its private memory stays flat across passes" "$([ $((after - before)) -lt 1024 ] && echo flat || echo grew)" "flat"

# SIGTERM: it ends (the pass in flight rolls back) and the postmaster brings it back
pid=$(worker_pid $DB)
q $DB "SELECT pg_terminate_backend($pid)" >/dev/null
wait_for 30 $DB "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'magic_sync relay' AND pid <> $pid" || true
check "after SIGTERM it comes back" "$(q $DB "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'magic_sync relay' AND pid <> $pid")" "1"
q $DB "INSERT INTO items VALUES (3, 'three')"
wait_for 10 $DB "SELECT count(*) = 3 FROM sync.held" || true
check "and relays again" "$(q $DB "SELECT count(*) FROM sync.held")" "3"

# a crash (SIGKILL): the server restarts its processes, the worker among them
pid=$(worker_pid $DB)
kill -9 "$pid"
sleep 2
wait_for 40 $DB "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'" || true
check "after a crash it comes back" "$(q $DB "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'")" "1"
q $DB "INSERT INTO items VALUES (4, 'four')"
wait_for 10 $DB "SELECT count(*) = 4 FROM sync.held" || true
check "nothing lost: it relays what was noted" "$(q $DB "SELECT count(*) FROM sync.held")" "4"

# a dynamic worker in another database, without a restart
q $DB "CREATE DATABASE other" >/dev/null
q other "CREATE EXTENSION magic_sync"
q other "CREATE TABLE items (id int PRIMARY KEY)"
q other "SELECT sync.mirror('items', 'catalog', 'broadcast')" >/dev/null
q other "SELECT sync.replica_add('dddddddd-0000-0000-0000-000000000002')" >/dev/null
q other "INSERT INTO items VALUES (1)"
check "sync.relay_start() starts one" "$(q other "SELECT sync.relay_start() > 0")" "t"
check "and not a second" "$(q other "SELECT sync.relay_start() = (SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay' AND datname = 'other')")" "t"
wait_for 10 other "SELECT count(*) = 1 FROM sync.held" || true
check "it relays there" "$(q other "SELECT count(*) FROM sync.held")" "1"

finish
