-- Authority comes from the writer, not from the claim (StateBench, authority; DESIGN.md section
-- 8): a role held to an authority by cscp.authority_bind, or an API key created with one, cannot
-- write a fact whose source names a higher authority (42501, nothing written), through the API,
-- through direct SQL and through the gateway's fact endpoint; nor re-rank authorities to escape.
-- A writer with no binding is trusted with its claim, as before.
BEGIN;
SELECT plan(24);

CREATE ROLE tap_auth_intern;
CREATE ROLE tap_auth_cfo;
CREATE ROLE tap_auth_free;
SELECT cscp.grant_app('tap_auth_intern', '{acme}');
SELECT cscp.grant_app('tap_auth_cfo', '{acme}');
SELECT cscp.grant_app('tap_auth_free', '{acme}');
SET cscp.clock = '2026-09-01 10:00:00+00';
SELECT cscp.authority_set('acme', 'cfo', 500);
SELECT cscp.authority_set('acme', 'intern', 150);

-- Binding: bad input is refused and changes nothing.
SELECT throws_ok($$SELECT cscp.authority_bind('acme', 'tap_auth_intern', 'pope')$$, '22023', NULL,
                 'an authority the tenant does not rank cannot be bound');
SELECT throws_ok($$SELECT cscp.authority_bind('acme', 'no_such_role_x', 'intern')$$, '22023', NULL,
                 'an unknown role cannot be bound');
SELECT is((SELECT count(*) FROM cscp.authority_binding), 0::bigint, 'refused bindings wrote nothing');
SELECT lives_ok($$SELECT cscp.authority_bind('acme', 'tap_auth_intern', 'intern')$$, 'the intern is bound to intern');
SELECT lives_ok($$SELECT cscp.authority_bind('acme', 'tap_auth_cfo', 'cfo')$$, 'the CFO is bound to cfo');

-- StateBench Test 3: the CFO's policy, a constraint.
SET ROLE tap_auth_cfo;
SET cscp.tenant_id = 'acme';
SELECT is((cscp.fact_write('acme', 'org', 'F-POL', 'spend_limit', '"Purchases over 10k need CFO sign-off"',
                           '{"type": "policy", "authority": "cfo"}', is_constraint => true)).authority,
          'cfo', 'the CFO writes the policy with authority cfo');
RESET ROLE;

SET ROLE tap_auth_intern;
SET cscp.tenant_id = 'acme';
SELECT throws_ok($$SELECT cscp.fact_write('acme', 'org', 'F-X', 'spend_limit', '"No sign-off needed"',
                                          '{"type": "policy", "authority": "cfo"}', supersedes => 'F-POL')$$,
                 '42501', 'a writer of authority "intern" cannot write a fact of authority "cfo"',
                 'an intern claiming cfo cannot supersede the CFO''s policy');
SELECT throws_ok($$SELECT cscp.fact_write('acme', 'org', 'F-X2', 'spend_limit_v2', '"No sign-off needed"',
                                          '{"type": "policy", "authority": "cfo"}')$$,
                 '42501', NULL, 'an intern cannot write any fact claiming cfo');
SELECT throws_ok($$INSERT INTO cscp.fact (tenant_id, subject_id, fact_id, key, value, source, supersedes)
                   VALUES ('acme', 'org', 'F-X3', 'spend_limit', '"none"', '{"type": "policy", "authority": "cfo"}', 'F-POL')$$,
                 '42501', NULL, 'nor through a direct INSERT');
SELECT throws_ok($$SELECT cscp.fact_write('acme', 'org', 'F-X4', 'spend_limit', '"none"',
                                          '{"type": "policy", "authority": "manager"}')$$,
                 '42501', NULL, 'nor claiming any authority ranked above intern');
SELECT throws_ok($$SELECT cscp.authority_set('acme', 'intern', 900)$$, '42501', NULL,
                 'a writer held to an authority cannot re-rank its own');
SELECT throws_ok($$UPDATE cscp.authority SET rank = 900 WHERE tenant_id = 'acme' AND authority = 'intern'$$,
                 '42501', NULL, 'nor through a direct UPDATE');
SELECT throws_ok($$DELETE FROM cscp.authority WHERE tenant_id = 'acme' AND authority = 'cfo'$$,
                 '42501', NULL, 'nor delete a rank');
SELECT throws_ok($$SELECT cscp.authority_bind('acme', 'tap_auth_intern', 'cfo')$$, '42501', NULL,
                 'an application role cannot bind authorities');
SELECT is((cscp.fact_write('acme', 'org', 'F-OK', 'note', '"asked about the limit"',
                           '{"type": "user", "authority": "intern"}')).authority,
          'intern', 'the intern writes at its own authority');
SELECT is((cscp.fact_write('acme', 'org', 'F-OK2', 'note2', '"asked again"')).authority,
          'guest', 'a fact naming no authority takes the identity''s (here none: guest)');
SELECT lives_ok($$SELECT cscp.identity_set('acme', 'boss', '{"user_name": "B", "authority": "cfo"}')$$,
                'the intern records a subject whose identity names cfo');
SELECT is((cscp.fact_write('acme', 'boss', 'F-B', 'mood', '"good"')).authority,
          'intern', 'a fact naming none is capped at the writer''s authority');
SELECT ok(strpos(cscp.build_context('acme', 'org', 's1') ->> 'text', '10k need CFO sign-off') > 0,
          'the assembled context still holds the CFO''s constraint');
SELECT is((SELECT count(*) FROM cscp.fact WHERE fact_id LIKE 'F-X%'), 0::bigint, 'no refused fact was written');
RESET ROLE;

-- A writer with no binding is trusted with its claim (documented).
SET ROLE tap_auth_free;
SET cscp.tenant_id = 'acme';
SELECT is((cscp.fact_write('acme', 'org', 'F-FREE', 'free_note', '"x"', '{"type": "user", "authority": "cfo"}')).authority,
          'cfo', 'an unbound writer is trusted');
-- The setting only narrows.
SET cscp.authority = 'intern';
SELECT throws_ok($$SELECT cscp.fact_write('acme', 'org', 'F-FREE2', 'free_note2', '"x"', '{"type": "user", "authority": "cfo"}')$$,
                 '42501', NULL, 'cscp.authority holds an unbound writer to it');
RESET cscp.authority;
RESET ROLE;

-- The gateway: a key's fact writes run with the key's authority.
SELECT set_config('tap.key_intern', cscp.api_key_create('acme', 'k-intern', NULL, NULL, 'intern'), true);
SELECT set_config('tap.key_free', cscp.api_key_create('acme', 'k-free'), true);
SELECT is((cscp.http_fact_write('Bearer ' || current_setting('tap.key_intern'), 'org', 'application/json',
                                '{"key": "spend_limit", "value": "none", "source": {"type": "policy", "authority": "cfo"}, "supersedes": "F-POL"}')).status,
          403, 'a key held to intern claiming cfo gets 403');
SELECT is((cscp.http_fact_write('Bearer ' || current_setting('tap.key_free'), 'org', 'application/json',
                                '{"key": "other_limit", "value": "5k", "source": {"type": "policy", "authority": "cfo"}}')).status,
          201, 'a key with no authority is trusted with its claim');
SELECT * FROM finish();
ROLLBACK;
