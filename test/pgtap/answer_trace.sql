-- What an answer leaves behind: the confirming (or declining) message becomes the context's
-- last_message_id, its trace; an answer that moved nothing leaves evidence whose context_ref names
-- the context it was judged against ({context_id, frame_id, context_hash, expires_at}; all null
-- without a context).  As an application role, through the API.
BEGIN;
SELECT plan(8);

CREATE ROLE tap_at_app;
SELECT cscp.grant_app('tap_at_app', ARRAY['at']);
SET cscp.clock = '2026-10-02 10:00:00+00';
SET ROLE tap_at_app;
SET cscp.tenant_id = 'at';
SELECT (cscp.context_open('at', 'c1', 'u')).status;
SELECT state FROM cscp.command_submit('at', 'c1', 'u', 'k1', 'transfer', true, '{m1}');
SELECT is((SELECT last_message_id FROM cscp.context WHERE tenant_id = 'at' AND conversation_id = 'c1'),
          'm1', 'the submit''s message is the context''s last');
SELECT is((SELECT outcome FROM cscp.confirm('at', 'c1', 'u', 'm2', true)), 'confirmed', 'a yes');
SELECT is((SELECT last_message_id FROM cscp.context WHERE tenant_id = 'at' AND conversation_id = 'c1'),
          'm2', 'the confirming message is the context''s last');
SELECT state FROM cscp.command_submit('at', 'c1', 'u', 'k2', 'transfer', true, '{m3}');
SELECT is((SELECT outcome FROM cscp.confirm('at', 'c1', 'u', 'm4', false)), 'declined', 'a no');
SELECT is((SELECT last_message_id FROM cscp.context WHERE tenant_id = 'at' AND conversation_id = 'c1'),
          'm4', 'the declining message is the context''s last');

-- Refused answers: with a context, and without.
SELECT is((SELECT outcome FROM cscp.confirm('at', 'c1', 'u', 'm5', true)), 'nothing_pending', 'a yes to nothing');
SELECT ok((SELECT e.context_ref ->> 'context_id' = c.context_id::text
                  AND e.context_ref ? 'frame_id' AND e.context_ref -> 'frame_id' = 'null'::jsonb
                  AND e.context_ref ->> 'context_hash' ~ '^sha256:[0-9a-f]{64}$'
                  AND e.context_ref ->> 'expires_at' IS NOT NULL
             FROM cscp.evidence e, cscp.context c
            WHERE e.tenant_id = 'at' AND 'm5' = ANY (e.message_ids)
              AND c.tenant_id = 'at' AND c.conversation_id = 'c1'),
          'its evidence names the context, its hash and expiry');
SELECT cscp.confirm('at', 'c9', 'u', 'm6', true);
SELECT is((SELECT e.context_ref FROM cscp.evidence e WHERE e.tenant_id = 'at' AND 'm6' = ANY (e.message_ids)),
          '{"context_id": null, "frame_id": null, "context_hash": null, "expires_at": null}'::jsonb,
          'without a context, every key of its context_ref is null');
RESET ROLE;
SELECT * FROM finish();
ROLLBACK;
