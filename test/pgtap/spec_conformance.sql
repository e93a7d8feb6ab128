-- Conformance to the StateBench state-based context spec and OpenWOP RFC 0005 (issue 31),
-- through an application role bound to its tenant: context assembly in the spec's order with
-- the identity always told, the working set filtered by relevance, the environment's derived
-- time, the spec's memory classification, authority checked before every write of a key, an
-- unranked identity authority refused; OpenWOP's interrupt kinds, replay.diverged recorded under
-- the error policy, the optional turn fields, a turn after close, the cached turn on replay, the
-- deadline on read.  Each refusal leaves nothing written.
BEGIN;
SELECT plan(33);

CREATE ROLE tap_spec;
SELECT cscp.grant_app('tap_spec', ARRAY['spec']);
SET cscp.clock = '2026-09-01 10:00:00+00';
SET ROLE tap_spec;
SET cscp.tenant_id = 'spec';

-- StateBench: context assembly.
SELECT cscp.authority_set('spec', 'cfo', 500);
SELECT cscp.authority_set('spec', 'intern', 50);
SELECT cscp.identity_set('spec', 'ana', '{"user_name": "Ana", "authority": "intern", "department": "Sales"}');
SELECT cscp.env_set('spec', 's-1', '{"timezone": "Europe/Lisbon", "office": "Porto"}');
SELECT cscp.fact_write('spec', 'ana', 'tiny', 'x', '"y"', '{"type": "user", "authority": "intern"}');
SELECT cscp.fact_write('spec', 'ana', 'disc', 'discount_policy', '"max 15% discount on renewals"',
                       '{"type": "policy", "authority": "cfo"}');
SELECT cscp.ws_put('spec', 's-1', 'draft_reply', '"discount offer draft for Acme"', interval '1 hour');
SELECT cscp.ws_put('spec', 's-1', 'lunch', '"sandwich at noon"', interval '1 hour');

SELECT ok(bool_and(strpos(cscp.build_context('spec', 'ana', 's-1', 'What discount can we offer?', b) ->> 'text',
                          'user_name: Ana') > 0),
          'the identity is told at every budget, 0 to 120')
  FROM generate_series(0, 120, 5) b;
-- Wherever the fact share has room for the relevant fact, it is told first; a smaller budget may
-- tell the small irrelevant fact instead (a line that does not fit is skipped for the next).
SELECT ok(bool_and((r ->> 'fact_budget')::int < cscp.token_count('## Facts - discount_policy: max 15% discount on renewals')
                   OR (r -> 'fact_ids' ->> 0) = 'disc')
          AND bool_or(r -> 'fact_ids' ? 'disc') AND bool_or(r -> 'fact_ids' = '["tiny"]'),
          'wherever the relevant fact fits it goes in first, before the small irrelevant one')
  FROM generate_series(0, 150) b, cscp.build_context('spec', 'ana', 's-1', 'What discount can we offer?', b) r;
SELECT is((r ->> 'fact_budget')::int,
          floor((200 - cscp.token_count((regexp_split_to_array(r ->> 'text', E'\n\n'))[1] || E'\n' ||
                                        (regexp_split_to_array(r ->> 'text', E'\n\n'))[2])) * 0.7)::int,
          'facts get 70% of what identity and environment leave')
  FROM cscp.build_context('spec', 'ana', 's-1', 'What discount can we offer?', 200) r;
SELECT is(cscp.build_context('spec', 'ana', 's-1', 'What discount can we offer?') -> 'working_set', '["draft_reply"]'::jsonb,
          'the working set is filtered by relevance to the query');
SELECT is(cscp.build_context('spec', 'ana', 's-1') -> 'working_set', '["draft_reply", "lunch"]'::jsonb,
          'without a query every live item is told (most recent first, then by key)');
SELECT matches(cscp.build_context('spec', 'ana', 's-1') ->> 'text',
               'current_date: 2026-09-01\nlocal_time: 2026-09-01T11:00:00\+01:00 \(Europe/Lisbon\)',
               'the environment derives current_date and local_time from its timezone');
SELECT throws_ok($$SELECT cscp.env_set('spec', 's-1', '{"timezone": "Atlantis/Capital"}')$$, '22023', NULL,
                 'an unknown timezone is refused through the API');
SELECT throws_ok($$UPDATE cscp.environment SET environment = '{"timezone": "Atlantis/Capital"}' WHERE session_id = 's-1'$$,
                 '22023', NULL, 'and through direct SQL');
SELECT is((SELECT environment ->> 'timezone' FROM cscp.environment WHERE session_id = 's-1'), 'Europe/Lisbon',
          'the environment is unchanged');

-- StateBench: memory classification.
SELECT is((cscp.fact_write('spec', 'ana', 'm-' || t, 'k_' || t, '1', jsonb_build_object('type', t, 'authority', 'intern'))).memory_type::text,
          m, format('source type %s is %s memory', t, m))
  FROM (VALUES ('finance_system', 'organizational'), ('hr_system', 'organizational'), ('pattern', 'capability'),
               ('heuristic', 'capability'), ('decision', 'user'), ('preference', 'user'), ('state_write', 'user'),
               ('anything_else', 'user')) v(t, m);

-- StateBench: authority before write.
SELECT throws_ok($$SELECT cscp.fact_write('spec', 'ana', 'disc-x', 'discount_policy', '"50%"')$$, '42501', NULL,
                 'the intern''s plain write of the CFO''s key is refused (identity authority)');
SELECT throws_ok($$INSERT INTO cscp.fact (tenant_id, subject_id, fact_id, key, value, source)
                   VALUES ('spec', 'ana', 'disc-x', 'discount_policy', '"50%"', '{"type": "user", "authority": "intern"}')$$,
                 '42501', NULL, 'and by a direct INSERT');
SELECT is((SELECT count(*)::int FROM cscp.fact WHERE key = 'discount_policy'), 1, 'nothing was written');
SELECT lives_ok($$SELECT cscp.fact_write('spec', 'ana', 'disc-h', 'discount_policy', '"what if 50%?"', scope => 'hypothetical')$$,
                'a hypothetical proposal of the key is allowed');
SELECT cscp.identity_set('spec', 'bob', '{"user_name": "Bob", "authority": "wizard"}');
SELECT throws_ok($$SELECT cscp.fact_write('spec', 'bob', 'b-1', 'k', '1')$$, '22023', 'unknown authority "wizard"',
                 'an identity authority the tenant does not rank is refused, not taken as guest');

-- OpenWOP RFC 0005.
SELECT ok(cscp.capabilities() -> 'interrupts' -> 'kinds' ?& ARRAY['approval', 'conversation']
          AND NOT cscp.capabilities() -> 'interrupts' -> 'kinds' ? 'confirmation',
          'capabilities list OpenWOP''s interrupt kinds, conversation among them');
SELECT cscp.conversation_start('spec', 'c-1', 'bot', '{"from": "bot", "role": "agent", "content": "Order?", "ts": 1}',
                               timeout_ms => 60000);
SELECT is((SELECT outcome FROM cscp.conversation_exchange('spec', 'c-1',
              '{"messageId": "m1", "from": "ana", "role": "user", "content": "18", "ts": 2, "groupId": "team", "to": "bot"}')),
          'exchanged', 'a turn with groupId and to is accepted');
SELECT is((SELECT extra FROM cscp.turn WHERE conversation_id = 'c-1' AND message_id = 'm1'),
          '{"to": "bot", "groupId": "team"}'::jsonb, 'and its optional fields are stored');
SELECT is((SELECT recorded_turn FROM cscp.conversation_exchange('spec', 'c-1',
              '{"messageId": "m1", "from": "ana", "role": "user", "content": "18", "ts": 2}')),
          '{"messageId": "m1", "from": "ana", "content": "18", "ts": 2, "role": "user", "turnIndex": 1, "to": "bot", "groupId": "team"}'::jsonb,
          'a replay answers with the cached turn');
RESET ROLE;
SELECT cscp.policy_set('spec', '{"replay_divergence": "error"}');
SET ROLE tap_spec;
SELECT is((SELECT outcome FROM cscp.conversation_exchange('spec', 'c-1',
              '{"messageId": "m1", "from": "ana", "role": "user", "content": "19", "ts": 3}')),
          'aborted', 'divergence under the error policy answers aborted');
SELECT is((SELECT payload ->> 'policy' FROM cscp.event WHERE conversation_id = 'c-1' AND type = 'replay.diverged'),
          'error', 'and replay.diverged is recorded');
SELECT is((SELECT content FROM cscp.turn WHERE conversation_id = 'c-1' AND message_id = 'm1'), '"18"'::jsonb,
          'the original turn stands');
SELECT cscp.conversation_close('spec', 'c-1', '{"from": "bot", "role": "agent", "content": "Done", "ts": 4}');
SELECT throws_ok($$SELECT cscp.conversation_exchange('spec', 'c-1', '{"from": "ana", "role": "user", "content": "more", "ts": 5}')$$,
                 '22023', 'conversation "c-1" is closed', 'a turn after close is a validation error');
SELECT is((SELECT outcome FROM cscp.conversation_exchange('spec', 'c-1',
              '{"messageId": "m1", "from": "ana", "role": "user", "content": "18", "ts": 2}')),
          'replayed', 'a redelivered turn after close replays');
SELECT cscp.conversation_start('spec', 'c-2', 'bot', '{"from": "bot", "role": "agent", "content": "Hi", "ts": 1}',
                               timeout_ms => 1000);
RESET ROLE;
SET cscp.clock = '2026-09-01 10:00:02+00';
SET ROLE tap_spec;
SELECT is((SELECT state::text || '/' || close_reason FROM cscp.conversation_get('spec', 'c-2')), 'closed/timeout',
          'past its deadline a conversation reads closed before anything records it');
SELECT is((SELECT state::text FROM cscp.conversation WHERE conversation_id = 'c-2'), 'open',
          '(the stored row is not yet closed)');

SELECT * FROM finish();
ROLLBACK;
