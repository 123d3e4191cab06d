# lib.sh - helpers for the end-to-end scripts, which run inside pg_virtualenv
# (PGHOST, PGPORT, PGUSER are set).  Source it from the tree's top; fail()
# ends the script.

pass=0
failed=0

in_cluster() {
	# in_cluster SCRIPT [-o name=value ...]: outside a cluster, run SCRIPT
	# again in a throw-away one of its own (the library preloaded, these
	# settings), holding the machine's lock, and end with its status
	[ -n "${PGPORT:-}" ] && return 0
	_script=$1
	shift
	. scripts/lib.sh
	ms_ready || exit 2
	ms_cluster "$@" sh "$_script"
	exit $?
}

items_provisioned() {
	# items_provisioned DB: a table items broadcast to one replica, provisioned
	# (a replica added notes nothing: the first pass woken by hand)
	q "$1" "CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL)"
	q "$1" "SELECT sync.mirror('items', 'catalog', 'broadcast')" >/dev/null
	q "$1" "SELECT sync.replica_add('eeeeeeee-0000-0000-0000-000000000001')" >/dev/null
	q "$1" "SELECT sync.wake()" >/dev/null
	wait_for 10 "$1" "SELECT NOT provision FROM sync.replicas" || true
	check "provisioned once woken" "$(q "$1" "SELECT NOT provision FROM sync.replicas")" "t"
}

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
