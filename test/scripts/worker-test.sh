#!/usr/bin/env bash
# The background sweep worker, a step of `make test`: a second throwaway cluster started with cscp
# in shared_preload_libraries and cscp.sweep_interval = 200ms (ALTER SYSTEM, a reload) records an expired context as
# expired in the table without anyone calling cscp.sweep(); with cscp.sweep_interval = 0 (set by
# ALTER SYSTEM and a reload) it stops sweeping.  Runs in its own shell, so that its cluster is not
# run-tests.sh's.  A backlog (more expired contexts than cscp.sweep_batch) is worked through batch
# by batch, cscp.sweep_backlog_delay apart, although cscp.sweep_interval is an hour; once it is gone,
# the worker waits its interval again.  A session's own calls of cscp.sweep() never wait.  In a
# database whose search_path puts public (with a tenant's shadowing objects) before pg_catalog,
# the worker runs none of them.
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

id=$(q -c "SELECT context_id FROM cscp.context_open('wk', 'conv-1', 'ana', '{}', interval '3 seconds')")
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

# A backlog: 23 expired contexts, a batch of 5, an interval of an hour.  The reload wakes the
# worker; half a second later it has not taken all 23 (one sweep takes 5, the next comes a second
# later), but within seconds it has (5 sweeps, a second apart); then it waits its hour.
q -c "ALTER SYSTEM SET cscp.sweep_interval = '1h'" -c "ALTER SYSTEM SET cscp.sweep_batch = 5" \
	-c "ALTER SYSTEM SET cscp.sweep_backlog_delay = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
q -c "SELECT count(*) FROM (SELECT cscp.context_open('wk', 'backlog-' || i, 'ana', '{}', interval '1 second')
                              FROM generate_series(1, 23) i) s" >/dev/null
sleep 1.5
q -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
left=$(q -c "SELECT count(*) FROM cscp.context WHERE conversation_id LIKE 'backlog-%' AND status = 'active'")
if [ "$left" -lt 13 ]; then
	echo "worker-test: half a second after waking, the worker had taken $((23 - left)) of 23 expired contexts; with cscp.sweep_batch = 5 a sweep takes at most 5" >&2
	exit 1
fi
for _ in $(seq 1 150); do
	left=$(q -c "SELECT count(*) FROM cscp.context WHERE conversation_id LIKE 'backlog-%' AND status = 'active'")
	[ "$left" = 0 ] && break
	sleep 0.1
done
if [ "$left" != 0 ]; then
	echo "worker-test: with cscp.sweep_batch = 5 and an interval of an hour, $left of 23 expired contexts are still active after 15 s" >&2
	exit 1
fi
echo "worker-test: a backlog of 23 expired contexts was worked through in batches of 5, cscp.sweep_backlog_delay apart"
# The backlog is gone: the next expired context waits for the interval (an hour).
id=$(q -c "SELECT context_id FROM cscp.context_open('wk', 'after-backlog', 'ana', '{}', interval '1 second')")
sleep 3
status=$(q -c "SELECT status FROM cscp.context WHERE context_id = '$id'")
if [ "$status" != active ]; then
	echo "worker-test: after the backlog, the worker swept again before its interval (status '$status')" >&2
	exit 1
fi
echo "worker-test: once the backlog is gone, the worker waits its interval again"

# A session's own calls of cscp.sweep() never wait, even with a backlog and the worker's
# cscp.sweep_backlog_delay at a minute: its second call, after a first that left work behind,
# returns at once (a pause would run into the statement timeout), and takes the next batch.
# (The worker waits its hour meanwhile, and the context left for it above goes first.)
q -c "DELETE FROM cscp.context WHERE conversation_id = 'after-backlog'" >/dev/null
q -c "ALTER SYSTEM SET cscp.sweep_backlog_delay = '1min'" -c "SELECT pg_reload_conf()" >/dev/null
q -c "SELECT count(*) FROM (SELECT cscp.context_open('wk', 'paced-' || i, 'ana', '{}', interval '1 second')
                              FROM generate_series(1, 6) i) s" >/dev/null
sleep 1.5
out=$(q -c "SET statement_timeout = '5s'" -c "SELECT cscp.sweep(2) ->> 'contexts_expired'" \
	-c "SELECT cscp.sweep(2) ->> 'contexts_expired'" 2>&1) || {
	echo "worker-test: a session's second sweep of a backlog did not return at once: $out" >&2
	exit 1
}
if [ "$out" != "$(printf '2\n2')" ]; then
	echo "worker-test: a session's two sweeps of a backlog returned '$out', expected 2 and 2" >&2
	exit 1
fi
left=$(q -c "SELECT count(*) FROM cscp.context WHERE conversation_id LIKE 'paced-%' AND status = 'active'")
[ "$left" = 2 ] || { echo "worker-test: after a session's two sweeps of 2, $left of 6 contexts are still active, expected 2" >&2; exit 1; }
echo "worker-test: a session's second sweep of a backlog returned at once, without waiting for cscp.sweep_backlog_delay"

grep -q 'cscp sweep worker started in database "postgres"' "$CSCP_TMP/postgres.log"

# No search_path is trusted (issue 39, finding 1): the database's owner sets search_path = public,
# pg_temp, pg_catalog for every session (ALTER DATABASE ... SET, the worker's included), and a
# tenant's role plants shadowing operators, functions and domains in public for every type cscp
# compares (test/search_path/plant.sql).  The worker, restarted so that it reads those settings,
# times out a conversation and expires a context as a superuser; nothing planted runs, and the
# planting role stays no superuser.  (From here on every query names its operators in pg_catalog.)
q -f test/search_path/plant.sql >/dev/null
q -c "ALTER DATABASE postgres SET search_path = public, pg_temp, pg_catalog" -c "ALTER DATABASE postgres SET sp.armed = on"
q -c "SELECT r.turn_index FROM cscp.conversation_start('wk', 'planted-1', 'agent',
        '{\"from\": \"agent\", \"role\": \"agent\", \"content\": {\"text\": \"hi\"}, \"ts\": 1}', NULL, 1000) r" \
	-c "SELECT r.status FROM cscp.context_open('wk', 'planted-1', 'ana', '{}', interval '1 second') r" >/dev/null
# The worker (waiting its hour, in a session begun before those settings) is stopped first; it is
# started again 10 s later (bgw_restart_time) with them, and with the interval the reload gives.
q -c "SELECT pg_catalog.pg_terminate_backend(a.pid) FROM pg_catalog.pg_stat_activity a
       WHERE a.backend_type OPERATOR(pg_catalog.=) 'cscp sweep'" >/dev/null
for _ in $(seq 1 50); do
	[ "$(q -c "SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_activity a
	            WHERE a.backend_type OPERATOR(pg_catalog.=) 'cscp sweep'")" = 0 ] && break
	sleep 0.1
done
q -c "ALTER SYSTEM SET cscp.sweep_interval = '200ms'" -c "ALTER SYSTEM SET cscp.sweep_backlog_delay = '1s'" \
	-c "SELECT pg_catalog.pg_reload_conf()" >/dev/null
for _ in $(seq 1 300); do
	state=$(q -c "SELECT c.state FROM cscp.conversation c WHERE c.conversation_id OPERATOR(pg_catalog.=) 'planted-1'")
	status=$(q -c "SELECT x.status FROM cscp.context x WHERE x.conversation_id OPERATOR(pg_catalog.=) 'planted-1'")
	[ "$state/$status" = closed/expired ] && break
	sleep 0.1
done
if [ "$state/$status" != closed/expired ]; then
	echo "worker-test: with shadowing objects planted, the worker did not sweep: conversation '$state', context '$status'" >&2
	tail -20 "$CSCP_TMP/postgres.log" >&2
	exit 1
fi
[ "$(grep -c 'cscp sweep worker started in database "postgres"' "$CSCP_TMP/postgres.log")" -ge 2 ]
hits=$(q -c "SELECT pg_catalog.string_agg(DISTINCT l.what, ', ') FROM public.sp_log l")
super=$(q -c "SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) 'sp_tenant'")
called=$(q -c "SELECT s.is_called FROM public.sp_hits s")
if [ -n "$hits" ] || [ "$super" != f ] || [ "$called" != f ]; then
	echo "worker-test: the worker ran objects a tenant planted: ${hits:-none logged}; sp_tenant superuser: $super" >&2
	exit 1
fi
echo "worker-test: with search_path public, pg_temp, pg_catalog and shadowing objects planted, the worker ran none of them"
echo "worker-test: passed"
