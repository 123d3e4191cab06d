# lib.sh: the recipe every script that needs PostgreSQL follows, in one place.
# Work trees sharing a machine install into the one system-wide PostgreSQL,
# so a script holds a machine-wide lock from `make install` to its last
# query; scripts started under it (scripts/test runs tests/e2e/run) are told
# by MAGIC_SYNC_LOCKED that the lock is held and this tree installed.
#
# Source it from the top of the tree:
#   cd "$(dirname "$0")/.." || exit 2
#   . scripts/lib.sh
#   ms_ready || exit 2                 lock, build, install (unless done above us)
#   ms_cluster [-o name=value ...] command ...
#                                      the command in a throw-away cluster

MS_LOCK=/tmp/magic_sync-pg.lock

# ms_lock: take the lock on descriptor 9, unless a script above us holds it.
# Held until this process and every child keeping descriptor 9 have ended;
# MAGIC_SYNC_LOCKED says which process took it.
ms_lock() {
	[ -n "${MAGIC_SYNC_LOCKED:-}" ] && return 0
	exec 9>"$MS_LOCK" || return 2
	flock 9 || return 2
	MAGIC_SYNC_LOCKED=$$
	export MAGIC_SYNC_LOCKED
}

# ms_unlock [pid]: let other trees install, once every server this script
# needs has loaded the installed files.  Only the process that took the lock
# lets it go, or one it started in its stead, given that process's pid
# (scripts/demo runs itself again inside its cluster).
ms_unlock() {
	[ "${MAGIC_SYNC_LOCKED:-}" = "${1:-$$}" ] || return 0
	flock -u 9
	exec 9>&-
	unset MAGIC_SYNC_LOCKED
}

# ms_build: build everything; only errors and warnings are shown.
ms_build() {
	make -s -j2 >/dev/null || { echo "the build failed" >&2; return 2; }
}

# ms_install: install this tree's build into the machine's PostgreSQL.
ms_install() {
	[ -n "${MAGIC_SYNC_LOCKED:-}" ] || { echo "ms_install: take the lock first (ms_lock)" >&2; return 2; }
	make -s install >/dev/null || { echo "make install failed (run as root)" >&2; return 2; }
}

# ms_ready: lock, build and install, unless a script above us did.
ms_ready() {
	[ -n "${MAGIC_SYNC_LOCKED:-}" ] && return 0
	ms_lock && ms_build && ms_install
}

# ms_cluster [-o name=value ...] command ...: the command in a throw-away
# cluster (pg_virtualenv: PGHOST, PGPORT, PGUSER set) with the relay worker's
# library preloaded; its exit status is the command's.  MS_PORT, when set,
# is its port (pg_createcluster's pick of a free one races another cluster
# being made at the same time: tests/e2e/run runs two).
ms_cluster() {
	if [ -n "${MS_PORT:-}" ]; then
		# and a pid file of its own: pg_ctlcluster and pg_dropcluster judge a
		# cluster running by its external_pid_file, by default
		# /var/run/postgresql/15-regress.pid for both slots' clusters alike
		PGPORT=$MS_PORT pg_virtualenv -t -o shared_preload_libraries=magic_sync -o max_worker_processes=16 \
			-o "external_pid_file=/var/run/postgresql/ms-$MS_PORT.pid" "$@"
	else
		pg_virtualenv -t -o shared_preload_libraries=magic_sync -o max_worker_processes=16 "$@"
	fi
}
