#!/bin/bash
# apply_floor.sh: the floor under bench/sustained.sh's ratio on this machine.
# pgbench's TPC-B-like script (8 clients, scale 10, synchronous_commit on,
# no magic_sync at all) alone, then beside two processes that apply the rows
# of its transactions to two SQLite files (bench/apply_floor.c: the
# plainest prepared upserts, one SQLite transaction every 200 ms, with the
# agent's settings) at TARGET times the TPS pgbench had alone, then alone
# again; rounds of the three.  Nothing of magic_sync runs: no noting, no
# relay, no pulling, no decoding, no acknowledging; only the writes the
# replicas' files cannot do without.
#
# If pgbench beside them keeps less than TARGET of its speed, no build of
# the relay and the agents reaches TARGET in bench/sustained.sh while the
# agents share the server's cores: at TARGET its agents must apply at least
# this many rows, and applying them alone costs more.  Figures: the TPS
# each way and their ratio, the rows the appliers kept up with against what
# was asked, and their share of the machine.
#
# With --notes-only, the same mirrored tables with no relay at all (the
# cluster's magic_sync.database names no database, so no worker starts): the
# run beside the appliers has the noting triggers on, and its notes are left
# for no one (deleted between rounds).  What the noting and the applying
# leave together: if it is below TARGET, no relay, however cheap, reaches
# TARGET in bench/sustained.sh while the agents share the server's cores.
#
# With --noting, pgbench's four tables are mirrored (broadcast, as in
# bench/sustained.sh) to no replica, with the preloaded relay worker: the
# run beside the appliers has the noting triggers on, and the relay
# consumes the notes (there is no replica to plan for); the runs alone have
# the triggers off: what every write pays on the server (its notes, and a
# relay to take them) beside the floor; a measure of this build, not a
# bound (a relay with replicas passes at another pace).
#
#   bench/apply_floor.sh [--noting | --notes-only] [rounds] [seconds] [target]
set -eu
cd "$(dirname "$0")/.."
noting=""
database=bench
if [ "${1:-}" = --noting ]; then
	noting=1
	shift
elif [ "${1:-}" = --notes-only ]; then
	noting=only
	database=no_such_database
	shift
fi
rounds=${1:-2}
seconds=${2:-30}
target=${3:-0.8}
scale=10

if [ -z "${MS_BENCH_INSIDE:-}" ]; then
	. scripts/lib.sh
	ms_ready
	# the settings bench/sustained.sh's cluster has
	ms_cluster -o max_wal_size=4GB -o checkpoint_timeout=30min -o magic_sync.database=$database \
		env MS_BENCH_INSIDE=1 MS_FLOOR_NOTING="$noting" "$0" "$rounds" "$seconds" "$target"
	exit $?
fi
noting=${MS_FLOOR_NOTING:-}
tables="pgbench_branches pgbench_tellers pgbench_accounts pgbench_history"

work=$(mktemp -d)
appliers=""
trap 'for p in $appliers; do kill $p 2>/dev/null || true; done; rm -rf "$work"' EXIT
cc -O2 -Wall -Wextra -Werror -o "$work/apply_floor" bench/apply_floor.c -lsqlite3
createdb bench
pgbench -q -i -s "$scale" bench >/dev/null 2>&1
if [ -n "$noting" ]; then
	psql -q -X -v ON_ERROR_STOP=1 -d bench -f bench/pgbench_mirror.sql -c "SELECT sync.wake()" >/dev/null
	# sync.mirror noted every row the tables have: taken before the rounds
	if [ "$noting" = only ]; then
		[ -z "$(psql -X -A -t -d bench -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'")" ] ||
			{ echo "a relay runs: --notes-only measures without one"; exit 1; }
	else
		for _ in $(seq 1200); do
			[ "$(psql -X -A -t -d bench -c "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)")" = t ] && break
			sleep 0.5
		done
	fi
fi
# with no relay, the notes are left for no one: gone before each run beside
# the appliers, so that each notes into a table as small as a relay keeps it
drop_notes() {
	[ "$noting" = only ] || return 0
	psql -q -X -v ON_ERROR_STOP=1 -d bench -c "DELETE FROM sync.notes" -c "VACUUM sync.notes" >/dev/null
}
# triggers ON|OFF: the noting triggers as sync.retrigger writes them, or disabled
triggers() {
	[ -n "$noting" ] || return 0
	for t in $tables; do
		if [ "$1" = OFF ]; then echo "ALTER TABLE $t DISABLE TRIGGER USER;"; else echo "SELECT sync.retrigger('$t');"; fi
	done | psql -q -X -v ON_ERROR_STOP=1 -d bench >/dev/null
}
triggers OFF
"$work/apply_floor" init "$work/replica1.db" "$scale"
cp "$work/replica1.db" "$work/replica2.db"

# the relay's CPU so far, in ticks (0 without --noting: there is none)
relay_ticks() {
	local pid
	pid=$(psql -X -A -t -d bench -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'")
	if [ -n "$pid" ]; then awk '{ print $14 + $15 }' "/proc/$pid/stat"; else echo 0; fi
}
run() { pgbench -n -T "$seconds" -c 8 -j 2 bench 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p'; }
ratios=""
for r in $(seq "$rounds"); do
	psql -q -X -d bench -c CHECKPOINT
	alone=$(run)
	drop_notes
	triggers ON
	psql -q -X -d bench -c CHECKPOINT
	rate=$(echo "$target * $alone" | bc -l)
	appliers=""
	for i in 1 2; do
		"$work/apply_floor" run "$work/replica$i.db" "$scale" "$rate" "$seconds" >"$work/applied$i" &
		appliers="$appliers $!"
	done
	relay0=$(relay_ticks)
	beside=$(run)
	relay_cpu=$(echo "($(relay_ticks) - $relay0) / $(getconf CLK_TCK)" | bc -l)
	wait $appliers
	appliers=""
	pending=$([ -z "$noting" ] || psql -X -A -t -d bench -c "SELECT count(*) FROM sync.notes WHERE NOT done")
	triggers OFF
	psql -q -X -d bench -c CHECKPOINT
	after=$(run)
	ratio=$(echo "2 * $beside / ($alone + $after)" | bc -l)
	ratios="$ratios $ratio"
	printf 'round %d  alone %.1f tps, %.1f after; beside two appliers asked for %.0f transactions a second each: %.1f tps: %.3f\n' \
		"$r" "$alone" "$after" "$rate" "$beside" "$ratio"
	cpu=0
	for i in 1 2; do
		read -r done took commits used <"$work/applied$i"
		printf '    applier %d: %d transactions (%d rows) in %.1f s, %.0f a second (asked %.0f), %d commits, %.2f s of CPU (%.1f us a row)\n' \
			"$i" "$done" "$((4 * done))" "$took" "$(echo "$done / $took" | bc -l)" "$rate" "$commits" "$used" \
			"$(echo "1000000 * $used / (4 * $done)" | bc -l)"
		cpu=$(echo "$cpu + $used" | bc -l)
	done
	printf '    the appliers: %.1f %% of the %d cores\n' "$(echo "100 * $cpu / ($(nproc) * $seconds)" | bc -l)" "$(nproc)"
	if [ "$noting" = only ]; then
		printf '    the noting: %s notes written beside the appliers, left for no relay\n' "$pending"
	elif [ "$noting" = 1 ]; then
		printf '    the relay: %.1f s of CPU taking the notes (%.1f %% of the machine), %s pending when pgbench stopped\n' \
			"$relay_cpu" "$(echo "100 * $relay_cpu / ($(nproc) * $seconds)" | bc -l)" "$pending"
	fi
done
if [ "$noting" = only ]; then
	verdict="what the noting and the applying leave: bench/sustained.sh cannot pass $target here, with any relay, when this is below it"
elif [ -n "$noting" ]; then
	verdict="what the noting and this build's relay taking the notes leave bench/sustained.sh, before any replica"
else
	verdict="bench/sustained.sh cannot pass $target here when this is below it"
fi
printf 'beside / alone, median of rounds  %.3f  (%s)\n' \
	"$(echo "$ratios" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')" "$verdict"
