#!/usr/bin/env bash
# The background sweep worker, a step of `make test`: a second throwaway cluster started with cscp
# in shared_preload_libraries and cscp.sweep_interval = 200ms (ALTER SYSTEM, a reload) records an expired context as
# expired in the table without anyone calling cscp.sweep(); with cscp.sweep_interval = 0 (set by
# ALTER SYSTEM and a reload) it stops sweeping.  Runs in its own shell, so that its cluster is not
# run-tests.sh's.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
# The interval is set by ALTER SYSTEM, not on the command line, which a reload could not override.
cluster_start "shared_preload_libraries=cscp" "cscp.sweep_database=postgres" || exit 1
q() { psql -X -q -v ON_ERROR_STOP=1 -d postgres -At "$@"; }

# The raw status column (not the effective status every reader sees) until it is expired.
wait_status() {
	local id=$1 want=$2 seconds=$3 s
	for _ in $(seq 1 $((seconds * 10))); do
		s=$(q -c "SELECT status FROM cscp.context WHERE context_id = '$id'")
		[ "$s" = "$want" ] && return 0
		sleep 0.1
	done
	echo "worker-test: context $id is still '$s' after ${seconds}s, expected '$want'" >&2
	return 1
}

q -c "CREATE EXTENSION cscp"
q -c "ALTER SYSTEM SET cscp.sweep_interval = '200ms'" -c "SELECT pg_reload_conf()" >/dev/null
workers=$(q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'cscp sweep'")
[ "$workers" = 1 ] || { echo "worker-test: expected one cscp sweep worker, found $workers" >&2; exit 1; }

id=$(q -c "SELECT context_id FROM cscp.context_open('wk', 'conv-1', 'ana', '{}', interval '1 second')")
[ "$(q -c "SELECT status FROM cscp.context WHERE context_id = '$id'")" = active ]
wait_status "$id" expired 10
echo "worker-test: the worker recorded an expired context without a call to cscp.sweep()"

# Interval 0: the worker stops sweeping (a reload is enough).
q -c "ALTER SYSTEM SET cscp.sweep_interval = 0" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
id=$(q -c "SELECT context_id FROM cscp.context_open('wk', 'conv-2', 'ana', '{}', interval '1 second')")
sleep 2
status=$(q -c "SELECT status FROM cscp.context WHERE context_id = '$id'")
effective=$(q -c "SELECT status FROM cscp.context_get('wk', 'conv-2', 'ana')")
if [ "$status" != active ] || [ "$effective" != expired ]; then
	echo "worker-test: with cscp.sweep_interval = 0, expected stored 'active' and effective 'expired', got '$status' and '$effective'" >&2
	exit 1
fi
echo "worker-test: with cscp.sweep_interval = 0 it sweeps no more (the context is still expired to every reader)"

# And back: a reload with an interval starts it sweeping again.
q -c "ALTER SYSTEM SET cscp.sweep_interval = '100ms'" -c "SELECT pg_reload_conf()" >/dev/null
wait_status "$id" expired 10
grep -q 'cscp sweep worker started in database "postgres"' "$CSCP_TMP/postgres.log"
echo "worker-test: passed"
