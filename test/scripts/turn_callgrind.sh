#!/usr/bin/env bash
# Instructions per W1 message turn (test/bench/message_turn_cscp.sql's nine calls, here in one
# DO block a turn) as an application role, counted by callgrind in a single-user backend:
# (300 turns - 100 turns) / 200, so that start-up and the first calls' caches cancel out.
#   bash test/scripts/turn_callgrind.sh [GRANT_SQL]
# GRANT_SQL grants role app, by default bound to the tenant: "SELECT cscp.grant_app('app', '{bench}')".
# Needs valgrind; uses the cscp installed for PG_BINDIR's PostgreSQL; about a minute.
set -euo pipefail
PG_BINDIR=${PG_BINDIR:-$(pg_config --bindir)}
grant=${1:-"SELECT cscp.grant_app('app', '{bench}')"}
D=$(mktemp -d "${TMPDIR:-/tmp}/cscp-cg.XXXXXX")
chmod 755 "$D"
as() { if [ "$(id -u)" -eq 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi; }
[ "$(id -u)" -eq 0 ] && chown nobody "$D"
cleanup() { as "$PG_BINDIR/pg_ctl" -D "$D/data" -m fast -w stop >/dev/null 2>&1 || true; rm -rf "$D"; }
trap cleanup EXIT
as "$PG_BINDIR/initdb" -D "$D/data" -U postgres --auth=trust --no-sync >/dev/null
as "$PG_BINDIR/pg_ctl" -D "$D/data" -o "-c listen_addresses='' -c unix_socket_directories='$D' -c fsync=off" -w start >/dev/null
"$PG_BINDIR/psql" -X -q -h "$D" -U postgres -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION cscp;
CREATE ROLE app;
$grant;
SET cscp.clock = '2026-06-01 10:00:00+00';
SELECT cscp.conversation_start('bench', 'conv-1', 'agent', '{"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1795269600000}');
SQL
as "$PG_BINDIR/pg_ctl" -D "$D/data" -w stop >/dev/null
turns() {
	echo "SET ROLE app"
	echo "SET cscp.tenant_id = 'bench'"
	for i in $(seq 1 "$1"); do
		echo "DO \$\$ DECLARE ctx uuid; cid uuid; n text := '$i'; BEGIN PERFORM cscp.conversation_exchange('bench', 'conv-1', jsonb_build_object('messageId', 'm-' || n, 'from', 'customer', 'role', 'user', 'content', '{\"text\": \"where is my order 123?\"}'::jsonb, 'ts', 1795269600000)); SELECT context_id INTO ctx FROM cscp.context_open('bench', 'conv-1', 'customer'); PERFORM cscp.slot_set(ctx, 'active_intent', '\"track_order\"'); PERFORM cscp.slot_set(ctx, 'active_target', to_jsonb('order:' || n)); SELECT command_id INTO cid FROM cscp.command_submit('bench', 'conv-1', 'customer', 'key-' || n, 'track_order', false, ARRAY['m-' || n], '{\"order_id\": \"123\"}', 'order:' || n); PERFORM cscp.command_transition(cid, 'authz_pending', 'policy_check'); PERFORM cscp.command_transition(cid, 'authorized', 'read_only'); PERFORM cscp.command_transition(cid, 'started'); PERFORM cscp.command_transition(cid, 'executed', 'order_found', '{\"status\": \"shipped\"}'); END \$\$"
	done
}
count() {
	rm -rf "$D/run"
	as cp -a "$D/data" "$D/run"
	turns "$1" >"$D/in.sql"
	chmod 644 "$D/in.sql"
	as valgrind --tool=callgrind --callgrind-out-file="$D/cg.$1" "$PG_BINDIR/postgres" --single -D "$D/run" -c fsync=off postgres <"$D/in.sql" >"$D/out.$1" 2>&1 || true
	if grep -q ERROR "$D/out.$1"; then
		grep -m3 ERROR "$D/out.$1" >&2
		exit 1
	fi
	callgrind_annotate "$D/cg.$1" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}
a=$(count 100)
b=$(count 300)
echo "instructions: 100 turns $a, 300 turns $b; per turn $(((b - a) / 200))"
