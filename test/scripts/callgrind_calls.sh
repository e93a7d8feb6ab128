#!/usr/bin/env bash
# Instructions per call of cscp's public calls, counted by callgrind in a single-user backend, as
# the application role bound to its one tenant (cscp.grant_app(role, ARRAY['bench']),
# cscp.tenant_id = 'bench'): deterministic where pgbench on a shared machine is not.
#
# How: one throwaway cluster is set up once (a conversation of 300 turns, 1,000 documents, 1,000
# open questions, 10,000 facts and a chain of 101, LangGraph threads and store items, two
# conversations forgotten) and, for each kind, the rows its
# calls need (a command in the state before the one a transition reaches, for each call; a
# question for each "yes"), then stopped and copied.  Each kind runs on a fresh copy of it, in one
# backend under callgrind: W calls (their planning and cache loads), a marker statement, N calls,
# the marker twice; callgrind dumps its counts when the marker's function is entered
# (--dump-before=pg_backend_pid), so the N calls and one marker fall between the first two dumps
# and one marker alone between the last two: one call costs the difference over N.  Every call
# returns whether it did what its kind measures (a transition accepted, a "yes" confirmed, a
# command not replayed, a document found): anything else fails the run.  Not part of `make test`;
# needs valgrind.  About 5 minutes for every kind on 2 cores.
#
#   bash test/scripts/callgrind_calls.sh [KIND...]
#
# Prints "KIND<TAB>instructions per call" per kind (all kinds by default, in the order below).
# With BENCH_CALLS_BASELINE=FILE (`make bench-calls`: test/bench/calls.tsv) it prints instead
# kind, baseline, now and now / baseline, marking with "!" every kind above 1.05 (and "new" a kind
# the baseline lacks); BENCH_CALLS_CHECK=1 then exits 1 when one is marked, BENCH_CALLS_UPDATE=1
# writes the counts of this run into FILE (the kinds run; those not run keep their line).
# BENCH_CALLS_PROFILE=DIR keeps there each kind's callgrind file of its N calls (KIND.callgrind;
# callgrind_annotate --inclusive=yes reads it).
#
# Kinds:
#   context_open.new        a conversation and actor with no live context (a new context)
#   context_open.reused     the live context of the conversation and actor
#   slot_set                one slot of a live context, a new value each call
#   conversation_exchange   a user's turn of a conversation of 300 turns and more
#   command_submit.read_only  a declared read-only command, in a conversation with a live context
#   command_submit.asking   a mutating command, which asks for confirmation
#   confirm                 the "yes" to a command's question, in its window, target matching
#   command_transition.authz_pending  a read-only command from canonicalized
#   command_transition.authorized     from authz_pending
#   command_transition.started        from authorized
#   command_transition.executed       from started, with an outcome
#   message_turn            turn, context and slots, read-only command in one call
#   turn                    W1's nine calls (test/bench/message_turn_cscp.sql, in a PL/pgSQL
#                           function) on a conversation of 300 turns: not a public function
#   doc_get                 one of 1,000 documents (W3's get)
#   doc_put                 merging one key into one of 1,000 documents (W3's put)
#   http_doc_get            the same documents with a bearer key of tenant 'bench' (what the
#                           gateway runs for GET /v1/context/...), as a role of cscp.grant_gateway
#   fact_current.head       the head of a chain of 101 facts, among 10,000 others
#   fact_current.chain      the same chain from its start
#   fact_write              a new fact of a subject, one of 10 keys
#   build_context           a subject of 50 valid facts
#   checkpoint_put          the next checkpoint of a thread, two channels changed
#   checkpoint_put_writes   a task's pending write against a checkpoint
#   checkpoint_get_tuple    the newest checkpoint of one of 100 threads of 5
#   store_put               replacing one of 1,000 store items
#   store_get               one of 1,000 store items (its TTL refreshed)
#   store_search            a namespace of 10 items, no filter, no query
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
ALL=(context_open.new context_open.reused slot_set conversation_exchange
	command_submit.read_only command_submit.asking confirm
	command_transition.authz_pending command_transition.authorized
	command_transition.started command_transition.executed message_turn turn
	doc_get doc_put http_doc_get fact_current.head fact_current.chain fact_write build_context
	checkpoint_put checkpoint_put_writes checkpoint_get_tuple store_put store_get store_search)
KINDS=("$@")
[ ${#KINDS[@]} -gt 0 ] || KINDS=("${ALL[@]}")
BASELINE=${BENCH_CALLS_BASELINE:-}
W=20
# calls counted per kind (400 unless said), so that a page split or a cache rebuild weighs little;
# a kind's count may depend on its N (the rows its calls add), so a change of N rewrites the
# kind's baseline
declare -A N=([turn]=40 [message_turn]=120 [conversation_exchange]=200 [context_open.new]=300
	[command_submit.read_only]=250 [command_submit.asking]=250 [confirm]=150
	[command_transition.authz_pending]=200 [command_transition.authorized]=200
	[command_transition.started]=200 [command_transition.executed]=200 [fact_write]=100
	[fact_current.chain]=50 [build_context]=120 [checkpoint_put]=100 [checkpoint_put_writes]=200
	[checkpoint_get_tuple]=150 [store_get]=100 [store_search]=25)
for k in "${KINDS[@]}"; do
	case " ${ALL[*]} " in
		*" $k "*) ;;
		*) echo "callgrind_calls: unknown kind \"$k\" (kinds: ${ALL[*]})" >&2; exit 2 ;;
	esac
done

cluster_start
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE EXTENSION cscp;
SELECT cscp.command_declare('bench', 'track_order', false);
-- the prepared questions and contexts outlive the run (a kind may run minutes after them)
SELECT cscp.policy_set('bench', '{"context_ttl": "1 day", "confirmation_ttl": "1 day"}');
CREATE ROLE bench_app LOGIN;
SELECT cscp.grant_app('bench_app', ARRAY['bench']);
CREATE ROLE bench_gw LOGIN;
SELECT cscp.grant_gateway('bench_gw');
-- a database in use has forgotten something: a conversation of this tenant and one of another
SELECT cscp.forget_conversation('bench', 'forgotten');
SELECT cscp.forget_conversation('other', 'forgotten');
INSERT INTO cscp.api_key (tenant_id, label, key_hash, scopes)
VALUES ('bench', 'bench', sha256(convert_to('bench-key', 'UTF8')), '{documents:read}');
INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
  SELECT 'bench', 's-' || i, 'profile', jsonb_build_object('name', 'user ' || i, 'k1', i), now() + interval '1 day'
    FROM generate_series(1, 1000) i;
-- what a kind's preparation hands its calls: the ids of call i
CREATE TABLE public.prep (kind text, i int, id uuid, PRIMARY KEY (kind, i));
GRANT ALL ON public.prep TO bench_app;
CREATE FUNCTION public.turn(n bigint) RETURNS boolean LANGUAGE plpgsql AS $f$
DECLARE
    ctx uuid;
    cid uuid;
    conv text := 'cg-conv';
    ok boolean;
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
    SELECT accepted INTO ok FROM cscp.command_transition(cid, 'executed', 'order_found', '{"status": "shipped"}');
    RETURN ok;
END
$f$;
GRANT EXECUTE ON FUNCTION public.turn(bigint) TO bench_app;
SQL
# as_app: psql as the application role
as_app() {
	{
		echo "SET cscp.tenant_id = 'bench'; SET ROLE bench_app;"
		cat
	} | psql -X -q -v ON_ERROR_STOP=1 "$@"
}
as_app >/dev/null <<'SQL'
SELECT * FROM cscp.conversation_start('bench', 'cg-conv', 'agent',
    '{"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1795269500000}');
SELECT * FROM cscp.conversation_start('bench', 'mt-conv', 'agent',
    '{"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1795269500000}');
SELECT * FROM cscp.context_open('bench', 'slot-conv', 'customer');
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
-- LangGraph: threads of 5 checkpoints, each with a task's write, and 100 namespaces of 10 items
DO $$
BEGIN
    FOR t IN 0..99 LOOP
        FOR c IN 1..5 LOOP
            PERFORM cscp.checkpoint_put('bench', 'lg-g-' || t, '', 'cp-' || c, CASE WHEN c > 1 THEN 'cp-' || (c - 1) END,
                jsonb_build_object('v', 4, 'id', 'cp-' || c, 'ts', '2026-01-01T00:00:00+00:00',
                                   'channel_versions', jsonb_build_object('messages', c::text, 'step', c::text),
                                   'versions_seen', '{}'::jsonb, 'pending_sends', '[]'::jsonb),
                jsonb_build_object('source', 'loop', 'step', c),
                ARRAY['messages', 'step'], ARRAY[c::text, c::text], ARRAY['json', 'json'],
                ARRAY[convert_to('[{"role": "user", "content": "where is my order ' || c || '?"}]', 'UTF8'),
                      convert_to(c::text, 'UTF8')]);
            PERFORM cscp.checkpoint_put_writes('bench', 'lg-g-' || t, '', 'cp-' || c, 'task-' || c, '',
                ARRAY['messages'], ARRAY['json'], ARRAY[convert_to('[{"role": "ai", "content": "shipped"}]', 'UTF8')], ARRAY[0]);
        END LOOP;
        FOR k IN 0..9 LOOP
            PERFORM cscp.store_put('bench', ARRAY['memories', 'u-' || t], 'k-' || k,
                                   jsonb_build_object('text', 'likes tea ' || k, 'n', k));
        END LOOP;
    END LOOP;
    PERFORM cscp.checkpoint_put('bench', 'lg-put', '', 'cp-0', NULL, '{"v": 4, "id": "cp-0"}', '{}');
END
$$;
SQL

# prepare KIND COUNT: the rows calls 1..COUNT of KIND need, before the copy, one statement each
# (a statement's rows share its timestamp, which indexes by time could not tell apart)
prepare() {
	local i step=0
	case $1 in
		*.authorized) step=1 ;;
		*.started) step=2 ;;
		*.executed) step=3 ;;
	esac
	for i in $(seq 1 "$2"); do
		case $1 in
			command_submit.read_only | command_submit.asking)
				echo "SELECT FROM cscp.context_open('bench', '$1-$i', 'customer');" ;;
			confirm | questions)
				echo "SELECT FROM cscp.context_open('bench', '$1-$i', 'customer');"
				echo "SELECT FROM cscp.command_submit('bench', '$1-$i', 'customer', '$1-key-$i', 'cancel_order', true, ARRAY['ask-$i'], '{\"order_id\": \"123\"}', 'order:$i');" ;;
			command_transition.*)
				echo "SELECT FROM cscp.context_open('bench', '$1-$i', 'customer');"
				echo "INSERT INTO public.prep SELECT '$1', $i, command_id FROM cscp.command_submit('bench', '$1-$i', 'customer', '$1-$i', 'track_order', false, ARRAY['m-$i'], '{\"order_id\": \"123\"}', 'order:$i');"
				if [ "$step" -ge 1 ]; then echo "SELECT FROM cscp.command_transition((SELECT id FROM public.prep WHERE kind = '$1' AND i = $i), 'authz_pending', 'policy_check');"; fi
				if [ "$step" -ge 2 ]; then echo "SELECT FROM cscp.command_transition((SELECT id FROM public.prep WHERE kind = '$1' AND i = $i), 'authorized', 'read_only');"; fi
				if [ "$step" -ge 3 ]; then echo "SELECT FROM cscp.command_transition((SELECT id FROM public.prep WHERE kind = '$1' AND i = $i), 'started');"; fi ;;
			checkpoint_put_writes)
				echo "SELECT FROM cscp.checkpoint_put('bench', 'lg-w', '', 'cpw-$i', NULL, '{\"v\": 4, \"id\": \"cpw-$i\"}', '{}');" ;;
			turns)
				echo "SELECT public.turn(-$i);" ;;
			*) return 0 ;;
		esac
	done
}
# the 300 turns of cg-conv; 1,000 questions waiting for their answer (cscp.command_window of a
# realistic size); then every kind's rows, also when some kinds run: the same rows (and
# statistics) whichever run
{
	prepare turns 300
	prepare questions 1000
	for k in "${ALL[@]}"; do
		prepare "$k" $((W + ${N[$k]:-400}))
	done
} | as_app >/dev/null
CTX=$(echo "SELECT context_id FROM cscp.context_get('bench', 'slot-conv', 'customer')" | as_app -A -t)
for k in "${KINDS[@]}"; do
	psql -X -q -A -t -v ON_ERROR_STOP=1 -c "SELECT id FROM public.prep WHERE kind = '$k' ORDER BY i" >"$CSCP_TMP/ids.$k"
done
psql -X -q -c "VACUUM ANALYZE" -c CHECKPOINT
# every kind runs in a later minute than the preparation, so that its first use of a prepared
# context always extends it into a later minute (and writes the context's live row), whenever
# it runs (a clock pinned for the preparation would give its rows one timestamp, which the
# indexes by time then cannot tell apart)
sleep $((61 - 10#$(date +%S)))
cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CSCP_TMP/data" -m fast -w stop >/dev/null
cluster_as_owner mv "$CSCP_TMP/data" "$CSCP_TMP/base"

# call KIND I: call I of KIND, one statement on one line (single-user mode), whose one column
# "ok" is true when the call did what KIND measures
call() {
	local i=$2
	case $1 in
		context_open.new) echo "SELECT status = 'active' AND created_at = pg_catalog.statement_timestamp() AS ok FROM cscp.context_open('bench', 'open-$i', 'customer')" ;;
		context_open.reused) echo "SELECT status = 'active' AND created_at < pg_catalog.statement_timestamp() AS ok FROM cscp.context_open('bench', 'cg-conv', 'customer')" ;;
		slot_set) echo "SELECT slots ->> 'active_target' = 'order:$i' AS ok FROM cscp.slot_set('$CTX', 'active_target', '\"order:$i\"')" ;;
		conversation_exchange) echo "SELECT outcome = 'exchanged' AS ok FROM cscp.conversation_exchange('bench', 'cg-conv', jsonb_build_object('messageId', 'x-$i', 'from', 'customer', 'role', 'user', 'content', '{\"text\": \"where is my order 123?\"}'::jsonb, 'ts', 1795269600000))" ;;
		command_submit.read_only) echo "SELECT NOT replayed AND state <> 'rejected' AS ok FROM cscp.command_submit('bench', '$1-$i', 'customer', 'rkey-$i', 'track_order', false, ARRAY['m-$i'], '{\"order_id\": \"123\"}', 'order:$i')" ;;
		command_submit.asking) echo "SELECT state = 'confirmation_required' AS ok FROM cscp.command_submit('bench', '$1-$i', 'customer', 'akey-$i', 'cancel_order', true, ARRAY['ask-$i'], '{\"order_id\": \"123\"}', 'order:$i')" ;;
		confirm) echo "SELECT outcome = 'confirmed' AS ok FROM cscp.confirm('bench', 'confirm-$i', 'customer', 'yes-$i', true, 'order:$i')" ;;
		command_transition.authz_pending) echo "SELECT accepted AS ok FROM cscp.command_transition('${IDS[i - 1]}', 'authz_pending', 'policy_check')" ;;
		command_transition.authorized) echo "SELECT accepted AS ok FROM cscp.command_transition('${IDS[i - 1]}', 'authorized', 'read_only')" ;;
		command_transition.started) echo "SELECT accepted AS ok FROM cscp.command_transition('${IDS[i - 1]}', 'started')" ;;
		command_transition.executed) echo "SELECT accepted AS ok FROM cscp.command_transition('${IDS[i - 1]}', 'executed', 'order_found', '{\"status\": \"shipped\"}')" ;;
		message_turn) echo "SELECT r ->> 'command_id' IS NOT NULL AS ok FROM cscp.message_turn('bench', 'mt-conv', 'customer', jsonb_build_object('messageId', 'mt-$i', 'from', 'customer', 'role', 'user', 'content', '{\"text\": \"where is my order 123?\"}'::jsonb, 'ts', 1795269600000), jsonb_build_object('active_intent', 'track_order', 'active_target', 'order:$i'), jsonb_build_object('idempotency_key', 'mtkey-$i', 'name', 'track_order', 'mutating', false, 'payload', '{\"order_id\": \"123\"}'::jsonb, 'target_fingerprint', 'order:$i')) r" ;;
		turn) echo "SELECT public.turn($i) AS ok" ;;
		doc_get) echo "SELECT cscp.doc_get('bench', 's-$(( (i * 7 % 1000) + 1 ))', 'profile') IS NOT NULL AS ok" ;;
		doc_put) echo "SELECT cscp.doc_put('bench', 's-$(( (i % 1000) + 1 ))', 'profile', jsonb_build_object('k$((i % 8))', 'v$i'), 86400) IS NOT NULL AS ok" ;;
		http_doc_get) echo "SELECT cscp.http_doc_get('Bearer bench-key', 's-$(( (i * 7 % 1000) + 1 ))', 'profile') IS NOT NULL AS ok" ;;
		fact_current.head) echo "SELECT fact_id = 'w-100' AS ok FROM cscp.fact_current('bench', 'walker', 'w-100')" ;;
		fact_current.chain) echo "SELECT fact_id = 'w-100' AS ok FROM cscp.fact_current('bench', 'walker', 'w-0')" ;;
		fact_write) echo "SELECT fact_id = 'fw-$i' AS ok FROM cscp.fact_write('bench', 'subj-w', 'fw-$i', 'key-$((i % 10))', '$i')" ;;
		build_context) echo "SELECT length(cscp.build_context('bench', 'subj-1', 'sess')::text) > 1000 AS ok" ;;
		checkpoint_put) echo "SELECT cscp.checkpoint_put('bench', 'lg-put', '', 'cp-$i', 'cp-$((i - 1))', '{\"v\": 4, \"id\": \"cp-$i\", \"ts\": \"2026-01-01T00:00:00+00:00\", \"channel_versions\": {\"messages\": \"$i\", \"step\": \"$i\"}, \"versions_seen\": {\"agent\": {\"messages\": \"$((i - 1))\"}}, \"pending_sends\": []}', '{\"source\": \"loop\", \"step\": $i}', '{messages,step}', '{$i,$i}', '{json,json}', ARRAY[convert_to('[{\"role\": \"user\", \"content\": \"where is my order $i?\"}]', 'UTF8'), convert_to('$i', 'UTF8')]) IS NOT NULL AS ok" ;;
		checkpoint_put_writes) echo "SELECT cscp.checkpoint_put_writes('bench', 'lg-w', '', 'cpw-$i', 'task-$i', '', '{messages}', '{json}', ARRAY[convert_to('[{\"role\": \"ai\", \"content\": \"shipped\"}]', 'UTF8')], '{0}') = 1 AS ok" ;;
		checkpoint_get_tuple) echo "SELECT id = 'cp-5' AS ok FROM cscp.checkpoint_get_tuple('bench', 'lg-g-$((i * 7 % 100))')" ;;
		store_put) echo "SELECT true AS ok FROM cscp.store_put('bench', '{memories,u-$((i % 100))}', 'k-$((i / 100 % 10))', '{\"text\": \"likes coffee $i\", \"n\": $i}')" ;;
		store_get) echo "SELECT item_key = 'k-$((i % 10))' AS ok FROM cscp.store_get('bench', '{memories,u-$((i * 7 % 100))}', 'k-$((i % 10))')" ;;
		store_search) echo "SELECT count(*) = 10 AS ok FROM cscp.store_search('bench', '{memories,u-$((i * 7 % 100))}')" ;;
	esac
}

MARK="SELECT pg_catalog.pg_backend_pid() IS NULL AS mark"
declare -A NOW=()
for k in "${KINDS[@]}"; do
	n=${N[$k]:-400}
	IDS=()
	mapfile -t IDS <"$CSCP_TMP/ids.$k"
	{
		echo "SET cscp.tenant_id = 'bench'"
		if [ "$k" = http_doc_get ]; then echo "SET ROLE bench_gw"; else echo "SET ROLE bench_app"; fi
		for i in $(seq 1 "$W"); do call "$k" "$i"; done
		echo "$MARK"
		for i in $(seq $((W + 1)) $((W + n))); do call "$k" "$i"; done
		echo "$MARK"
		echo "$MARK"
	} >"$CSCP_TMP/$k.sql"
	chmod 644 "$CSCP_TMP/$k.sql"
	rm -rf "$CSCP_TMP/data"
	cluster_as_owner cp -a "$CSCP_TMP/base" "$CSCP_TMP/data"
	cluster_as_owner valgrind --tool=callgrind --dump-before=pg_backend_pid \
		--callgrind-out-file="$CSCP_TMP/cg.$k" \
		"$PG_BINDIR/postgres" --single -D "$CSCP_TMP/data" -c fsync=off postgres \
		<"$CSCP_TMP/$k.sql" >"$CSCP_TMP/$k.log" 2>&1
	oks=$(grep -c '^	 1: ok = "t"' "$CSCP_TMP/$k.log" || true)
	if grep -q ERROR "$CSCP_TMP/$k.log" || [ "$oks" -ne $((W + n)) ]; then
		echo "callgrind_calls: $k: $oks of $((W + n)) calls did what the kind measures" >&2
		grep -m3 -B2 'ERROR\|ok = "f"' "$CSCP_TMP/$k.log" >&2 || true
		exit 1
	fi
	if [ -n "${BENCH_CALLS_PROFILE:-}" ]; then
		mkdir -p "$BENCH_CALLS_PROFILE"
		cp "$CSCP_TMP/cg.$k.2" "$BENCH_CALLS_PROFILE/$k.callgrind"
	fi
	part() { awk '/^summary:/ { print $2; exit }' "$CSCP_TMP/cg.$k.$1"; }
	NOW[$k]=$(( ($(part 2) - $(part 3)) / n ))
	[ -n "$BASELINE" ] || printf '%s\t%s\n' "$k" "${NOW[$k]}"
done

[ -n "$BASELINE" ] || exit 0
declare -A BASE=()
if [ -f "$BASELINE" ]; then
	while IFS=$'\t' read -r k v; do
		case $k in '#'* | '') continue ;; esac
		BASE[$k]=$v
	done <"$BASELINE"
fi
above=0
printf '%-34s %12s %12s %7s\n' kind baseline now ratio
for k in "${KINDS[@]}"; do
	if [ -z "${BASE[$k]:-}" ]; then
		printf '%-34s %12s %12s %7s new\n' "$k" - "${NOW[$k]}" -
		continue
	fi
	r=$(awk -v a="${NOW[$k]}" -v b="${BASE[$k]}" 'BEGIN { printf "%.3f", a / b }')
	mark=
	if awk -v r="$r" 'BEGIN { exit !(r > 1.05) }'; then mark=' !'; above=1; fi
	printf '%-34s %12s %12s %7s%s\n' "$k" "${BASE[$k]}" "${NOW[$k]}" "$r" "$mark"
done
if [ "${BENCH_CALLS_UPDATE:-0}" = 1 ]; then
	for k in "${KINDS[@]}"; do BASE[$k]=${NOW[$k]}; done
	{
		echo "# kind	instructions per call (make bench-calls; BENCH_CALLS_UPDATE=1 make bench-calls rewrites it)"
		for k in "${ALL[@]}"; do
			[ -z "${BASE[$k]:-}" ] || printf '%s\t%s\n' "$k" "${BASE[$k]}"
		done
	} >"$BASELINE"
	echo "callgrind_calls: wrote $BASELINE"
fi
if [ "$above" = 1 ]; then
	echo "callgrind_calls: a kind marked ! costs more than 1.05 times its baseline: say why in the commit body" >&2
	[ "${BENCH_CALLS_CHECK:-0}" != 1 ] || exit 1
fi
