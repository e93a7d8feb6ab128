-- Hostile roles (issue 30, items 1, 4 and 6): two application roles bound to one tenant each,
-- a trusted multi-tenant service role (unbound), a role set up with the old one-argument
-- grant_app, a login role inheriting a bound group role, an operator bound to one tenant and an
-- unbound operator.  Each tries to reach tenant tb the ways an attacker would: by naming it in
-- cscp.tenant_id, by argument, through an id, and by direct SQL on every table; a bound role gets
-- 42501 and nothing of tb changes.  A row naming another tenant is refused with 42501 before any
-- check that would tell its data apart (23505, 55000).  Grants, re-grants and revokes take effect
-- in an open session.  Every operator read is filtered to its tenants and audited with the role
-- that asked.
BEGIN;
SELECT plan(136);
SET cscp.clock = '2026-09-01 10:00:00+00';

CREATE ROLE hr_a; CREATE ROLE hr_b; CREATE ROLE hr_svc; CREATE ROLE hr_old;
CREATE ROLE hr_group; CREATE ROLE hr_login LOGIN IN ROLE hr_group;
CREATE ROLE hr_ops_a; CREATE ROLE hr_ops;
SELECT cscp.grant_app('hr_a', ARRAY['ta']);
SELECT cscp.grant_app('hr_b', ARRAY['tb']);
SELECT cscp.grant_app('hr_svc', NULL);
SELECT cscp.grant_app('hr_old');
SELECT cscp.grant_app('hr_group', ARRAY['ta']);
SELECT cscp.grant_operator('hr_ops_a', ARRAY['ta']);
SELECT cscp.grant_operator('hr_ops');
-- Both tenants use every table, as the superuser.
CREATE TEMP TABLE ids (tenant text PRIMARY KEY, ctx uuid, cmd uuid, wcmd uuid);
GRANT SELECT ON ids TO PUBLIC;
DO $$
DECLARE
    t text;
    c uuid;
BEGIN
    FOREACH t IN ARRAY ARRAY['ta', 'tb'] LOOP
        PERFORM cscp.policy_set(t, '{"detail_level": "full"}');
        PERFORM cscp.authority_set(t, 'cfo', 150);
        PERFORM cscp.conversation_start(t, 'conv', 'agent', '{"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1}');
        PERFORM cscp.conversation_exchange(t, 'conv', '{"messageId": "m1", "from": "user", "role": "user", "content": {"text": "cancel"}, "ts": 2}');
        -- a closed context (context_retired), then the live one
        PERFORM cscp.context_transition((cscp.context_open(t, 'conv', 'user')).context_id, 'closed');
        INSERT INTO ids (tenant, ctx) VALUES (t, (cscp.context_open(t, 'conv', 'user', '{"active_intent": "cancel"}')).context_id);
        -- a read-only command run to its end (command_retired), one waiting for its answer
        -- (command_window), confirmed (answer)
        SELECT s.command_id INTO c FROM cscp.command_submit(t, 'conv', 'user', 'key-1', 'lookup', false, ARRAY['m1']) s;
        UPDATE ids SET cmd = c WHERE tenant = t;
        PERFORM cscp.command_transition(c, 'authz_pending');
        PERFORM cscp.command_transition(c, 'authorized');
        PERFORM cscp.command_transition(c, 'started');
        PERFORM cscp.command_transition(c, 'executed');
        SELECT s.command_id INTO c FROM cscp.command_submit(t, 'conv', 'user', 'key-2', 'cancel_order', true, ARRAY['m1'], '{}', 'fp') s;
        UPDATE ids SET wcmd = c WHERE tenant = t;
        PERFORM cscp.confirm(t, 'conv', 'user', 'm2', true, 'fp');
        PERFORM cscp.command_submit(t, 'conv', 'user', 'key-3', 'cancel_order', true, ARRAY['m3'], '{}', 'fp3');
        PERFORM cscp.doc_put(t, 'sess', 'ns', '{"a": 1}', 600);
        PERFORM cscp.identity_set(t, 'subj', '{"user_name": "Sam", "authority": "employee"}');
        PERFORM cscp.fact_write(t, 'subj', 'f1', 'home_city', '"Porto"');
        PERFORM cscp.ws_put(t, 'sess', 'k', '1');
        PERFORM cscp.env_set(t, 'sess', '{"tz": "UTC"}');
        -- a conversation that was erased (tombstone)
        PERFORM cscp.conversation_start(t, 'gone', 'agent', '{"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1}');
        PERFORM cscp.forget_conversation(t, 'gone');
    END LOOP;
END
$$;

SELECT ctx AS tb_ctx, cmd AS tb_cmd, wcmd AS tb_wcmd FROM ids WHERE tenant = 'tb' \gset

-- What tenant tb holds, everywhere, as the superuser sees it.
CREATE FUNCTION pg_temp.digest(tenant text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    rel text;
    part text;
    acc text := '';
BEGIN
    FOR rel IN
        SELECT c.relname FROM pg_class c
         WHERE c.relnamespace = 'cscp'::regnamespace AND c.relkind = 'r'
           AND EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id')
         ORDER BY 1
    LOOP
        EXECUTE format('SELECT %L || '':'' || count(*) || '':'' || coalesce(md5(string_agg(x::text, '','' ORDER BY x::text)), '''')'
                       ' FROM cscp.%I x WHERE x.tenant_id = $1', rel, rel) INTO part USING tenant;
        acc := acc || part || ';';
    END LOOP;
    RETURN acc;
END
$$;
SELECT pg_temp.digest('tb') AS tb_before \gset

SELECT results_eq(
    $$SELECT role::text, kind, tenants FROM cscp.tenant_binding WHERE role::text LIKE 'hr\_%' ORDER BY 1, 2$$,
    $$VALUES ('hr_a', 'app', ARRAY['ta']), ('hr_b', 'app', ARRAY['tb']), ('hr_group', 'app', ARRAY['ta']),
             ('hr_old', 'app', NULL::text[]), ('hr_ops', 'operator', NULL), ('hr_ops_a', 'operator', ARRAY['ta']),
             ('hr_svc', 'app', NULL)$$,
    'each grant records its binding; the one-argument grant_app is an unbound grant');
SELECT ok((SELECT count(*) FROM cscp.context_live WHERE tenant_id = 'tb') > 0
          AND (SELECT count(*) FROM cscp.command_window WHERE tenant_id = 'tb') > 0
          AND (SELECT count(*) FROM cscp.answer WHERE tenant_id = 'tb') > 0
          AND (SELECT count(*) FROM cscp.context_retired WHERE tenant_id = 'tb') > 0
          AND (SELECT count(*) FROM cscp.command_retired WHERE tenant_id = 'tb') > 0
          AND (SELECT count(*) FROM cscp.tombstone WHERE tenant_id = 'tb') > 0,
          'tenant tb has rows in every table');

-- Bad bindings: 22023, and nothing changes.
SELECT throws_ok($$SELECT cscp.grant_app('hr_a', '{}')$$, '22023', 'tenants must not be empty', 'grant_app with an empty list');
SELECT throws_ok($$SELECT cscp.grant_app('hr_a', '{*}')$$, '22023', 'tenant "*" is reserved', 'grant_app binding tenant "*"');
SELECT throws_ok($$SELECT cscp.grant_app('hr_a', '{ta,""}')$$, '22023', 'tenant must not be empty', 'grant_app with an empty tenant id');
SELECT throws_ok($$SELECT cscp.grant_app('hr_a', ARRAY['ta', NULL])$$, '22023', 'tenant must not be null', 'grant_app with a NULL tenant id');
SELECT throws_ok($$SELECT cscp.grant_operator('hr_ops_a', ARRAY[repeat('x', 300)])$$, '22023', 'tenant is too long', 'grant_operator with a tenant id too long');
SELECT throws_ok($$SELECT cscp.grant_app('hr_nobody', '{ta}')$$, '22023', 'role "hr_nobody" does not exist', 'grant_app to no role');
CREATE ROLE hr_bypass BYPASSRLS;
SELECT throws_ok($$SELECT cscp.grant_app('hr_bypass', '{ta}')$$, '22023', 'role "hr_bypass" cannot be bound to tenants',
                 'a role with BYPASSRLS cannot be bound (row-level security would not hold it)');
SELECT throws_ok(format('SELECT cscp.grant_operator(%L, %L)', current_user, '{ta}'), '22023', NULL,
                 'a superuser cannot be bound');
SELECT is((SELECT tenants FROM cscp.tenant_binding WHERE role = 'hr_a'::regrole AND kind = 'app'), ARRAY['ta'],
          'a refused grant leaves the binding as it was');

-- hr_a, bound to ta, names tb in cscp.tenant_id: every read of every table is refused.
SET ROLE hr_a;
SET cscp.tenant_id = 'tb';
SELECT throws_ok(format('SELECT count(*) FROM cscp.%I', t), '42501', 'permission denied for tenant "tb"',
                 format('bound to ta, naming tb: SELECT from cscp.%s', t))
  FROM unnest(ARRAY['context', 'context_live', 'context_retired', 'command', 'command_window', 'command_retired',
                    'frame', 'answer', 'evidence', 'conversation', 'turn', 'event', 'document', 'policy',
                    'identity', 'fact', 'working_set', 'environment', 'authority']) t;
-- ... and every write.
SELECT throws_ok(format('INSERT INTO cscp.%I (tenant_id) VALUES (%L)', t, 'tb'), '42501', NULL,
                 format('bound to ta, naming tb: INSERT into cscp.%s', t))
  FROM unnest(ARRAY['context', 'command', 'frame', 'answer', 'conversation', 'turn', 'document', 'policy',
                    'identity', 'fact', 'working_set', 'environment', 'authority',
                    -- and those it may only read, or not even that
                    'context_live', 'context_retired', 'command_window', 'command_retired', 'evidence',
                    'event', 'tombstone', 'inspection_log']) t;
SELECT throws_ok(format('UPDATE cscp.%I SET tenant_id = tenant_id', t), '42501', 'permission denied for tenant "tb"',
                 format('bound to ta, naming tb: UPDATE of cscp.%s', t))
  FROM unnest(ARRAY['context', 'command', 'conversation', 'document', 'policy', 'identity', 'fact',
                    'working_set', 'environment', 'authority']) t;
SELECT throws_ok(format('DELETE FROM cscp.%I', t), '42501', 'permission denied for tenant "tb"',
                 format('bound to ta, naming tb: DELETE from cscp.%s', t))
  FROM unnest(ARRAY['context', 'document', 'policy', 'working_set', 'environment', 'authority']) t;
-- ... and every function, by argument or through an id.
SELECT throws_ok(sql, '42501', 'permission denied for tenant "tb"', 'bound to ta, naming tb: ' || sql)
  FROM unnest(ARRAY[
    $$SELECT cscp.context_get('tb', 'conv', 'user')$$,
    $$SELECT cscp.context_open('tb', 'conv', 'user')$$,
    $$SELECT cscp.doc_get('tb', 'sess', 'ns')$$,
    $$SELECT cscp.doc_put('tb', 'sess', 'ns', '{"a": 2}', 600)$$,
    $$SELECT cscp.forget_conversation('tb', 'conv')$$,
    $$SELECT cscp.forget_subject('tb', 'subj')$$,
    $$SELECT cscp.policy_set('tb', '{"detail_level": "none"}')$$,
    $$SELECT cscp.fact_current('tb', 'subj', 'f1')$$,
    $$SELECT cscp.build_context('tb', 'subj', 'sess')$$,
    $$SELECT count(*) FROM cscp.conversation_turns('tb', 'conv')$$,
    $$SELECT cscp.conversation_exchange('tb', 'conv', '{"from": "user", "role": "user", "content": {}, "ts": 3}')$$,
    $$SELECT cscp.confirm('tb', 'conv', 'user', 'm9', true)$$,
    $$SELECT cscp.sweep()$$]) sql;
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', :'tb_wcmd', 'rejected'), '42501',
                 'permission denied for tenant "tb"', 'bound to ta, naming tb: command_transition by id');
SELECT throws_ok(format('SELECT * FROM cscp.command_status(%L)', :'tb_cmd'), '42501', NULL,
                 'bound to ta, naming tb: command_status by id');
SELECT throws_ok(format('SELECT cscp.slot_set(%L, %L, %L)', :'tb_ctx', 'x_note', '1'), '42501', NULL,
                 'bound to ta, naming tb: slot_set by id');
SELECT throws_ok(format('SELECT cscp.context_transition(%L, %L)', :'tb_ctx', 'closed'), '42501', NULL,
                 'bound to ta, naming tb: context_transition by id');

-- Its own tenant, named as the session's: tb by argument is refused, tb's rows stay out of reach.
SET cscp.tenant_id = 'ta';
SELECT lives_ok($$SELECT cscp.context_get('ta', 'conv', 'user')$$, 'bound to ta, naming ta: its own data');
SELECT throws_ok($$SELECT cscp.context_open('tb', 'conv', 'user')$$, '42501', 'permission denied for tenant "tb"',
                 'bound to ta: tb by argument');
SELECT is((SELECT count(*) FROM cscp.context WHERE tenant_id = 'tb'), 0::bigint, 'bound to ta: no row of tb visible');
WITH u AS (UPDATE cscp.command SET reason_code = 'x' WHERE tenant_id = 'tb' RETURNING 1)
SELECT is(count(*), 0::bigint, 'bound to ta: an UPDATE of tb''s commands touches nothing') FROM u;
-- Through an id of tb's: the same answer as for an id that does not exist (no oracle).
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', :'tb_wcmd', 'rejected'), '22023',
                 format('command %s does not exist', :'tb_wcmd'), 'bound to ta: command_transition of tb''s command finds none');
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', '26dc9cc5-0000-4000-8000-000000000000', 'rejected'), '22023',
                 'command 26dc9cc5-0000-4000-8000-000000000000 does not exist', '... as for a command that does not exist');
-- 42501 first: rows naming tb's live context, erased conversation, idempotency key and conversation.
SELECT throws_ok($$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
                   VALUES ('tb', 'conv', 'user', cscp.now() + interval '1 hour', interval '1 hour')$$,
                 '42501', 'permission denied for tenant "tb"', 'a context naming tb''s live one: 42501, not 23505');
SELECT throws_ok($$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
                   VALUES ('tb', 'gone', 'user', cscp.now() + interval '1 hour', interval '1 hour')$$,
                 '42501', 'permission denied for tenant "tb"', 'a context naming tb''s erased conversation: 42501, not 55000');
SELECT throws_ok($$INSERT INTO cscp.command (tenant_id, command_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
                   VALUES ('tb', '26dc9cc5-0000-4000-8000-000000000001', 'key-1', 'conv', 'user', 'lookup', false)$$,
                 '42501', 'permission denied for tenant "tb"', 'a command with tb''s idempotency key: 42501, not 23505');
SELECT throws_ok($$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id) VALUES ('tb', 'conv', 'agent')$$,
                 '42501', 'permission denied for tenant "tb"', 'a conversation with tb''s id: 42501, not 23505');
SELECT throws_ok($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts) VALUES ('tb', 'gone', 'user', 'x', '1', 1)$$,
                 '42501', 'permission denied for tenant "tb"', 'a turn in tb''s erased conversation: 42501, not 55000');
SELECT throws_ok($$INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
                   VALUES ('tb', 'sess', 'ns', '{}', cscp.now() + interval '1 hour')$$,
                 '42501', 'permission denied for tenant "tb"', 'a document with tb''s key: 42501, not 23505');
SELECT throws_ok($$UPDATE cscp.context SET tenant_id = 'tb' WHERE tenant_id = 'ta'$$, '42501', 'permission denied for tenant "tb"',
                 'moving its own context to tb: 42501');
RESET ROLE;
SELECT is(pg_temp.digest('tb'), :'tb_before', 'after all of hr_a''s attempts, nothing of tenant tb changed');

-- hr_b, bound to tb, cannot use ta either.
SET ROLE hr_b;
SET cscp.tenant_id = 'ta';
SELECT throws_ok($$SELECT count(*) FROM cscp.context$$, '42501', 'permission denied for tenant "ta"', 'bound to tb, naming ta: SELECT');
SELECT throws_ok($$SELECT cscp.context_get('ta', 'conv', 'user')$$, '42501', NULL, 'bound to tb, naming ta: context_get');
SET cscp.tenant_id = 'tb';
SELECT is((SELECT count(*) FROM cscp.context WHERE tenant_id = 'tb'), 2::bigint, 'bound to tb, naming tb: its own contexts');
RESET ROLE;

-- The login role inheriting a bound group role is bound.
SET ROLE hr_login;
SELECT is(cscp.bound_tenants(), ARRAY['ta'], 'a login role inheriting a bound group role is bound to its tenants');
SET cscp.tenant_id = 'tb';
SELECT throws_ok($$SELECT count(*) FROM cscp.document$$, '42501', 'permission denied for tenant "tb"', 'inheriting bound group, naming tb: SELECT');
SELECT throws_ok($$SELECT cscp.doc_put('tb', 's2', 'ns', '{}', 60)$$, '42501', NULL, 'inheriting bound group, naming tb: doc_put');
SET cscp.tenant_id = 'ta';
SELECT is(cscp.doc_get('ta', 'sess', 'ns'), '{"a": 1}'::jsonb, 'inheriting bound group, naming ta: its own document');
RESET ROLE;

-- The trusted service (unbound) names its tenant per session; row-level security still holds.
SET ROLE hr_svc;
SELECT is(cscp.bound_tenants(), NULL, 'an unbound role has no tenant list');
SET cscp.tenant_id = 'tb';
SELECT is((SELECT count(*) FROM cscp.context), 2::bigint, 'unbound, naming tb: tb''s contexts');
SET cscp.tenant_id = 'ta';
SELECT is((SELECT count(*) FROM cscp.context WHERE tenant_id = 'tb'), 0::bigint, 'unbound, naming ta: no row of tb');
SELECT throws_ok($$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
                   VALUES ('tb', 'conv', 'user', cscp.now() + interval '1 hour', interval '1 hour')$$,
                 '42501', 'permission denied for tenant "tb"', 'unbound, naming ta: a context naming tb''s live one gets 42501, not 23505');
RESET cscp.tenant_id;
SELECT throws_ok($$INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
                   VALUES ('tb', 'sess', 'ns', '{}', cscp.now() + interval '1 hour')$$,
                 '42501', 'cscp.tenant_id is not set', 'unbound, naming no tenant: a row naming tb''s document gets 42501, not 23505');
RESET ROLE;
SET ROLE hr_old;
SET cscp.tenant_id = 'tb';
SELECT is((SELECT conversation_id FROM cscp.context_get('tb', 'conv', 'user')), 'conv',
          'the one-argument grant_app: a multi-tenant service, as before');
RESET ROLE;

-- A re-grant takes effect in the open session: hr_a moves from ta to tb.
SELECT cscp.grant_app('hr_a', ARRAY['tb']);
SET ROLE hr_a;
SET cscp.tenant_id = 'tb';
SELECT is((SELECT count(*) FROM cscp.context), 2::bigint, 're-granted to tb: tb''s contexts');
SET cscp.tenant_id = 'ta';
SELECT throws_ok($$SELECT count(*) FROM cscp.context$$, '42501', 'permission denied for tenant "ta"', 're-granted to tb: ta is refused');
RESET ROLE;
-- A revoke takes everything back.
SELECT cscp.revoke_app('hr_a');
SELECT is((SELECT count(*) FROM cscp.tenant_binding WHERE role = 'hr_a'::regrole), 0::bigint, 'revoke_app removes the binding');
SET ROLE hr_a;
SET cscp.tenant_id = 'tb';
SELECT throws_ok($$SELECT count(*) FROM cscp.context$$, '42501', NULL, 'after revoke_app: no table');
SELECT throws_ok($$SELECT cscp.context_get('tb', 'conv', 'user')$$, '42501', NULL, 'after revoke_app: no function');
RESET ROLE;
-- Application roles can neither change bindings nor read them.
SET ROLE hr_svc;
SELECT throws_ok($$SELECT cscp.grant_app('hr_svc', '{ta}')$$, '42501', NULL, 'an application role cannot grant');
SELECT throws_ok($$INSERT INTO cscp.tenant_binding (role, kind) VALUES ('hr_b', 'app')$$, '42501', NULL, 'an application role cannot write bindings');
SELECT throws_ok($$DELETE FROM cscp.tenant_binding$$, '42501', NULL, 'an application role cannot delete bindings');
RESET ROLE;

-- Operators.  Both tenants get an invariant violation to report (a live context unlisted).
SET session_replication_role = replica;
DELETE FROM cscp.context_live;
RESET session_replication_role;
SELECT coalesce(max(inspection_id), 0) AS audit_before FROM cscp.inspection_log \gset
SET ROLE hr_ops_a;
RESET cscp.tenant_id;
SELECT is(cscp.bound_tenants('operator'), ARRAY['ta'], 'the operator bound to ta');
SELECT results_eq($$SELECT DISTINCT tenant_id FROM cscp.command_lifecycle$$, $$VALUES ('ta')$$,
                  'operator bound to ta: command_lifecycle shows ta only');
SELECT results_eq($$SELECT DISTINCT tenant_id FROM cscp.check_invariants()$$, $$VALUES ('ta')$$,
                  'operator bound to ta: check_invariants shows ta only');
SELECT throws_ok(sql, '42501', 'permission denied for tenant "tb"', 'operator bound to ta: ' || sql)
  FROM unnest(ARRAY[
    $$SELECT * FROM cscp.show_active_context('tb', 'conv')$$,
    $$SELECT * FROM cscp.inspect_active_context('tb')$$,
    $$SELECT * FROM cscp.inspect_command_lifecycle('tb', 'conv')$$,
    $$SELECT * FROM cscp.check_invariants('tb')$$]) sql;
SELECT throws_ok($$SELECT * FROM cscp._active_context$$, '42501', NULL, 'operator: the unfiltered view is closed');
SELECT throws_ok($$SELECT * FROM cscp.context$$, '42501', 'permission denied for table context', 'operator: the tables are closed');
SET cscp.tenant_id = 'tb';
SELECT throws_ok($$SELECT count(*) FROM cscp.command_lifecycle$$, '42501', 'permission denied for tenant "tb"',
                 'operator bound to ta, naming tb: command_lifecycle');
RESET cscp.tenant_id;
RESET ROLE;
-- The live contexts come back for the views (cscp.active_context reads cscp.context_live).
SET session_replication_role = replica;
INSERT INTO cscp.context_live (tenant_id, conversation_id, actor_id, context_id, expires_at)
SELECT tenant_id, conversation_id, actor_id, context_id, expires_at FROM cscp.context
 WHERE status IN ('active', 'pending', 'blocked');
RESET session_replication_role;
SET ROLE hr_ops_a;
SELECT results_eq($$SELECT tenant_id, conversation_id FROM cscp.active_context$$, $$VALUES ('ta', 'conv')$$,
                  'operator bound to ta: active_context shows ta only');
SELECT results_eq($$SELECT tenant_id, conversation_id FROM cscp.show_active_context('ta', 'conv')$$, $$VALUES ('ta', 'conv')$$,
                  'operator bound to ta: show_active_context of ta');
RESET ROLE;
SELECT is((SELECT string_agg(format('%s/%s/%s/%s/%s', tenant_id, inspector, conversation_id, rows_shown, source), ' '
                             ORDER BY inspection_id)
             FROM cscp.inspection_log WHERE inspection_id > :audit_before),
          'ta/hr_ops_a/conv/3/command_lifecycle ta/hr_ops_a/conv/1/active_context ta/hr_ops_a/conv/1/show_active_context',
          'every operator read is recorded, naming the role that asked (current_user), and nothing of tb');
SELECT is((SELECT count(*) FROM pg_proc p
            WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname LIKE '\_%'
              AND has_function_privilege('hr_ops_a', p.oid, 'EXECUTE')), 0::bigint,
          'an operator can execute no internal function');
-- The unbound operator sees both tenants.
SET ROLE hr_ops;
SELECT results_eq($$SELECT DISTINCT tenant_id FROM cscp.active_context ORDER BY 1$$, $$VALUES ('ta'), ('tb')$$,
                  'unbound operator: every tenant');
SET cscp.tenant_id = 'tb';
SELECT results_eq($$SELECT DISTINCT tenant_id FROM cscp.command_lifecycle$$, $$VALUES ('tb')$$,
                  'unbound operator naming tb: tb only');
RESET cscp.tenant_id;
RESET ROLE;
SELECT cscp.revoke_operator('hr_ops');
SET ROLE hr_ops;
SELECT throws_ok($$SELECT count(*) FROM cscp.active_context$$, '42501', NULL, 'after revoke_operator: no view');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
