-- command_transition writes the command's row without an UPDATE statement (spiplan.c,
-- cscp_row_update) where cscp.command has no rule, statement trigger or transition table.
-- Whatever an UPDATE statement of that row would do still happens:
--   * a user's AFTER UPDATE row trigger fires once per step, with the row as stored;
--   * a column-list trigger fires for the columns the step sets (state, with a WHEN condition),
--     not for those the guard trigger moves (version);
--   * a refused step fires nothing;
--   * a BEFORE UPDATE row trigger that returns NULL skips the step, which is then not found;
--   * a CHECK constraint added to the table refuses a step with 23514, and nothing changes;
--   * a role without UPDATE on cscp.command is refused (42501);
--   * two steps in one statement each see the one before.
-- With a statement trigger on the table, the UPDATE statement runs: both triggers fire.
-- slot_set writes the context's row the same way: a row trigger on cscp.context fires once per
-- slot set, and with a statement trigger the statement runs.  So do context_open (the live
-- context in use) and confirm (the command, the context's slot, and cscp.answer, inserted
-- without an INSERT statement: a row trigger, a CHECK constraint, the INSERT privilege and a
-- statement trigger on cscp.answer as for the statement).  The command's list rows
-- (cscp.command_window) are inserted and deleted without statements too; a row trigger there
-- fires for the insert, and with a DELETE trigger the DELETE statement runs.  doc_put updates
-- an existing document the same way: a row trigger and a column-list trigger fire once per put,
-- a BEFORE trigger that returns NULL leaves the document as it was, a CHECK constraint and a
-- role without UPDATE are refused with nothing changed, two puts in one statement both merge,
-- and with a statement trigger on cscp.document the UPDATE statement runs.
BEGIN;
SELECT plan(68);

SET cscp.clock = '2026-08-01 10:00:00+00';
CREATE ROLE tap_rw_app;
SELECT cscp.grant_app('tap_rw_app');

CREATE TABLE public.rw_log (
    n           serial PRIMARY KEY,
    kind        text,
    command_id  uuid,
    old_state   text,
    new_state   text,
    reason_code text,
    version     bigint
);
GRANT SELECT, INSERT, DELETE ON public.rw_log TO tap_rw_app;
GRANT USAGE ON SEQUENCE public.rw_log_n_seq TO tap_rw_app;
CREATE FUNCTION public.rw_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.rw_log (kind, command_id, old_state, new_state, reason_code, version)
    VALUES (TG_ARGV[0], NEW.command_id, OLD.state, NEW.state, NEW.reason_code, NEW.version);
    RETURN NULL;
END
$$;
CREATE FUNCTION public.rw_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.rw_log (kind) VALUES ('statement');
    RETURN NULL;
END
$$;
CREATE FUNCTION public.rw_skip() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE WHEN NEW.reason_code = 'skip_me' THEN NULL ELSE NEW END;
END
$$;
CREATE TRIGGER rw_after AFTER UPDATE ON cscp.command
    FOR EACH ROW EXECUTE FUNCTION public.rw_row('row');
CREATE TRIGGER rw_executed AFTER UPDATE OF state ON cscp.command
    FOR EACH ROW WHEN (NEW.state = 'executed') EXECUTE FUNCTION public.rw_row('executed');
CREATE TRIGGER rw_version AFTER UPDATE OF version ON cscp.command
    FOR EACH ROW EXECUTE FUNCTION public.rw_row('version');
CREATE TRIGGER rw_skip BEFORE UPDATE ON cscp.command
    FOR EACH ROW EXECUTE FUNCTION public.rw_skip();

SET ROLE tap_rw_app;
SET cscp.tenant_id = 'acme';
SELECT status FROM cscp.context_open('acme', 'rw-conv', 'rw-user');
SELECT command_id AS c1
  FROM cscp.command_submit('acme', 'rw-conv', 'rw-user', 'rw-k1', 'track_order', false, ARRAY['rw-m1']) \gset
SELECT command_id AS c2
  FROM cscp.command_submit('acme', 'rw-conv', 'rw-user', 'rw-k2', 'track_order', false, ARRAY['rw-m2']) \gset
SELECT command_id AS c3
  FROM cscp.command_submit('acme', 'rw-conv', 'rw-user', 'rw-k3', 'track_order', false, ARRAY['rw-m3']) \gset
DELETE FROM public.rw_log;

-- A user's row triggers, through the steps to executed.
SELECT is((SELECT accepted FROM cscp.command_transition(:'c1', 'authz_pending', 'policy_check')), true,
          'the step to authz_pending is accepted');
SELECT results_eq($$SELECT kind, old_state, new_state, reason_code FROM public.rw_log ORDER BY n$$,
                  $$VALUES ('row', 'canonicalized', 'authz_pending', 'policy_check')$$,
                  'an AFTER UPDATE row trigger fired once, with the old and the new state');
SELECT is((SELECT version FROM public.rw_log), (SELECT version FROM cscp.command WHERE command_id = :'c1'),
          'it saw the row as stored, the version the guard trigger set');
SELECT is((SELECT accepted FROM cscp.command_transition(:'c1', 'authorized', 'read_only')), true,
          'authorized');
SELECT is((SELECT accepted FROM cscp.command_transition(:'c1', 'started')), true, 'started');
SELECT is((SELECT accepted FROM cscp.command_transition(:'c1', 'executed', 'order_found', '{"status": "shipped"}')),
          true, 'executed');
SELECT results_eq($$SELECT kind, new_state FROM public.rw_log ORDER BY n$$,
                  $$VALUES ('row', 'authz_pending'), ('row', 'authorized'), ('row', 'started'),
                           ('row', 'executed'), ('executed', 'executed')$$,
                  'one row trigger per step; UPDATE OF state WHEN executed fired once; UPDATE OF version never');

-- A refused step writes nothing and fires nothing.
DELETE FROM public.rw_log;
SELECT results_eq(format('SELECT accepted, state::text FROM cscp.command_transition(%L, %L)', :'c1', 'started'),
                  $$VALUES (false, 'executed')$$, 'a refused step is returned');
SELECT is((SELECT count(*) FROM public.rw_log), 0::bigint, 'and fired no trigger');
SELECT is((SELECT count(*) FROM cscp.evidence WHERE command_id = :'c1' AND event_type = 'invalid_transition_attempt'),
          1::bigint, 'and was recorded as evidence');

-- A BEFORE UPDATE row trigger that returns NULL skips the step.
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L, %L)', :'c2', 'authz_pending', 'skip_me'),
                 '22023', NULL, 'a step a BEFORE trigger skips finds no command');
SELECT is((SELECT state::text FROM cscp.command WHERE command_id = :'c2'), 'canonicalized',
          'and the command did not move');
SELECT is((SELECT count(*) FROM public.rw_log), 0::bigint, 'nor fired its AFTER triggers');

-- A CHECK constraint of the table's.
RESET ROLE;
ALTER TABLE cscp.command ADD CONSTRAINT rw_not_forbidden CHECK (reason_code IS DISTINCT FROM 'forbidden');
SET ROLE tap_rw_app;
CREATE TEMP TABLE rw_before AS
    SELECT (SELECT count(*) FROM cscp.evidence WHERE command_id = :'c2') AS evidence,
           (SELECT version FROM cscp.command WHERE command_id = :'c2') AS version;
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L, %L)', :'c2', 'authz_pending', 'forbidden'),
                 '23514', NULL, 'a CHECK constraint refuses the step');
SELECT is((SELECT ROW(count(*), max(c.version))::text FROM cscp.evidence e JOIN cscp.command c USING (tenant_id, command_id)
            WHERE e.command_id = :'c2'),
          (SELECT ROW(evidence, version)::text FROM rw_before),
          'and neither the command nor its evidence changed');
RESET ROLE;
ALTER TABLE cscp.command DROP CONSTRAINT rw_not_forbidden;

-- Without UPDATE on cscp.command.
REVOKE UPDATE ON cscp.command FROM tap_rw_app;
SET ROLE tap_rw_app;
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', :'c2', 'authz_pending'),
                 '42501', NULL, 'a role without UPDATE on cscp.command cannot move a command');
RESET ROLE;
GRANT UPDATE ON cscp.command TO tap_rw_app;
SET ROLE tap_rw_app;

-- Two steps in one statement.
DELETE FROM public.rw_log;
SELECT results_eq(
    format($$SELECT t.accepted FROM unnest(ARRAY['authz_pending', 'authorized']::cscp.command_state[])
                     WITH ORDINALITY s(st, i),
                   LATERAL cscp.command_transition(%L, s.st, 'read_only') t ORDER BY s.i$$, :'c2'),
    $$VALUES (true), (true)$$, 'the second of two steps in one statement sees the first');
SELECT is((SELECT state::text FROM cscp.command WHERE command_id = :'c2'), 'authorized', 'both were made');

-- With a statement trigger, the UPDATE statement runs.
RESET ROLE;
CREATE TRIGGER rw_statement AFTER UPDATE ON cscp.command
    FOR EACH STATEMENT EXECUTE FUNCTION public.rw_statement();
SET ROLE tap_rw_app;
DELETE FROM public.rw_log;
SELECT is((SELECT accepted FROM cscp.command_transition(:'c3', 'authz_pending', 'policy_check')), true,
          'with a statement trigger, the step is accepted');
SELECT results_eq($$SELECT kind, new_state FROM public.rw_log ORDER BY n$$,
                  $$VALUES ('row', 'authz_pending'), ('statement', NULL)$$,
                  'the row trigger and the statement trigger fired');
SELECT results_eq(format('SELECT accepted, state::text FROM cscp.command_transition(%L, %L)', :'c3', 'executed'),
                  $$VALUES (false, 'authz_pending')$$, 'a refused step is returned by the statement too');
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L, %L)', :'c3', 'authorized', 'skip_me'),
                 '22023', NULL, 'and a skipped one finds no command');
SELECT is((SELECT accepted FROM cscp.command_transition(:'c3', 'authorized', 'read_only')), true,
          'the next step is accepted');
SELECT is((SELECT state::text FROM cscp.command WHERE command_id = :'c3'), 'authorized', 'and made');

-- slot_set.
RESET ROLE;
CREATE FUNCTION public.rw_context() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.rw_log (kind, reason_code, version) VALUES (TG_ARGV[0], NEW.slots::text, NEW.version);
    RETURN NULL;
END
$$;
CREATE TRIGGER rw_context AFTER UPDATE OF slots ON cscp.context
    FOR EACH ROW EXECUTE FUNCTION public.rw_context('context');
SET ROLE tap_rw_app;
SELECT context_id AS ctx FROM cscp.context WHERE tenant_id = 'acme' AND conversation_id = 'rw-conv' \gset
DELETE FROM public.rw_log;
SELECT is((SELECT slots ->> 'x_rw_step' FROM cscp.slot_set(:'ctx', 'x_rw_step', '"one"')), 'one', 'slot_set sets the slot');
SELECT results_eq($$SELECT kind, reason_code::jsonb ->> 'x_rw_step' FROM public.rw_log ORDER BY n$$,
                  $$VALUES ('context', 'one')$$, 'a row trigger on cscp.context fired once, with the new slots');
SELECT is((SELECT version FROM public.rw_log), (SELECT version FROM cscp.context WHERE context_id = :'ctx'),
          'with the version as stored');
RESET ROLE;
CREATE TRIGGER rw_context_statement AFTER UPDATE ON cscp.context
    FOR EACH STATEMENT EXECUTE FUNCTION public.rw_statement();
SET ROLE tap_rw_app;
DELETE FROM public.rw_log;
SELECT ok((SELECT NOT slots ? 'x_rw_step' FROM cscp.slot_set(:'ctx', 'x_rw_step', NULL)),
          'with a statement trigger, slot_set removes the slot');
SELECT results_eq($$SELECT kind FROM public.rw_log ORDER BY n$$, $$VALUES ('context'), ('statement')$$,
                  'the row trigger and the statement trigger fired');


-- context_open, with the statement trigger still on cscp.context: the UPDATE statement runs.
DELETE FROM public.rw_log;
SELECT is((SELECT slots ->> 'x_rw_open' FROM cscp.context_open('acme', 'rw-conv', 'rw-user', '{"x_rw_open": "a"}')),
          'a', 'with a statement trigger, context_open merges the slots');
SELECT results_eq($$SELECT kind FROM public.rw_log ORDER BY n$$, $$VALUES ('context'), ('statement')$$,
                  'the row trigger and the statement trigger fired');
RESET ROLE;
DROP TRIGGER rw_context_statement ON cscp.context;

-- context_open without it: the row written below the executor.
SET cscp.clock = '2026-08-01 10:10:00+00';
SET ROLE tap_rw_app;
DELETE FROM public.rw_log;
SELECT results_eq($$SELECT context_id, slots ->> 'x_rw_open', expires_at
                     FROM cscp.context_open('acme', 'rw-conv', 'rw-user', '{"x_rw_open": "b"}', NULL, 'rw-corr')$$,
                  format($$VALUES (%L::uuid, 'b', '2026-08-01 10:40:00+00'::timestamptz)$$, :'ctx'),
                  'context_open uses the live context: slots merged, its TTL slid from now');
SELECT results_eq($$SELECT kind, reason_code::jsonb ->> 'x_rw_open', version FROM public.rw_log ORDER BY n$$,
                  format('VALUES (%L, %L, %s::bigint)', 'context', 'b',
                         (SELECT version FROM cscp.context WHERE context_id = :'ctx')),
                  'a row trigger on cscp.context fired once, with the row as stored');
SELECT is((SELECT correlation_id FROM cscp.context WHERE context_id = :'ctx'), 'rw-corr',
          'and the correlation id given was kept');
SELECT is((SELECT correlation_id FROM cscp.context_open('acme', 'rw-conv', 'rw-user')), 'rw-corr',
          'an open without one keeps it');

-- confirm: the command, the context's slot and the answer, each a row trigger's once.
RESET ROLE;
DROP TRIGGER rw_statement ON cscp.command;
CREATE FUNCTION public.rw_other() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO public.rw_log (kind, command_id, reason_code) VALUES (TG_ARGV[0], OLD.command_id, TG_OP);
    ELSIF TG_LEVEL = 'STATEMENT' THEN
        INSERT INTO public.rw_log (kind, reason_code) VALUES (TG_ARGV[0], TG_OP);
    ELSIF TG_TABLE_NAME = 'answer' THEN
        INSERT INTO public.rw_log (kind, command_id, reason_code) VALUES (TG_ARGV[0], NEW.command_id, NEW.outcome);
    ELSE
        INSERT INTO public.rw_log (kind, command_id, reason_code) VALUES (TG_ARGV[0], NEW.command_id, TG_OP);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER rw_answer AFTER INSERT ON cscp.answer
    FOR EACH ROW EXECUTE FUNCTION public.rw_other('answer');
CREATE TRIGGER rw_context_status AFTER UPDATE OF status ON cscp.context
    FOR EACH ROW EXECUTE FUNCTION public.rw_context('status');
CREATE TRIGGER rw_window AFTER INSERT ON cscp.command_window
    FOR EACH ROW EXECUTE FUNCTION public.rw_other('window');
SET ROLE tap_rw_app;
SELECT command_id AS c4
  FROM cscp.command_submit('acme', 'rw-conv', 'rw-user', 'rw-k4', 'cancel_order', true, ARRAY['rw-m4'],
                           '{}', 'order:4') \gset
SELECT results_eq($$SELECT kind, command_id, reason_code FROM public.rw_log WHERE kind = 'window'$$,
                  format('VALUES (%L, %L::uuid, %L)', 'window', :'c4', 'INSERT'),
                  'a row trigger on cscp.command_window fired for the open window');
DELETE FROM public.rw_log;
SELECT results_eq($$SELECT outcome, command_id FROM cscp.confirm('acme', 'rw-conv', 'rw-user', 'rw-yes4', true)$$,
                  format('VALUES (%L, %L::uuid)', 'confirmed', :'c4'), 'a yes confirms the command');
SELECT results_eq($$SELECT kind, coalesce(new_state, CASE WHEN kind = 'answer' THEN reason_code END)
                     FROM public.rw_log ORDER BY n$$,
                  $$VALUES ('row', 'confirmed'), ('context', NULL), ('status', NULL),
                           ('answer', 'confirmed')$$,
                  'the command''s, the context''s (slots, status) and the answer''s row triggers fired once each');
SELECT results_eq(format($$SELECT state::text, message_ids, reason_code FROM cscp.command WHERE command_id = %L$$, :'c4'),
                  $$VALUES ('confirmed', ARRAY['rw-m4', 'rw-yes4'], 'confirmed_by_user')$$,
                  'the command: confirmed, the answer''s message id appended');
SELECT results_eq(format($$SELECT status::text, slots ? 'pending_confirmation', last_command_id
                            FROM cscp.context WHERE context_id = %L$$, :'ctx'),
                  format($$VALUES ('active', false, %L::uuid)$$, :'c4'),
                  'the context: active again, the slot cleared, the command its last');
SELECT results_eq($$SELECT outcome, command_id, answered_by, created_at FROM cscp.answer
                     WHERE conversation_id = 'rw-conv' AND message_id = 'rw-yes4'$$,
                  format($$VALUES ('confirmed', %L::uuid, 'rw-user', '2026-08-01 10:10:00+00'::timestamptz)$$, :'c4'),
                  'the answer kept, at cscp.now()');
SELECT is((SELECT count(*) FROM cscp.command_window WHERE command_id = :'c4'), 0::bigint,
          'and the window''s row is gone');
DELETE FROM public.rw_log;
SELECT results_eq($$SELECT outcome FROM cscp.confirm('acme', 'rw-conv', 'rw-user', 'rw-yes4', true)$$,
                  $$VALUES ('confirmed')$$, 'the same yes again replays');
SELECT is((SELECT count(*) FROM public.rw_log), 0::bigint, 'and writes nothing');

-- A CHECK constraint on cscp.answer, and a role without INSERT on it: refused, nothing changes.
SELECT command_id AS c5
  FROM cscp.command_submit('acme', 'rw-conv', 'rw-user', 'rw-k5', 'cancel_order', true, ARRAY['rw-m5'],
                           '{}', 'order:5') \gset
RESET ROLE;
ALTER TABLE cscp.answer ADD CONSTRAINT rw_no_decline CHECK (outcome <> 'declined');
SET ROLE tap_rw_app;
CREATE TEMP TABLE rw_c5 AS
    SELECT (SELECT ROW(c.state, c.message_ids, c.version)::text FROM cscp.command c WHERE c.command_id = :'c5') AS cmd,
           (SELECT ROW(x.status, x.slots, x.version)::text FROM cscp.context x WHERE x.context_id = :'ctx') AS ctx,
           (SELECT count(*) FROM cscp.evidence WHERE command_id = :'c5') AS evidence,
           (SELECT count(*) FROM cscp.answer WHERE conversation_id = 'rw-conv') AS answers,
           (SELECT count(*) FROM cscp.command_window WHERE command_id = :'c5') AS windows;
DELETE FROM public.rw_log;
SELECT throws_ok($$SELECT * FROM cscp.confirm('acme', 'rw-conv', 'rw-user', 'rw-no5', false)$$,
                 '23514', NULL, 'a CHECK constraint on cscp.answer refuses the answer');
RESET ROLE;
ALTER TABLE cscp.answer DROP CONSTRAINT rw_no_decline;
REVOKE INSERT ON cscp.answer FROM tap_rw_app;
SET ROLE tap_rw_app;
SELECT throws_ok($$SELECT * FROM cscp.confirm('acme', 'rw-conv', 'rw-user', 'rw-no5', false)$$,
                 '42501', NULL, 'a role without INSERT on cscp.answer cannot answer');
SELECT is((SELECT ROW((SELECT ROW(c.state, c.message_ids, c.version)::text FROM cscp.command c WHERE c.command_id = :'c5'),
                      (SELECT ROW(x.status, x.slots, x.version)::text FROM cscp.context x WHERE x.context_id = :'ctx'),
                      (SELECT count(*) FROM cscp.evidence WHERE command_id = :'c5'),
                      (SELECT count(*) FROM cscp.answer WHERE conversation_id = 'rw-conv'),
                      (SELECT count(*) FROM cscp.command_window WHERE command_id = :'c5'))::text),
          (SELECT ROW(cmd, ctx, evidence, answers, windows)::text FROM rw_c5),
          'and neither the command, the context, the evidence, the answers nor the window changed');
SELECT is((SELECT count(*) FROM public.rw_log), 0::bigint, 'nor did any trigger''s write stay');
RESET ROLE;
GRANT INSERT ON cscp.answer TO tap_rw_app;

-- With a statement trigger on cscp.answer, and a DELETE trigger on cscp.command_window, their
-- statements run.
CREATE TRIGGER rw_answer_statement AFTER INSERT ON cscp.answer
    FOR EACH STATEMENT EXECUTE FUNCTION public.rw_other('answer_statement');
CREATE TRIGGER rw_window_delete AFTER DELETE ON cscp.command_window
    FOR EACH ROW EXECUTE FUNCTION public.rw_other('window');
SET ROLE tap_rw_app;
SELECT results_eq($$SELECT outcome FROM cscp.confirm('acme', 'rw-conv', 'rw-user', 'rw-no5', false)$$,
                  $$VALUES ('declined')$$, 'with them, a no declines the command');
SELECT results_eq($$SELECT kind, reason_code FROM public.rw_log WHERE kind IN ('window', 'answer', 'answer_statement') ORDER BY n$$,
                  $$VALUES ('window', 'DELETE'), ('answer', 'declined'), ('answer_statement', 'INSERT')$$,
                  'the window''s DELETE trigger, the answer''s row and statement triggers fired');
SELECT results_eq(format($$SELECT state::text, reason_code, message_ids FROM cscp.command WHERE command_id = %L$$, :'c5'),
                  $$VALUES ('rejected', 'declined', ARRAY['rw-m5', 'rw-no5'])$$,
                  'the command: rejected as declined, the message id appended');
SELECT results_eq(format($$SELECT (SELECT count(*) FROM cscp.command_window WHERE command_id = %1$L),
                                  (SELECT count(*) FROM cscp.command_retired WHERE command_id = %1$L)$$, :'c5'),
                  $$VALUES (0::bigint, 1::bigint)$$, 'its window row gone, its finished row listed');

-- doc_put of an existing document.
RESET ROLE;
CREATE FUNCTION public.rw_doc() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_LEVEL = 'STATEMENT' THEN
        INSERT INTO public.rw_log (kind, reason_code) VALUES (TG_ARGV[0], TG_OP);
    ELSE
        INSERT INTO public.rw_log (kind, reason_code) VALUES (TG_ARGV[0], NEW.payload::text);
    END IF;
    RETURN NULL;
END
$$;
CREATE FUNCTION public.rw_doc_skip() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE WHEN NEW.payload ? 'skip_me' THEN NULL ELSE NEW END;
END
$$;
CREATE TRIGGER rw_doc AFTER UPDATE ON cscp.document
    FOR EACH ROW EXECUTE FUNCTION public.rw_doc('doc');
CREATE TRIGGER rw_doc_expires AFTER UPDATE OF expires_at ON cscp.document
    FOR EACH ROW EXECUTE FUNCTION public.rw_doc('doc_expires');
CREATE TRIGGER rw_doc_tenant AFTER UPDATE OF tenant_id ON cscp.document
    FOR EACH ROW EXECUTE FUNCTION public.rw_doc('doc_tenant');
CREATE TRIGGER rw_doc_skip BEFORE UPDATE ON cscp.document
    FOR EACH ROW EXECUTE FUNCTION public.rw_doc_skip();
SET ROLE tap_rw_app;
SELECT cscp.doc_put('acme', 'rw-s', 'prefs', '{"lang": "en"}', 600);
DELETE FROM public.rw_log;
SELECT is(cscp.doc_put('acme', 'rw-s', 'prefs', '{"tz": "UTC"}', 600), 'rw-s:prefs',
          'doc_put of an existing document returns its key');
SELECT results_eq($$SELECT kind, reason_code::jsonb FROM public.rw_log ORDER BY n$$,
                  $$VALUES ('doc', '{"lang": "en", "tz": "UTC"}'::jsonb),
                           ('doc_expires', '{"lang": "en", "tz": "UTC"}'::jsonb)$$,
                  'a row trigger and UPDATE OF expires_at fired once, with the merged payload; UPDATE OF tenant_id never');
DELETE FROM public.rw_log;
SELECT is(cscp.doc_put('acme', 'rw-s', 'prefs', '{"skip_me": true}', 600), 'rw-s:prefs',
          'a put a BEFORE trigger skips returns the key');
SELECT is(cscp.doc_get('acme', 'rw-s', 'prefs'), '{"lang": "en", "tz": "UTC"}'::jsonb,
          'and leaves the document as it was');
SELECT is((SELECT count(*) FROM public.rw_log), 0::bigint, 'and fires no AFTER trigger');
RESET ROLE;
ALTER TABLE cscp.document ADD CONSTRAINT rw_no_forbidden CHECK (NOT payload ? 'forbidden');
SET cscp.clock = '2026-08-01 10:11:00+00';
SET ROLE tap_rw_app;
CREATE TEMP TABLE rw_doc_before AS
    SELECT payload, created_at, updated_at, expires_at FROM cscp.document
     WHERE tenant_id = 'acme' AND session_id = 'rw-s' AND namespace = 'prefs';
SELECT throws_ok($$SELECT cscp.doc_put('acme', 'rw-s', 'prefs', '{"forbidden": 1}', 600)$$,
                 '23514', NULL, 'a CHECK constraint on cscp.document refuses the put');
RESET ROLE;
ALTER TABLE cscp.document DROP CONSTRAINT rw_no_forbidden;
REVOKE UPDATE ON cscp.document FROM tap_rw_app;
SET ROLE tap_rw_app;
SELECT throws_ok($$SELECT cscp.doc_put('acme', 'rw-s', 'prefs', '{"other": 1}', 600)$$,
                 '42501', NULL, 'a role without UPDATE on cscp.document cannot put into a document');
SELECT results_eq($$SELECT payload, created_at, updated_at, expires_at FROM cscp.document
                     WHERE tenant_id = 'acme' AND session_id = 'rw-s' AND namespace = 'prefs'$$,
                  $$SELECT * FROM rw_doc_before$$, 'and neither refused put changed the document');
RESET ROLE;
GRANT UPDATE ON cscp.document TO tap_rw_app;
SET ROLE tap_rw_app;
SELECT results_eq($$SELECT cscp.doc_put('acme', 'rw-s', 'prefs', jsonb_build_object('k' || i, i), 600)
                      FROM generate_series(1, 2) i$$,
                  $$VALUES ('rw-s:prefs'), ('rw-s:prefs')$$, 'two puts in one statement');
SELECT is(cscp.doc_get('acme', 'rw-s', 'prefs'), '{"lang": "en", "tz": "UTC", "k1": 1, "k2": 2}'::jsonb,
          'the second merged into what the first wrote');
SELECT results_eq($$SELECT created_at, updated_at, expires_at FROM cscp.document
                     WHERE tenant_id = 'acme' AND session_id = 'rw-s' AND namespace = 'prefs'$$,
                  $$VALUES ('2026-08-01 10:10:00+00'::timestamptz, '2026-08-01 10:11:00+00'::timestamptz,
                            '2026-08-01 10:21:00+00'::timestamptz)$$,
                  'created_at kept, updated_at now, the TTL reset from now');
RESET ROLE;
SET cscp.clock = '2026-08-01 10:30:00+00';
SET ROLE tap_rw_app;
DELETE FROM public.rw_log;
SELECT is(cscp.doc_put('acme', 'rw-s', 'prefs', '{"fresh": true}', 600), 'rw-s:prefs',
          'a put into the expired document');
SELECT results_eq($$SELECT payload, created_at, expires_at FROM cscp.document
                     WHERE tenant_id = 'acme' AND session_id = 'rw-s' AND namespace = 'prefs'$$,
                  $$VALUES ('{"fresh": true}'::jsonb, '2026-08-01 10:30:00+00'::timestamptz,
                            '2026-08-01 10:40:00+00'::timestamptz)$$,
                  'starts it again from the payload, created now');
SELECT results_eq($$SELECT kind FROM public.rw_log ORDER BY n$$, $$VALUES ('doc'), ('doc_expires')$$,
                  'as an update of the row: its row triggers fired once');
RESET ROLE;
CREATE TRIGGER rw_doc_statement AFTER UPDATE ON cscp.document
    FOR EACH STATEMENT EXECUTE FUNCTION public.rw_doc('doc_statement');
SET ROLE tap_rw_app;
DELETE FROM public.rw_log;
SELECT is(cscp.doc_put('acme', 'rw-s', 'prefs', '{"more": 1}', 600), 'rw-s:prefs',
          'with a statement trigger, doc_put puts');
SELECT results_eq($$SELECT kind, reason_code FROM public.rw_log ORDER BY n$$,
                  $$VALUES ('doc', '{"more": 1, "fresh": true}'), ('doc_expires', '{"more": 1, "fresh": true}'),
                           ('doc_statement', 'UPDATE')$$,
                  'the UPDATE statement ran: the row triggers and the statement trigger fired');

SELECT * FROM finish();
ROLLBACK;
