#!/usr/bin/env bash
# Instructions per call of cscp's hot calls, counted by callgrind in a single-user backend, as
# an application role (cscp.grant_app, cscp.tenant_id = 'bench'): deterministic where pgbench
# on a shared machine is not.  For each kind, the backend runs W calls, then W + N calls; the
# difference over N is one call's instructions (the first calls' planning and cache loads
# cancel out).  Not part of `make test`; needs valgrind.
#
#   bash test/scripts/callgrind_calls.sh [KIND...]
#
# Kinds (all by default):
#   put    cscp.doc_put merging one key into one of 1,000 documents (W3's put)
#   get    cscp.doc_get of one of 1,000 documents (W3's get)
#   httpget  cscp.http_doc_get of the same documents, with a bearer key of tenant 'bench' (what
#          the gateway runs for GET /v1/context/...), as a role of cscp.grant_gateway
#   turn   one message turn of W1 (test/bench/message_turn_cscp.sql's nine calls, in a
#          PL/pgSQL function), on a conversation of 300 turns
#   open   cscp.context_open of a conversation and actor with no live context (a new context)
#   chain  cscp.fact_current from the start of a chain of 101 facts, among 10,000 others
#   head   cscp.fact_current of the head of that chain
# Prints "KIND Ir/call N" per kind.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
KINDS=("$@")
[ ${#KINDS[@]} -gt 0 ] || KINDS=(put get httpget turn open chain head)

cluster_start
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION cscp;
INSERT INTO cscp.command_registry (tenant_id, command_name, mutating) VALUES ('bench', 'track_order', false);
CREATE ROLE bench_app LOGIN;
SELECT cscp.grant_app('bench_app');
CREATE ROLE bench_gw LOGIN;
SELECT cscp.grant_gateway('bench_gw');
INSERT INTO cscp.api_key (tenant_id, label, key_hash, scopes)
VALUES ('bench', 'bench', sha256(convert_to('bench-key', 'UTF8')), '{documents:read}');
INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
  SELECT 'bench', 's-' || i, 'profile', jsonb_build_object('name', 'user ' || i, 'k1', i), now() + interval '1 day'
    FROM generate_series(1, 1000) i;
CREATE FUNCTION public.turn(n bigint) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
    ctx uuid;
    cid uuid;
    conv text := 'cg-conv';
BEGIN
    PERFORM outcome FROM cscp.conversation_exchange('bench', conv, jsonb_build_object('messageId', 'm-' || n,
        'from', 'customer', 'role', 'user', 'content', '{"text": "where is my order 123?"}'::jsonb, 'ts', 1795269600000));
    SELECT context_id INTO ctx FROM cscp.context_open('bench', conv, 'customer');
    PERFORM status FROM cscp.slot_set(ctx, 'active_intent', '"track_order"');
    PERFORM status FROM cscp.slot_set(ctx, 'active_target', to_jsonb('order:' || n));
    SELECT command_id INTO cid FROM cscp.command_submit('bench', conv, 'customer', 'key-' || n, 'track_order', false,
                                                        ARRAY['m-' || n], '{"order_id": "123"}', 'order:' || n);
    PERFORM accepted FROM cscp.command_transition(cid, 'authz_pending', 'policy_check');
    PERFORM accepted FROM cscp.command_transition(cid, 'authorized', 'read_only');
    PERFORM accepted FROM cscp.command_transition(cid, 'started');
    PERFORM accepted FROM cscp.command_transition(cid, 'executed', 'order_found', '{"status": "shipped"}');
END
$f$;
GRANT EXECUTE ON FUNCTION public.turn(bigint) TO bench_app;
SQL
PGOPTIONS="-c cscp.tenant_id=bench" psql -X -q -v ON_ERROR_STOP=1 -U bench_app >/dev/null <<'SQL'
SELECT * FROM cscp.conversation_start('bench', 'cg-conv', 'agent',
    '{"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1795269500000}');
SELECT public.turn(-i) FROM generate_series(1, 300) i;
DO $$
BEGIN
    FOR s IN 1..200 LOOP
        FOR i IN 1..50 LOOP
            PERFORM cscp.fact_write('bench', 'subj-' || s, 'f-' || i, 'key-' || i, to_jsonb(i));
        END LOOP;
        COMMIT;  -- each fact_write holds an advisory lock until commit
    END LOOP;
    FOR i IN 0..100 LOOP
        PERFORM cscp.fact_write('bench', 'walker', 'w-' || i, 'step', to_jsonb(i),
                                supersedes => CASE WHEN i > 0 THEN 'w-' || (i - 1) END);
    END LOOP;
END
$$;
SQL
psql -X -q -c "VACUUM ANALYZE" -c CHECKPOINT
cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CSCP_TMP/data" -m fast -w stop >/dev/null

# calls KIND FROM TO: the statements of calls FROM..TO of KIND, one per line (single-user mode)
calls() {
	echo "SET cscp.tenant_id = 'bench'"
	if [ "$1" = httpget ]; then echo "SET ROLE bench_gw"; else echo "SET ROLE bench_app"; fi
	for i in $(seq "$2" "$3"); do
		case $1 in
			put) echo "SELECT cscp.doc_put('bench', 's-$(( (i % 1000) + 1 ))', 'profile', jsonb_build_object('k$((i % 8))', 'v$i'), 86400)" ;;
			get) echo "SELECT cscp.doc_get('bench', 's-$(( (i * 7 % 1000) + 1 ))', 'profile')" ;;
			httpget) echo "SELECT cscp.http_doc_get('Bearer bench-key', 's-$(( (i * 7 % 1000) + 1 ))', 'profile')" ;;
			turn) echo "SELECT public.turn($i)" ;;
			open) echo "SELECT (cscp.context_open('bench', 'open-$3-$i', 'customer')).status" ;;
			chain) echo "SELECT (cscp.fact_current('bench', 'walker', 'w-0')).fact_id" ;;
			head) echo "SELECT (cscp.fact_current('bench', 'walker', 'w-100')).fact_id" ;;
			*) echo "callgrind_calls: unknown kind \"$1\"" >&2; exit 2 ;;
		esac
	done
}

W=20
declare -A N=([put]=400 [get]=400 [httpget]=400 [turn]=100 [open]=200 [chain]=50 [head]=400)
for k in "${KINDS[@]}"; do
	declare -A ir=()
	for n in $W $((W + ${N[$k]:-100})); do
		calls "$k" 1 "$n" >"$CSCP_TMP/$k.$n.sql"
		chmod 644 "$CSCP_TMP/$k.$n.sql"
		cluster_as_owner valgrind --tool=callgrind --callgrind-out-file="$CSCP_TMP/cg.$k.$n.out" \
			"$PG_BINDIR/postgres" --single -D "$CSCP_TMP/data" -c fsync=off postgres \
			<"$CSCP_TMP/$k.$n.sql" >"$CSCP_TMP/$k.$n.log" 2>&1
		if grep -q ERROR "$CSCP_TMP/$k.$n.log"; then
			grep -m3 ERROR "$CSCP_TMP/$k.$n.log" >&2
			exit 1
		fi
		ir[$n]=$(awk '/^summary:/ { print $2; exit }' "$CSCP_TMP/cg.$k.$n.out")
	done
	echo "$k Ir/call $(( (ir[$((W + ${N[$k]:-100}))] - ir[$W]) / ${N[$k]:-100} ))"
done
