#!/bin/sh
# long.sh: the long walk (make check-long; not part of scripts/test).  The
# oracle walk (oracle.py: after every step every replica holds exactly its
# wanted set), the same over a schema nobody here wrote (realwalk.py) and the
# storm (storm.py: every fault kind, in storms of CHECK_LONG_SEGMENT steps
# each followed by a calm and every check) for CHECK_LONG_STEPS steps each;
# prints the steps, the faults of each kind and the mismatches, which must
# be 0.  And the zbugs walk (zbugs_walk.py: issue 39's experiments at the
# published sizes, ZBUGS_SCALE, with sync.why timed over a move; not in
# tests/e2e/run's list), and the drift walk (drift_walk.py: issue 40's refused
# delete and corrupted value repaired).  Each walk holds the machine's lock only until its shop is loaded
# (walk.py, release_lock).
#   tests/e2e/long.sh                               100000 steps each
#   CHECK_LONG_STEPS=5000 CHECK_LONG_WALKS=storm.py tests/e2e/long.sh
set -u
cd "$(dirname "$0")/../.." || exit 2
# hours long: as root, in a machine of its own (scripts/isolated), so it holds
# no lock other trees wait on and their installs never change what its servers
# load; otherwise it lets the lock go once its shop is loaded (walk.py)
if [ -z "${MAGIC_SYNC_ISOLATED:-}" ] && [ -z "${MAGIC_SYNC_LOCKED:-}" ] && [ "$(id -u)" = 0 ] &&
	unshare --mount --net true 2>/dev/null; then
	exec scripts/isolated tests/e2e/long.sh "$@"
fi
steps=${CHECK_LONG_STEPS:-100000}
segment=${CHECK_LONG_SEGMENT:-1000}
[ "$segment" -gt "$steps" ] && segment=$steps
walks=${CHECK_LONG_WALKS:-oracle.py realwalk.py storm.py zbugs_walk.py drift_walk.py}
# a script above us holding the lock for longer (scripts/test) keeps it, and
# an isolated run has a lock of its own
[ -z "${MAGIC_SYNC_LOCKED:-}" ] && [ -z "${MAGIC_SYNC_ISOLATED:-}" ] && MAGIC_SYNC_LONG_UNLOCK=1 &&
	export MAGIC_SYNC_LONG_UNLOCK
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failed=""
for w in $walks; do
	begin=$(date +%s)
	# tests/e2e/run says what the walk said once it ends; LONG_PROGRESS (walk.py) as it goes
	LONG_PROGRESS=$(mktemp)
	export LONG_PROGRESS
	tail -f "$LONG_PROGRESS" &
	watch=$!
	case "$w" in
		storm.py) STEPS=$segment SEGMENTS=$((steps / segment)) tests/e2e/run storm.py >"$out" 2>&1 ;;
		*) STEPS=$steps tests/e2e/run "$w" >"$out" 2>&1 ;;
	esac
	rc=$?
	kill $watch
	rm -f "$LONG_PROGRESS"
	grep -E '^(faults|steps|snapshots|zbugs|FAIL|[0-9]+ passed)' "$out"
	echo "$w: $(($(date +%s) - begin)) s, exit status $rc"
	# a failed walk's whole output is kept: its last lines are often the server's log
	[ $rc -eq 0 ] || { failed="$failed $w"; tail -30 "$out"; mkdir -p build;
		cp "$out" "build/long-$w.log"; echo "$w: its whole output is in build/long-$w.log"; }
done
if [ -n "$failed" ]; then
	echo "check-long: failed:$failed"
	exit 1
fi
echo "check-long: $steps steps of each of $walks, 0 mismatches"
