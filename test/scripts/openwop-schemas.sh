#!/usr/bin/env bash
# The turns and events cscp stores, exported as JSON (cscp.conversation_export), validated against
# OpenWOP's published conversation-turn.schema.json and conversation-event.schema.json
# (test/openwop/schemas, source in test/openwop/schemas/SOURCE) with ajv from npm, installed under
# test/node: an independent JSON Schema validator, not cscp's own.  Runs on the cluster PGHOST
# names (run-tests.sh's), in a database of its own, as an application role.  Then 400 random turns
# (test/openwop/random_turns.sql, seeded): what the schemas forbid must be refused on input, and
# every accepted turn must export valid.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -f test/node/node_modules/ajv/dist/2020.js ]; then
	bash test/scripts/npm-tool.sh ajv@8.17.1 || exit 1
fi
db=cscp_openwop
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS '$db'" >/dev/null 2>&1 || true' EXIT
psql -X -q -v ON_ERROR_STOP=1 -d "$db" <<'SQL' >/dev/null
CREATE EXTENSION cscp;
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'openwop_app') THEN CREATE ROLE openwop_app LOGIN; END IF;
END $$;
SELECT cscp.grant_app('openwop_app', ARRAY['ow']);
SELECT cscp.policy_set('ow', '{"replay_divergence": "keep"}');
SET cscp.clock = '2026-07-01 10:00:00+00';
SET ROLE openwop_app;
SET cscp.tenant_id = 'ow';
-- An open, exchanged, replayed, diverged and closed conversation, with optional fields.
SELECT cscp.conversation_start('ow', 'claim-1', 'claims-bot',
    '{"from": "claims-bot", "role": "agent", "content": {"text": "What happened?"}, "ts": 1782900000000}',
    schema => '{"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}',
    timeout_ms => 3600000, causation_id => 'run-1');
SELECT cscp.conversation_exchange('ow', 'claim-1',
    '{"messageId": "wamid.1", "from": "ana", "role": "user", "content": {"text": "A tree fell"}, "ts": 1782900060000,
      "groupId": "household", "to": "claims-bot"}');
SELECT cscp.conversation_exchange('ow', 'claim-1',
    '{"messageId": "wamid.1", "from": "ana", "role": "user", "content": {"text": "A tree fell"}, "ts": 1782900060000}');
SELECT cscp.conversation_exchange('ow', 'claim-1',
    '{"messageId": "wamid.1", "from": "ana", "role": "user", "content": {"text": "A car"}, "ts": 1782900070000}');
SELECT cscp.conversation_exchange('ow', 'claim-1',
    '{"from": "claims-bot", "role": "agent", "content": {"text": "Photos?"}, "ts": 1782900080000,
      "speakerId": "host:claims-bot", "agent": {"agentId": "claims-bot", "agentSharing": "isolated"}}');
SELECT cscp.conversation_close('ow', 'claim-1',
    '{"from": "claims-bot", "role": "agent", "content": {"text": "Filed."}, "ts": 1782900090000}',
    '{"claim": 1, "status": "filed"}');
-- One left open; one timed out by a late turn (a system final turn).
SELECT cscp.conversation_start('ow', 'open-1', 'bot', '{"from": "bot", "role": "agent", "content": "hi", "ts": 0}');
SELECT cscp.conversation_exchange('ow', 'open-1', '{"from": "user", "role": "user", "content": null, "ts": 5}');
SELECT cscp.conversation_start('ow', 'late-1', 'bot', '{"from": "bot", "role": "agent", "content": [1, 2], "ts": 0}',
                               timeout_ms => 1000);
RESET ROLE;
SET cscp.clock = '2026-07-01 10:00:05+00';
SET ROLE openwop_app;
SET cscp.tenant_id = 'ow';
SELECT cscp.conversation_exchange('ow', 'late-1', '{"from": "user", "role": "user", "content": "late", "ts": 9}');
-- A turn written by direct SQL, as an application role may.
INSERT INTO cscp.turn (tenant_id, conversation_id, message_id, role, sender, content, ts, extra)
VALUES ('ow', 'open-1', 'direct-1', 'agent', 'bot', '{"a": true}', 10, '{"speakerId": "host:bot"}');
SQL
# The property test: random turns, what the schema forbids refused, the rest exported below.
random=$(psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" -f test/openwop/random_turns.sql | grep -v '^$')
echo "$random"
if grep -q -e '^unexpected' -e '^too few' <<<"$random"; then
	exit 1
fi
PGOPTIONS='-c role=openwop_app -c cscp.tenant_id=ow' psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" \
	-c "SELECT cscp.conversation_export('ow', c.conversation_id)::text FROM cscp.conversation c ORDER BY 1" |
	NODE_PATH="$PWD/test/node/node_modules" node test/openwop/validate.js
