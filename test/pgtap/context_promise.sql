-- A step that needs a live context (to confirmed, authz_pending, authorized, started) believes
-- the command's promise, context_live_until, while it lies ahead, and reads the context only
-- when there is none (taken back, or passed); a new command's promise is its context's
-- expires_at, read with its frame, and a step that read the context live keeps its expires_at.
-- Every end of the context (closed, expired, deleted) takes the promise back from each of its
-- commands that could still step forward, and an earlier expires_at lowers it.  An UPDATE may
-- lower the promise or take it away, which is no step (no evidence, the version kept); raising
-- it is refused 55000, and a step that gives a higher one keeps the guard's.  As an application
-- role bound to its tenant, but where the superuser closes a context with the triggers off to
-- show what the step believes.
BEGIN;
SELECT plan(26);

CREATE ROLE tap_cp_app;
SELECT cscp.grant_app('tap_cp_app', ARRAY['cp']);
SELECT cscp.command_declare('cp', 'lookup', false) IS NOT NULL AS declared;
SET ROLE tap_cp_app;
SET cscp.tenant_id = 'cp';

SELECT context_id AS ctx, expires_at AS exp0 FROM cscp.context_open('cp', 'conv', 'alice') \gset
SELECT command_id AS a FROM cscp.command_submit('cp', 'conv', 'alice', 'k-a', 'lookup', false, '{m1}') \gset
SELECT command_id AS b FROM cscp.command_submit('cp', 'conv', 'alice', 'k-b', 'lookup', false, '{m2}') \gset
SELECT command_id AS c FROM cscp.command_submit('cp', 'conv', 'alice', 'k-c', 'lookup', false, '{m3}') \gset
CREATE FUNCTION pg_temp.promise(id uuid) RETURNS timestamptz LANGUAGE sql AS
    $$ SELECT context_live_until FROM cscp.command WHERE tenant_id = 'cp' AND command_id = id $$;
CREATE FUNCTION pg_temp.expiry(id uuid) RETURNS timestamptz LANGUAGE sql AS
    $$ SELECT expires_at FROM cscp.context WHERE tenant_id = 'cp' AND context_id = id $$;

-- Born with its context's expiry as its promise; a step that needs no read keeps it.
SELECT is(pg_temp.promise(:'a'), :'exp0'::timestamptz, 'a new command: its context''s expires_at, read with its frame');
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'a', 'authz_pending')),
          '(t,authz_pending)', 'authz_pending');
SELECT is(pg_temp.promise(:'a'), :'exp0'::timestamptz, 'the promise kept');

-- An UPDATE may lower the promise or take it away: no step, no evidence, the version kept.
CREATE TEMP TABLE cp_before AS
    SELECT (SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'cp') AS evidence,
           (SELECT version FROM cscp.command WHERE tenant_id = 'cp' AND command_id = :'a') AS version;
UPDATE cscp.command SET context_live_until = context_live_until - interval '1 second'
 WHERE tenant_id = 'cp' AND command_id = :'a';
SELECT is(pg_temp.promise(:'a'), :'exp0'::timestamptz - interval '1 second', 'lowered by a direct UPDATE');
UPDATE cscp.command SET context_live_until = NULL WHERE tenant_id = 'cp' AND command_id = :'a';
SELECT is(pg_temp.promise(:'a'), NULL, 'taken away by a direct UPDATE');
UPDATE cscp.command SET context_live_until = NULL WHERE tenant_id = 'cp' AND command_id = :'a';
SELECT is((SELECT row((SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'cp') = evidence,
                      (SELECT version FROM cscp.command WHERE tenant_id = 'cp' AND command_id = :'a') = version)::text
             FROM cp_before),
          '(t,t)', 'none of them a step: no evidence, the version kept');
SELECT throws_ok(format($$UPDATE cscp.command SET context_live_until = 'infinity' WHERE tenant_id = 'cp' AND command_id = %L$$, :'a'),
                 '55000', format('context_live_until of command %s can only be lowered', :'a'),
                 'raising the promise: 55000');
SELECT is(pg_temp.promise(:'a'), NULL, 'and nothing changed');
SELECT throws_ok(format($$UPDATE cscp.command SET state = 'authz_pending' WHERE tenant_id = 'cp' AND command_id = %L$$, :'a'),
                 '55000', NULL, 'a write that is neither a step nor about the promise alone: 55000 as before');

-- A step that gives a promise keeps the guard's: read from the context, not the UPDATE's.
UPDATE cscp.command SET state = 'authorized', reason_code = 'ok', context_live_until = 'infinity'
 WHERE tenant_id = 'cp' AND command_id = :'a';
SELECT is(pg_temp.promise(:'a'), pg_temp.expiry(:'ctx'), 'a direct step read the context; the infinity it gave is not kept');

-- The step believes the promise: a context closed with the triggers off (as a restore writes)
-- is not seen while the promise lies ahead; without the promise it is read, and refused.
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'b', 'authz_pending')),
          '(t,authz_pending)', 'another command to authz_pending');
RESET ROLE;
SET session_replication_role = replica;
UPDATE cscp.context SET status = 'closed' WHERE tenant_id = 'cp' AND context_id = :'ctx';
RESET session_replication_role;
SET ROLE tap_cp_app;
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'b', 'authorized')),
          '(t,authorized)', 'the promise believed: the step made without reading the context');
UPDATE cscp.command SET context_live_until = NULL WHERE tenant_id = 'cp' AND command_id = :'b';
SELECT is((SELECT row(accepted, state::text, reason_code)::text FROM cscp.command_transition(:'b', 'started')),
          '(f,authorized,context_closed)', 'the promise taken away: the context read, the step refused');
RESET ROLE;
SET session_replication_role = replica;
UPDATE cscp.context SET status = 'active' WHERE tenant_id = 'cp' AND context_id = :'ctx';
RESET session_replication_role;
SET ROLE tap_cp_app;

-- An earlier expires_at lowers the promise of every command that could step forward.
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'c', 'authz_pending')),
          '(t,authz_pending)', 'a third command to authz_pending');
UPDATE cscp.context SET expires_at = expires_at - interval '1 minute' WHERE tenant_id = 'cp' AND context_id = :'ctx';
SELECT is(pg_temp.promise(:'c'), pg_temp.expiry(:'ctx'), 'an earlier expires_at: the promise lowered to it');
SELECT is(pg_temp.promise(:'a'), pg_temp.expiry(:'ctx'), 'on each command of the context that can step forward');

-- One command started: no longer one that steps forward, its promise is left as it is.
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'a', 'started')),
          '(t,started)', 'the first command started');
SELECT is(pg_temp.promise(:'a') IS NOT NULL, true, 'it holds a promise');

-- The context closed: the promise of each command that could step forward is taken back.
SELECT is((SELECT status::text FROM cscp.context_transition(:'ctx', 'closed', 'done')), 'closed', 'the context closed');
SELECT is(pg_temp.promise(:'c'), NULL, 'the promise of a command that could step forward is taken back');
SELECT is(pg_temp.promise(:'a') IS NOT NULL, true, 'a started command keeps its own');
SELECT is((SELECT row(accepted, state::text, reason_code)::text FROM cscp.command_transition(:'c', 'authorized')),
          '(f,authz_pending,context_closed)', 'a step after the close: refused context_closed');
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'a', 'executed')),
          '(t,executed)', 'the started command may still finish');

-- Past the promise (the clock past the context's expires_at): the context is read, and has expired.
SELECT context_id AS ctx3 FROM cscp.context_open('cp', 'conv', 'carol') \gset
SELECT command_id AS e FROM cscp.command_submit('cp', 'conv', 'carol', 'k-e', 'lookup', false, '{m5}') \gset
SELECT is(pg_temp.promise(:'e') <= pg_temp.expiry(:'ctx3'), true, 'a promise is never later than expires_at');
RESET ROLE;
SELECT set_config('cscp.clock', (pg_temp.expiry(:'ctx3') + interval '1 minute')::text, true) IS NOT NULL AS clock_set;
SET ROLE tap_cp_app;
SELECT is((SELECT row(accepted, state::text, reason_code)::text FROM cscp.command_transition(:'e', 'authz_pending')),
          '(f,canonicalized,context_expired)', 'the promise passed: the context read, the step refused context_expired');
RESET ROLE;
SELECT set_config('cscp.clock', '', true) IS NOT NULL AS clock_reset;
SET ROLE tap_cp_app;

-- A live context deleted (by its owner): its commands' promises go with it.
SELECT context_id AS ctx2 FROM cscp.context_open('cp', 'conv', 'bob') \gset
SELECT command_id AS d FROM cscp.command_submit('cp', 'conv', 'bob', 'k-d', 'lookup', false, '{m4}') \gset
SELECT accepted FROM cscp.command_transition(:'d', 'authz_pending');
RESET ROLE;
DELETE FROM cscp.context WHERE tenant_id = 'cp' AND context_id = :'ctx2';
SELECT is((SELECT context_live_until FROM cscp.command WHERE tenant_id = 'cp' AND command_id = :'d'), NULL,
          'a live context deleted: the promise taken back');

SELECT * FROM finish();
ROLLBACK;
