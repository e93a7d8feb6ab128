-- A policy's default lifetimes stay within its max_ttl: a max_ttl below the context_ttl,
-- confirmation_ttl or approval_ttl in force (the tenant's own or the defaults') would make every
-- open that takes the default fail, so it is refused (22023) in whichever order the keys are set,
-- through cscp.policy_set and through direct SQL as the application role, and a change of the
-- defaults '*' is refused when it breaks any tenant's policy.
BEGIN;
SELECT plan(16);

SET cscp.clock = '2026-08-01 10:00:00+00';
CREATE ROLE tap_pl_app;
SELECT cscp.grant_app('tap_pl_app', ARRAY['pl']);
SET ROLE tap_pl_app;
SET cscp.tenant_id = 'pl';

-- max_ttl first, below the defaults in force (context_ttl 30 minutes, approval_ttl 1 hour).
SELECT throws_ok($$SELECT cscp.policy_set('pl', '{"max_ttl": "10 minutes"}')$$, '22023',
                 'policy key "context_ttl" of tenant "pl" exceeds its "max_ttl"',
                 'max_ttl below the default context_ttl is refused');
SELECT throws_ok($$SELECT cscp.policy_set('pl', '{"max_ttl": "40 minutes"}')$$, '22023',
                 'policy key "approval_ttl" of tenant "pl" exceeds its "max_ttl"',
                 'max_ttl below the default approval_ttl is refused');
SELECT is((SELECT count(*) FROM cscp.policy WHERE tenant_id = 'pl'), 0::bigint, 'the refused calls wrote nothing');
SELECT is(cscp.policy_set('pl', '{"max_ttl": "2 hours"}') ->> 'max_ttl', '2 hours', 'a max_ttl above every lifetime is accepted');

-- A lifetime above max_ttl, then max_ttl below a lifetime: refused in either order.
SELECT throws_ok($$SELECT cscp.policy_set('pl', '{"context_ttl": "3 hours"}')$$, '22023',
                 'policy key "context_ttl" of tenant "pl" exceeds its "max_ttl"',
                 'a context_ttl above the max_ttl in force is refused');
SELECT throws_ok($$SELECT cscp.policy_set('pl', '{"confirmation_ttl": "121 minutes"}')$$, '22023',
                 'policy key "confirmation_ttl" of tenant "pl" exceeds its "max_ttl"',
                 'a confirmation_ttl above the max_ttl in force is refused');
SELECT is(cscp.policy_set('pl', '{"context_ttl": "5 minutes", "approval_ttl": "5 minutes"}') ->> 'context_ttl', '5 minutes',
          'lowering the lifetimes is accepted');
SELECT is(cscp.policy_set('pl', '{"max_ttl": "10 minutes"}') ->> 'max_ttl', '10 minutes',
          'then a max_ttl above the lowered lifetimes is accepted');
SELECT throws_ok($$SELECT cscp.policy_set('pl', '{"context_ttl": null}')$$, '22023',
                 'policy key "context_ttl" of tenant "pl" exceeds its "max_ttl"',
                 'removing its context_ttl, so that the default 30 minutes applies again, is refused');
SELECT lives_ok($$SELECT cscp.context_open('pl', 'conv', 'user')$$, 'an open with the policy''s defaults works');

-- Direct SQL as the application role: the same rule.
SELECT throws_ok($$UPDATE cscp.policy SET settings = settings || '{"max_ttl": "1 minute"}' WHERE tenant_id = 'pl'$$,
                 '22023', 'policy key "context_ttl" of tenant "pl" exceeds its "max_ttl"',
                 'a direct UPDATE lowering max_ttl below a lifetime is refused');
SELECT throws_ok($$UPDATE cscp.policy SET settings = settings || '{"context_ttl": "20 minutes"}' WHERE tenant_id = 'pl'$$,
                 '22023', 'policy key "context_ttl" of tenant "pl" exceeds its "max_ttl"',
                 'a direct UPDATE raising a lifetime above max_ttl is refused');
SELECT is((SELECT settings ->> 'max_ttl' FROM cscp.policy WHERE tenant_id = 'pl'), '10 minutes', 'the refused writes changed nothing');
RESET ROLE;
RESET cscp.tenant_id;

-- The defaults: a change that breaks a tenant's policy, or their own, is refused.
SELECT throws_ok($$SELECT cscp.policy_set('*', '{"max_ttl": "20 minutes"}')$$, '22023',
                 'policy key "context_ttl" of tenant "*" exceeds its "max_ttl"',
                 'a default max_ttl below the default context_ttl is refused');
SELECT lives_ok($$SELECT cscp.policy_set('other', '{"context_ttl": "20 days"}')$$, 'another tenant''s context_ttl of 20 days, under the default max_ttl');
SELECT throws_ok($$SELECT cscp.policy_set('*', '{"max_ttl": "10 days"}')$$, '22023',
                 'policy key "context_ttl" of tenant "other" exceeds its "max_ttl"',
                 'a default max_ttl below a tenant''s own context_ttl is refused, naming the tenant');

SELECT * FROM finish();
ROLLBACK;
