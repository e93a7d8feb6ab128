\i sql/include/helpers.sql
-- One write path (issue 30): cscp's calls read and write their rows through the executor, so
-- columns added to and dropped from its tables change nothing, also in a new session, where
-- every cache starts afresh (with evidence rows formed in C, a column added to cscp.evidence
-- made every command_submit of a new session fail with XX000).  As an application role.
-- test/pgtap/executor_path.sql tests triggers, policies and columns within one session.
CREATE ROLE ep_app;
SELECT cscp.grant_app('ep_app');
ALTER TABLE cscp.evidence ADD COLUMN note text;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['context', 'document', 'conversation', 'turn', 'event', 'fact'] LOOP
        EXECUTE format('ALTER TABLE cscp.%I ADD COLUMN ep_gone int, ADD COLUMN note text DEFAULT %L', t, 'noted');
        EXECUTE format('ALTER TABLE cscp.%I DROP COLUMN ep_gone', t);
    END LOOP;
END
$$;

\c
SET cscp.clock = '2026-09-01 10:00:00+00';
SET ROLE ep_app;
SET cscp.tenant_id = 'ep';
SELECT status, slots, note FROM cscp.context_open('ep', 'ep-conv', 'ana', '{"active_intent": "track"}');
SELECT slots, version, note FROM cscp.slot_set((SELECT context_id FROM cscp.context WHERE conversation_id = 'ep-conv'),
                                               'active_target', '"order:7"');
SELECT slots, version FROM cscp.context_open('ep', 'ep-conv', 'ana', '{"x_seen": true}');
SELECT cscp.doc_put('ep', 'ep-conv', 'ns', '{"a": 1}', 600);
SELECT cscp.doc_put('ep', 'ep-conv', 'ns', '{"b": 2}', 600);
SELECT cscp.doc_get('ep', 'ep-conv', 'ns');
SELECT payload, note FROM cscp.document WHERE tenant_id = 'ep';
SELECT * FROM cscp.conversation_start('ep', 'ep-conv', 'agent',
    '{"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1790000000000}');
SELECT * FROM cscp.conversation_exchange('ep', 'ep-conv',
    '{"messageId": "m1", "from": "ana", "role": "user", "content": {"text": "where?"}, "ts": 1790000001000}');
SELECT turn_index, message_id, note FROM cscp.turn WHERE tenant_id = 'ep' ORDER BY turn_index;
SELECT fact_id FROM cscp.fact_write('ep', 'ana', 'f1', 'home_city', '"Lisbon"');
SELECT fact_id FROM cscp.fact_write('ep', 'ana', 'f2', 'home_city', '"Porto"', supersedes => 'f1');
SELECT fact_id, value, is_valid, note FROM cscp.fact_current('ep', 'ana', 'f1');
SELECT fact_id, is_valid, note FROM cscp.fact_history('ep', 'ana', 'f2');
SELECT cscp.build_context('ep', 'ana', 'ep-conv') -> 'fact_ids' AS fact_ids;
SELECT state, replayed FROM cscp.command_submit('ep', 'ep-conv', 'ana', 'ep-key', 'track_order', false, ARRAY['m1']);
SELECT seq, event_type, note FROM cscp.evidence WHERE tenant_id = 'ep' ORDER BY evidence_id;
SELECT count(*) AS broken_links FROM cscp.evidence_verify('ep');

-- And once more in a new session: the erasure.
\c
SET ROLE ep_app;
SET cscp.tenant_id = 'ep';
SELECT cscp.forget_conversation('ep', 'ep-conv');
SELECT count(*) AS facts_left FROM cscp.fact WHERE tenant_id = 'ep';
RESET ROLE;

DELETE FROM cscp.fact WHERE tenant_id = 'ep';
DELETE FROM cscp.tombstone WHERE tenant_id = 'ep';
ALTER TABLE cscp.evidence DROP COLUMN note;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['context', 'document', 'conversation', 'turn', 'event', 'fact'] LOOP
        EXECUTE format('ALTER TABLE cscp.%I DROP COLUMN note', t);
    END LOOP;
END
$$;
DROP OWNED BY ep_app;
DROP ROLE ep_app;
