#!/bin/sh
# The relay worker's floor under the notes it reads (src/pg/relay/floor.h,
# issue 14): after a large change, a one-row change's passes read a few
# pages of notes_pending, not every entry the change's deleted notes left
# (autovacuum is off for sync.notes here, as it is between its rounds); and
# the floor never skips a note: one a transaction left open drew before the
# passes that read later ones, one parked and read again a minute later, one
# numbered after the sequence was set back, one written under the floor by
# hand (the first quiet pass reads it).
set -u
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/../.." || exit 2
. tests/e2e/lib.sh
in_cluster "$self" -o magic_sync.database=floor -o magic_sync.naptime=3600000
DB=floor
tmp=$(mktemp -d)
trap 'exec 3>&- 2>/dev/null; rm -rf "$tmp"' EXIT

q postgres "CREATE DATABASE floor" >/dev/null
wait_for 20 postgres "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'magic_sync relay' AND datname = 'floor'" || true
check "the relay runs in the database" \
	"$(q postgres "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'magic_sync relay' AND datname = 'floor'")" "1"
q $DB "CREATE EXTENSION magic_sync"
q $DB "ALTER TABLE sync.notes SET (autovacuum_enabled = off)"
items_provisioned $DB
q $DB "INSERT INTO items SELECT g, 'v' FROM generate_series(1, 20) g"
wait_for 5 $DB "SELECT count(*) = 20 FROM sync.held" || true
check "twenty rows relayed" "$(q $DB "SELECT count(*) FROM sync.held")" "20"

# change ROW: update it and print the id of its note
change() { q $DB "UPDATE items SET v = v || '.' WHERE id = $1; SELECT currval('sync.note_seq')"; }
# gone ID: the note was read and planned (only a pass deletes a note)
gone() { echo "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE id = $1)"; }
held() { echo "SELECT count(*) = 1 FROM sync.held WHERE key = sync.key(ARRAY['$1']) AND note >= $2"; }

# a large change, relayed: its 40,000 notes deleted, their index entries left
q $DB "INSERT INTO items SELECT g, 'bulk' FROM generate_series(1000, 40999) g"
wait_for 120 $DB "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)" || true
check "the large change is relayed" "$(q $DB "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)")" "t"
sleep 1
# the blocks of sync.notes and its indexes read, whatever the plan
blocks() {
	q $DB "SELECT coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0) + coalesce(idx_blks_hit, 0)
	              + coalesce(idx_blks_read, 0)
	         FROM pg_statio_all_tables WHERE relid = 'sync.notes'::regclass"
}
q $DB "ANALYZE sync.notes" >/dev/null
leaves=$(q $DB "SELECT pg_relation_size('sync.notes_pending') / current_setting('block_size')::int")
before=$(blocks)
worst=0
late=0
for i in 1 2 3 4 5; do
	note=$(change $i)
	wait_for 5 $DB "$(held $i "$note")" || late=$((late + 1))
	# the worker flushes its statistics when it sleeps
	sleep 1.2
	after=$(blocks)
	read=$((after - before))
	[ $read -gt $worst ] && worst=$read
	before=$after
done
echo "notes_pending: $leaves pages; a one-row change's passes read at most $worst blocks of sync.notes"
check "each one-row change is relayed (its blocks counted)" "$late" "0"
check "a one-row change's passes read a few blocks of sync.notes, not the $leaves pages of notes_pending the large change left (at most 60)" \
	"$([ "$worst" -le 60 ] && echo yes || echo no)" "yes"

# a transaction left open drew its note's id before the passes that read later ones
mkfifo "$tmp/open"
psql -XAtq -d $DB <"$tmp/open" >"$tmp/open.out" 2>&1 &
exec 3>"$tmp/open"
echo "BEGIN; UPDATE items SET v = 'open' WHERE id = 7; SELECT 'noted', currval('sync.note_seq');" >&3
wait_for 5 $DB "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE state = 'idle in transaction' AND datname = 'floor')" || true
open=$(sed -n 's/^noted|//p' "$tmp/open.out")
check "a transaction stays open with its note" "$(echo "$open" | grep -c '^[0-9][0-9]*$')" "1"
late=0
for i in 11 12 13 14 15 16; do
	note=$(change $i)
	wait_for 5 $DB "$(gone "$note")" || late=$((late + 1))
done
check "changes committed after it are relayed while it stays open" "$late" "0"
echo "COMMIT;" >&3
exec 3>&-
wait_for 5 $DB "$(gone "$open")" || true
check "its note is relayed when it commits, under every later note read" "$(q $DB "$(gone "$open")")" "t"
check "the replica holds its row's version" "$(q $DB "$(held 7 "$open")")" "t"

# a parked note, under the floor by now, read again a minute later
late=0
tab=$(q $DB "SELECT id FROM sync.tables WHERE relid = 'items'::regclass")
parked=$(q $DB "INSERT INTO sync.notes (tab, key, parked, parked_at) VALUES ($tab, sync.key(ARRAY['8']), 'planning failed (test)', now()) RETURNING id")
for i in 17 18; do
	note=$(change $i)
	wait_for 5 $DB "$(gone "$note")" || late=$((late + 1))
done
check "the parked note waits" "$(q $DB "SELECT parked IS NOT NULL FROM sync.notes WHERE id = $parked")" "t"
q $DB "UPDATE sync.notes SET parked_at = now() - interval '2 minutes' WHERE id = $parked"
q $DB "SELECT sync.wake()" >/dev/null
wait_for 5 $DB "$(gone "$parked")" || true
check "a parked note under the floor is read again a minute later" "$(q $DB "$(gone "$parked")")" "t"

# the sequence set back: notes numbered under the floor are read
q $DB "SELECT setval('sync.note_seq', 2)" >/dev/null
note=$(change 9)
wait_for 5 $DB "$(gone "$note")" || true
check "a note numbered after the sequence was set back is relayed" "$(q $DB "$(gone "$note")")" "t"
q $DB "SELECT setval('sync.note_seq', 10000000)" >/dev/null
for i in 19 20; do
	note=$(change $i)
	wait_for 5 $DB "$(gone "$note")" || late=$((late + 1))
done

# a note written under the floor by hand: the first quiet pass (a naptime with no wake) reads it
low=$(q $DB "INSERT INTO sync.notes (id, tab, key) VALUES (3, $tab, sync.key(ARRAY['10'])) RETURNING id")
note=$(change 11)
wait_for 5 $DB "$(gone "$note")" || late=$((late + 1))
check "the changes between the cases are relayed" "$late" "0"
check "a woken pass reads from the floor: a note under it waits" "$(q $DB "$(gone "$low")")" "f"
q postgres "ALTER SYSTEM SET magic_sync.naptime = 500" >/dev/null
q postgres "SELECT pg_reload_conf()" >/dev/null
wait_for 10 $DB "$(gone "$low")" || true
check "the first quiet pass reads from the first note" "$(q $DB "$(gone "$low")")" "t"

finish
