-- Privileges (issue 7): what the application role cannot do beyond tenancy.sql (forge or change
-- evidence, silence notifications, run operator or administration functions, erase another
-- tenant's data); what the operator role can see (redacted views and invariant checks, never the
-- tables or raw values); that every SECURITY DEFINER and PL/pgSQL function pins its search_path;
-- and that objects shadowing built-ins in a schema the caller puts first (CVE-2018-1058) change
-- nothing cscp does, nor run with its owner's rights.
BEGIN;
SELECT plan(40);

CREATE ROLE tap_priv_app;
CREATE ROLE tap_priv_ops;
SELECT cscp.grant_app('tap_priv_app');
SELECT cscp.grant_operator('tap_priv_ops');
SET cscp.clock = '2026-10-01 10:00:00+00';

-- Data of two tenants, made by the superuser: a secret slot value, a command with evidence.
SELECT cscp.policy_set('pv', '{"detail_level": "full"}') IS NOT NULL;
SELECT context_id AS pv_ctx FROM cscp.context_open('pv', 'pv-conv', 'pv-user',
       '{"active_intent": "pay", "active_target": {"iban": "SECRET-IBAN-42"}}') \gset
SELECT command_id AS pv_cmd FROM cscp.command_submit('pv', 'pv-conv', 'pv-user', 'SECRET-KEY-7', 'pay', true,
       '{pv:m1}', '{"amount": 5}', 'SECRET-FP-9') \gset
SELECT command_id AS other_cmd FROM cscp.command_submit('pv-other', 'o-conv', 'o-user', 'o-key', 'lookup', false, '{o:m1}') \gset
SELECT count(*) AS other_evidence FROM cscp.evidence WHERE tenant_id = 'pv-other' \gset

---------------------------------------------------------------------------------------------------
-- The application role.
SET ROLE tap_priv_app;
SET cscp.tenant_id = 'pv';
SELECT throws_ok($$INSERT INTO cscp.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type, created_at, hash)
                   VALUES ('pv', 'pv-conv', '$$ || :'pv_cmd' || $$', 99, 'executed', 'execution.executed', cscp.now(), 'x')$$,
                 '42501', NULL, 'the application cannot insert evidence');
SELECT throws_ok($$UPDATE cscp.evidence SET reason_code = 'forged' WHERE tenant_id = 'pv'$$, '42501', NULL,
                 'the application cannot change evidence');
SELECT throws_ok($$DELETE FROM cscp.evidence WHERE tenant_id = 'pv'$$, '42501', NULL,
                 'the application cannot delete evidence');
SELECT throws_ok($$TRUNCATE cscp.evidence$$, '42501', NULL, 'the application cannot truncate evidence');
SELECT throws_ok($$INSERT INTO cscp.event (tenant_id, conversation_id, seq, type, created_at)
                   VALUES ('pv', 'pv-conv', 0, 'conversation.opened', cscp.now())$$, '42501', NULL,
                 'the application cannot write events');
SELECT throws_ok($$SELECT cscp._evidence_refusal('pv-other', 'o-conv', '$$ || :'other_cmd' || $$', 'started', 'forged', NULL, NULL, NULL)$$,
                 '42501', NULL, 'the application cannot add refusals to another tenant''s chain');
SELECT throws_ok($$SELECT cscp._evidence_refusal('pv', 'o-conv', '$$ || :'other_cmd' || $$', 'started', 'forged', NULL, NULL, NULL)$$,
                 '42501', NULL, 'nor for its own tenant: internal functions are not the application''s');
SELECT throws_ok($$SET cscp.notify = off$$, '42501', NULL, 'the application cannot silence notifications');
SELECT throws_ok($$SELECT set_config('cscp.clock', '2030-01-01 00:00:00+00', false)$$, '42501', NULL,
                 'the application cannot move the clock');
SELECT throws_ok($$SELECT * FROM cscp.check_invariants()$$, '42501', NULL, 'check_invariants is not the application''s');
SELECT throws_ok($$SELECT cscp.grant_operator('tap_priv_app')$$, '42501', NULL, 'grant_operator is not the application''s');
SELECT throws_ok($$SELECT cscp.forget_conversation('pv-other', 'o-conv')$$, '42501', NULL,
                 'the application cannot erase another tenant''s conversation');
SELECT throws_ok($$SELECT cscp.forget_subject('pv-other', 'o-user')$$, '42501', NULL,
                 'nor another tenant''s subject');
SELECT throws_ok($$SELECT * FROM cscp.tombstone$$, '42501', NULL, 'tombstones are not the application''s to read');
SELECT lives_ok($$SELECT cscp.forget_conversation('pv', 'pv-gone')$$, 'the application erases a conversation of its own tenant');
SELECT is((SELECT count(*) FROM cscp.evidence), (SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'pv'),
          'the application reads only its own tenant''s evidence');
RESET cscp.tenant_id;
RESET ROLE;
SELECT is((SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'pv-other'), :'other_evidence'::bigint,
          'the other tenant''s evidence is unchanged');
SELECT is((SELECT count(*) FROM cscp.evidence_verify('pv')) + (SELECT count(*) FROM cscp.evidence_verify('pv-other')),
          0::bigint, 'both tenants'' evidence chains verify');

---------------------------------------------------------------------------------------------------
-- The operator role: redacted views, the audited lookup and the invariant checks; nothing else.
SET ROLE tap_priv_ops;
SELECT throws_ok($$SELECT * FROM cscp.context$$, '42501', NULL, 'the operator cannot read contexts');
SELECT throws_ok($$SELECT * FROM cscp.command$$, '42501', NULL, 'nor commands');
SELECT throws_ok($$SELECT * FROM cscp.evidence$$, '42501', NULL, 'nor evidence');
SELECT throws_ok($$SELECT * FROM cscp.fact$$, '42501', NULL, 'nor facts');
SELECT throws_ok($$SELECT * FROM cscp.turn$$, '42501', NULL, 'nor turns');
SELECT throws_ok($$SELECT cscp.context_open('pv', 'x', 'y')$$, '42501', NULL, 'the operator cannot call the API');
SELECT throws_ok($$SELECT cscp.forget_conversation('pv', 'pv-conv')$$, '42501', NULL, 'nor erase');
SELECT throws_ok($$SELECT cscp.sweep()$$, '42501', NULL, 'nor sweep');
SELECT is((SELECT count(*) FROM cscp.active_context WHERE tenant_id = 'pv'), 1::bigint, 'the operator sees the live context');
SELECT ok((SELECT bool_and(NOT (to_jsonb(a)::text ~ 'SECRET')) FROM cscp.active_context a),
          'active_context shows no slot value, key or fingerprint, even at detail level full');
SELECT ok((SELECT bool_and(NOT (to_jsonb(l)::text ~ 'SECRET')) FROM cscp.command_lifecycle l),
          'command_lifecycle shows no idempotency key, fingerprint or payload');
SELECT ok((SELECT bool_and(NOT (to_jsonb(s)::text ~ 'SECRET')) FROM cscp.show_active_context('pv', 'pv-conv') s),
          'show_active_context neither');
SELECT is((SELECT count(*) FROM cscp.check_invariants()), 0::bigint, 'the operator runs the invariant checks');

-- A shadow of a built-in in a schema the operator puts first cannot see raw slot values through
-- the views (their helpers resolve names in pg_catalog).
RESET ROLE;
CREATE SCHEMA tap_evil AUTHORIZATION tap_priv_ops;
CREATE SCHEMA tap_shadow AUTHORIZATION tap_priv_app;
SET ROLE tap_priv_ops;
CREATE FUNCTION tap_evil.jsonb_typeof(v jsonb) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'leaked: %', v;
END
$$;
CREATE FUNCTION tap_evil.octet_length(v text) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'leaked: %', v;
END
$$;
SET search_path = tap_evil, pg_catalog, public;
SELECT lives_ok($$SELECT * FROM cscp.active_context$$, 'a shadowed jsonb_typeof or octet_length does not run in the operator''s view');
RESET search_path;
RESET ROLE;

---------------------------------------------------------------------------------------------------
-- search_path: every SECURITY DEFINER function, and every PL/pgSQL function, pins it.
SELECT is((SELECT count(*) FROM pg_proc p
            WHERE p.pronamespace = 'cscp'::regnamespace AND p.prosecdef
              AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)),
          0::bigint, 'every SECURITY DEFINER function of cscp sets search_path = pg_catalog, pg_temp');
SELECT is((SELECT count(*) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.pronamespace = 'cscp'::regnamespace AND l.lanname = 'plpgsql'
              AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)),
          0::bigint, 'every PL/pgSQL function of cscp sets search_path = pg_catalog, pg_temp');

-- Shadows of now(), jsonb_build_object and the text = operator, in a schema the application puts
-- before pg_catalog: cscp's functions give the same results, and none of the shadows runs with
-- the owner's rights (the = shadow refuses to run as anyone but the application role).
SET ROLE tap_priv_app;
CREATE FUNCTION tap_shadow.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT '2000-01-01 00:00:00+00'::timestamptz $$;
CREATE FUNCTION tap_shadow.jsonb_build_object(VARIADIC a text[]) RETURNS jsonb LANGUAGE sql AS $$ SELECT '{"shadowed": true}'::jsonb $$;
CREATE FUNCTION tap_shadow.text_eq(a text, b text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF current_user <> 'tap_priv_app' THEN
        RAISE EXCEPTION 'shadow operator ran as %', current_user;
    END IF;
    RETURN a OPERATOR(pg_catalog.=) b;
END
$$;
CREATE OPERATOR tap_shadow.= (LEFTARG = text, RIGHTARG = text, FUNCTION = tap_shadow.text_eq);
SET search_path = tap_shadow, pg_catalog, public;
SET cscp.tenant_id = 'pv';
SELECT is((SELECT status FROM cscp.context_open('pv', 'pv-conv-2', 'pv-user', '{}', interval '1 minute')),
          'active'::cscp.context_status, 'context_open works under the shadows');
SELECT is((SELECT outcome FROM cscp.confirm('pv', 'pv-conv', 'pv-user', 'pv:m2', true)), 'confirmed',
          'confirm works under the shadows (evidence written as the owner)');
SELECT is((SELECT string_agg(t.state::text, ' ' ORDER BY n)
             FROM unnest('{authz_pending,authorized,started,executed}'::cscp.command_state[]) WITH ORDINALITY u(s, n),
                  LATERAL cscp.command_transition(:'pv_cmd', s) t),
          'authz_pending authorized started executed', 'the command runs to the end under the shadows');
SELECT is((SELECT count(*) FROM cscp.evidence_verify('pv')), 0::bigint, 'its evidence verifies');
SELECT is((SELECT cscp.sweep() ->> 'contexts_expired'), '0', 'the sweep counts as before (no context is past 10:01)');
SELECT is(cscp.now(), '2026-10-01 10:00:00+00'::timestamptz, 'cscp.now() is not the shadowed now()');
RESET search_path;
RESET cscp.tenant_id;
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
