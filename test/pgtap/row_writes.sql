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
-- slot set, and with a statement trigger the statement runs.
BEGIN;
SELECT plan(29);

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

SELECT * FROM finish();
ROLLBACK;
