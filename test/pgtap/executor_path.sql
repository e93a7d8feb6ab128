-- One write path (issue 30): every row cscp's context, document, conversation, fact, evidence
-- and erasure code reads, locks or writes goes through the executor, so PostgreSQL's own rules
-- apply to it exactly as to a plain statement, for an application role (cscp.grant_app,
-- cscp.tenant_id set):
--   * a user's row triggers fire once per row written (context_open, slot_set, doc_put,
--     conversation_start and _exchange, fact_write, the evidence of command_submit, the
--     deletes of forget_conversation);
--   * an unrelated statement trigger on those tables changes no answer;
--   * a DBA's RESTRICTIVE policy refuses what it refuses to the plain statement, and nothing
--     changes;
--   * columns added to and dropped from those tables change no answer, and a column added to
--     cscp.evidence takes its default (sql/executor_path.sql does the same in a new session).
BEGIN;
SELECT plan(36);

SET cscp.clock = '2026-09-01 10:00:00+00';
CREATE ROLE tap_ep_app;
SELECT cscp.grant_app('tap_ep_app');

-- What the row and statement triggers saw.
CREATE TABLE public.ep_log (n serial PRIMARY KEY, tbl text, op text, level text);
GRANT SELECT, INSERT, DELETE ON public.ep_log TO tap_ep_app;
GRANT USAGE ON SEQUENCE public.ep_log_n_seq TO tap_ep_app;
CREATE FUNCTION public.ep_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.ep_log (tbl, op, level) VALUES (TG_TABLE_NAME, TG_OP, TG_LEVEL);
    RETURN NULL;
END
$$;
-- The row writes logged since the last call, as 'table:op' in order, and the log emptied.
CREATE FUNCTION public.ep_take() RETURNS text[] LANGUAGE sql AS $$
    WITH d AS (DELETE FROM public.ep_log RETURNING n, tbl, op, level)
    SELECT coalesce(array_agg(tbl || ':' || op ORDER BY n) FILTER (WHERE level = 'ROW'), '{}') FROM d
$$;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['context', 'document', 'conversation', 'turn', 'fact', 'evidence'] LOOP
        EXECUTE format('CREATE TRIGGER ep_row AFTER INSERT OR UPDATE OR DELETE ON cscp.%I'
                       ' FOR EACH ROW EXECUTE FUNCTION public.ep_trigger()', t);
    END LOOP;
END
$$;

-- The calls of this slice for one set of ids (suffix t), as the caller, and what they answered
-- that does not depend on the ids.
CREATE FUNCTION public.ep_run(t text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    ctx cscp.context;
    ctx2 cscp.context;
    r jsonb := '{}';
    x record;
    cmd uuid;
BEGIN
    ctx := cscp.context_open('acme', 'c-' || t, 'user', '{"active_intent": "track"}');
    r := r || jsonb_build_object('open', ctx.status, 'open_slots', ctx.slots);
    ctx2 := cscp.slot_set(ctx.context_id, 'active_target', '"order:1"');
    r := r || jsonb_build_object('slot_set', ctx2.slots, 'slot_set_version', ctx2.version);
    ctx2 := cscp.context_open('acme', 'c-' || t, 'user', '{"x_more": 1}');
    r := r || jsonb_build_object('reopen_same', ctx2.context_id = ctx.context_id, 'reopen', ctx2.slots,
                                 'reopen_expires', ctx2.expires_at);
    r := r || jsonb_build_object('put', cscp.doc_put('acme', 'c-' || t, 'ns', '{"a": 1}', 600) = 'c-' || t || ':ns');
    PERFORM cscp.doc_put('acme', 'c-' || t, 'ns', '{"b": 2}', 600);
    r := r || jsonb_build_object('get', cscp.doc_get('acme', 'c-' || t, 'ns'),
                                 'get_none', cscp.doc_get('acme', 'none-' || t, 'ns'));
    SELECT * INTO x FROM cscp.conversation_start('acme', 'c-' || t, 'agent',
        '{"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1790000000000}');
    r := r || jsonb_build_object('start', x.turn_index);
    SELECT * INTO x FROM cscp.conversation_exchange('acme', 'c-' || t,
        '{"messageId": "m1", "from": "ana", "role": "user", "content": {"text": "where?"}, "ts": 1790000001000}');
    r := r || jsonb_build_object('exchange', x.outcome, 'exchange_index', x.turn_index);
    SELECT * INTO x FROM cscp.conversation_exchange('acme', 'c-' || t,
        '{"messageId": "m1", "from": "ana", "role": "user", "content": {"text": "where?"}, "ts": 1790000001000}');
    r := r || jsonb_build_object('replay', x.outcome, 'replay_index', x.turn_index);
    PERFORM cscp.fact_write('acme', 'subj-' || t, 'f1', 'home_city', '"Lisbon"');
    PERFORM cscp.fact_write('acme', 'subj-' || t, 'f2', 'home_city', '"Porto"', supersedes => 'f1');
    SELECT fact_id, value INTO x FROM cscp.fact_current('acme', 'subj-' || t, 'f1');
    r := r || jsonb_build_object('current', x.fact_id, 'current_value', x.value,
                                 'history', (SELECT array_agg(fact_id) FROM cscp.fact_history('acme', 'subj-' || t, 'f1')),
                                 'build_context', cscp.build_context('acme', 'subj-' || t, 'c-' || t) -> 'fact_ids');
    SELECT * INTO x FROM cscp.command_submit('acme', 'c-' || t, 'user', 'key-' || t, 'track_order', false,
                                             ARRAY['m1'], '{"order": 1}');
    cmd := x.command_id;
    r := r || jsonb_build_object('submit', x.state, 'submit_replayed', x.replayed,
                                 'evidence', (SELECT array_agg(event_type ORDER BY seq) FROM cscp.evidence
                                               WHERE tenant_id = 'acme' AND command_id = cmd),
                                 'verify_problems', (SELECT count(*) FROM cscp.evidence_verify('acme', cmd)));
    r := r || jsonb_build_object('forget', cscp.forget_conversation('acme', 'c-' || t));
    RETURN r;
END
$$;

CREATE TABLE public.ep_answers (tag text PRIMARY KEY, answer jsonb, rowlog text[], statements bigint);
GRANT SELECT, INSERT, UPDATE ON public.ep_answers TO tap_ep_app;

-- 1. Row triggers fire once per row written.
SET ROLE tap_ep_app;
SET cscp.tenant_id = 'acme';
INSERT INTO public.ep_answers (tag, answer) VALUES ('plain', public.ep_run('a'));
UPDATE public.ep_answers SET statements = (SELECT count(*) FROM public.ep_log WHERE level = 'STATEMENT') WHERE tag = 'plain';
UPDATE public.ep_answers SET rowlog = public.ep_take() WHERE tag = 'plain';
SELECT is((SELECT answer FROM public.ep_answers WHERE tag = 'plain'),
          '{"get": {"a": 1, "b": 2}, "put": true, "open": "active", "start": 0,
            "forget": {"turns": 2, "events": 2, "frames": 1, "answers": 0, "commands": 1, "contexts": 1,
                       "evidence": 1, "documents": 1, "environment": 0, "inspections": 0,
                       "working_set": 0, "conversations": 1, "agent_sessions": 0,
                       "checkpoint_threads": 0},
            "reopen": {"x_more": 1, "active_intent": "track", "active_target": "order:1"},
            "replay": "replayed", "submit": "canonicalized", "current": "f2", "history": ["f1", "f2"],
            "evidence": ["command.accepted"], "exchange": "exchanged", "get_none": null,
            "slot_set": {"active_intent": "track", "active_target": "order:1"},
            "open_slots": {"active_intent": "track"}, "reopen_same": true, "replay_index": 1,
            "build_context": ["f2"], "current_value": "Porto", "exchange_index": 1,
            "reopen_expires": "2026-09-01T10:30:00+00:00", "submit_replayed": false,
            "verify_problems": 0, "slot_set_version": 2}'::jsonb,
          'as the application role, every call of the slice answers as documented');
SELECT is((SELECT rowlog FROM public.ep_answers WHERE tag = 'plain'),
          ARRAY['context:INSERT', 'context:UPDATE', 'context:UPDATE',     -- context_open, slot_set, context_open
                'document:INSERT', 'document:UPDATE',                     -- doc_put, doc_put
                'conversation:INSERT', 'conversation:UPDATE', 'turn:INSERT', -- conversation_start
                'conversation:UPDATE', 'turn:INSERT',                     -- conversation_exchange (the replay writes nothing)
                'fact:INSERT', 'fact:INSERT', 'fact:UPDATE',              -- fact_write, fact_write superseding
                'evidence:INSERT', 'context:UPDATE',                      -- command_submit
                'evidence:DELETE', 'context:DELETE', 'turn:DELETE', 'turn:DELETE',
                'conversation:DELETE', 'document:DELETE'],                -- forget_conversation
          'a user''s row trigger fired once for each row written, in order');
SELECT is((SELECT count(*) FROM public.ep_answers, unnest(rowlog) w WHERE tag = 'plain' AND w = 'evidence:INSERT'),
          (SELECT jsonb_array_length(answer -> 'evidence')::bigint FROM public.ep_answers WHERE tag = 'plain'),
          'once for each evidence row command_submit wrote');
SELECT results_eq($$SELECT t, (SELECT count(*) FROM public.ep_answers a, unnest(a.rowlog) w
                                 WHERE a.tag = 'plain' AND w = t || ':DELETE')
                      FROM unnest(ARRAY['context', 'document', 'conversation', 'turn', 'evidence']) t ORDER BY t$$,
                  $$SELECT t, (SELECT (answer -> 'forget' ->> k)::bigint FROM public.ep_answers WHERE tag = 'plain')
                      FROM (VALUES ('context', 'contexts'), ('document', 'documents'), ('conversation', 'conversations'),
                                   ('turn', 'turns'), ('evidence', 'evidence')) v(t, k) ORDER BY t$$,
                  'and once for each row forget_conversation erased, as it reports');
SELECT is((SELECT statements FROM public.ep_answers WHERE tag = 'plain'), 0::bigint, 'no statement trigger yet');

-- 2. An unrelated statement trigger on each table changes no answer and no row trigger.
RESET ROLE;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['context', 'document', 'conversation', 'turn', 'fact', 'evidence'] LOOP
        EXECUTE format('CREATE TRIGGER ep_statement AFTER INSERT OR UPDATE OR DELETE ON cscp.%I'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION public.ep_trigger()', t);
    END LOOP;
END
$$;
SET ROLE tap_ep_app;
INSERT INTO public.ep_answers (tag, answer) VALUES ('statement', public.ep_run('b'));
UPDATE public.ep_answers SET statements = (SELECT count(*) FROM public.ep_log WHERE level = 'STATEMENT') WHERE tag = 'statement';
UPDATE public.ep_answers SET rowlog = public.ep_take() WHERE tag = 'statement';
SELECT ok((SELECT statements FROM public.ep_answers WHERE tag = 'statement') > 0, 'the statement triggers fired');
SELECT is((SELECT answer FROM public.ep_answers WHERE tag = 'statement'),
          (SELECT answer FROM public.ep_answers WHERE tag = 'plain'),
          'with a statement trigger on every table, every call answers the same');
SELECT is((SELECT rowlog FROM public.ep_answers WHERE tag = 'statement'),
          (SELECT rowlog FROM public.ep_answers WHERE tag = 'plain'),
          'and the same row triggers fired, once each');
RESET ROLE;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['context', 'document', 'conversation', 'turn', 'fact', 'evidence'] LOOP
        EXECUTE format('DROP TRIGGER ep_statement ON cscp.%I', t);
    END LOOP;
END
$$;

-- 3. A column added to each table, and one added and dropped again: every call answers the same,
-- and the rows written take the new column's default.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['context', 'document', 'conversation', 'turn', 'event', 'fact', 'evidence'] LOOP
        EXECUTE format('ALTER TABLE cscp.%I ADD COLUMN ep_gone int, ADD COLUMN ep_note text DEFAULT %L', t, 'noted');
        EXECUTE format('ALTER TABLE cscp.%I DROP COLUMN ep_gone', t);
    END LOOP;
END
$$;
SET ROLE tap_ep_app;
INSERT INTO public.ep_answers (tag, answer) VALUES ('columns', public.ep_run('c'));
UPDATE public.ep_answers SET rowlog = public.ep_take() WHERE tag = 'columns';
SELECT is((SELECT answer FROM public.ep_answers WHERE tag = 'columns'),
          (SELECT answer FROM public.ep_answers WHERE tag = 'plain'),
          'with a column added and one dropped on every table, every call answers the same');
SELECT is((SELECT rowlog FROM public.ep_answers WHERE tag = 'columns'),
          (SELECT rowlog FROM public.ep_answers WHERE tag = 'plain'),
          'and the same row triggers fired, once each');
SELECT is((SELECT (cscp.context_open('acme', 'c-n', 'user')).ep_note), 'noted', 'context_open returns the new column');
SELECT is((SELECT (cscp.slot_set(context_id, 'active_intent', '"x"')).ep_note FROM cscp.context WHERE conversation_id = 'c-n'),
          'noted', 'so does slot_set');
SELECT is((SELECT state FROM cscp.command_submit('acme', 'c-n', 'user', 'key-n', 'track_order', false, ARRAY['m1'])),
          'canonicalized'::cscp.command_state, 'command_submit writes its evidence with the new column');
SELECT is((SELECT array_agg(DISTINCT ep_note) FROM cscp.evidence WHERE tenant_id = 'acme' AND conversation_id = 'c-n'),
          ARRAY['noted'], 'which takes its default');
SELECT is(cscp.doc_put('acme', 'c-n', 'ns', '{"n": 1}', 600), 'c-n:ns', 'doc_put with the new column');
SELECT is((SELECT ep_note FROM cscp.document WHERE session_id = 'c-n'), 'noted', 'the document takes its default');
SELECT is((SELECT (cscp.fact_write('acme', 'subj-n', 'n1', 'home_city', '"Braga"')).ep_note), 'noted',
          'fact_write with the new column');
SELECT is((SELECT ep_note FROM cscp.fact_current('acme', 'subj-n', 'n1')), 'noted', 'fact_current returns it');

-- 4. A DBA's RESTRICTIVE policies: what the plain statement may not do, the call may not do
-- either, and nothing changes.  The rows, made before the policies.
SELECT context_id AS blocked_ctx FROM cscp.context_open('acme', 'c-p', 'blocked', '{"active_intent": "x"}') \gset
SELECT context_id AS free_ctx FROM cscp.context_open('acme', 'c-p', 'free', '{"active_intent": "x"}') \gset
SELECT cscp.doc_put('acme', 'blocked', 'ns', '{"a": 1}', 600);
SELECT turn_index FROM cscp.conversation_start('acme', 'c-p', 'blocked-agent',
    '{"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1790000000000}');
SELECT fact_id FROM cscp.fact_write('acme', 'subj-p', 'secret-1', 'secret', '"s"');
SELECT fact_id FROM cscp.fact_write('acme', 'subj-p', 'open-1', 'home_city', '"Faro"');
RESET ROLE;
CREATE POLICY ep_ctx ON cscp.context AS RESTRICTIVE FOR UPDATE USING (actor_id <> 'blocked');
CREATE POLICY ep_doc ON cscp.document AS RESTRICTIVE FOR UPDATE USING (session_id <> 'blocked');
CREATE POLICY ep_conv ON cscp.conversation AS RESTRICTIVE FOR UPDATE USING (agent_id <> 'blocked-agent');
CREATE POLICY ep_fact ON cscp.fact AS RESTRICTIVE FOR SELECT USING (key <> 'secret');
SET ROLE tap_ep_app;
CREATE TEMP TABLE ep_before AS
    SELECT (SELECT to_jsonb(c) FROM cscp.context c WHERE context_id = :'blocked_ctx') AS ctx,
           (SELECT to_jsonb(d) FROM cscp.document d WHERE session_id = 'blocked') AS doc,
           (SELECT count(*) FROM cscp.turn WHERE conversation_id = 'c-p') AS turns;

-- cscp.context: no update of the blocked actor's context.
WITH u AS (UPDATE cscp.context SET slots = slots || '{"x_p": 1}' WHERE context_id = :'blocked_ctx' RETURNING 1)
SELECT is(count(*), 0::bigint, 'the policy: a plain UPDATE of the blocked actor''s context finds no row') FROM u;
SELECT throws_ok(format('SELECT cscp.slot_set(%L, %L, %L)', :'blocked_ctx', 'x_p', '1'), '27000', NULL,
                 'slot_set updates no row either, and says its write was suppressed (27000)');
SELECT throws_ok($$SELECT cscp.context_open('acme', 'c-p', 'blocked', '{"x_p": 1}')$$, '40001', NULL,
                 'context_open cannot use the live context, nor open a second one');
SELECT is((SELECT to_jsonb(c) FROM cscp.context c WHERE context_id = :'blocked_ctx'), (SELECT ctx FROM ep_before),
          'and the context is as it was');
SELECT is((SELECT slots ->> 'x_p' FROM cscp.slot_set(:'free_ctx', 'x_p', '1')), '1',
          'another actor''s context is updated as before');

-- cscp.document: no update of the blocked session's document.
WITH u AS (UPDATE cscp.document SET payload = payload || '{"b": 2}' WHERE session_id = 'blocked' RETURNING 1)
SELECT is(count(*), 0::bigint, 'the policy: a plain UPDATE of the blocked document finds no row') FROM u;
SELECT throws_ok($$INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
                   VALUES ('acme', 'blocked', 'ns', '{"b": 2}', cscp.now() + interval '1 hour')
                   ON CONFLICT (tenant_id, session_id, namespace) DO UPDATE SET payload = excluded.payload$$,
                 '42501', NULL, 'and a plain upsert is refused');
SELECT throws_ok($$SELECT cscp.doc_put('acme', 'blocked', 'ns', '{"b": 2}', 600)$$, '42501', NULL,
                 'so is doc_put');
SELECT is((SELECT to_jsonb(d) FROM cscp.document d WHERE session_id = 'blocked'), (SELECT doc FROM ep_before),
          'and the document is as it was');
SELECT is(cscp.doc_get('acme', 'blocked', 'ns'), '{"a": 1}'::jsonb, 'doc_get reads it, as SELECT may');

-- cscp.conversation: no lock on the blocked agent's conversation, so no turn.
SELECT is((SELECT count(*) FROM (SELECT 1 FROM cscp.conversation WHERE conversation_id = 'c-p' FOR UPDATE) l), 0::bigint,
          'the policy: a plain SELECT ... FOR UPDATE of the blocked conversation finds no row');
SELECT throws_ok($$SELECT * FROM cscp.conversation_exchange('acme', 'c-p',
                   '{"from": "ana", "role": "user", "content": {"text": "hello"}, "ts": 1790000001000}')$$,
                 '22023', NULL, 'conversation_exchange finds no conversation to lock');
SELECT is((SELECT count(*) FROM cscp.turn WHERE conversation_id = 'c-p'), (SELECT turns FROM ep_before),
          'and no turn was added');

-- cscp.fact: no read of the secret fact.
SELECT is((SELECT count(*) FROM cscp.fact WHERE subject_id = 'subj-p' AND key = 'secret'), 0::bigint,
          'the policy: a plain SELECT of the secret fact finds no row');
SELECT throws_ok($$SELECT cscp.fact_current('acme', 'subj-p', 'secret-1')$$, '22023', NULL,
                 'fact_current finds no such fact');
SELECT throws_ok($$SELECT * FROM cscp.fact_history('acme', 'subj-p', 'secret-1')$$, '22023', NULL,
                 'nor does fact_history');
SELECT is((SELECT fact_id FROM cscp.fact_current('acme', 'subj-p', 'open-1')), 'open-1', 'the other fact is read');
SELECT is(cscp.build_context('acme', 'subj-p', 'c-p') -> 'fact_ids', '["open-1"]'::jsonb,
          'build_context assembles only what the policy lets the role read');

SELECT * FROM finish();
ROLLBACK;
