#!/usr/bin/env bash
# The scale-out suite (part of `make test`): cscp on two shards behind a PL/Proxy proxy.
#
# Three throwaway clusters, each on a unix socket in its own directory: shard0 and shard1 (database
# cscp, holding partitions 0 and 1 of 2) and proxy (database proxy with cscp_proxy and the SQL/MED
# server cscp; database single with cscp alone, the one-node reference).  Checks:
#   1. cscp_proxy's install script is the one proxy/generate.sh makes from this cscp, and the
#      proxy has every API function of the shards, with the same signature and result;
#   2. test/scaleout/scenario.sql (the main flows) and frameworks.sql (LangGraph's checkpoints
#      and store, agent sessions) each give the same output on one node and through the proxy
#      (random ids masked), and that output is test/scaleout/expected/<name>.out;
#   3. the rows are spread over both shards, and each holds only its own partitions; threads
#      and sessions spread by (tenant, id), a tenant's store whole on one shard;
#   4. an error on a shard comes back through the proxy with its SQLSTATE and message, and
#      tenancy holds through the proxy for an application role (store, sessions and
#      checkpoints included);
#   5. a write that bypasses the proxy is refused by the wrong shard (55000);
#   6. with shard1 stopped, only its conversations fail;
#   7. every node holds the same secret key (one fingerprint), which routing hashes need.
# Everything is stopped and removed on exit, also on failure.  Sourced-cluster helpers come from
# cluster.sh; bench_proxy.sh reuses the start-up below (SCALEOUT_SETUP_ONLY=1).
set -uo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh

SO_TMP=$(mktemp -d "${TMPDIR:-/tmp}/cscp-scaleout.XXXXXX")
chmod 755 "$SO_TMP"
SO_NODES=()

so_start() {
	local name=$1
	shift
	mkdir -p "$SO_TMP/$name"
	[ "$(id -u)" -eq 0 ] && chown -R nobody "$SO_TMP"
	cluster_as_owner "$PG_BINDIR/initdb" -D "$SO_TMP/$name/data" -U postgres --auth=trust \
		--encoding=UTF8 --locale=C.UTF-8 --no-sync >"$SO_TMP/$name/initdb.log" 2>&1 ||
		{ cat "$SO_TMP/$name/initdb.log" >&2; return 1; }
	local opts="-c listen_addresses='' -c unix_socket_directories='$SO_TMP/$name' -p 5432"
	opts+=" -c fsync=off -c max_connections=40"
	local s
	for s in "$@"; do opts+=" -c $s"; done
	cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$SO_TMP/$name/data" -o "$opts" \
		-l "$SO_TMP/$name/postgres.log" -w -t 60 start >/dev/null ||
		{ cat "$SO_TMP/$name/postgres.log" >&2; return 1; }
	SO_NODES+=("$name")
}

so_stop() {
	cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$SO_TMP/$1/data" -m fast -w stop >/dev/null 2>&1 || true
}

so_cleanup() {
	local n
	for n in "${SO_NODES[@]}"; do so_stop "$n"; done
	rm -rf "$SO_TMP"
}
trap so_cleanup EXIT

# psql on a node's database, as postgres unless PGUSER says otherwise.
so_psql() {
	local node=$1 db=$2
	shift 2
	psql -X -q -v ON_ERROR_STOP=1 -h "$SO_TMP/$node" -p 5432 -U "${SO_USER:-postgres}" -d "$db" "$@"
}

# The secret key of routing hashes, the same on every node (README "Scale-out").
SO_KEY="\\x$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"

so_setup() {
	local i
	for i in 0 1; do
		so_start "shard$i" || return 1
		so_psql "shard$i" postgres -c "CREATE DATABASE cscp" &&
			so_psql "shard$i" cscp >/dev/null <<-SQL || return 1
				CREATE EXTENSION cscp;
				SELECT cscp.secret_key_set('$SO_KEY');
				SELECT cscp.shard_set(2, '{$i}');
				CREATE ROLE app LOGIN;
				SELECT cscp.grant_app('app');
			SQL
	done
	so_start proxy || return 1
	so_psql proxy postgres -c "CREATE DATABASE proxy" -c "CREATE DATABASE single" || return 1
	so_psql proxy single -c "CREATE EXTENSION cscp" -c "SELECT cscp.secret_key_set('$SO_KEY')" >/dev/null || return 1
	so_psql proxy proxy >/dev/null <<-SQL || return 1
		CREATE EXTENSION plproxy;
		CREATE EXTENSION cscp_proxy;
		SELECT cscp_proxy.secret_key_set('$SO_KEY');
		CREATE SERVER cscp FOREIGN DATA WRAPPER plproxy
		    OPTIONS (p0 'host=$SO_TMP/shard0 port=5432 dbname=cscp',
		             p1 'host=$SO_TMP/shard1 port=5432 dbname=cscp');
		CREATE USER MAPPING FOR postgres SERVER cscp OPTIONS (user 'postgres');
		CREATE ROLE app LOGIN;
		CREATE USER MAPPING FOR app SERVER cscp OPTIONS (user 'app');
		SELECT cscp_proxy.grant_app('app');
	SQL
}

so_setup || { echo "scale-out: set-up failed" >&2; exit 1; }
[ "${SCALEOUT_SETUP_ONLY:-0}" = 1 ] && return 0 2>/dev/null

status=0
fail() {
	echo "not ok - $*"
	status=1
}
pass() { echo "ok - $*"; }

# 1. The install script is current, and the proxy has the shards' API.
if bash proxy/generate.sh "$SO_TMP/generated.sql" && diff -u proxy/cscp_proxy--0.1.0.sql "$SO_TMP/generated.sql" >"$SO_TMP/generated.diff"; then
	pass "proxy/cscp_proxy--0.1.0.sql is what proxy/generate.sh makes from this cscp"
else
	cat "$SO_TMP/generated.diff"
	fail "proxy/cscp_proxy--0.1.0.sql is stale: run 'make proxy-sql' (and classify new functions in proxy/api.tsv)"
fi
api_query="SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') ' || pg_get_function_result(p.oid)
             FROM pg_proc p WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname !~ '^_'
              AND p.prorettype <> 'trigger'::regtype ORDER BY 1"
admin=$(awk -F'\t' '$2 == "admin" {print $1}' proxy/api.tsv | paste -sd'|')
so_psql shard0 cscp -At -c "$api_query" | grep -Ev "^($admin)\(" >"$SO_TMP/api.shard"
so_psql proxy proxy -At -c "$api_query" >"$SO_TMP/api.proxy"
if diff -u "$SO_TMP/api.shard" "$SO_TMP/api.proxy"; then
	pass "the proxy has every API function of the shards ($(wc -l <"$SO_TMP/api.proxy")), same signatures and results"
else
	fail "the proxy's API differs from the shards' (above: - shard, + proxy)"
fi

# 2. The scenarios: one node against the proxy, and against the expected output.
mask() { sed -E 's/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/<uuid>/g'; }
for scenario in scenario frameworks; do
	so_psql proxy single -f "test/scaleout/$scenario.sql" 2>&1 | mask >"$SO_TMP/$scenario.single"
	so_psql proxy proxy -f "test/scaleout/$scenario.sql" 2>&1 | mask >"$SO_TMP/$scenario.proxy"
	if diff -u "$SO_TMP/$scenario.single" "$SO_TMP/$scenario.proxy"; then
		pass "test/scaleout/$scenario.sql gives the same output on one node and through the proxy ($(wc -l <"$SO_TMP/$scenario.proxy") lines)"
	else
		fail "test/scaleout/$scenario.sql differs between one node (-) and the proxy (+)"
	fi
	if diff -u "test/scaleout/expected/$scenario.out" "$SO_TMP/$scenario.proxy"; then
		pass "its output is test/scaleout/expected/$scenario.out"
	else
		cp "$SO_TMP/$scenario.proxy" "test/scaleout/$scenario.out.new" 2>/dev/null
		fail "the output of $scenario.sql differs from test/scaleout/expected/$scenario.out (- expected, + got; saved as test/scaleout/$scenario.out.new)"
	fi
done

# 3. Rows on both shards, each only in its own partitions.
spread_query="SELECT (SELECT count(*) FROM cscp.context) || ' ' || (SELECT count(*) FROM cscp.command) || ' '
                     || (SELECT count(*) FROM cscp.conversation) || ' ' || (SELECT count(*) FROM cscp.fact) || ' '
                     || (SELECT count(*) FROM cscp.document)"
spread_ok=1
for i in 0 1; do
	read -r ctx cmd conv fact doc <<<"$(so_psql "shard$i" cscp -At -c "$spread_query")"
	echo "   shard$i: $ctx contexts, $cmd commands, $conv conversations, $fact facts, $doc documents"
	[ "${ctx:-0}" -gt 0 ] && [ "${cmd:-0}" -gt 0 ] || { spread_ok=0; fail "shard$i holds no contexts or commands"; }
	misplaced=$(so_psql "shard$i" cscp -At -c "SELECT count(*) FROM cscp.shard_misplaced()")
	[ "$misplaced" = 0 ] || { spread_ok=0; fail "shard$i holds rows of a partition it does not hold"; }
done
[ $spread_ok -eq 1 ] && pass "rows are spread over both shards, each holding only its partitions"
# LangGraph threads and agent sessions spread by (tenant, id); a tenant's store on one shard, whole.
fw_query="SELECT (SELECT count(*) FROM cscp.checkpoint_thread WHERE tenant_id = 'gamma') || ' '
                 || (SELECT count(*) FROM cscp.agent_session WHERE tenant_id = 'gamma') || ' '
                 || (SELECT count(*) FROM cscp.store_item WHERE tenant_id = 'acme')"
read -r th0 se0 st0 <<<"$(so_psql shard0 cscp -At -c "$fw_query")"
read -r th1 se1 st1 <<<"$(so_psql shard1 cscp -At -c "$fw_query")"
echo "   gamma's threads $th0 + $th1 and sessions $se0 + $se1, acme's store items $st0 + $st1 (shard0 + shard1)"
single_store=$(so_psql proxy single -At -c "SELECT count(*) FROM cscp.store_item WHERE tenant_id = 'acme'")
if [ "${th0:-0}" -gt 0 ] && [ "${th1:-0}" -gt 0 ] && [ "${se0:-0}" -gt 0 ] && [ "${se1:-0}" -gt 0 ] &&
	[ "${single_store:-0}" -gt 0 ] && { [ "$st0:$st1" = "$single_store:0" ] || [ "$st0:$st1" = "0:$single_store" ]; }; then
	pass "threads and sessions are spread over both shards; the tenant's $single_store store items are on one shard, not copied"
else
	fail "threads, sessions or store items are not where their routing puts them"
fi

# 4. Errors keep their SQLSTATE and message; tenancy holds through the proxy.
err=$(so_psql proxy proxy -c "SELECT cscp.context_open('acme', '', 'a')" 2>&1)
if grep -q 'conversation_id must not be empty' <<<"$err" &&
	so_psql proxy proxy -At -c "DO \$\$ BEGIN PERFORM cscp.context_open('acme', '', 'a'); EXCEPTION WHEN invalid_parameter_value THEN RAISE NOTICE 'sqlstate 22023'; END \$\$" 2>&1 | grep -q 'sqlstate 22023'; then
	pass "a shard's error comes back with its SQLSTATE (22023) and message"
else
	echo "$err"
	fail "a shard's error lost its SQLSTATE or message"
fi
tenancy=$(SO_USER=app so_psql proxy proxy -At 2>&1 <<-'SQL'
	\set ON_ERROR_STOP 0
	\set VERBOSITY terse
	SET cscp.tenant_id = 'beta';
	SELECT 'open ' || status FROM cscp.context_open('beta', 'wa:beta', 'b');
	SELECT 'read own ' || count(*) FROM cscp.context_get('beta', 'wa:beta', 'b');
	SELECT 'read other ' || count(*) FROM cscp.context_get('acme', 'wa:ana', 'ana');
	SELECT 'verify other ' || count(*) FROM cscp.evidence_verify('acme');
	RESET cscp.tenant_id;
	SELECT 'no tenant ' || count(*) FROM cscp.context_get('beta', 'wa:beta', 'b');
SQL
)
echo "$tenancy" | sed 's/^/   /'
if grep -qx 'open active' <<<"$tenancy" && grep -qx 'read own 1' <<<"$tenancy" &&
	[ "$(grep -c 'REMOTE ERROR: permission denied for tenant "acme"' <<<"$tenancy")" -eq 2 ] &&
	grep -q 'REMOTE ERROR: cscp.tenant_id is not set' <<<"$tenancy"; then
	pass "an application role through the proxy acts only for the tenant its session names"
else
	fail "tenancy through the proxy"
fi

fw_tenancy=$(SO_USER=app so_psql proxy proxy -At 2>&1 <<-'SQL'
	\set ON_ERROR_STOP 0
	\set VERBOSITY terse
	SET cscp.tenant_id = 'beta';
	SELECT 'put ' || count(*) FROM cscp.store_put('beta', '{notes}', 'n1', '{"text": "beta note"}');
	SELECT 'search own ' || count(*) FROM cscp.store_search('beta', '{}');
	SELECT 'namespaces own ' || count(*) FROM cscp.store_list_namespaces('beta');
	SELECT 'session own ' || cscp.session_add_items('beta', 's1', '[{"role": "user", "content": "x"}]');
	SELECT 'list own ' || count(*) FROM cscp.checkpoint_list('beta');
	SELECT 'search other ' || count(*) FROM cscp.store_search('acme', '{}');
	SELECT 'list other ' || count(*) FROM cscp.checkpoint_list('acme', row_limit => 1);
	SELECT 'session other ' || count(*) FROM cscp.session_get_items('acme', 'sess-1');
	SELECT 'put other ' || count(*) FROM cscp.store_put('acme', '{notes}', 'n1', '{}');
SQL
)
echo "$fw_tenancy" | sed 's/^/   /'
if grep -qx 'put 1' <<<"$fw_tenancy" && grep -qx 'search own 1' <<<"$fw_tenancy" &&
	grep -qx 'namespaces own 1' <<<"$fw_tenancy" && grep -qx 'session own 1' <<<"$fw_tenancy" &&
	grep -qx 'list own 0' <<<"$fw_tenancy" &&
	[ "$(grep -c 'REMOTE ERROR: permission denied for tenant "acme"' <<<"$fw_tenancy")" -eq 4 ] &&
	[ "$(so_psql proxy proxy -At -c "SELECT count(*) FROM cscp.store_get('acme', '{notes}', 'n1')")" = 0 ]; then
	pass "through the proxy, an application role reaches its own tenant's store, sessions and checkpoints only"
else
	fail "tenancy of store, sessions and checkpoints through the proxy"
fi

# 5. A write that bypasses the proxy lands nowhere but on its own shard.
conv=$(so_psql proxy proxy -At -c "SELECT c FROM generate_series(1, 50) i, LATERAL (SELECT 'direct-' || i AS c) s WHERE cscp.routing_conversation_hash(c) & 1 = 1 LIMIT 1")
direct=$(so_psql shard0 cscp -c "SELECT cscp.context_open('acme', '$conv', 'x')" 2>&1)
if grep -q 'this shard does not hold partition 1 of 2' <<<"$direct" &&
	so_psql shard1 cscp -c "SELECT cscp.context_open('acme', '$conv', 'x')" >/dev/null; then
	pass "shard0 refuses a conversation of partition 1 (55000); shard1 takes it"
else
	echo "$direct"
	fail "the shard guard let a misrouted write through"
fi

# LangGraph threads and agent sessions by (tenant, id), a tenant's store by (tenant, ''): a write
# that bypasses the proxy is refused on the other shard too, and taken on its own.
thread=$(so_psql proxy proxy -At -c "SELECT t FROM generate_series(1, 50) i, LATERAL (SELECT 'direct-' || i AS t) s WHERE cscp.routing_key_hash('gamma', t) & 1 = 1 LIMIT 1")
store_tenant=$(so_psql proxy proxy -At -c "SELECT t FROM generate_series(1, 50) i, LATERAL (SELECT 'direct-' || i AS t) s WHERE cscp.routing_key_hash(t, '') & 1 = 1 LIMIT 1")
fw_direct_sql="SELECT cscp.checkpoint_put('gamma', '$thread', '', 'c-1', NULL, '{\"v\": 4, \"channel_versions\": {\"m\": \"1\"}}', '{}',
                                          '{m}', '{1}', '{json}', ARRAY['\\x5b315d'::bytea]) IS NOT NULL;
SELECT cscp.session_add_items('gamma', '$thread', '[{\"role\": \"user\"}]');
SELECT count(*) FROM cscp.store_put('$store_tenant', '{notes}', 'k', '{}');"
fw_direct=$(so_psql shard0 cscp -At -v ON_ERROR_STOP=0 <<<"$fw_direct_sql" 2>&1)
fw_held=$(so_psql shard1 cscp -At <<<"$fw_direct_sql" 2>&1)
if [ "$(grep -c 'this shard does not hold partition 1 of 2' <<<"$fw_direct")" -eq 3 ] &&
	[ "$(tr '\n' ' ' <<<"$fw_held")" = "t 1 1 " ] &&
	[ "$(so_psql shard0 cscp -At -c "SELECT (SELECT count(*) FROM cscp.checkpoint_thread WHERE thread_id = '$thread')
	                                       + (SELECT count(*) FROM cscp.agent_session WHERE session_id = '$thread')
	                                       + (SELECT count(*) FROM cscp.store_item WHERE tenant_id = '$store_tenant')")" = 0 ]; then
	pass "shard0 refuses a LangGraph thread, an agent session and a tenant's store of partition 1 (55000); shard1 takes them"
else
	echo "$fw_direct"; echo "$fw_held"
	fail "the shard guard let a misrouted thread, session or store item through"
fi
# Once partition 1 moves away from shard1, shard_misplaced reports those tables' rows there.
fw_misplaced=$(so_psql shard1 cscp -At <<-'SQL' 2>&1
	BEGIN;
	SELECT count(*) FROM cscp.shard_set(2, '{0}');
	SELECT DISTINCT m.table_name FROM cscp.shard_misplaced() m ORDER BY 1;
	ROLLBACK;
SQL
)
misplaced_ok=1
for t in checkpoint_thread checkpoint checkpoint_blob agent_session session_item store_item; do
	grep -qx "$t" <<<"$fw_misplaced" || misplaced_ok=0
done
if [ $misplaced_ok -eq 1 ] && [ "$(so_psql shard1 cscp -At -c "SELECT count(*) FROM cscp.shard_misplaced()")" = 0 ]; then
	pass "shard_misplaced counts the rows of threads, sessions and stores of a partition a shard no longer holds"
else
	echo "$fw_misplaced"
	fail "shard_misplaced does not report threads, sessions or stores left on a shard"
fi

# 6. shard1 down: only its conversations fail.
so_stop shard1
down=$(so_psql proxy proxy -At 2>&1 <<-'SQL'
	SET client_min_messages = warning;
	SET cscp.clock = '2026-05-04 10:05:00+00';
	CREATE FUNCTION pg_temp.try(conv text) RETURNS text LANGUAGE plpgsql AS $$
	BEGIN
	    PERFORM cscp.context_open('acme', conv, 'late');
	    RETURN 'ok';
	EXCEPTION WHEN OTHERS THEN
	    RETURN 'failed';
	END
	$$;
	SELECT cscp.routing_conversation_hash('bulk-' || i) & 1 AS partition, pg_temp.try('bulk-' || i) AS result, count(*)
	  FROM generate_series(1, 40) i GROUP BY 1, 2 ORDER BY 1, 2;
SQL
)
echo "$down" | sed 's/^/   /'
if grep -qx '0|ok|[0-9]*' <<<"$down" && grep -qx '1|failed|[0-9]*' <<<"$down" &&
	! grep -q '^0|failed\|^1|ok' <<<"$down"; then
	pass "with shard1 stopped, the conversations of partition 0 work and only those of partition 1 fail"
else
	fail "with shard1 stopped"
fi

# 7. One key everywhere: the fingerprint each node's key gives, and the hashes agree.
fp_query="SELECT 'sha256:' || left(encode(sha256(key), 'hex'), 16) FROM cscp.secret_key"
fp0=$(so_psql shard0 cscp -At -c "$fp_query")
fpp=$(so_psql proxy proxy -At -c "SELECT fingerprint FROM cscp_proxy.secret_key")
h0=$(so_psql shard0 cscp -At -c "SELECT cscp.routing_conversation_hash('wa:ana') || ' ' || cscp.routing_key_hash('acme', 'sess-1')")
hp=$(so_psql proxy proxy -At -c "SELECT cscp.routing_conversation_hash('wa:ana') || ' ' || cscp.routing_key_hash('acme', 'sess-1')")
hh=$(so_psql proxy proxy -At -c "SELECT hashtext('wa:ana')")
if [ -n "$fp0" ] && [ "$fp0" = "$fpp" ] && [ "$h0" = "$hp" ] && [ "${h0%% *}" != "$hh" ]; then
	pass "the shards and the proxy share one secret key ($fp0) and compute the same keyed routing hashes"
else
	fail "secret key or routing hashes differ between shard0 ($fp0: $h0) and the proxy ($fpp: $hp)"
fi
keyread=$(SO_USER=app so_psql proxy proxy -At -c "SELECT count(*) FROM cscp_proxy.secret_key" 2>&1)
keyset=$(SO_USER=app so_psql proxy proxy -At -c "SELECT cscp_proxy.secret_key_set('$SO_KEY')" 2>&1)
if grep -q 'permission denied for table secret_key' <<<"$keyread" && grep -q 'permission denied' <<<"$keyset"; then
	pass "an application role on the proxy can neither read nor set the secret key"
else
	echo "$keyread"; echo "$keyset"
	fail "an application role on the proxy reached the secret key"
fi

if [ $status -ne 0 ]; then
	for n in "${SO_NODES[@]}"; do
		echo "---- $n: last lines of its log"
		tail -n 15 "$SO_TMP/$n/postgres.log"
	done
	echo "scale-out: FAILED"
else
	echo "scale-out: all checks passed"
fi
exit $status
