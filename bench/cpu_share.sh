#!/bin/bash
# cpu_share.sh: what a share of the machine taken by something else costs
# pgbench, with no magic_sync at all: the baseline bench/sustained.sh's ratio
# is read against.  pgbench's TPC-B-like script (8 clients, scale 10,
# synchronous_commit on) alone, then beside two processes busy 30 % of each
# 10 ms (what the relay and the agents are to it on the same cores), rounds
# alternating.  Figures: the TPS ratio, the share of the machine the busy
# processes got, and pgbench's CPU a transaction (it and its backends: the
# machine's busy time less the busy processes') both ways.  No target.
#
#   bench/cpu_share.sh [rounds] [seconds]
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-2}
seconds=${2:-20}

if [ -z "${MS_BENCH_INSIDE:-}" ]; then
	. scripts/lib.sh
	ms_ready
	ms_cluster -o max_wal_size=4GB -o checkpoint_timeout=30min \
		env MS_BENCH_INSIDE=1 "$0" "$rounds" "$seconds"
	exit $?
fi

createdb bench
pgbench -q -i -s 10 bench >/dev/null 2>&1
ticks=$(getconf CLK_TCK)
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
cpu_of() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
run() { pgbench -n -T "$seconds" -c 8 -j 2 bench 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p'; }
spinner() {
	/usr/bin/python3 -c '
import time
while True:
    t = time.monotonic()
    while time.monotonic() - t < 0.003:
        pass
    time.sleep(0.007)
' >/dev/null 2>&1 &
	echo $!
}
ratios=""
for r in $(seq "$rounds"); do
	psql -q -X -d bench -c CHECKPOINT
	b0=$(busy)
	alone=$(run)
	b_alone=$(($(busy) - b0))
	psql -q -X -d bench -c CHECKPOINT
	s1=$(spinner)
	s2=$(spinner)
	sleep 1
	c0=$(($(cpu_of "$s1") + $(cpu_of "$s2")))
	b0=$(busy)
	beside=$(run)
	b_beside=$(($(busy) - b0))
	c=$(($(cpu_of "$s1") + $(cpu_of "$s2") - c0))
	kill "$s1" "$s2"
	ratio=$(echo "$beside / $alone" | bc -l)
	ratios="$ratios $ratio"
	printf 'round %d  alone %8.1f tps (%.3f ms CPU a transaction)  beside %8.1f tps (%.3f ms), the busy processes %.1f %% of the machine: %.3f\n' \
		"$r" "$alone" "$(echo "1000 * $b_alone / $ticks / ($alone * $seconds)" | bc -l)" \
		"$beside" "$(echo "1000 * ($b_beside - $c) / $ticks / ($beside * $seconds)" | bc -l)" \
		"$(echo "100 * $c / $ticks / ($(nproc) * $seconds)" | bc -l)" "$ratio"
done
printf 'beside / alone, median of rounds  %.3f\n' "$(echo "$ratios" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')"
