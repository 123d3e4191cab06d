# lib.sh - helpers for the end-to-end scripts, which run inside pg_virtualenv
# (PGHOST, PGPORT, PGUSER are set).  Source it; fail() ends the script.

pass=0
failed=0

q() {
	# q DB SQL: one value per line, unaligned, no headers
	psql -XAtq -v ON_ERROR_STOP=1 -d "$1" -c "$2"
}

check() {
	# check NAME ACTUAL EXPECTED
	if [ "$2" = "$3" ]; then
		pass=$((pass + 1))
	else
		failed=$((failed + 1))
		echo "FAIL $1: got '$2', expected '$3'"
	fi
}

wait_for() {
	# wait_for SECONDS DB SQL: until SQL returns t
	end=$(($(date +%s) + $1))
	while [ "$(date +%s)" -le "$end" ]; do
		[ "$(q "$2" "$3" 2>/dev/null)" = "t" ] && return 0
		sleep 0.2
	done
	return 1
}

finish() {
	echo "$pass passed, $failed failed"
	[ "$failed" -eq 0 ]
}
