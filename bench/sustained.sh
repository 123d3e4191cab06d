#!/bin/bash
# sustained.sh: the relay under a sustained write load (issue 14).  pgbench's
# TPC-B-like script, 8 clients for 60 s, on its four tables mirrored
# (broadcast) to two replicas, with the preloaded relay worker (default
# settings) and two real agents applying to SQLite files, against the same
# run with the noting triggers disabled (unmirrored: nothing noted, nothing
# relayed).  Figures: the TPS ratio (target >= 0.8); the age of the oldest
# note not yet planned, sampled every second during the mirrored run (target:
# max <= 1 s); and the agents' lag when pgbench stops: the messages they had
# yet to apply, and how long until every note was done and each agent had
# acknowledged every message written for it.  The unmirrored run goes before
# the mirrored one and again after it (the ratio is against their mean); the
# relay's CPU, and its messages a second, say how it spent the mirrored one;
# the machine's CPU and the WAL a transaction, what a mirrored one costs more
# than an unmirrored one, and how much of it is the relay's and the agents'
# (the rest bounds the ratio whatever they cost).  Default settings
# (synchronous_commit on), pgbench at scale 10 (10 branches: a scale of 1
# makes every transaction wait on the one branch row, and any work inside
# one, noting included, waits with it).
#
#   bench/sustained.sh [seconds] [clients] [scale]
#
# With MS_BENCH_PERF=dir (a profile, not a figure: perf and pg_stat_statements
# cost the run some of its speed), dir gets where the mirrored run went:
# relay.txt and agents.txt (perf's top symbols), statements.txt (every
# statement of the minute by its time, pg_stat_statements with track = all),
# tables.txt (how each table of sync and public was written, and vacuumed),
# waits.txt (each second, what each agent's session waited on, and on whom)
# and wal.txt (pg_waldump --stats of the mirrored run's WAL, by kind of record).
set -eu
cd "$(dirname "$0")/.."
seconds=${1:-60}
clients=${2:-8}
scale=${3:-10}
tables="pgbench_branches pgbench_tellers pgbench_accounts pgbench_history"

if [ -z "${MS_BENCH_INSIDE:-}" ]; then
	. scripts/lib.sh
	ms_ready
	pgss=()
	[ -n "${MS_BENCH_PERF:-}" ] && pgss=(-o shared_preload_libraries=magic_sync,pg_stat_statements -o pg_stat_statements.track=all)
	# MS_BENCH_OPTS="-o name=value ...": settings of an experiment (the figures are for the defaults)
	# shellcheck disable=SC2086
	ms_cluster "${pgss[@]}" ${MS_BENCH_OPTS:-} -o max_wal_size=4GB -o checkpoint_timeout=30min \
		-o magic_sync.database=bench \
		env MS_BENCH_INSIDE=1 "$0" "$seconds" "$clients" "$scale"
	exit $?
fi

sql() { psql -q -X -v ON_ERROR_STOP=1 -d bench "$@"; }
val() { psql -X -A -t -d bench -c "$1"; }
work=$(mktemp -d)
agents=""
trap 'touch "$work/sampled"; for p in $agents; do kill $p 2>/dev/null || true; done; rm -rf "$work"' EXIT

createdb bench
pgbench -q -i -s "$scale" bench >/dev/null 2>&1
sql -f bench/pgbench_mirror.sql >/dev/null
# sync.mirror notes the rows a table has, for the replicas there are: none yet,
# so the worker only marks them done, and the replicas' snapshots carry the rows
sql -c "SELECT sync.wake()" >/dev/null
for _ in $(seq 1200); do [ "$(val "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)")" = t ] && break; sleep 0.5; done
sql >/dev/null <<'SQL'
SELECT sync.replica_add('aaaaaaaa-0000-0000-0000-000000000001');
SELECT sync.replica_add('aaaaaaaa-0000-0000-0000-000000000002');
SELECT sync.wake();
SQL
for i in 1 2; do
	./magic_sync_agent --server "dbname=bench" --listen "dbname=bench" --replica "aaaaaaaa-0000-0000-0000-00000000000$i" \
		--db "$work/replica$i.db" --quiet &
	agents="$agents $!"
done
# provisioned, applied and acknowledged
caught_up() {
	val "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)
	    AND NOT EXISTS (SELECT FROM sync.replicas WHERE provision OR acked_number < last_number)"
}
for _ in $(seq 600); do [ "$(caught_up)" = t ] && break; sleep 0.5; done
[ "$(caught_up)" = t ] || { echo "the replicas were never provisioned"; exit 1; }

# ENABLE TRIGGER USER enables the noting triggers as ORIGIN, not ALWAYS: sync.check()
# reports it and the relay refuses to run (it then relayed nothing while pgbench
# ran); sync.retrigger writes them again as they were
triggers() {
	for t in $tables; do
		if [ "$1" = DISABLE ]; then echo "ALTER TABLE $t DISABLE TRIGGER USER;"; else echo "SELECT sync.retrigger('$t');"; fi
	done | sql >/dev/null
}
# the machine's busy CPU ticks so far (every process's, not idle nor waiting on I/O)
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
# where the WAL is now, and the bytes written since: what a run wrote is what its commits waited to flush
lsn() { val "SELECT pg_current_wal_lsn()"; }
wal_since() { val "SELECT pg_current_wal_lsn() - '$1'::pg_lsn"; }
run() {
	pgbench -n -T "$seconds" -c "$clients" -j 2 bench 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
# sample FILE: the oldest pending note's age, every second, into FILE, until
# sampled; from one psql session for the whole run (a psql and a backend
# started every second took 5 % of the machine), and during every run,
# unmirrored ones too, so that both sides of the ratio carry what it costs
sample() {
	rm -f "$work/sampled"
	(
		while [ ! -e "$work/sampled" ]; do
			echo "SELECT coalesce(extract(epoch FROM clock_timestamp() - min(noted)), 0) FROM sync.notes WHERE NOT done;"
			sleep 1
		done
	) | psql -X -A -t -q -d bench >"$1" &
	sampler=$!
}
# sampled: stop sampling now; the session ends within a second (wait $sampler)
sampled() { touch "$work/sampled"; }

# unmirrored: the triggers off, the worker and the agents idle; its history rows then go, unnoted
triggers DISABLE
sql -c "VACUUM ANALYZE" -c "CHECKPOINT"
max_history=$(val "SELECT coalesce(max(id), 0) FROM pgbench_history")
wal_from=$(lsn)
busy0=$(busy)
sample "$work/ages_plain"
plain=$(run)
sampled
busy_plain=$(($(busy) - busy0))
wal_plain=$(wal_since "$wal_from")
sql -c "DELETE FROM pgbench_history WHERE id > $max_history" -c "VACUUM ANALYZE" -c "CHECKPOINT"
triggers ENABLE

# mirrored, the oldest pending note's age sampled every second
wait $sampler
sample "$work/ages"
[ -n "${MS_BENCH_PERF:-}" ] && (
	while :; do
		val "SELECT string_agg(a.wait_event_type || ':' || a.wait_event || ' ' || left(a.query, 40) || ' blocked by ' || coalesce((SELECT left(b.query, 60) || ' ' || coalesce(b.wait_event, 'running') FROM pg_stat_activity b WHERE b.pid = (pg_blocking_pids(a.pid))[1]), '-'), E'\n') FROM pg_stat_activity a WHERE a.application_name = 'magic_sync_agent' AND a.state = 'active'" >>"$MS_BENCH_PERF/waits.txt"
		sleep 1
	done
) &
waits=$!
# the relay's CPU and its passes: each pass that sends writes a message to
# each replica, so the messages written to one are at least its passes
relay_pid=$(val "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'")
agent_backends=$(val "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE application_name = 'magic_sync_agent'")
ticks_of() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo $t; }
cpu() { ticks_of $relay_pid; }
cpu0=$(cpu)
agents0=$(ticks_of $agents)
agent_backends0=$(ticks_of $agent_backends)
msg0=$(val "SELECT last_value FROM sync.message_seq")
note0=$(val "SELECT last_value FROM sync.note_seq")
# MS_BENCH_PERF=dir: perf record on the relay and on the agents meanwhile, and
# every statement by pg_stat_statements
if [ -n "${MS_BENCH_PERF:-}" ]; then
	perf record -q -o "$MS_BENCH_PERF/relay.data" -p "$relay_pid" -- sleep "$seconds" >/dev/null 2>&1 &
	perfs=$!
	perf record -q -o "$MS_BENCH_PERF/agents.data" -p "$(echo $agents | tr ' ' ,)" -- sleep "$seconds" >/dev/null 2>&1 &
	perfs="$perfs $!"
	# the whole machine, to say where "the rest" went: each process's kind,
	# read of pg_stat_activity halfway through the run (pgbench's sessions
	# live as long as the run)
	perf record -q -a -o "$MS_BENCH_PERF/machine.data" -- sleep "$seconds" >/dev/null 2>&1 &
	perfs="$perfs $!"
	(
		sleep $((seconds / 2))
		val "SELECT pid, CASE WHEN backend_type <> 'client backend' THEN backend_type
		                      WHEN application_name = 'pgbench' THEN 'pgbench session'
		                      WHEN application_name = 'magic_sync_agent' THEN 'agent session'
		                      ELSE 'other session' END FROM pg_stat_activity" | tr '|' ' ' >"$MS_BENCH_PERF/pids.txt"
		for p in $agents; do echo "$p agent"; done >>"$MS_BENCH_PERF/pids.txt"
		echo "$(pgrep -x pgbench | head -1) pgbench" >>"$MS_BENCH_PERF/pids.txt"
	) &
	sql -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "SELECT pg_stat_statements_reset()" >/dev/null
fi
wal_from=$(lsn)
busy0=$(busy)
mirrored=$(run)
busy_mirrored=$(($(busy) - busy0))
wal_to=$(lsn)
wal_mirrored=$(val "SELECT '$wal_to'::pg_lsn - '$wal_from'::pg_lsn")
if [ -n "${MS_BENCH_PERF:-}" ]; then
	# what the mirrored run's WAL was, by kind of record
	"$(pg_config --bindir)/pg_waldump" --stats=record -p "$(val "SHOW data_directory")/pg_wal" -s "$wal_from" -e "$wal_to" \
		>"$MS_BENCH_PERF/wal.txt" 2>&1 || true
	val "SELECT round(total_exec_time)::text || ' ms ' || calls || ' calls ' || rows || ' rows  ' || left(regexp_replace(query, '\s+', ' ', 'g'), 300)
	       FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 40" >"$MS_BENCH_PERF/statements.txt"
	# how each table was written (since it was made: the mirrored run's updates, most of them), and vacuumed
	sql -c "SELECT pg_stat_force_next_flush()" -c "SELECT schemaname || '.' || relname AS t, n_tup_ins, n_tup_upd, n_tup_hot_upd,
	          n_tup_del, n_dead_tup, autovacuum_count, autoanalyze_count FROM pg_stat_all_tables
	         WHERE schemaname IN ('sync', 'public') AND n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY 1" \
		>"$MS_BENCH_PERF/tables.txt"
fi
cpu1=$(cpu)
agents1=$(ticks_of $agents)
agent_backends1=$(ticks_of $agent_backends)
msg1=$(val "SELECT last_value FROM sync.message_seq")
note1=$(val "SELECT last_value FROM sync.note_seq")
sampled
[ -n "${MS_BENCH_PERF:-}" ] && kill $waits 2>/dev/null
behind=$(val "SELECT string_agg(n::text, ', ' ORDER BY r) FROM (SELECT r.id AS r, count(o.number) AS n
               FROM sync.replicas r LEFT JOIN sync.outbox o ON o.replica = r.id AND o.number > r.acked_number
              GROUP BY r.id) s")
pending=$(val "SELECT count(*) FROM sync.notes WHERE NOT done")
start=$(date +%s%N)
for _ in $(seq 1200); do [ "$(caught_up)" = t ] && break; sleep 0.1; done
lag=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$(caught_up)" = t ] || lag="never (gave up after $lag)"
notes=$(val "SELECT last_value FROM sync.note_seq")

# unmirrored again, after: the machine is shared, and what else ran during the
# first unmirrored run may not run during the mirrored one; the ratio is
# against the mean of the two
max_history=$(val "SELECT coalesce(max(id), 0) FROM pgbench_history")
triggers DISABLE
sql -c "VACUUM ANALYZE" -c "CHECKPOINT"
wait $sampler
sample "$work/ages_plain"
plain_after=$(run)
sampled
wait $sampler
sql -c "DELETE FROM pgbench_history WHERE id > $max_history" >/dev/null
triggers ENABLE
if [ -n "${MS_BENCH_PERF:-}" ]; then
	wait $perfs
	for f in relay agents; do
		perf report -q -i "$MS_BENCH_PERF/$f.data" --no-children --sort dso,sym 2>/dev/null | head -70 >"$MS_BENCH_PERF/$f.txt"
	done
	# machine.txt: the machine's samples by kind of process (a process not
	# seen halfway, an autovacuum worker say, by its command), then the
	# pgbench sessions' top symbols
	perf report -q -i "$MS_BENCH_PERF/machine.data" --no-children --sort pid 2>/dev/null |
		awk 'NR == FNR { kind[$1] = $2 " " $3; next }
		     { split($2, a, ":"); k = (a[1] in kind) ? kind[a[1]] : a[2]; sub(/%/, "", $1); share[k] += $1 }
		     END { for (k in share) printf "%6.2f %%  %s\n", share[k], k }' "$MS_BENCH_PERF/pids.txt" - |
		sort -rn >"$MS_BENCH_PERF/machine.txt"
	echo "the pgbench sessions:" >>"$MS_BENCH_PERF/machine.txt"
	perf report -q -i "$MS_BENCH_PERF/machine.data" --no-children --sort dso,sym \
		--pid "$(awk '$2 == "pgbench" && $3 == "session" { printf "%s%s", (n++ ? "," : ""), $1 }' "$MS_BENCH_PERF/pids.txt")" 2>/dev/null |
		head -60 >>"$MS_BENCH_PERF/machine.txt"
fi
max_age=$(sort -g "$work/ages" | tail -1)
samples=$(wc -l <"$work/ages")

printf 'pgbench -c %d -T %d, scale %d, 4 tables broadcast to 2 replicas, the worker and two agents\n' \
	"$clients" "$seconds" "$scale"
printf '  unmirrored  %10.1f tps before, %.1f after\n' "$plain" "$plain_after"
printf '  mirrored    %10.1f tps\n' "$mirrored"
printf '  mirrored / unmirrored              %.3f  (target >= 0.8; against the first alone %.3f)\n' \
	"$(echo "2 * $mirrored / ($plain + $plain_after)" | bc -l)" "$(echo "$mirrored / $plain" | bc -l)"
printf '  WAL a transaction: unmirrored %.0f bytes (the first run), mirrored %.0f (with what the relay and the agents wrote)\n' \
	"$(echo "$wal_plain / ($plain * $seconds)" | bc -l)" "$(echo "$wal_mirrored / ($mirrored * $seconds)" | bc -l)"
printf '  oldest pending note, max over %d samples  %.3f s  (target <= 1 s)\n' "$samples" "$max_age"
printf '    p50 %.3f s, p90 %.3f s; the samples over 1 s: %s\n' \
	"$(sort -g "$work/ages" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')" \
	"$(sort -g "$work/ages" | awk '{ a[NR] = $1 } END { print a[int(NR * 0.9 + 0.5)] }')" \
	"$(awk '$1 > 1 { printf "%s%d: %.1f s", (n++ ? ", " : ""), NR, $1 } END { if (!n) printf "none" }' "$work/ages")"
printf '  when pgbench stopped: %s notes pending, messages each agent had yet to apply: %s\n' "$pending" "$behind"
printf '  caught up (every note done, every message acknowledged) %s ms later; %s notes in all\n' "$lag" "$notes"
ticks=$(getconf CLK_TCK)
printf '  the relay meanwhile: %.1f s of CPU in %d s; %d messages to each replica (passes that sent: at most that many),\n' \
	"$(echo "($cpu1 - $cpu0) / $ticks" | bc -l)" "$seconds" "$(( (msg1 - msg0) / 2 ))"
printf '    %.0f a second, %.0f notes written each (%d notes, %.0f a second)\n' \
	"$(echo "($msg1 - $msg0) / 2 / $seconds" | bc -l)" "$(echo "($note1 - $note0) * 2 / ($msg1 - $msg0 + 1)" | bc -l)" \
	"$(( note1 - note0 ))" "$(echo "($note1 - $note0) / $seconds" | bc -l)"
printf '  the two agents: %.1f s of CPU, their server sessions (sync.pull, sync.file) %.1f s\n' \
	"$(echo "($agents1 - $agents0) / $ticks" | bc -l)" "$(echo "($agent_backends1 - $agent_backends0) / $ticks" | bc -l)"
# the share of the machine the relay and the agents took from pgbench
printf '  the relay, the agents and their sessions: %.1f %% of the %d cores for the %d s\n' \
	"$(echo "100 * ($cpu1 - $cpu0 + $agents1 - $agents0 + $agent_backends1 - $agent_backends0) / $ticks / $(nproc) / $seconds" | bc -l)" \
	"$(nproc)" "$seconds"
# where a mirrored transaction's CPU went, against an unmirrored one's: the
# machine's busy time over the transactions.  What is neither the relay's nor
# the agents' is pgbench's, its backends' with their noting, and everything
# else that ran: with a relay and agents that cost nothing, the ratio would be
# at most unmirrored / that
ms_tx() { echo "1000 * $1 / $ticks / ($2 * $seconds)" | bc -l; }
relay_tx=$(ms_tx "$((cpu1 - cpu0))" "$mirrored")
agents_tx=$(ms_tx "$((agents1 - agents0 + agent_backends1 - agent_backends0))" "$mirrored")
plain_tx=$(ms_tx "$busy_plain" "$plain")
mirrored_tx=$(ms_tx "$busy_mirrored" "$mirrored")
rest_tx=$(echo "$mirrored_tx - $relay_tx - $agents_tx" | bc -l)
printf '  CPU a transaction (the machine'"'"'s busy time): unmirrored %.3f ms (the first run), mirrored %.3f ms:\n' "$plain_tx" "$mirrored_tx"
printf '    the relay %.3f, the agents and their sessions %.3f, the rest (pgbench, its backends noting) %.3f;\n' \
	"$relay_tx" "$agents_tx" "$rest_tx"
printf '    were the relay and the agents free, the ratio would be at most %.3f\n' "$(echo "$plain_tx / $rest_tx" | bc -l)"
