#!/bin/bash
# notes_pgbench.sh: what noting costs a writer.  pgbench's TPC-B-like script
# with every pgbench table mirrored (the C trigger), against the same run with
# the triggers disabled (plain) and with an equivalent PL/pgSQL noting
# trigger, alternated round by round on one throw-away cluster with
# synchronous_commit = off.  Targets: C / plain >= 0.85, and the C trigger's
# overhead (time per transaction over plain) at most half of PL/pgSQL's.
#
#   bench/notes_pgbench.sh [rounds] [seconds] [clients] [scale]
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-10}
clients=${3:-4}
scale=${4:-10}
tables="pgbench_branches pgbench_tellers pgbench_accounts pgbench_history"

if [ -z "${MS_BENCH_INSIDE:-}" ]; then
	. scripts/lib.sh
	ms_ready
	ms_cluster -o synchronous_commit=off \
		-o max_wal_size=4GB -o checkpoint_timeout=30min \
		env MS_BENCH_INSIDE=1 "$0" "$rounds" "$seconds" "$clients" "$scale"
	exit $?
fi

sql() { psql -q -X -v ON_ERROR_STOP=1 -d bench "$@"; }

createdb bench
pgbench -q -i -s "$scale" bench >/dev/null 2>&1
sql <<'SQL'
CREATE EXTENSION magic_sync;
-- a mirrored table has a key: pgbench_history gets one, in every mode
ALTER TABLE pgbench_history ADD COLUMN id bigserial PRIMARY KEY;
SELECT sync.mirror('pgbench_branches', 'catalog', 'broadcast');
SELECT sync.mirror('pgbench_tellers', 'catalog', 'broadcast');
SELECT sync.mirror('pgbench_accounts', 'catalog', 'broadcast');
SELECT sync.mirror('pgbench_history', 'catalog', 'broadcast');

-- The same note written by PL/pgSQL: the key from the trigger's arguments,
-- nothing noted for an update that changed nothing.
CREATE FUNCTION bench_note() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
	n jsonb;
	o jsonb;
	k text;
	ok text;
BEGIN
	IF TG_OP <> 'DELETE' THEN n := to_jsonb(NEW); END IF;
	IF TG_OP <> 'INSERT' THEN o := to_jsonb(OLD); END IF;
	IF TG_OP = 'UPDATE' AND n = o THEN RETURN NULL; END IF;
	IF n IS NOT NULL THEN
		k := sync.key(ARRAY(SELECT n ->> TG_ARGV[i] FROM generate_series(3, 2 + TG_ARGV[2]::int) i));
	END IF;
	IF o IS NOT NULL THEN
		ok := sync.key(ARRAY(SELECT o ->> TG_ARGV[i] FROM generate_series(3, 2 + TG_ARGV[2]::int) i));
	END IF;
	INSERT INTO sync.notes (tab, source, key, old_key)
	VALUES (TG_ARGV[0]::int, 'r', coalesce(k, ok), CASE WHEN k <> ok THEN ok END);
	RETURN NULL;
END
$f$;
CREATE TRIGGER bench_plpgsql AFTER INSERT OR UPDATE OR DELETE ON pgbench_branches
	FOR EACH ROW EXECUTE FUNCTION bench_note('1', 'r', '1', 'bid');
CREATE TRIGGER bench_plpgsql AFTER INSERT OR UPDATE OR DELETE ON pgbench_tellers
	FOR EACH ROW EXECUTE FUNCTION bench_note('2', 'r', '1', 'tid');
CREATE TRIGGER bench_plpgsql AFTER INSERT OR UPDATE OR DELETE ON pgbench_accounts
	FOR EACH ROW EXECUTE FUNCTION bench_note('3', 'r', '1', 'aid');
CREATE TRIGGER bench_plpgsql AFTER INSERT OR UPDATE OR DELETE ON pgbench_history
	FOR EACH ROW EXECUTE FUNCTION bench_note('4', 'r', '1', 'id');
SQL

# mode: every run starts from the same state, with one kind of trigger on.
mode() {
	{
		for t in $tables; do echo "ALTER TABLE $t DISABLE TRIGGER USER;"; done
		echo "TRUNCATE pgbench_history, sync.notes; VACUUM ANALYZE; CHECKPOINT;"
		for t in $tables; do
			case $1 in
			c) echo "ALTER TABLE $t ENABLE TRIGGER magic_sync_note; ALTER TABLE $t ENABLE TRIGGER magic_sync_truncate;" ;;
			plpgsql) echo "ALTER TABLE $t ENABLE TRIGGER bench_plpgsql;" ;;
			esac
		done
	} | sql >/dev/null
}

declare -A total=([plain]=0 [c]=0 [plpgsql]=0)
ratios_c=""
ratios_o=""
for r in $(seq "$rounds"); do
	declare -A this=()
	for m in plain c plpgsql; do
		mode $m
		tps=$(pgbench -n -T "$seconds" -c "$clients" -j 2 bench 2>/dev/null |
			sed -n 's/^tps = \([0-9.]*\).*/\1/p')
		notes=$(psql -X -A -t -d bench -c 'SELECT count(*) FROM sync.notes')
		printf 'round %d  %-8s %10.1f tps  %8d notes\n' "$r" "$m" "$tps" "$notes"
		total[$m]=$(echo "${total[$m]} + $tps" | bc -l)
		this[$m]=$tps
	done
	# the three runs of a round are back to back: their ratios see the same machine
	ratios_c="$ratios_c $(echo "${this[c]} / ${this[plain]}" | bc -l)"
	ratios_o="$ratios_o $(echo "(1 / ${this[c]} - 1 / ${this[plain]}) / (1 / ${this[plpgsql]} - 1 / ${this[plain]})" | bc -l)"
done
median() { printf '%s\n' $1 | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
plain=$(echo "${total[plain]} / $rounds" | bc -l)
c=$(echo "${total[c]} / $rounds" | bc -l)
plpgsql=$(echo "${total[plpgsql]} / $rounds" | bc -l)
echo
printf 'plain     %10.1f tps (mean)\n' "$plain"
printf 'C         %10.1f tps (mean)\n' "$c"
printf 'PL/pgSQL  %10.1f tps (mean)\n' "$plpgsql"
printf 'C / plain, median of rounds        %.3f  (target >= 0.85)\n' "$(median "$ratios_c")"
printf 'PL/pgSQL / plain                   %.3f\n' "$(echo "$plpgsql / $plain" | bc -l)"
printf 'C overhead / PL/pgSQL overhead     %.3f  (median of rounds; target <= 0.5)\n' "$(median "$ratios_o")"
