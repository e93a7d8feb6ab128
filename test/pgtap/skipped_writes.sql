-- Row counts checked: a DBA's BEFORE ROW trigger that returns NULL skips a write cscp needs.
-- Every such write raises 27000 (triggered_data_change_violation) and changes nothing, rather
-- than report what did not happen: confirm's move of the command, a transition, a context's
-- move and slot, a fact and the supersession of the one before, a conversation's turn and its
-- advance, a document, a recovery's cancel and an evidence row; through the API as the
-- application role and as the owner.
BEGIN;
SELECT plan(23);

SET cscp.clock = '2026-08-01 10:00:00+00';
CREATE FUNCTION public.tap_skip_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE ROLE tap_skip_app;
SELECT cscp.grant_app('tap_skip_app', ARRAY['sk']);
SELECT cscp.command_declare('sk', 'lookup', false) IS NOT NULL AS declared;
SELECT context_id AS ctx FROM cscp.context_open('sk', 'conv', 'user', '{"active_intent": "pay"}') \gset
SELECT command_id AS cmd FROM cscp.command_submit('sk', 'conv', 'user', 'k1', 'pay', true, ARRAY['m1']) \gset
SELECT cscp.context_open('sk', 'conv', 'other') IS NOT NULL AS opened;
SELECT command_id AS ro FROM cscp.command_submit('sk', 'conv', 'other', 'k2', 'lookup', false, ARRAY['m2']) \gset
SELECT cscp.context_open('sk', 'conv', 'third') IS NOT NULL AS opened;
SELECT command_id AS run FROM cscp.command_submit('sk', 'conv', 'third', 'k4', 'lookup', false, ARRAY['m4']) \gset
SELECT bool_and(accepted) AS started FROM (VALUES ('authz_pending'), ('authorized'), ('started')) AS s(to_state),
       cscp.command_transition(:'run', s.to_state::cscp.command_state);
SELECT count(*) AS evidence_before FROM cscp.evidence WHERE tenant_id = 'sk' \gset
SELECT cscp.fact_write('sk', 'ana', 'f1', 'city', '"Lisbon"') IS NOT NULL AS written;
SELECT (cscp.conversation_start('sk', 'cv', 'agent', '{"from": "agent", "role": "agent", "content": "hi", "ts": 1}')).turn_index;

-- The command: confirm, command_transition, a recovery's cancel.
CREATE TRIGGER zz_tap_skip BEFORE UPDATE ON cscp.command FOR EACH ROW EXECUTE FUNCTION public.tap_skip_row();
SET ROLE tap_skip_app;
SET cscp.tenant_id = 'sk';
SELECT throws_ok($$SELECT * FROM cscp.confirm('sk', 'conv', 'user', 'm3', true)$$, '27000', NULL,
                 'app role: confirm whose command UPDATE is skipped raises, not "confirmed"');
SELECT is((SELECT state FROM cscp.command WHERE command_id = :'cmd'), 'confirmation_required'::cscp.command_state,
          '... the command still waits');
SELECT is((SELECT slots ? 'pending_confirmation' FROM cscp.context WHERE context_id = :'ctx'), true,
          '... and its question is still asked');
SELECT is((SELECT count(*) FROM cscp.answer WHERE tenant_id = 'sk'), 0::bigint, '... and no answer is recorded');
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', :'ro', 'canceled'), '27000', NULL,
                 'app role: a transition whose UPDATE is skipped raises, not accepted');
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', :'run', 'executed'), '27000', NULL,
                 'app role: a step that writes the command alone, its UPDATE skipped, raises too');
SELECT throws_ok(format('SELECT * FROM cscp.command_recover(%L, %L, %L)', :'ro', 'cancel', 'r1'), '27000', NULL,
                 'app role: a cancel whose target''s UPDATE is skipped raises');
RESET ROLE;
SELECT throws_ok($$SELECT * FROM cscp.confirm('sk', 'conv', 'user', 'm3', true)$$, '27000', NULL,
                 'owner: confirm whose command UPDATE is skipped raises');
DROP TRIGGER zz_tap_skip ON cscp.command;
SELECT is((SELECT state FROM cscp.command WHERE command_id = :'ro'), 'canonicalized'::cscp.command_state,
          'the skipped transitions changed nothing');
SELECT is((SELECT state FROM cscp.command WHERE command_id = :'run'), 'started'::cscp.command_state,
          '... nor the step that writes the command alone');

-- The context: context_transition and slot_set.
CREATE TRIGGER zz_tap_skip BEFORE UPDATE ON cscp.context FOR EACH ROW EXECUTE FUNCTION public.tap_skip_row();
SET ROLE tap_skip_app;
SELECT throws_ok(format('SELECT cscp.context_transition(%L, %L)', :'ctx', 'blocked'), '27000', NULL,
                 'app role: a context transition whose UPDATE is skipped raises, not the context');
SELECT throws_ok(format('SELECT cscp.slot_set(%L, %L, %L)', :'ctx', 'active_target', '"x"'), '27000', NULL,
                 'app role: a slot whose UPDATE is skipped raises 27000, not "does not exist"');
SELECT throws_ok(format('SELECT cscp.slot_set(%L, %L, %L)', '26dc9cc5-0000-4000-8000-000000000000', 'active_target', '"x"'),
                 '22023', NULL, '... while an absent context is still 22023');
RESET ROLE;
DROP TRIGGER zz_tap_skip ON cscp.context;
SELECT is((SELECT status FROM cscp.context WHERE context_id = :'ctx'), 'pending'::cscp.context_status,
          'the skipped context writes changed nothing');

-- Facts: the new fact, and the supersession of the one before.
CREATE TRIGGER zz_tap_skip BEFORE INSERT ON cscp.fact FOR EACH ROW EXECUTE FUNCTION public.tap_skip_row();
SET ROLE tap_skip_app;
SELECT throws_ok($$SELECT cscp.fact_write('sk', 'ana', 'f2', 'lang', '"pt"')$$, '27000', NULL,
                 'app role: a fact whose INSERT is skipped raises, not a NULL fact');
RESET ROLE;
DROP TRIGGER zz_tap_skip ON cscp.fact;
CREATE TRIGGER zz_tap_skip BEFORE UPDATE ON cscp.fact FOR EACH ROW EXECUTE FUNCTION public.tap_skip_row();
SET ROLE tap_skip_app;
SELECT throws_ok($$SELECT cscp.fact_write('sk', 'ana', 'f3', 'city', '"Porto"', supersedes => 'f1')$$, '27000', NULL,
                 'app role: a supersession whose mark is skipped raises 27000, not "already superseded"');
RESET ROLE;
DROP TRIGGER zz_tap_skip ON cscp.fact;
SELECT is((SELECT string_agg(fact_id || ':' || is_valid, ',' ORDER BY fact_id) FROM cscp.fact WHERE tenant_id = 'sk'),
          'f1:true', 'the skipped fact writes changed nothing');

-- Conversations: the turn, and the conversation's advance.
CREATE TRIGGER zz_tap_skip BEFORE UPDATE ON cscp.conversation FOR EACH ROW EXECUTE FUNCTION public.tap_skip_row();
SET ROLE tap_skip_app;
SELECT throws_ok($$SELECT * FROM cscp.conversation_exchange('sk', 'cv', '{"from": "u", "role": "user", "content": "x", "ts": 2}')$$,
                 '27000', NULL, 'app role: an exchange whose conversation UPDATE is skipped raises');
RESET ROLE;
DROP TRIGGER zz_tap_skip ON cscp.conversation;
CREATE TRIGGER zz_tap_skip BEFORE INSERT ON cscp.turn FOR EACH ROW EXECUTE FUNCTION public.tap_skip_row();
SET ROLE tap_skip_app;
SELECT throws_ok($$SELECT * FROM cscp.conversation_exchange('sk', 'cv', '{"from": "u", "role": "user", "content": "x", "ts": 2}')$$,
                 '27000', NULL, 'app role: an exchange whose turn INSERT is skipped raises');
RESET ROLE;
DROP TRIGGER zz_tap_skip ON cscp.turn;
SELECT is((SELECT next_turn_index FROM cscp.conversation WHERE tenant_id = 'sk'), 1, 'the skipped appends changed nothing');

-- A document, and an evidence row.
CREATE TRIGGER zz_tap_skip BEFORE INSERT ON cscp.document FOR EACH ROW EXECUTE FUNCTION public.tap_skip_row();
SET ROLE tap_skip_app;
SELECT throws_ok($$SELECT cscp.doc_put('sk', 's', 'n', '{"a": 1}', 600)$$, '27000', NULL,
                 'app role: doc_put whose INSERT is skipped raises, not its key');
RESET ROLE;
DROP TRIGGER zz_tap_skip ON cscp.document;
CREATE TRIGGER zz_tap_skip BEFORE INSERT ON cscp.evidence FOR EACH ROW EXECUTE FUNCTION public.tap_skip_row();
SET ROLE tap_skip_app;
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', :'ro', 'executed'), '27000', NULL,
                 'app role: a refused transition whose evidence is skipped raises, not accepted = false');
RESET ROLE;
DROP TRIGGER zz_tap_skip ON cscp.evidence;
SELECT is((SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'sk'), :'evidence_before'::bigint,
          'no evidence was written by any skipped call');

SELECT * FROM finish();
ROLLBACK;
