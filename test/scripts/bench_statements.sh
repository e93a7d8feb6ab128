#!/usr/bin/env bash
# `make bench-statements`: the statements each public call of the hot paths runs inside the
# database (its nested statements: those of its SPI, its triggers' and its PL/pgSQL's), counted
# by pg_stat_statements with track = all on a throwaway cluster, warm, as an application role
# bound to its one tenant (cscp.grant_app(role, ARRAY[tenant])).
#
# How: one psql session runs W1's and W2's calls (test/bench/message_turn_cscp.sql and
# command_cycle_cscp.sql), then W3's document calls and the facts' calls, as the application
# role (SET ROLE); around every call it reads, as the superuser, the sum of the calls of the
# nested statements pg_stat_statements has seen, and the difference is that call's.  The first
# STATEMENTS_WARM cycles (5) fill the caches and are not counted; the next STATEMENTS_CYCLES
# (20) are, and each call's figure is their mean (a call that runs a statement only sometimes,
# such as the once-a-minute ones, shows a fraction).  Prints a Markdown table: call, nested
# statements per call, and the distinct nested statements it ran (STATEMENTS_DETAIL=1 lists
# them, with their calls per call).  Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
WARM=${STATEMENTS_WARM:-5}
CYCLES=${STATEMENTS_CYCLES:-20}
DETAIL=${STATEMENTS_DETAIL:-0}

cluster_start shared_preload_libraries=pg_stat_statements pg_stat_statements.track=all \
	pg_stat_statements.max=10000 pg_stat_statements.track_utility=off
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE EXTENSION pg_stat_statements;
CREATE EXTENSION cscp;
SELECT cscp.command_declare('bench', 'track_order', false);
CREATE ROLE bench_app LOGIN;
SELECT cscp.grant_app('bench_app', ARRAY['bench']);
-- per call: the nested statements seen before it (as the superuser, outside the call)
CREATE TABLE public.tally (step int, label text, cycle int, nested bigint, queries jsonb);
CREATE FUNCTION public.nested() RETURNS jsonb LANGUAGE sql AS $$
    SELECT coalesce(jsonb_object_agg(queryid::text, c), '{}') FROM (
        SELECT queryid, sum(calls) AS c FROM pg_stat_statements
         WHERE NOT toplevel AND query NOT LIKE '%pg_stat_statements%' GROUP BY queryid) q
$$;
SQL

# step N LABEL SQL: call SQL (as the application role) between two reads of the counters
step() {
	local n=$1 label=$2 sql=$3
	echo "SELECT public.nested() AS before \\gset"
	echo "SET ROLE bench_app;"
	echo "$sql"
	echo "RESET ROLE;"
	echo "INSERT INTO public.tally SELECT $n, '$label', :cycle, sum(coalesce(a.value::bigint, 0) - coalesce(b.value::bigint, 0)),"
	echo "    jsonb_object_agg(a.key, a.value::bigint - coalesce(b.value::bigint, 0)) FILTER (WHERE a.value::bigint > coalesce(b.value::bigint, 0))"
	echo "  FROM jsonb_each(public.nested()) a LEFT JOIN jsonb_each(:'before'::jsonb) b USING (key);"
}

script() {
	echo "SET cscp.tenant_id = 'bench';"
	echo "SET synchronous_commit = off;"
	echo "SET ROLE bench_app;"
	echo "SELECT FROM cscp.conversation_start('bench', 'w1', 'agent', '{\"from\": \"agent\", \"role\": \"agent\", \"content\": {\"text\": \"How can I help?\"}, \"ts\": 0}');"
	echo "SELECT FROM cscp.conversation_start('bench', 'mt', 'agent', '{\"from\": \"agent\", \"role\": \"agent\", \"content\": {\"text\": \"How can I help?\"}, \"ts\": 0}');"
	echo "INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)"
	echo "  SELECT 'bench', 's-' || i, 'profile', jsonb_build_object('name', 'user ' || i), now() + interval '1 day' FROM generate_series(1, 100) i;"
	echo "RESET ROLE;"
	local cycle
	for cycle in $(seq 1 $((WARM + CYCLES))); do
		echo "\\set cycle $cycle"
		echo "\\set n $((cycle * 1000))"
		# W1: a message turn, nine calls
		step 11 "conversation_exchange" "SELECT outcome FROM cscp.conversation_exchange('bench', 'w1', jsonb_build_object('messageId', 'm-' || :n, 'from', 'customer', 'role', 'user', 'content', '{\"text\": \"where is my order 123?\"}'::jsonb, 'ts', 1795269600000));"
		step 12 "context_open (reused)" "SELECT context_id AS ctx FROM cscp.context_open('bench', 'w1', 'customer') \\gset"
		step 13 "slot_set" "SELECT status FROM cscp.slot_set(:'ctx'::uuid, 'active_intent', '\"track_order\"');"
		step 14 "slot_set" "SELECT status FROM cscp.slot_set(:'ctx'::uuid, 'active_target', to_jsonb('order:' || :n));"
		step 15 "command_submit (read-only)" "SELECT command_id AS cid FROM cscp.command_submit('bench', 'w1', 'customer', 'key-' || :n, 'track_order', false, ARRAY['m-' || :n], '{\"order_id\": \"123\"}', 'order:' || :n) \\gset"
		step 16 "command_transition (authz_pending)" "SELECT accepted FROM cscp.command_transition(:'cid'::uuid, 'authz_pending', 'policy_check');"
		step 17 "command_transition (authorized)" "SELECT accepted FROM cscp.command_transition(:'cid'::uuid, 'authorized', 'read_only');"
		step 18 "command_transition (started)" "SELECT accepted FROM cscp.command_transition(:'cid'::uuid, 'started');"
		step 19 "command_transition (executed)" "SELECT accepted FROM cscp.command_transition(:'cid'::uuid, 'executed', 'order_found', '{\"status\": \"shipped\"}');"
		# a context opened for a conversation and actor with none live
		step 20 "context_open (new context)" "SELECT status FROM cscp.context_open('bench', 'new-' || :n, 'customer');"
		# W2: the confirmation path, seven calls
		step 21 "context_open (reused)" "SELECT status FROM cscp.context_open('bench', 'w2', 'customer');"
		step 22 "command_submit (confirmation)" "SELECT command_id AS cid FROM cscp.command_submit('bench', 'w2', 'customer', 'ckey-' || :n, 'cancel_order', true, ARRAY['ask-' || :n], '{\"order_id\": \"123\"}', 'order:' || :n) \\gset"
		step 23 "confirm (yes)" "SELECT outcome FROM cscp.confirm('bench', 'w2', 'customer', 'yes-' || :n, true, 'order:' || :n);"
		step 24 "command_transition (authz_pending)" "SELECT accepted FROM cscp.command_transition(:'cid'::uuid, 'authz_pending', 'policy_check');"
		step 25 "command_transition (authorized)" "SELECT accepted FROM cscp.command_transition(:'cid'::uuid, 'authorized', 'order_not_shipped');"
		step 26 "command_transition (started)" "SELECT accepted FROM cscp.command_transition(:'cid'::uuid, 'started');"
		step 27 "command_transition (executed)" "SELECT accepted FROM cscp.command_transition(:'cid'::uuid, 'executed', 'order_cancelled', '{\"refund\": \"EUR 42.00\"}');"
		# W1 as one call
		step 31 "message_turn" "SELECT r ->> 'command_id' AS cid FROM cscp.message_turn('bench', 'mt', 'customer', jsonb_build_object('messageId', 'mt-' || :n, 'from', 'customer', 'role', 'user', 'content', '{\"text\": \"where is my order 123?\"}'::jsonb, 'ts', 1795269600000), jsonb_build_object('active_intent', 'track_order', 'active_target', 'order:' || :n), jsonb_build_object('idempotency_key', 'mtkey-' || :n, 'name', 'track_order', 'mutating', false, 'payload', '{\"order_id\": \"123\"}'::jsonb, 'target_fingerprint', 'order:' || :n)) r \\gset"
		step 32 "command_transition (authz_pending)" "SELECT accepted FROM cscp.command_transition(:'cid'::uuid, 'authz_pending', 'policy_check');"
		step 33 "command_transition (authorized)" "SELECT accepted FROM cscp.command_transition(:'cid'::uuid, 'authorized', 'read_only');"
		step 34 "command_transition (started)" "SELECT accepted FROM cscp.command_transition(:'cid'::uuid, 'started');"
		step 35 "command_transition (executed)" "SELECT accepted FROM cscp.command_transition(:'cid'::uuid, 'executed', 'order_found', '{\"status\": \"shipped\"}');"
		# W3: documents
		step 41 "doc_get" "SELECT cscp.doc_get('bench', 's-' || (:n / 1000 % 100 + 1), 'profile') IS NOT NULL AS found;"
		step 42 "doc_put (merge)" "SELECT cscp.doc_put('bench', 's-' || (:n / 1000 % 100 + 1), 'profile', jsonb_build_object('k', :n), 86400) IS NOT NULL AS done;"
		# facts
		step 51 "fact_write" "SELECT cscp.fact_write('bench', 'subj', 'f-' || :n, 'key-' || (:n / 1000 % 10), to_jsonb(:n)) IS NOT NULL AS done;"
		step 52 "fact_current" "SELECT (cscp.fact_current('bench', 'subj', 'f-' || :n)).fact_id IS NOT NULL AS found;"
		step 53 "build_context" "SELECT length(cscp.build_context('bench', 'subj', 'sess')::text) > 0 AS built;"
	done
}

script >"$CSCP_TMP/statements.sql"
chmod 644 "$CSCP_TMP/statements.sql"
psql -X -q -v ON_ERROR_STOP=1 -f "$CSCP_TMP/statements.sql" >"$CSCP_TMP/statements.log" 2>&1 ||
	{ tail -n 20 "$CSCP_TMP/statements.log" >&2; exit 1; }

psql -X -q -A -t -F '|' -v ON_ERROR_STOP=1 <<SQL
SELECT '| call | nested statements per call | distinct statements |';
SELECT '| --- | ---: | ---: |';
SELECT '| ' || label || ' | ' || round(avg(nested), 1) || ' | '
       || (SELECT count(DISTINCT k) FROM public.tally t2, jsonb_object_keys(t2.queries) k
            WHERE t2.step = t.step AND t2.cycle > $WARM) || ' |'
  FROM public.tally t WHERE cycle > $WARM GROUP BY step, label ORDER BY step;
SQL
if [ "$DETAIL" = 1 ]; then
	psql -X -q -A -t -F '|' -v ON_ERROR_STOP=1 <<SQL
SELECT t.step || ' ' || t.label || ': ' || round(sum(q.value::bigint)::numeric / $CYCLES, 2) || ' x '
       || regexp_replace(left(s.query, 160), '\s+', ' ', 'g')
  FROM public.tally t, jsonb_each(t.queries) q,
       LATERAL (SELECT min(query) AS query FROM pg_stat_statements p WHERE p.queryid::text = q.key) s
 WHERE t.cycle > $WARM
 GROUP BY t.step, t.label, q.key, s.query ORDER BY t.step, sum(q.value::bigint) DESC;
SQL
fi
