-- The detail level of the operator views is the tenant's policy in force (cscp.policy_effective):
-- the default of tenant '*' until the tenant sets its own, whether the tenant sets it through
-- cscp.policy_set or by direct SQL on cscp.policy as an application role, and from the next
-- statement of the same transaction on.  What each level shows of the actor
-- (cscp._redact_actor) and of the target is the same in both views.
BEGIN;
SELECT plan(11);

CREATE ROLE tap_dl_app;
CREATE ROLE tap_dl_ops;
SELECT cscp.grant_app('tap_dl_app');
SELECT cscp.grant_operator('tap_dl_ops');
SET cscp.clock = '2026-10-01 10:00:00+00';

-- A live context with a target and a command, of a tenant with no policy of its own.
SELECT context_id AS dl_ctx FROM cscp.context_open('dl', 'dl-conv', 'dl-user',
       '{"active_intent": "pay", "active_target": {"iban": "DL-IBAN"}}') \gset
SELECT command_id AS dl_cmd FROM cscp.command_submit('dl', 'dl-conv', 'dl-user', 'dl-k1', 'lookup', false, '{dl:m1}') \gset

CREATE FUNCTION pg_temp.shown() RETURNS text LANGUAGE sql AS $$
    SELECT format('%s %s %s | %s %s',
                  a.detail_level, a.actor, a.target, m.detail_level, m.actor)
      FROM cscp.active_context a, cscp.command_lifecycle m
     WHERE a.tenant_id = 'dl' AND m.tenant_id = 'dl'
$$;
SELECT 'sha256:' || left(encode(sha256(convert_to('dl-user', 'UTF8')), 'hex'), 16) AS actor_digest,
       'sha256:' || left(encode(sha256(convert_to('{"iban": "DL-IBAN"}', 'UTF8')), 'hex'), 16) AS target_digest \gset

SET ROLE tap_dl_ops;
SELECT is(pg_temp.shown(), format('summary %s [redacted] | summary %s', :'actor_digest', :'actor_digest'),
          'no policy of its own: the default of tenant * (summary), the actor as its digest');
RESET ROLE;

-- The default changes: the tenant follows it, in the same transaction.
SELECT cscp.policy_set('*', '{"detail_level": "full"}') ->> 'detail_level' AS star_level \gset
SET ROLE tap_dl_ops;
SELECT is(pg_temp.shown(), format('full dl-user %s | full dl-user', :'target_digest'),
          'the default of tenant * set to full: the actor itself and the target''s digest');
RESET ROLE;

-- The tenant sets its own through the API, as the application role.
SET ROLE tap_dl_app;
SET cscp.tenant_id = 'dl';
SELECT is(cscp.policy_set('dl', '{"detail_level": "none"}') ->> 'detail_level', 'none',
          'the application sets its tenant''s detail level through policy_set');
RESET cscp.tenant_id;
SET ROLE tap_dl_ops;
SELECT is(pg_temp.shown(), format('none %s  | none %s', :'actor_digest', :'actor_digest'),
          'its own level outranks the default: none, the actor as its digest, no target');
RESET ROLE;

-- And by direct SQL, as the application role.
SET ROLE tap_dl_app;
SET cscp.tenant_id = 'dl';
SELECT lives_ok($$UPDATE cscp.policy SET settings = settings || '{"detail_level": "summary"}' WHERE tenant_id = 'dl'$$,
                'the application updates its tenant''s policy row by direct SQL');
RESET cscp.tenant_id;
SET ROLE tap_dl_ops;
SELECT is(pg_temp.shown(), format('summary %s [redacted] | summary %s', :'actor_digest', :'actor_digest'),
          'the level written by direct SQL holds in the next statement');
RESET ROLE;

SET ROLE tap_dl_app;
SET cscp.tenant_id = 'dl';
SELECT lives_ok($$DELETE FROM cscp.policy WHERE tenant_id = 'dl'$$,
                'the application deletes its tenant''s policy row by direct SQL');
UPDATE cscp.policy SET settings = '{"detail_level": "none"}' WHERE tenant_id = '*';
SELECT is((SELECT count(*) FROM cscp.policy WHERE tenant_id = '*' AND settings ->> 'detail_level' = 'full'), 1::bigint,
          'but its UPDATE of the default of tenant *, which it reads, changes nothing');
RESET cscp.tenant_id;
SET ROLE tap_dl_ops;
SELECT is(pg_temp.shown(), format('full dl-user %s | full dl-user', :'target_digest'),
          'its own row gone: the default of tenant * again');
RESET ROLE;

-- The same pseudonym in check_invariants' report of two live contexts of one actor.
ALTER TABLE cscp.context DISABLE TRIGGER USER;
INSERT INTO cscp.context
SELECT (jsonb_populate_record(c, jsonb_build_object('context_id', cscp.routing_id(c.conversation_id)))).*
  FROM cscp.context c WHERE c.tenant_id = 'dl';
ALTER TABLE cscp.context ENABLE TRIGGER USER;
SET ROLE tap_dl_ops;
SELECT alike((SELECT detail FROM cscp.check_invariants('dl') WHERE kind = 'multiple_live_contexts'),
             format('2 live contexts for actor %s: %%', :'actor_digest'),
             'check_invariants names the actor by the same digest');
SELECT unalike((SELECT string_agg(detail, ' ') FROM cscp.check_invariants('dl')), '%dl-user%',
                'and never by its id');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
