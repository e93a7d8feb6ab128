-- The command trigger reads the recorded answer and the context in one statement when a step to
-- confirmed is written (answer_recorded, command_fsm.c), and cscp.confirm finds a replayed
-- message by the INSERT of its answer (cscp_answer_keep, answer.c).  The rules stay the same for
-- every writer.  As an application role bound to its tenant: the yes confirms and releases the
-- slot, and the same message replays its first outcome; a slot naming the waiting command in
-- another spelling of its id still confirms; a direct UPDATE to confirmed is allowed only with
-- the recorded answer and only while the context is live (refused 55000: not_answered,
-- context_closed, context_expired, in the order the trigger judges them), and a refused one
-- changes nothing; an answer a BEFORE trigger on cscp.answer skips is 27000, never a replay,
-- and changes nothing.  Answers are planted and contexts changed around the triggers by the
-- superuser only, as setup.
BEGIN;
SELECT plan(19);

CREATE ROLE tap_co_app;
SELECT cscp.grant_app('tap_co_app', ARRAY['co']);
SET cscp.tenant_id = 'co';

-- Six conversations, each with a mutating command waiting for its yes.
CREATE TEMP TABLE co_cmd (conv text PRIMARY KEY, cmd uuid, ctx uuid);
GRANT ALL ON co_cmd TO tap_co_app;
SET ROLE tap_co_app;
INSERT INTO co_cmd
SELECT c, s.command_id, o.context_id
  FROM unnest('{c1,c2,c3,c4,c5,c6}'::text[]) c,
       LATERAL cscp.context_open('co', c, 'alice') o,
       LATERAL cscp.command_submit('co', c, 'alice', 'k-' || c, 'pay', true, ARRAY[c || ':m1']) s;
SELECT is((SELECT count(*) FROM cscp.command WHERE tenant_id = 'co' AND state = 'confirmation_required'),
          6::bigint, 'six commands wait for a yes');

-- The yes, through the one statement.
SELECT is((SELECT row(outcome, command_id = (SELECT cmd FROM co_cmd WHERE conv = 'c1'))::text
             FROM cscp.confirm('co', 'c1', 'alice', 'c1:yes', true)),
          '(confirmed,t)', 'a yes confirms the command waiting');
SELECT is((SELECT row(x.status::text, x.slots ? 'pending_confirmation', x.last_message_id)::text
             FROM cscp.context x WHERE x.tenant_id = 'co' AND x.conversation_id = 'c1'),
          '(active,f,c1:yes)', 'its slot released, the yes the context''s last message');
SELECT is((SELECT outcome FROM cscp.confirm('co', 'c1', 'alice', 'c1:yes', false)),
          'confirmed', 'the same message again replays the first outcome');
RESET ROLE;

-- The slot names the waiting command with its id in upper case (written around the triggers).
SET session_replication_role = replica;
UPDATE cscp.context x
   SET slots = jsonb_set(x.slots, '{pending_confirmation,command_id}',
                         to_jsonb(upper((SELECT cmd FROM co_cmd WHERE conv = 'c2')::text)))
 WHERE x.tenant_id = 'co' AND x.conversation_id = 'c2';
RESET session_replication_role;
SET ROLE tap_co_app;
SELECT is((SELECT outcome FROM cscp.confirm('co', 'c2', 'alice', 'c2:yes', true)),
          'confirmed', 'a slot naming the command in another spelling: confirmed all the same');
RESET ROLE;

-- Answers planted by the owner for c3, c4 and c6; c4's context closed and c6's expired, both
-- around the triggers, so that their commands still wait, with what the context's trigger would
-- also have written: their commands' promises that the context is live taken back.
INSERT INTO cscp.answer (tenant_id, conversation_id, kind, message_id, answered_by, outcome, command_id)
SELECT 'co', conv, 'confirm', conv || ':yes', 'alice', 'confirmed', cmd
  FROM co_cmd WHERE conv IN ('c3', 'c4', 'c6');
SET session_replication_role = replica;
UPDATE cscp.context x SET status = 'closed' WHERE x.tenant_id = 'co' AND x.conversation_id = 'c4';
UPDATE cscp.context x SET expires_at = pg_catalog.now() - interval '1 minute'
 WHERE x.tenant_id = 'co' AND x.conversation_id = 'c6';
UPDATE cscp.command x SET context_live_until = NULL WHERE x.tenant_id = 'co' AND x.conversation_id IN ('c4', 'c6');
RESET session_replication_role;

CREATE TEMP TABLE co_before AS
    SELECT (SELECT string_agg(state::text || ':' || array_length(message_ids, 1), ',' ORDER BY conversation_id)
              FROM cscp.command WHERE tenant_id = 'co') AS states,
           (SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'co') AS evidence;
GRANT SELECT ON co_before TO tap_co_app;

SET ROLE tap_co_app;
SELECT throws_ok(format($$UPDATE cscp.command x SET state = 'confirmed', message_ids = x.message_ids || '{c5:yes}'
                           WHERE x.tenant_id = 'co' AND x.command_id = %L$$, (SELECT cmd FROM co_cmd WHERE conv = 'c5')),
                 '55000', format('command %s cannot be confirmed without the user''s answer', (SELECT cmd FROM co_cmd WHERE conv = 'c5')),
                 'a direct UPDATE to confirmed with no recorded answer: 55000 not_answered');
SELECT throws_ok(format($$UPDATE cscp.command x SET state = 'confirmed', message_ids = x.message_ids || '{c3:other}'
                           WHERE x.tenant_id = 'co' AND x.command_id = %L$$, (SELECT cmd FROM co_cmd WHERE conv = 'c3')),
                 '55000', format('command %s cannot be confirmed without the user''s answer', (SELECT cmd FROM co_cmd WHERE conv = 'c3')),
                 'a direct UPDATE naming another message than the answer''s: 55000 not_answered');
SELECT throws_ok(format($$UPDATE cscp.command x SET state = 'confirmed', message_ids = x.message_ids || '{c4:yes}'
                           WHERE x.tenant_id = 'co' AND x.command_id = %L$$, (SELECT cmd FROM co_cmd WHERE conv = 'c4')),
                 '55000', format('command %s cannot move from "confirmation_required" to "confirmed" (context_closed)',
                                 (SELECT cmd FROM co_cmd WHERE conv = 'c4')),
                 'with the recorded answer on a closed context: 55000 context_closed');
SELECT throws_ok(format($$UPDATE cscp.command x SET state = 'confirmed', message_ids = x.message_ids || '{c4:no}'
                           WHERE x.tenant_id = 'co' AND x.command_id = %L$$, (SELECT cmd FROM co_cmd WHERE conv = 'c4')),
                 '55000', format('command %s cannot move from "confirmation_required" to "confirmed" (context_closed)',
                                 (SELECT cmd FROM co_cmd WHERE conv = 'c4')),
                 'with no answer on a closed context: context_closed comes first');
SELECT throws_ok(format($$UPDATE cscp.command x SET state = 'confirmed', message_ids = x.message_ids || '{c6:yes}'
                           WHERE x.tenant_id = 'co' AND x.command_id = %L$$, (SELECT cmd FROM co_cmd WHERE conv = 'c6')),
                 '55000', format('command %s cannot move from "confirmation_required" to "confirmed" (context_expired)',
                                 (SELECT cmd FROM co_cmd WHERE conv = 'c6')),
                 'with the recorded answer on an expired context: 55000 context_expired');
SELECT is((SELECT (SELECT string_agg(state::text || ':' || array_length(message_ids, 1), ',' ORDER BY conversation_id)
                     FROM cscp.command WHERE tenant_id = 'co') = states
              AND (SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'co') = evidence
             FROM co_before), true, 'the refused UPDATEs changed nothing');
SELECT is((SELECT count(*) FROM cscp.command_window w
            WHERE w.tenant_id = 'co' AND w.command_id IN (SELECT cmd FROM co_cmd WHERE conv IN ('c3', 'c4', 'c5', 'c6'))),
          4::bigint, 'their windows still open');

-- With the recorded answer on a live context, the same UPDATE confirms.
SELECT lives_ok(format($$UPDATE cscp.command x SET state = 'confirmed', message_ids = x.message_ids || '{c3:yes}'
                          WHERE x.tenant_id = 'co' AND x.command_id = %L$$, (SELECT cmd FROM co_cmd WHERE conv = 'c3')),
                'a direct UPDATE with the recorded answer on a live context confirms');
SELECT is((SELECT row(state::text, confirmed_at IS NOT NULL, window_expires_at IS NULL)::text
             FROM cscp.command WHERE tenant_id = 'co' AND command_id = (SELECT cmd FROM co_cmd WHERE conv = 'c3')),
          '(confirmed,t,t)', 'confirmed, its window closed');
SELECT is((SELECT count(*) FROM cscp.evidence
            WHERE tenant_id = 'co' AND command_id = (SELECT cmd FROM co_cmd WHERE conv = 'c3')
              AND to_state = 'confirmed' AND event_type = 'command.confirmation.satisfied'),
          1::bigint, 'and its evidence recorded once');

-- The yes on the closed context's conversation: nothing waits in a live context any more.
SELECT isnt((SELECT outcome FROM cscp.confirm('co', 'c4', 'alice', 'c4:yes2', true)),
            'confirmed', 'cscp.confirm does not confirm on a closed context');

-- A BEFORE trigger on cscp.answer that skips the row: the yes raises 27000, nothing changes.
RESET ROLE;
CREATE FUNCTION pg_temp.co_skip() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER co_skip BEFORE INSERT ON cscp.answer FOR EACH ROW EXECUTE FUNCTION pg_temp.co_skip();
CREATE TEMP TABLE co_before5 AS
    SELECT (SELECT state FROM cscp.command WHERE tenant_id = 'co' AND command_id = (SELECT cmd FROM co_cmd WHERE conv = 'c5')) AS state,
           (SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'co') AS evidence,
           (SELECT count(*) FROM cscp.answer WHERE tenant_id = 'co') AS answers;
GRANT SELECT ON co_before5 TO tap_co_app;
SET ROLE tap_co_app;
SELECT throws_ok($$SELECT * FROM cscp.confirm('co', 'c5', 'alice', 'c5:yes', true)$$,
                 '27000', 'could not keep the answer of a message: the write was skipped',
                 'an answer a BEFORE trigger skips: 27000, not a replay');
SELECT is((SELECT (SELECT state FROM cscp.command WHERE tenant_id = 'co' AND command_id = (SELECT cmd FROM co_cmd WHERE conv = 'c5')) = state
              AND (SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'co') = evidence
              AND (SELECT count(*) FROM cscp.answer WHERE tenant_id = 'co') = answers
             FROM co_before5), true, 'and nothing changed');
RESET ROLE;
DROP TRIGGER co_skip ON cscp.answer;
SET ROLE tap_co_app;
SELECT is((SELECT outcome FROM cscp.confirm('co', 'c5', 'alice', 'c5:yes', true)),
          'confirmed', 'without it, the same yes confirms');

RESET ROLE;
SELECT * FROM finish();
ROLLBACK;
