-- One write path (issue 30, item 8): every API write goes through PostgreSQL's executor, so
-- PostgreSQL's own rules hold for it exactly as for a plain statement by the application role.
--   * A DBA's restrictive row-level policy on cscp.command refuses command_transition, confirm
--     and approve of a blocked actor's command as it refuses a plain UPDATE of it (nothing
--     changes, no evidence), and lets another actor's through.
--   * An unrelated statement trigger on any table cscp writes changes no answer of any API call.
--   * A user's row triggers fire once per row written (no more, no less) and see the row as
--     stored; a rule on cscp.answer fires with confirm; a BEFORE trigger that skips the row,
--     a CHECK constraint and a missing privilege refuse as for the statement.
--   * command_submit's INSERT of a command born asking for confirmation is judged by the row
--     alone, so the application role's own INSERT of such a row is held to the same rules.
--   * After ALTER TABLE ADD/DROP COLUMN on cscp.command and cscp.context, every API call gives
--     the same answers (row_writes_after_alter.sql does the same in a session whose first call
--     comes after the ALTER).
-- Everything runs as an application role set up with cscp.grant_app and SET cscp.tenant_id.
BEGIN;
SELECT plan(49);

SET cscp.clock = '2026-08-01 10:00:00+00';
CREATE ROLE tap_rw_app;
SELECT cscp.grant_app('tap_rw_app');

CREATE TABLE public.rw_log (
    n       serial PRIMARY KEY,
    tbl     text,
    op      text,
    level   text,
    version bigint
);
GRANT SELECT, INSERT, DELETE ON public.rw_log TO PUBLIC;
GRANT USAGE ON SEQUENCE public.rw_log_n_seq TO PUBLIC;
CREATE FUNCTION public.rw_log_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.rw_log (tbl, op, level, version)
    VALUES (TG_TABLE_NAME, TG_OP, TG_LEVEL,
            CASE WHEN TG_LEVEL = 'ROW' AND TG_OP <> 'DELETE' AND TG_TABLE_NAME IN ('command', 'context')
                 THEN (to_jsonb(NEW) ->> 'version')::bigint END);
    RETURN NULL;
END
$$;

-- The answers of the command calls (command_submit, confirm, command_transition, approve,
-- command_recover, command_status) on the live context of ('acme', conv, 'u'), with keys and
-- message ids made from k; ids left out, so that two runs compare.
CREATE FUNCTION public.rw_commands(conv text, k text) RETURNS TABLE(step int, answer text)
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    c1 uuid;
    c2 uuid;
    c3 uuid;
    c4 uuid;
    st text;
BEGIN
    step := 0;
    SELECT * INTO r FROM cscp.command_submit('acme', conv, 'u', k || '-1', 'cancel_order', true,
                                             ARRAY[k || '-m1'], '{"order": 1}', 'order:1');
    c1 := r.command_id;
    step := step + 1; answer := r.state || ' ' || r.replayed; RETURN NEXT;
    SELECT * INTO r FROM cscp.command_submit('acme', conv, 'u', k || '-1', 'cancel_order', true,
                                             ARRAY[k || '-m1'], '{"order": 1}', 'order:1');
    step := step + 1; answer := r.state || ' ' || r.replayed || ' ' || (r.command_id = c1); RETURN NEXT;
    SELECT * INTO r FROM cscp.confirm('acme', conv, 'u', k || '-y1', true, 'order:1');
    step := step + 1; answer := r.outcome || ' ' || (r.command_id = c1); RETURN NEXT;
    SELECT * INTO r FROM cscp.confirm('acme', conv, 'u', k || '-y1', true, 'order:1');
    step := step + 1; answer := 'again ' || r.outcome; RETURN NEXT;
    FOREACH st IN ARRAY ARRAY['started', 'authz_pending', 'authorized', 'authorized', 'started', 'executed'] LOOP
        SELECT * INTO r FROM cscp.command_transition(c1, st::cscp.command_state,
            CASE st WHEN 'authz_pending' THEN 'policy_check' WHEN 'executed' THEN 'done' END,
            CASE st WHEN 'executed' THEN '{"refund": 42}'::jsonb END);
        step := step + 1; answer := st || ': ' || r.accepted || ' ' || r.state || ' ' || coalesce(r.reason_code, '-');
        RETURN NEXT;
    END LOOP;
    SELECT * INTO r FROM cscp.command_status(c1);
    step := step + 1; answer := r.state || ' ' || r.terminal || ' ' || r.outcome::text; RETURN NEXT;

    SELECT * INTO r FROM cscp.command_submit('acme', conv, 'u', k || '-2', 'cancel_order', true,
                                             ARRAY[k || '-m2'], '{"order": 2}', 'order:2');
    c2 := r.command_id;
    SELECT * INTO r FROM cscp.confirm('acme', conv, 'u', k || '-n2', false);
    step := step + 1; answer := r.outcome || ' ' || (r.command_id = c2); RETURN NEXT;
    SELECT * INTO r FROM cscp.confirm('acme', conv, 'u', k || '-y2', true);
    step := step + 1; answer := r.outcome; RETURN NEXT;

    SELECT * INTO r FROM cscp.command_submit('acme', conv, 'u', k || '-3', 'lookup', false,
                                             ARRAY[k || '-m3']);
    c3 := r.command_id;
    SELECT * INTO r FROM cscp.command_transition(c3, 'authz_pending', 'approval_required',
                                                 '{"approver_id": "boss"}');
    step := step + 1; answer := r.accepted || ' ' || r.state; RETURN NEXT;
    SELECT * INTO r FROM cscp.approve('acme', conv, 'boss', k || '-ok3', true);
    step := step + 1; answer := r.outcome || ' ' || (r.command_id = c3); RETURN NEXT;

    SELECT * INTO r FROM cscp.command_submit('acme', conv, 'u', k || '-4', 'lookup', false,
                                             ARRAY[k || '-m4']);
    c4 := r.command_id;
    SELECT * INTO r FROM cscp.command_recover(c4, 'cancel', k || '-r4');
    step := step + 1; answer := r.state || ' ' || r.replayed; RETURN NEXT;
    SELECT * INTO r FROM cscp.command_transition(c4, 'canceled', 'user_left');
    step := step + 1; answer := r.accepted || ' ' || r.state; RETURN NEXT;

    step := step + 1;
    SELECT string_agg(e.event_type || ':' || coalesce(e.reason_code, '-'), ' ' ORDER BY e.evidence_id)
      INTO answer FROM cscp.evidence e WHERE e.conversation_id = conv;
    RETURN NEXT;
    step := step + 1;
    SELECT x.status || ' ' || (x.slots ? 'pending_confirmation') || ' ' || (x.slots ? 'pending_approval')
      INTO answer FROM cscp.context x WHERE x.conversation_id = conv;
    RETURN NEXT;
END
$$;

-- The answers of the other writing calls (context_open, slot_set, context_transition, doc_put,
-- conversation_start/exchange, fact_write, ws_put), tag in every key, left out of the answers.
CREATE FUNCTION public.rw_others(tag text) RETURNS TABLE(step int, answer text)
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    ctx uuid;
BEGIN
    step := 0;
    SELECT * INTO r FROM cscp.context_open('acme', 'o-' || tag, 'u', '{"x_a": 1}');
    ctx := r.context_id;
    step := step + 1; answer := r.status || ' ' || r.slots::text; RETURN NEXT;
    SELECT * INTO r FROM cscp.slot_set(ctx, 'x_b', '2');
    step := step + 1; answer := r.slots::text; RETURN NEXT;
    SELECT * INTO r FROM cscp.context_open('acme', 'o-' || tag, 'u', '{"x_c": 3}');
    step := step + 1; answer := (r.context_id = ctx) || ' ' || r.slots::text; RETURN NEXT;
    SELECT * INTO r FROM cscp.context_transition(ctx, 'pending', 'asked');
    step := step + 1; answer := r.status || ' ' || r.reason; RETURN NEXT;
    step := step + 1;
    answer := replace(cscp.doc_put('acme', 's-' || tag, 'ns', '{"a": 1}', 600), tag, '<t>'); RETURN NEXT;
    step := step + 1;
    answer := replace(cscp.doc_put('acme', 's-' || tag, 'ns', '{"b": 2}', 600), tag, '<t>'); RETURN NEXT;
    step := step + 1; answer := cscp.doc_get('acme', 's-' || tag, 'ns')::text; RETURN NEXT;
    SELECT * INTO r FROM cscp.conversation_start('acme', 'cv-' || tag, 'agent',
        '{"from": "agent", "role": "agent", "content": "hi", "ts": 1}');
    step := step + 1; answer := r.turn_index || ' ' || replace(r.message_id, tag, '<t>'); RETURN NEXT;
    SELECT * INTO r FROM cscp.conversation_exchange('acme', 'cv-' || tag,
        '{"messageId": "u-1", "from": "maria", "role": "user", "content": "yes", "ts": 2}');
    step := step + 1; answer := r.turn_index || ' ' || r.outcome; RETURN NEXT;
    SELECT * INTO r FROM cscp.conversation_exchange('acme', 'cv-' || tag,
        '{"messageId": "u-1", "from": "maria", "role": "user", "content": "yes", "ts": 2}');
    step := step + 1; answer := r.turn_index || ' ' || r.outcome; RETURN NEXT;
    SELECT * INTO r FROM cscp.fact_write('acme', 'p-' || tag, 'f1', 'city', '"Lyon"');
    step := step + 1; answer := r.value::text || ' ' || r.is_valid; RETURN NEXT;
    SELECT * INTO r FROM cscp.fact_write('acme', 'p-' || tag, 'f2', 'city', '"Paris"', supersedes => 'f1');
    step := step + 1; answer := r.value::text || ' ' || r.supersedes; RETURN NEXT;
    SELECT * INTO r FROM cscp.fact_current('acme', 'p-' || tag, 'f1');
    step := step + 1; answer := r.fact_id || ' ' || r.value::text; RETURN NEXT;
    PERFORM cscp.ws_put('acme', 'w-' || tag, 'k', '{"v": 1}');
    step := step + 1; answer := cscp.ws_get('acme', 'w-' || tag, 'k')::text; RETURN NEXT;
END
$$;

-- The answers of the calls that write a command of actor 'blocked' in conversation conv (an
-- error's SQLSTATE where one is raised).
CREATE FUNCTION public.rw_blocked(conv text, k text) RETURNS TABLE(step int, answer text)
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    c1 uuid;
    c2 uuid;
    st text;
BEGIN
    step := 0;
    SELECT * INTO r FROM cscp.command_submit('acme', conv, 'blocked', k || '-1', 'lookup', false, ARRAY[k || '-m1']);
    c1 := r.command_id;
    step := step + 1; answer := r.state; RETURN NEXT;
    FOREACH st IN ARRAY ARRAY['authz_pending', 'executed'] LOOP
        BEGIN
            SELECT * INTO r FROM cscp.command_transition(c1, st::cscp.command_state, 'policy_check');
            answer := r.accepted || ' ' || r.state;
        EXCEPTION WHEN OTHERS THEN
            answer := SQLSTATE;
        END;
        step := step + 1; RETURN NEXT;
    END LOOP;
    SELECT * INTO r FROM cscp.command_submit('acme', conv, 'blocked', k || '-2', 'cancel_order', true,
                                             ARRAY[k || '-m2'], '{}', 'order:2');
    c2 := r.command_id;
    step := step + 1; answer := r.state; RETURN NEXT;
    SELECT * INTO r FROM cscp.confirm('acme', conv, 'blocked', k || '-y2', true, 'order:2');
    step := step + 1; answer := r.outcome; RETURN NEXT;
    step := step + 1;
    SELECT string_agg(x.state::text, ' ' ORDER BY x.created_at, x.idempotency_key) INTO answer
      FROM cscp.command x WHERE x.command_id IN (c1, c2);
    RETURN NEXT;
    step := step + 1;
    SELECT string_agg(e.event_type || ':' || coalesce(e.reason_code, '-'), ' ' ORDER BY e.evidence_id)
      INTO answer FROM cscp.evidence e WHERE e.conversation_id = conv;
    RETURN NEXT;
END
$$;

-- 'same' when a scenario's answers equal those recorded in rw_expected under its name, else
-- what differs or the error it raised (in a subtransaction, undone either way).
CREATE TABLE public.rw_expected (scenario text, step int, answer text);
GRANT SELECT, INSERT ON public.rw_expected TO PUBLIC;
CREATE FUNCTION public.rw_same(scenario text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    diff text;
BEGIN
    BEGIN
        EXECUTE format($q$SELECT string_agg(coalesce(e.step, a.step) || ': ' || coalesce(e.answer, '(none)')
                                            || ' <> ' || coalesce(a.answer, '(none)'), '; ')
                            FROM (SELECT * FROM public.rw_expected WHERE scenario = %L) e
                            FULL JOIN (%s) a ON a.step = e.step
                           WHERE e.answer IS DISTINCT FROM a.answer$q$, scenario, q)
           INTO diff;
        RAISE EXCEPTION USING ERRCODE = 'P0004', MESSAGE = coalesce(diff, 'same');
    EXCEPTION
        WHEN assert_failure THEN
            RETURN SQLERRM;
        WHEN OTHERS THEN
            RETURN SQLSTATE || ' ' || SQLERRM;
    END;
END
$$;

SET ROLE tap_rw_app;
SET cscp.tenant_id = 'acme';
SELECT count(*) AS contexts FROM unnest(ARRAY['cmd-plain', 'cmd-trig', 'cmd-alt', 'cmd-ev']) conv,
     LATERAL cscp.context_open('acme', conv, 'u');

-- 1. A DBA's restrictive policy: commands of actor 'blocked' cannot be updated.
RESET ROLE;
CREATE POLICY rw_not_blocked ON cscp.command AS RESTRICTIVE FOR UPDATE USING (actor_id <> 'blocked');
CREATE FUNCTION public.rw_plain_update(id uuid, to_state cscp.command_state) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    UPDATE cscp.command SET state = to_state, reason_code = 'policy_check' WHERE command_id = id;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
SET ROLE tap_rw_app;
SELECT count(*) AS contexts FROM unnest(ARRAY['blocked', 'free']) actor, LATERAL cscp.context_open('acme', 'pol', actor);
SELECT count(*) AS contexts FROM unnest(ARRAY['blk-plain', 'blk-trig']) conv,
     LATERAL cscp.context_open('acme', conv, 'blocked');
SELECT command_id AS blocked1 FROM cscp.command_submit('acme', 'pol', 'blocked', 'pol-b1', 'lookup', false, ARRAY['pb1']) \gset
SELECT command_id AS free1 FROM cscp.command_submit('acme', 'pol', 'free', 'pol-f1', 'lookup', false, ARRAY['pf1']) \gset
CREATE TEMP TABLE rw_pol_before AS
    SELECT (SELECT ROW(state, version)::text FROM cscp.command WHERE command_id = :'blocked1') AS cmd,
           (SELECT count(*) FROM cscp.evidence WHERE command_id = :'blocked1') AS evidence;

SELECT is(public.rw_plain_update(:'blocked1', 'authz_pending'), 0::bigint,
          'a plain UPDATE of the blocked actor''s command changes no row');
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L, %L)', :'blocked1', 'authz_pending', 'policy_check'),
                 '22023', NULL, 'command_transition of it is refused too: no command it may update has the id');
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', :'blocked1', 'executed'),
                 '22023', NULL, 'and so is a step the lifecycle refuses: nothing is judged or recorded');
SELECT is((SELECT ROW((SELECT ROW(state, version)::text FROM cscp.command WHERE command_id = :'blocked1'),
                      (SELECT count(*) FROM cscp.evidence WHERE command_id = :'blocked1'))::text),
          (SELECT ROW(cmd, evidence)::text FROM rw_pol_before),
          'the blocked command did not move and has no new evidence');
SELECT results_eq(format('SELECT accepted, state::text FROM cscp.command_transition(%L, %L, %L)', :'free1', 'authz_pending', 'policy_check'),
                  $$VALUES (true, 'authz_pending')$$, 'another actor''s command moves');
SELECT is(public.rw_plain_update(:'free1', 'authorized'), 1::bigint, 'as a plain UPDATE of it does');

SELECT command_id AS blocked2 FROM cscp.command_submit('acme', 'pol', 'blocked', 'pol-b2', 'cancel_order', true, ARRAY['pb2'], '{}', 'order:b2') \gset
SELECT command_id AS free2 FROM cscp.command_submit('acme', 'pol', 'free', 'pol-f2', 'cancel_order', true, ARRAY['pf2'], '{}', 'order:f2') \gset
SELECT results_eq($$SELECT outcome FROM cscp.confirm('acme', 'pol', 'blocked', 'pb2-yes', true)$$,
                  $$VALUES ('nothing_pending')$$, 'a yes of the blocked actor finds no command it may confirm');
SELECT results_eq($$SELECT outcome FROM cscp.confirm('acme', 'pol', 'free', 'pf2-yes', true)$$,
                  $$VALUES ('confirmed')$$, 'the free actor''s yes confirms');
SELECT results_eq(format($$SELECT state::text FROM cscp.command WHERE command_id IN (%L, %L) ORDER BY actor_id$$, :'blocked2', :'free2'),
                  $$VALUES ('confirmation_required'), ('confirmed')$$,
                  'the blocked command still waits; the free one is confirmed');

SELECT command_id AS blocked3 FROM cscp.command_submit('acme', 'pol', 'blocked', 'pol-b3', 'lookup', false, ARRAY['pb3']) \gset
RESET ROLE;
-- the superuser, whom row-level security does not bind, asks for the approval
SELECT accepted FROM cscp.command_transition(:'blocked3', 'authz_pending', 'approval_required', '{"approver_id": "boss"}');
SET ROLE tap_rw_app;
SELECT results_eq($$SELECT outcome FROM cscp.approve('acme', 'pol', 'boss', 'pb3-ok', true)$$,
                  $$VALUES ('nothing_pending')$$, 'an approval of the blocked actor''s command finds none either');
SELECT is((SELECT state::text FROM cscp.command WHERE command_id = :'blocked3'), 'authz_pending',
          'and it still waits');

-- 2. A user's row triggers fire once per row written, with the row as stored.
RESET ROLE;
CREATE TRIGGER rw_row AFTER INSERT OR UPDATE OR DELETE ON cscp.command FOR EACH ROW EXECUTE FUNCTION public.rw_log_row();
CREATE TRIGGER rw_row AFTER INSERT OR UPDATE OR DELETE ON cscp.context FOR EACH ROW EXECUTE FUNCTION public.rw_log_row();
CREATE TRIGGER rw_row AFTER INSERT ON cscp.answer FOR EACH ROW EXECUTE FUNCTION public.rw_log_row();
CREATE TRIGGER rw_row AFTER INSERT ON cscp.frame FOR EACH ROW EXECUTE FUNCTION public.rw_log_row();
CREATE TRIGGER rw_row AFTER INSERT OR DELETE ON cscp.command_window FOR EACH ROW EXECUTE FUNCTION public.rw_log_row();
CREATE TRIGGER rw_row AFTER INSERT OR DELETE ON cscp.command_retired FOR EACH ROW EXECUTE FUNCTION public.rw_log_row();
CREATE TRIGGER rw_row AFTER INSERT ON cscp.evidence FOR EACH ROW EXECUTE FUNCTION public.rw_log_row();
SET ROLE tap_rw_app;
CREATE TEMP VIEW rw_fired AS
    SELECT string_agg(tbl || ' ' || op || ' ' || cnt, ', ' ORDER BY tbl, op) AS fired
      FROM (SELECT tbl, op, count(*) AS cnt FROM public.rw_log GROUP BY tbl, op) s;

SELECT status FROM cscp.context_open('acme', 'once', 'u');
DELETE FROM public.rw_log;
SELECT command_id AS once1 FROM cscp.command_submit('acme', 'once', 'u', 'once-1', 'cancel_order', true, ARRAY['o1'], '{}', 'order:o1') \gset
SELECT is((SELECT fired FROM rw_fired),
          'command INSERT 1, command_window INSERT 1, context UPDATE 1, evidence INSERT 2, frame INSERT 1',
          'command_submit: one row trigger per row written (two steps, two evidence rows)');
DELETE FROM public.rw_log;
SELECT outcome FROM cscp.confirm('acme', 'once', 'u', 'o1-yes', true);
SELECT is((SELECT fired FROM rw_fired),
          'answer INSERT 1, command UPDATE 1, command_window DELETE 1, context UPDATE 1, evidence INSERT 1',
          'confirm: the command, its window, the context, the answer and one evidence row');
SELECT is((SELECT version FROM public.rw_log WHERE tbl = 'command'),
          (SELECT version FROM cscp.command WHERE command_id = :'once1'),
          'the command''s trigger saw the row as stored, with the version the guard set');
DELETE FROM public.rw_log;
SELECT results_eq(format('SELECT accepted FROM cscp.command_transition(%L, %L)', :'once1', 'started'),
                  $$VALUES (false)$$, 'a refused step');
SELECT is((SELECT fired FROM rw_fired), 'evidence INSERT 1', 'writes its evidence row and nothing else');
DELETE FROM public.rw_log;
SELECT accepted FROM cscp.command_transition(:'once1', 'authz_pending', 'policy_check');
SELECT accepted FROM cscp.command_transition(:'once1', 'authorized');
SELECT accepted FROM cscp.command_transition(:'once1', 'started');
SELECT is((SELECT fired FROM rw_fired), 'command UPDATE 3, evidence INSERT 3',
          'three steps: three updates of the command, three evidence rows');
DELETE FROM public.rw_log;
SELECT accepted FROM cscp.command_transition(:'once1', 'executed', 'done');
SELECT is((SELECT fired FROM rw_fired), 'command UPDATE 1, command_retired INSERT 1, evidence INSERT 1',
          'the last step lists the command as finished');
DELETE FROM public.rw_log;
SELECT outcome FROM cscp.confirm('acme', 'once', 'u', 'o1-yes', true);
SELECT is((SELECT fired FROM rw_fired), NULL, 'a replayed answer writes nothing');

-- A rule, a BEFORE trigger that skips the row, a CHECK constraint, a missing privilege.
RESET ROLE;
CREATE RULE rw_rule AS ON INSERT TO cscp.answer DO ALSO
    INSERT INTO public.rw_log (tbl, op, level) VALUES ('answer', NEW.outcome, 'RULE');
CREATE FUNCTION public.rw_skip() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE WHEN NEW.reason_code = 'skip_me' THEN NULL ELSE NEW END;
END
$$;
CREATE TRIGGER rw_skip BEFORE UPDATE ON cscp.command FOR EACH ROW EXECUTE FUNCTION public.rw_skip();
ALTER TABLE cscp.command ADD CONSTRAINT rw_not_forbidden CHECK (reason_code IS DISTINCT FROM 'forbidden');
SET ROLE tap_rw_app;
SELECT command_id AS once2 FROM cscp.command_submit('acme', 'once', 'u', 'once-2', 'cancel_order', true, ARRAY['o2'], '{}', 'order:o2') \gset
DELETE FROM public.rw_log;
SELECT results_eq($$SELECT outcome FROM cscp.confirm('acme', 'once', 'u', 'o2-no', false)$$,
                  $$VALUES ('declined')$$, 'with a rule on cscp.answer, a no declines');
SELECT is((SELECT count(*) FROM public.rw_log WHERE level = 'RULE' AND op = 'declined'), 1::bigint,
          'and the rule ran with the answer''s insert');
SELECT command_id AS once3 FROM cscp.command_submit('acme', 'once', 'u', 'once-3', 'lookup', false, ARRAY['o3']) \gset
CREATE TEMP TABLE rw_once3 AS
    SELECT (SELECT ROW(state, version)::text FROM cscp.command WHERE command_id = :'once3') AS cmd,
           (SELECT count(*) FROM cscp.evidence WHERE command_id = :'once3') AS evidence;
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L, %L)', :'once3', 'authz_pending', 'skip_me'),
                 '27000', NULL, 'a step a BEFORE trigger skips raises 27000, never reported as taken');
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L, %L)', :'once3', 'authz_pending', 'forbidden'),
                 '23514', NULL, 'a CHECK constraint refuses a step');
RESET ROLE;
REVOKE UPDATE ON cscp.command FROM tap_rw_app;
SET ROLE tap_rw_app;
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', :'once3', 'authz_pending'),
                 '42501', NULL, 'a role without UPDATE on cscp.command cannot move a command');
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', :'once3', 'executed'),
                 '42501', NULL, 'nor have a refused step judged');
RESET ROLE;
GRANT UPDATE ON cscp.command TO tap_rw_app;
SET ROLE tap_rw_app;
SELECT ok(NOT has_table_privilege('cscp.answer', 'INSERT'),
          'an application role cannot insert answers: cscp.confirm and cscp.approve write them, as the owner');
SELECT is((SELECT ROW((SELECT ROW(state, version)::text FROM cscp.command WHERE command_id = :'once3'),
                      (SELECT count(*) FROM cscp.evidence WHERE command_id = :'once3'))::text),
          (SELECT ROW(cmd, evidence)::text FROM rw_once3),
          'none of the refused calls changed the command or its evidence');
RESET ROLE;
DROP RULE rw_rule ON cscp.answer;
DROP TRIGGER rw_skip ON cscp.command;
ALTER TABLE cscp.command DROP CONSTRAINT rw_not_forbidden;
DROP TRIGGER rw_row ON cscp.command;
DROP TRIGGER rw_row ON cscp.context;
DROP TRIGGER rw_row ON cscp.answer;
DROP TRIGGER rw_row ON cscp.frame;
DROP TRIGGER rw_row ON cscp.command_window;
DROP TRIGGER rw_row ON cscp.command_retired;
DROP TRIGGER rw_row ON cscp.evidence;
SET ROLE tap_rw_app;

-- 3. An unrelated statement trigger on every table cscp writes changes no answer, the DBA's
-- policy still in place.
INSERT INTO public.rw_expected SELECT 'commands', * FROM public.rw_commands('cmd-plain', 'plain');
INSERT INTO public.rw_expected SELECT 'others', * FROM public.rw_others('plain');
INSERT INTO public.rw_expected SELECT 'blocked', * FROM public.rw_blocked('blk-plain', 'blk-plain');
SELECT results_eq($$SELECT answer FROM public.rw_expected WHERE scenario = 'blocked' ORDER BY step$$,
                  $$VALUES ('canonicalized'), ('22023'), ('22023'), ('confirmation_required'), ('nothing_pending'),
                           ('canonicalized confirmation_required'),
                           ('command.accepted:- command.accepted:- command.confirmation.requested:- '
                            'invalid_transition_attempt:nothing_pending')$$,
                  'the blocked actor''s commands: no step taken, the yes finds nothing to confirm');
SELECT ok((SELECT count(*) FROM public.rw_expected WHERE scenario = 'commands') = 19,
          'the command calls answered, every one of them');
SELECT ok((SELECT count(*) FROM public.rw_expected WHERE scenario = 'others') = 14,
          'the other calls answered, every one of them');
SELECT is((SELECT answer FROM public.rw_expected WHERE scenario = 'commands' AND step = 3), 'confirmed true',
          'among them, the yes confirmed the command it answered');
RESET ROLE;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['command', 'context', 'answer', 'frame', 'command_window', 'command_retired',
                             'evidence', 'document', 'conversation', 'turn', 'event', 'fact', 'working_set']
    LOOP
        EXECUTE format('CREATE TRIGGER rw_statement AFTER INSERT OR UPDATE OR DELETE ON cscp.%I'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION public.rw_log_row()', t);
    END LOOP;
END
$$;
SET ROLE tap_rw_app;
DELETE FROM public.rw_log;
SELECT is(public.rw_same('commands', $$SELECT * FROM public.rw_commands('cmd-trig', 'trig')$$), 'same',
          'with statement triggers, the command calls give the same answers');
SELECT ok((SELECT count(*) FROM public.rw_log WHERE level = 'STATEMENT' AND tbl = 'command') = 0,
          'the comparison''s writes were undone');
SELECT is(public.rw_same('others', $$SELECT * FROM public.rw_others('trig')$$), 'same',
          'and so do the other calls');
SELECT is(public.rw_same('blocked', $$SELECT * FROM public.rw_blocked('blk-trig', 'blk-trig')$$), 'same',
          'and the blocked actor''s calls: the policy refuses them with or without the triggers');
SELECT results_eq($$SELECT answer FROM public.rw_commands('cmd-trig', 'trig2') WHERE step = 3$$,
                  $$VALUES ('confirmed true')$$, 'run for good: the yes confirms');
SELECT results_eq($$SELECT tbl FROM public.rw_log
                     WHERE level = 'STATEMENT' AND tbl IN ('answer', 'command', 'command_retired', 'command_window', 'context', 'frame')
                     GROUP BY tbl ORDER BY tbl$$,
                  $$VALUES ('answer'), ('command'), ('command_retired'), ('command_window'), ('context'), ('frame')$$,
                  'the statement triggers fired: the writes were statements');
SELECT ok(EXISTS (SELECT FROM public.rw_log WHERE level = 'STATEMENT' AND tbl = 'evidence'),
          'so were the evidence rows');
RESET ROLE;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['command', 'context', 'answer', 'frame', 'command_window', 'command_retired',
                             'evidence', 'document', 'conversation', 'turn', 'event', 'fact', 'working_set']
    LOOP
        EXECUTE format('DROP TRIGGER rw_statement ON cscp.%I', t);
    END LOOP;
END
$$;
DROP POLICY rw_not_blocked ON cscp.command;

-- 4. command_submit's INSERT of a command asking for confirmation is an ordinary statement: the
-- application role's own INSERT of such a row is held to the same rules, with no flag set by
-- the API: accepted when mutating, not auto-confirmed and with a window (both steps recorded,
-- the window listed), refused with 55000 otherwise.
-- Its snapshot (context, frame and context_ref) is one the API recorded for message d1.
SET ROLE tap_rw_app;
DO $$
BEGIN
    PERFORM cscp.context_open('acme', 'direct', 'u');
    PERFORM cscp.command_submit('acme', 'direct', 'u', 'direct-0', 'lookup', false, ARRAY['d1']);
END
$$;
SELECT lives_ok($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name,
                                           mutating, payload, message_ids, state, window_expires_at,
                                           context_id, frame_id, context_ref)
                  SELECT 'acme', 'direct-1', 'direct', 'u', 'cancel_order', true, '{}', ARRAY['d1'],
                         'confirmation_required', cscp.now() + interval '5 minutes',
                         s.context_id, s.frame_id, s.context_ref
                    FROM cscp.command s WHERE s.idempotency_key = 'direct-0'$$,
                'a direct INSERT of a mutating command asking for confirmation');
SELECT results_eq($$SELECT c.version, (SELECT string_agg(e.event_type, ' ' ORDER BY e.evidence_id) FROM cscp.evidence e
                                        WHERE e.command_id = c.command_id),
                           (SELECT count(*) FROM cscp.command_window w WHERE w.command_id = c.command_id)
                      FROM cscp.command c WHERE c.idempotency_key = 'direct-1'$$,
                  $$VALUES (2::bigint, 'command.accepted command.confirmation.requested', 1::bigint)$$,
                  'is recorded as command_submit''s is: two steps, two evidence rows, its window listed');
SELECT throws_ok($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name,
                                            mutating, payload, message_ids, state)
                   VALUES ('acme', 'direct-2', 'direct', 'u', 'cancel_order', true, '{}', ARRAY['d2'],
                           'confirmation_required')$$,
                 '55000', 'a new command in confirmation_required must be mutating, not auto-confirmed, and have a window',
                 'one without a window is refused');
SELECT throws_ok($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name,
                                            mutating, payload, message_ids, state, window_expires_at)
                   VALUES ('acme', 'direct-3', 'direct', 'u', 'lookup', false, '{}', ARRAY['d3'],
                           'confirmation_required', cscp.now() + interval '5 minutes')$$,
                 '55000', NULL, 'and so is one that does not mutate');
SELECT is((SELECT count(*) FROM cscp.command WHERE conversation_id = 'direct' AND idempotency_key <> 'direct-0'),
          1::bigint, 'neither was written');
RESET ROLE;

-- 5. ALTER TABLE ADD and DROP COLUMN on cscp.command and cscp.context, in this session.
ALTER TABLE cscp.command ADD COLUMN rw_gone text, ADD COLUMN rw_note text DEFAULT 'note';
ALTER TABLE cscp.command DROP COLUMN rw_gone;
ALTER TABLE cscp.context ADD COLUMN rw_gone text, ADD COLUMN rw_note text DEFAULT 'note';
ALTER TABLE cscp.context DROP COLUMN rw_gone;
SET ROLE tap_rw_app;
SELECT is(public.rw_same('commands', $$SELECT * FROM public.rw_commands('cmd-alt', 'alt')$$), 'same',
          'after ADD and DROP COLUMN, the command calls give the same answers');
SELECT results_eq($$SELECT answer FROM public.rw_commands('cmd-alt', 'alt2') WHERE step = 3$$,
                  $$VALUES ('confirmed true')$$, 'run for good: the yes confirms');
SELECT is((SELECT count(*) FROM cscp.command WHERE conversation_id = 'cmd-alt' AND rw_note = 'note'), 5::bigint,
          'the commands it formed have the new column''s default');
SELECT is(public.rw_same('others', $$SELECT * FROM public.rw_others('alt')$$), 'same',
          'and so do the other calls');
RESET ROLE;
ALTER TABLE cscp.command DROP COLUMN rw_note;
ALTER TABLE cscp.context DROP COLUMN rw_note;

-- ALTER TABLE cscp.evidence ADD COLUMN: every write of a command appends evidence.
ALTER TABLE cscp.evidence ADD COLUMN note text;
SET ROLE tap_rw_app;
SELECT is(public.rw_same('commands', $$SELECT * FROM public.rw_commands('cmd-ev', 'ev')$$), 'same',
          'after ALTER TABLE cscp.evidence ADD COLUMN note, the command calls give the same answers');
SELECT is(public.rw_same('others', $$SELECT * FROM public.rw_others('ev')$$), 'same',
          'and so do the other calls');

SELECT * FROM finish();
ROLLBACK;
