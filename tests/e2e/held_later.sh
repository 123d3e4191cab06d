#!/bin/sh
# The worker's first syncs (issue 37): a snapshot's messages commit with its
# pass, and the held rows of the tables it reads whole follow in a
# transaction of their own (src/pg/relay/record.c), while the replica pulls
# and applies.  Until then the replica's held_due names the snapshot; a
# worker that dies in between, or held rows that fail to record, leave it
# set, and the next pass provisions the replica again.  A session's
# uncommitted held row holds the worker between the two: the held rows wait
# on it, the pass's messages do not.
set -u
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/../.." || exit 2
. tests/e2e/lib.sh
in_cluster "$self" -o magic_sync.database=postgres -o magic_sync.naptime=200
DB=postgres
ROWS=5000
worker_pid() { q $DB "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'"; }

q $DB "CREATE EXTENSION magic_sync" >/dev/null
q $DB "CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL)"
q $DB "INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, $ROWS) g"
q $DB "SELECT sync.mirror('items', 'catalog', 'broadcast')" >/dev/null
q $DB "SELECT sync.wake()" >/dev/null
wait_for 30 $DB "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)" || true
TAB=$(q $DB "SELECT id FROM sync.tables WHERE name = 'items'")

# block REPLICA: a session of its own holds an uncommitted held row of the
# replica's last row, which the held rows the worker writes wait on
tmp=$(mktemp -d)
trap 'exec 3>&- 2>/dev/null; rm -rf "$tmp"' EXIT
block() {
	mkfifo "$tmp/in"
	psql -XAtq -d $DB <"$tmp/in" >/dev/null 2>&1 &
	blocker=$!
	exec 3>"$tmp/in"
	echo "BEGIN; INSERT INTO sync.held (replica, tab, key, number) VALUES ('$1', $TAB, sync.key(ARRAY['$ROWS']), 0);" >&3
	sleep 1
}
# unblock COMMIT|ROLLBACK
unblock() {
	echo "$1;" >&3
	exec 3>&-
	wait "$blocker"
	rm -f "$tmp/in"
}
# due REPLICA: its snapshot's messages committed, its held rows not yet
due() { wait_for 60 $DB "SELECT NOT provision AND held_due IS NOT NULL FROM sync.replicas WHERE id = '$1'"; }
held() { q $DB "SELECT count(*) FROM sync.held WHERE replica = '$1'"; }
snapshot() { q $DB "SELECT snapshot_number FROM sync.replicas WHERE id = '$1'"; }
# settings SQL...: ALTER SYSTEM statements (each alone: none runs in a transaction), then the worker reloaded
settings() {
	for s in "$@"; do q $DB "$s" >/dev/null; done
	q $DB "SELECT pg_reload_conf()" >/dev/null
	sleep 1
}
# add REPLICA: registered, the worker woken
# added and woken from one session: a second psql could start only after the
# pass, and its wake end the held rows' wait for the pulls (section 7) at once
add() { psql -XAtq -v ON_ERROR_STOP=1 -d $DB -c "SELECT sync.replica_add('$1')" -c "SELECT sync.wake()" >/dev/null; }

R6=eeeeeeee-0000-0000-0000-000000000006
F6=$tmp/r6.db
# rep ACTION: the replica $REP (R6 unless set) in $REPF (F6), as its agent would (tests/e2e/harness.py)
rep() {
	/usr/bin/python3 - "$1" "${REP:-$R6}" "${REPF:-$F6}" <<'PY'
import sys
sys.path.insert(0, "tests/e2e")
import psycopg2
from harness import Server, Replica
action, rid, path = sys.argv[1:]
s = Server("postgres", create=False)
r = Replica(s, rid, path)
if action == "apply":
    while r.pull_apply(1 << 20):
        pass
    print(r.one("SELECT count(*) FROM items"))
elif action == "file":
    try:
        print("filed" if r.upload() is not None else "nothing")
    except psycopg2.Error as e:
        print(e.pgcode)
elif action == "file_waiting":
    # applied, then filed with a bound on waiting for a lock: refused at once,
    # or after lock_timeout had it wait (both 55P03, told apart by the message)
    while r.pull_apply(1 << 20):
        pass
    s.exec("SET lock_timeout = '5s'")
    try:
        print("filed" if r.upload() is not None else "nothing")
    except psycopg2.Error as e:
        print(e.pgcode, "recording" if "cannot file yet" in str(e) else "waited")
elif action in ("trickle", "trickle_kill", "trickle_write"):
    # one message a pull, 0.1 s apart, 15 of them: what the worker records
    # and does meanwhile, looked at after each pull; then a filing; then
    # (trickle_kill) the worker killed as it waits, and a write; or
    # (trickle_write) a write, which ends the wait, the snapshot half pulled
    import time
    held, due, doing = set(), set(), set()
    worker = "SELECT pid, query FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'"
    for i in range(15):
        r.pull_apply(1024)
        if action == "trickle" and i == 4:
            # a reload sets the worker's latch as a commit's wake does: it
            # ended the wait before (a commit's wake alone does, wake.c)
            s.exec("SELECT pg_reload_conf()")
        held.add(s.one("SELECT count(*) FROM sync.held WHERE replica = %s", (rid,)))
        due.add(s.one("SELECT held_due IS NOT NULL FROM sync.replicas WHERE id = %s", (rid,)))
        doing.add(s.rows(worker)[0][1])
        time.sleep(0.1)
    try:
        filed = "filed" if r.upload() is not None else "nothing"
    except psycopg2.Error as e:
        filed = e.pgcode
    ended = ""
    if action == "trickle_kill":
        pid, what = s.rows(worker)[0]
        s.exec("SELECT pg_terminate_backend(%s)", (pid,))
        doing.add(what)
        # a write as the worker starts again: planned for this replica too
        s.exec("UPDATE items SET v = 'again' WHERE id = 12")
    elif action == "trickle_write":
        # a commit wakes the worker: the wait yields to it, the held rows are
        # recorded and the pass plans the write for this replica too
        s.exec("UPDATE items SET v = 'during' WHERE id = 12; DELETE FROM items WHERE id = 20")
        t = time.monotonic()
        while s.one("SELECT held_due IS NOT NULL FROM sync.replicas WHERE id = %s", (rid,)) and time.monotonic() < t + 60:
            time.sleep(0.05)
        ended = "; recorded within 5 s" if time.monotonic() - t < 5 else f"; recorded after {time.monotonic() - t:.1f} s"
        # the replica has yet to apply the whole snapshot
        ended += f", {r.one('SELECT count(*) FROM items') < 29990} half pulled"
    print(f"held {sorted(held)} due {sorted(due)} {filed}; {' | '.join(sorted(doing))}{ended}")
elif action == "rest":
    # the rest pulled: seconds until the held rows are recorded
    import time
    while r.pull_apply(1 << 20):
        pass
    t = time.monotonic()
    while s.one("SELECT held_due IS NOT NULL FROM sync.replicas WHERE id = %s", (rid,)) and time.monotonic() < t + 60:
        time.sleep(0.05)
    print("within 5 s" if time.monotonic() - t < 5 else f"after {time.monotonic() - t:.1f} s")
elif action == "sync":
    for _ in range(20):
        if not any(a or f for a, f in r.sync()):
            break
    wanted = s.wanted(rid).get("items", set())
    have = r.keys("items", ["id"])
    print(f"{len(have)}/{have == wanted}/{s.held(rid).get('items', set()) == wanted}/"
          f"{r.one('SELECT v FROM items WHERE id = 12')}")
PY
}

# 1. the pass commits the snapshot; its held rows follow once they can
R1=eeeeeeee-0000-0000-0000-000000000001
block $R1
q $DB "SELECT sync.replica_add('$R1')" >/dev/null
q $DB "SELECT sync.wake()" >/dev/null
due $R1 || true
check "the snapshot's messages committed before its held rows" \
	"$(q $DB "SELECT held_due = snapshot_number AND snapshot_end IS NOT NULL
	           AND (SELECT count(*) FROM sync.outbox o WHERE o.replica = r.id AND NOT o.dropped) > 1
	           FROM sync.replicas r WHERE id = '$R1'")" "t"
check "no held row recorded yet" "$(held $R1)" "0"
# first for the replica's pulls, a second without one at most (magic_sync.held_wait)
wait_for 10 $DB "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'" || true
check "the worker waits to record them" \
	"$(q $DB "SELECT wait_event_type FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'")" "Lock"
check "its filing meanwhile is refused at once, transiently, not made to wait for them" \
	"$(REP=$R1 REPF=$tmp/r1.db rep file_waiting)" "55P03 recording"
first=$(snapshot $R1)
unblock ROLLBACK
wait_for 30 $DB "SELECT held_due IS NULL FROM sync.replicas WHERE id = '$R1'" || true
check "then every row is recorded held" "$(held $R1)" "$ROWS"
check "by the messages of its snapshot, with the version planned" \
	"$(q $DB "SELECT count(*) FROM sync.held h JOIN sync.replicas r ON r.id = h.replica
	           WHERE h.replica = '$R1' AND h.number BETWEEN r.snapshot_number AND r.snapshot_end
	             AND h.since = h.number AND h.note = 0 AND h.taken IS NULL")" "$ROWS"
check "and the snapshot is the one written" "$(snapshot $R1)" "$first"

# 2. the worker dies between the two: the next pass provisions the replica again
R2=eeeeeeee-0000-0000-0000-000000000002
block $R2
q $DB "SELECT sync.replica_add('$R2')" >/dev/null
q $DB "SELECT sync.wake()" >/dev/null
due $R2 || true
first=$(snapshot $R2)
pid=$(worker_pid)
q $DB "SELECT pg_terminate_backend($pid)" >/dev/null
unblock ROLLBACK
wait_for 60 $DB "SELECT held_due IS NULL AND NOT provision AND snapshot_number > ${first:-0}
                 FROM sync.replicas WHERE id = '$R2'" || true
check "a worker that died before the held rows: the replica is provisioned again" \
	"$(q $DB "SELECT held_due IS NULL AND NOT provision AND snapshot_number > ${first:-0} FROM sync.replicas WHERE id = '$R2'")" "t"
check "and every row recorded held, once" "$(held $R2)" "$ROWS"
check "by its new snapshot" \
	"$(q $DB "SELECT count(*) FROM sync.held h JOIN sync.replicas r ON r.id = h.replica
	           WHERE h.replica = '$R2' AND h.number BETWEEN r.snapshot_number AND r.snapshot_end")" "$ROWS"
check "its first snapshot's messages are dropped" \
	"$(q $DB "SELECT count(*) FROM sync.outbox WHERE replica = '$R2' AND number < $first AND NOT dropped")" "0"
check "the other replica is untouched" "$(held $R1)/$(snapshot $R1)" "$ROWS/$(snapshot $R1)"

# 3. a row recorded held meanwhile (sync.file's, say): the held rows fail, the replica is provisioned again
R3=eeeeeeee-0000-0000-0000-000000000003
block $R3
q $DB "SELECT sync.replica_add('$R3')" >/dev/null
q $DB "SELECT sync.wake()" >/dev/null
due $R3 || true
first=$(snapshot $R3)
unblock COMMIT
wait_for 60 $DB "SELECT held_due IS NULL AND NOT provision AND snapshot_number > ${first:-0}
                 FROM sync.replicas WHERE id = '$R3'" || true
check "held rows that fail to record: the replica is provisioned again" \
	"$(q $DB "SELECT held_due IS NULL AND NOT provision AND snapshot_number > ${first:-0} FROM sync.replicas WHERE id = '$R3'")" "t"
check "and every row recorded held, by the new snapshot" \
	"$(q $DB "SELECT count(*) FROM sync.held h JOIN sync.replicas r ON r.id = h.replica
	           WHERE h.replica = '$R3' AND h.number BETWEEN r.snapshot_number AND r.snapshot_end")" "$ROWS"

# 6. a replica that applied the snapshot files while its held rows are not
# recorded (the worker died in between, its next pass held back by a session):
# nothing is filed against the held set that lacks them; the next pass
# provisions the replica again, and it ends holding exactly what it wants,
# the rows changed meanwhile included
block $R6
q $DB "SELECT sync.replica_add('$R6')" >/dev/null
q $DB "SELECT sync.wake()" >/dev/null
due $R6 || true
first=$(snapshot $R6)
check "the replica applies the snapshot while its held rows wait" "$(rep apply)" "$ROWS"
q $DB "DELETE FROM items WHERE id BETWEEN 2 AND 11; UPDATE items SET v = 'changed' WHERE id = 12;
       INSERT INTO items VALUES (0, 'new')"
# a session takes the relay lock as the dying worker lets it go: the next
# one waits for it (src/pg/relay/relay.h, MS_RELAY_LOCK_KEY1 and 2)
mkfifo "$tmp/hold"
# not holding the blocker's fifo open (fd 3): it would never see its end
psql -XAtq -d $DB <"$tmp/hold" >/dev/null 2>&1 3>&- &
holder=$!
exec 4>"$tmp/hold"
echo "SELECT pg_advisory_lock(1835100009, 1668512110);" >&4
pid=$(worker_pid)
q $DB "SELECT pg_terminate_backend($pid)" >/dev/null
unblock ROLLBACK
wait_for 30 $DB "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND objid = 1668512110 AND granted AND pid <> $pid)" || true
sleep 1
check "its held rows are still due" "$(q $DB "SELECT held_due = snapshot_number FROM sync.replicas WHERE id = '$R6'")" "t"
check "a filing meanwhile is refused, transiently" "$(rep file)" "55P03"
check "and acknowledges nothing" "$(q $DB "SELECT acked_number FROM sync.replicas WHERE id = '$R6'")" "0"
exec 4>&-
wait "$holder"
wait_for 60 $DB "SELECT held_due IS NULL AND NOT provision AND snapshot_number > ${first:-0}
                 FROM sync.replicas WHERE id = '$R6'" || true
check "the next pass provisions it again" \
	"$(q $DB "SELECT held_due IS NULL AND NOT provision AND snapshot_number > ${first:-0} FROM sync.replicas WHERE id = '$R6'")" "t"
check "the replica holds exactly what it wants, as the server records" "$(rep sync)" "$((ROWS - 9))/True/True/changed"

# 4. magic_sync.held_later off: the pass records them itself, before its messages go
settings "ALTER SYSTEM SET magic_sync.held_later = off"
R4=eeeeeeee-0000-0000-0000-000000000004
add $R4
wait_for 30 $DB "SELECT NOT provision FROM sync.replicas WHERE id = '$R4'" || true
check "off, the pass records the held rows with its messages" \
	"$(q $DB "SELECT held_due IS NULL FROM sync.replicas WHERE id = '$R4'")/$(held $R4)" "t/$((ROWS - 9))"

# 5. more than magic_sync.fill_bytes of them: those past the bound are recorded in the pass
q $DB "ALTER SYSTEM SET magic_sync.held_later = on" >/dev/null
q $DB "ALTER SYSTEM SET magic_sync.fill_bytes = 64" >/dev/null
q $DB "SELECT pg_reload_conf()" >/dev/null
q $DB "INSERT INTO items SELECT g, 'v' || g FROM generate_series($((ROWS + 1)), 30000) g"
q $DB "SELECT sync.wake()" >/dev/null
wait_for 60 $DB "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)" || true
sleep 1
R5=eeeeeeee-0000-0000-0000-000000000005
# the first row's held row waits: it is among those kept for after the pass
mkfifo "$tmp/in"
psql -XAtq -d $DB <"$tmp/in" >/dev/null 2>&1 &
blocker=$!
exec 3>"$tmp/in"
echo "BEGIN; INSERT INTO sync.held (replica, tab, key, number) VALUES ('$R5', $TAB, sync.key(ARRAY['1']), 0);" >&3
sleep 1
q $DB "SELECT sync.replica_add('$R5')" >/dev/null
q $DB "SELECT sync.wake()" >/dev/null
due $R5 || true
check "past the bound, the rest are recorded by the pass" \
	"$(q $DB "SELECT count(*) BETWEEN 1 AND 29999 FROM sync.held WHERE replica = '$R5'")" "t"
unblock ROLLBACK
wait_for 30 $DB "SELECT held_due IS NULL FROM sync.replicas WHERE id = '$R5'" || true
check "and every row is recorded held once the kept ones are" "$(held $R5)" "$((30000 - 9))"

# 7. the held rows wait for the replica's pulls (magic_sync.held_wait): not
# recorded while it pulls its snapshot, at once once it pulled the last
# message; a worker that dies meanwhile leaves held_due set, and the next
# pass provisions the replica again.  The gap allowed between two pulls is
# long here, so that this script's own pace under load does not end the wait.
settings "ALTER SYSTEM RESET magic_sync.fill_bytes" "ALTER SYSTEM SET magic_sync.message_bytes = 8192" \
	"ALTER SYSTEM SET magic_sync.held_wait = '60s'" "ALTER SYSTEM SET magic_sync.held_pull_gap = '10s'"
R7=eeeeeeee-0000-0000-0000-000000000007
add $R7
due $R7 || true
check "the snapshot is many messages" \
	"$(q $DB "SELECT count(*) > 20 FROM sync.outbox WHERE replica = '$R7' AND NOT dropped")" "t"
check "while the replica pulls its snapshot, no held row is recorded (a reload meanwhile too), they stay due, the worker waits for its pulls and a filing is refused, transiently" \
	"$(REP=$R7 REPF=$tmp/r7.db rep trickle)" "held [0] due [True] 55P03; magic_sync held rows wait for the snapshot's pulls"
check "once it pulled the last message, they are recorded, not a gap later" \
	"$(REP=$R7 REPF=$tmp/r7.db rep rest)" "within 5 s"
check "every row of them" "$(held $R7)" "$((30000 - 9))"
q $DB "UPDATE items SET v = 'after' WHERE id = 12; DELETE FROM items WHERE id = 20" >/dev/null
check "it holds exactly what it wants, as the server records, the write after included" \
	"$(REP=$R7 REPF=$tmp/r7.db rep sync)" "$((30000 - 10))/True/True/after"

R8=eeeeeeee-0000-0000-0000-000000000008
add $R8
due $R8 || true
first=$(snapshot $R8)
# the worker dies as it waits, then a write
check "the worker dies as it waits for the pulls" \
	"$(REP=$R8 REPF=$tmp/r8.db rep trickle_kill)" "held [0] due [True] 55P03; magic_sync held rows wait for the snapshot's pulls"
# its new snapshot committed (its held rows wait for its pulls, or are
# recorded); the replica pulls it at once, as an agent would: it waited
# for magic_sync.held_pull_gap (10 s here) before
wait_for 60 $DB "SELECT NOT provision AND snapshot_number > ${first:-0} FROM sync.replicas WHERE id = '$R8'" || true
check "a worker that died waiting: the replica is provisioned again, its held rows recorded as it pulls" \
	"$(REP=$R8 REPF=$tmp/r8.db rep rest)" "within 5 s"
check "by its new snapshot" \
	"$(q $DB "SELECT held_due IS NULL AND NOT provision AND snapshot_number > ${first:-0} FROM sync.replicas WHERE id = '$R8'")" "t"
check "and holds exactly what it wants, as the server records" \
	"$(REP=$R8 REPF=$tmp/r8.db rep sync)" "$((30000 - 10))/True/True/again"

# 9. the wait yields to work: a commit (here another session's write) ends
# it while the snapshot is still half pulled, and the write reaches the
# replica with its snapshot
R10=eeeeeeee-0000-0000-0000-000000000010
add $R10
due $R10 || true
check "a write while the replica pulls its snapshot ends the wait: the held rows are recorded before its last pull" \
	"$(REP=$R10 REPF=$tmp/r10.db rep trickle_write)" \
	"held [0] due [True] 55P03; magic_sync held rows wait for the snapshot's pulls; recorded within 5 s, True half pulled"
check "and it holds exactly what it wants, as the server records, the write included" \
	"$(REP=$R10 REPF=$tmp/r10.db rep sync)" "$((30000 - 10))/True/True/during"

# 8. no pull at all: recorded a gap after the pass, not at magic_sync.held_wait
settings "ALTER SYSTEM RESET magic_sync.held_pull_gap"
R9=eeeeeeee-0000-0000-0000-000000000009
add $R9
wait_for 30 $DB "SELECT NOT provision FROM sync.replicas WHERE id = '$R9'" || true
wait_for 15 $DB "SELECT held_due IS NULL FROM sync.replicas WHERE id = '$R9'" || true
check "a replica that does not pull: its held rows are recorded all the same" "$(held $R9)" "$((30000 - 10))"

finish
