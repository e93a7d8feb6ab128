#!/usr/bin/env bash
# `make fuzz` (and a short form inside `make test`): every function of schema cscp called with
# random and adversarial arguments by test/fuzz/fuzz_sql.c, on a throwaway cluster, three ways: as
# the superuser, as an application role bound to tenant fuzz (cscp.grant_app with a tenant list;
# its session names that tenant, now and then none or another), and as the gateway's role
# (cscp.grant_gateway: the http_* endpoints, with a valid key, another tenant's, a revoked one, a
# mangled one or garbage); rows of cscp's tables passed as arguments come with fields set to NULL
# or to values of the wrong shape.
#
# The database is first given some state through the API (conversations, one under a JSON Schema,
# contexts, commands waiting and executed, identities, facts, documents), so that plausible
# arguments reach past the first check. The run fails on a crash, an internal error (SQLSTATE
# XX000, any XX or 58), a statement timeout, a refused call that changed any row of cscp's tables,
# a function the application or gateway role may not execute that is not refused with 42501, an
# endpoint answering 5xx, a row of tenant bystander (which neither role is bound to nor holds a
# valid key of) changed by a call of either role or shown to it (its rows hold a word no other
# row holds, zqsecret), or invariants broken afterwards; the failing call is printed as SQL.
# Settings: FUZZ_CALLS (3000), FUZZ_SEED (20261121; printed, so a run can be repeated).
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh

CALLS=${FUZZ_CALLS:-3000}
SEED=${FUZZ_SEED:-20261121}
ROLE=fuzz_app
GATEWAY=fuzz_gateway
TENANT=fuzz
BYSTANDER=bystander

make --no-print-directory -s test/fuzz/fuzz_sql

cluster_start
echo "cscp fuzz: seed $SEED, $CALLS calls"
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION cscp;
SELECT cscp.command_declare('fuzz', 'lookup_order', false);
CREATE ROLE $ROLE LOGIN;
SELECT cscp.grant_app('$ROLE', ARRAY['$TENANT']);
CREATE ROLE $GATEWAY LOGIN;
SELECT cscp.grant_gateway('$GATEWAY');
-- the role the fuzz grants and revokes (not $ROLE, which must keep its privileges)
CREATE ROLE fuzz_bystander;
-- rows of a tenant neither role may touch: the run fails if one changes after their calls, or
-- if what either role is answered holds the word zqsecret, which only these rows hold
SELECT cscp.conversation_start('$BYSTANDER', 'c1', 'agent',
       '{"from": "agent", "role": "agent", "ts": 1700000000000, "content": {"text": "hi zqsecret"}}');
SELECT cscp.context_open('$BYSTANDER', c, a, '{"active_intent": "cancel_order"}')
  FROM unnest(ARRAY['c1', 'c2']) c, unnest(ARRAY['user-1', 'user-2']) a;
SELECT cscp.command_submit('$BYSTANDER', 'c1', 'user-1', 'k-read', 'lookup_order', false, '{m-1}');
SELECT cscp.command_submit('$BYSTANDER', 'c2', 'user-1', 'k-cancel', 'cancel_order', true, '{m-1}', '{"order_id": 1}', 'order:1');
SELECT cscp.identity_set('$BYSTANDER', 'user-1', '{"user_name": "Ana zqsecret", "user_id": "user-1", "authority": "employee"}');
SELECT cscp.fact_write('$BYSTANDER', 'user-1', 'f-1', 'address', '"Side St 2 zqsecret"');
SELECT cscp.doc_put('$BYSTANDER', 'c1', 'cart', '{"items": 1, "note": "zqsecret"}', 86400);
SELECT cscp.ws_put('$BYSTANDER', 'c1', 'draft', '{"to": "zqsecret"}');
SELECT cscp.checkpoint_put('$BYSTANDER', 'th-1', '', 'c-1', NULL, '{"v": 4, "channel_versions": {}, "note": "zqsecret"}', '{"m": "zqsecret"}');
SELECT cscp.checkpoint_put_writes('$BYSTANDER', 'th-1', '', 'c-1', 'task-a', '~1', '{messages}', '{json}', ARRAY['\x01'::bytea], '{0}');
SELECT cscp.store_put('$BYSTANDER', '{users,u-1,memories}', 'm-1', '{"text": "likes green tea zqsecret"}');
SELECT cscp.session_add_items('$BYSTANDER', 'c1', '[{"role": "user", "content": "hi zqsecret"}]');
SQL
# API keys: one of the fuzz's tenant, one of another tenant, one of the bystander, revoked
key() { psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT cscp.api_key_create('$1', 'fuzz-key')"; }
KEY_VALID=$(key "$TENANT")
KEY_OTHER=$(key other)
KEY_REVOKED=$(key "$BYSTANDER")
psql -X -q -v ON_ERROR_STOP=1 -c "SELECT cscp.api_key_revoke('$BYSTANDER', 'fuzz-key')" >/dev/null
PGUSER=$ROLE PGOPTIONS="-c cscp.tenant_id=$TENANT" psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
SELECT cscp.conversation_start('fuzz', 'c1', 'agent',
       '{"from": "agent", "role": "agent", "ts": 1700000000000, "content": {"text": "hi"}}');
SELECT cscp.conversation_start('fuzz', 'c2', 'agent',
       '{"from": "agent", "role": "agent", "ts": 1700000000000, "content": {"text": "hi"}}',
       '{"type": "object", "required": ["text"], "properties": {"text": {"type": "string", "maxLength": 40, "pattern": "^[a-z ]*$"}}}');
SELECT cscp.conversation_exchange('fuzz', 'c1',
       '{"messageId": "m-1", "from": "user-1", "role": "user", "ts": 1700000000001, "content": {"text": "cancel"}}');
SELECT cscp.context_open('fuzz', c, a, '{"active_intent": "cancel_order"}')
  FROM unnest(ARRAY['c1', 'c2', 'c3']) c, unnest(ARRAY['user-1', 'user-2']) a;
SELECT cscp.command_submit('fuzz', 'c1', 'user-1', 'k-read', 'lookup_order', false, '{m-1}');
SELECT cscp.command_submit('fuzz', 'c2', 'user-1', 'k-cancel', 'cancel_order', true, '{m-1}', '{"order_id": 1}', 'order:1');
SELECT cscp.command_submit('fuzz', 'c3', 'user-2', 'k-done', 'cancel_order', true, '{m-2}', '{}', 'order:2');
SELECT cscp.confirm('fuzz', 'c3', 'user-2', 'm-3', true, 'order:2');
SELECT cscp.command_transition(command_id, s::cscp.command_state)
  FROM cscp.command, unnest(ARRAY['authz_pending', 'authorized', 'started', 'executed']) WITH ORDINALITY s(s, i)
 WHERE idempotency_key = 'k-done' ORDER BY i;
SELECT cscp.identity_set('fuzz', 'user-1', '{"user_name": "Maria", "user_id": "user-1", "authority": "employee"}');
SELECT cscp.fact_write('fuzz', 'user-1', 'f-1', 'address', '"Main St 1"');
SELECT cscp.fact_write('fuzz', 'user-1', 'f-2', 'diet', '"vegetarian"', depends_on => '{f-1}');
SELECT cscp.doc_put('fuzz', 'c1', 'cart', '{"items": 2}', 600);
SELECT cscp.ws_put('fuzz', 'c1', 'draft', '{"to": "x"}');
SELECT cscp.env_set('fuzz', 'c1', '{"timezone": "UTC"}');
SELECT cscp.checkpoint_put('fuzz', 'th-1', '', 'c-1', NULL, '{"v": 4, "channel_versions": {}}', '{}');
SELECT cscp.checkpoint_put('fuzz', 'th-1', '', 'c-2', 'c-1', '{"v": 4, "channel_versions": {}}', '{"step": 1}');
SELECT cscp.checkpoint_put_writes('fuzz', 'th-1', '', 'c-2', 'task-a', '~1', '{messages}', '{json}', ARRAY['\x01'::bytea], '{0}');
SELECT cscp.store_put('fuzz', '{users,u-1,memories}', 'm-1', '{"text": "likes coffee"}');
SELECT cscp.session_add_items('fuzz', 'c1', '[{"role": "user", "content": "hi"}]');
SQL

status=0
test/fuzz/fuzz_sql "$SEED" "$CALLS" "$ROLE" "$TENANT" "$CSCP_TMP/fuzz_failure.sql" \
	"$GATEWAY" "$BYSTANDER" "$KEY_VALID" "$KEY_OTHER" "$KEY_REVOKED" || status=1
if [ $status -ne 0 ]; then
	cat "$CSCP_TMP/fuzz_failure.sql" 2>/dev/null | cut -c1-2000
fi
if grep -E 'terminated by signal|PANIC|TRAP:' "$CSCP_TMP/postgres.log"; then
	echo "cscp fuzz: the server log shows a crash" >&2
	status=1
fi
exit $status
