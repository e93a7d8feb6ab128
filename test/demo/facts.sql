-- The facts walk-through of `make demo`: what an HR assistant tells its model about Maria.
-- A user who moves house, a manager's policy an intern cannot override, and a what-if
-- discussion that never leaks into the real context.  Steps marked "refused" are meant to fail;
-- every outcome is checked, so the demo fails when one changes.
\ir checks.sql

\echo
\echo '== 34. An HR assistant for tenant hr-corp; the clock is pinned; we act as the application'
CREATE ROLE hr_bot;
SELECT cscp.grant_app('hr_bot');
SET cscp.clock = '2026-11-23 09:00:00+00';
SET ROLE hr_bot;
SET cscp.tenant_id = 'hr-corp';
SELECT cscp.authority_set('hr-corp', 'intern', 50);
SELECT cscp.identity_set('hr-corp', 'maria', '{"user_name": "Maria Silva", "authority": "employee",
                                              "department": "Sales", "organization": "HR Corp"}');
SELECT cscp.env_set('hr-corp', 'chat-7', '{"channel": "Teams", "locale": "en-GB"}');

\echo
\echo '== 35. Maria: "I live in Lisbon." A fact of hers; its authority comes from her identity'
SELECT fact_id, key, value, authority, memory_type, is_valid
  FROM cscp.fact_write('hr-corp', 'maria', 'addr-1', 'home_address', '"Rua Augusta 1, Lisbon"');
SELECT fact_id, key, value, depends_on
  FROM cscp.fact_write('hr-corp', 'maria', 'office-1', 'nearest_office', '"Lisbon office"', depends_on => '{addr-1}');

\echo
\echo '== 36. Her manager sets the travel policy: a constraint of authority "manager"'
SELECT fact_id, key, value, authority, is_constraint, constraint_type
  FROM cscp.fact_write('hr-corp', 'maria', 'travel-1', 'travel_policy', '"Economy class; trips over 500 EUR need approval"',
                       '{"type": "policy", "authority": "manager"}', is_constraint => true, constraint_type => 'travel');

\echo
\echo '== 37. 10:00  Maria: "I moved to Porto." The new address supersedes the old one by key'
\set ECHO none
RESET ROLE;
SET cscp.clock = '2026-11-23 10:00:00+00';
SET ROLE hr_bot;
\set ECHO queries
SELECT fact_id, value, supersedes
  FROM cscp.fact_write('hr-corp', 'maria', 'addr-2', 'home_address', '"Rua de Santa Catarina 5, Porto"',
                       supersedes => 'home_address');
-- The old address is superseded; the office derived from it is flagged for review.
SELECT fact_id, key, is_valid, superseded_by, needs_review
  FROM cscp.fact WHERE tenant_id = 'hr-corp' ORDER BY created_at, fact_id;
SELECT fact_id, value, is_valid FROM cscp.fact_history('hr-corp', 'maria', 'addr-2');
SELECT fact_id AS current_of_addr_1 FROM cscp.fact_current('hr-corp', 'maria', 'addr-1');

\echo
\echo '== 38. The intern tries to lift the travel policy: refused (42501), nothing written'
\set ON_ERROR_STOP 0
SELECT cscp.fact_write('hr-corp', 'maria', 'travel-x', 'travel_policy', '"Business class is fine"',
                       '{"type": "user", "authority": "intern"}', supersedes => 'travel_policy');
\set ON_ERROR_STOP 1
\set ECHO none
SELECT pg_temp.expect(:'SQLSTATE', '42501', 'an intern cannot supersede a manager''s policy') \g /dev/null
\set ECHO queries
SELECT pg_temp.check(count(*) = 0, 'the intern wrote nothing') AS intern_wrote_nothing,
       (SELECT value FROM cscp.fact_current('hr-corp', 'maria', 'travel-1')) AS travel_policy_in_force
  FROM cscp.fact WHERE tenant_id = 'hr-corp' AND authority = 'intern';

\echo
\echo '== 39. A what-if: "If I moved to Madrid, could I work from there?" kept as a hypothetical fact'
SELECT fact_id, scope
  FROM cscp.fact_write('hr-corp', 'maria', 'whatif-1', 'home_address', '"Calle Mayor 3, Madrid"', scope => 'hypothetical');
SELECT cscp.ws_put('hr-corp', 'chat-7', 'open_request', '"expense claim for the Porto move"', interval '30 minutes');

\echo
\echo '== 40. The context the model is told: the policy first, Porto, the office flagged for review, never Rua Augusta, never Madrid'
SELECT r ->> 'text' AS context FROM cscp.build_context('hr-corp', 'maria', 'chat-7', 'Where does Maria live, and can she fly business?') r;
SELECT r -> 'fact_ids' AS fact_ids, r -> 'needs_review' AS needs_review, r -> 'tokens' AS tokens
  FROM cscp.build_context('hr-corp', 'maria', 'chat-7', 'Where does Maria live, and can she fly business?') r;
-- On a small budget the constraint still comes first.
SELECT r ->> 'text' AS context_in_60_tokens FROM cscp.build_context('hr-corp', 'maria', 'chat-7', 'business class', 60) r;

\echo
\echo '== 41. The checks: the demo fails here if any outcome changes'
SELECT pg_temp.check(position('Porto' IN c) > 0, 'the new address is told') AS new_address,
       pg_temp.check(position('Rua Augusta' IN c) = 0, 'the old address is never told') AS old_address,
       pg_temp.check(position('Madrid' IN c) = 0, 'the what-if never leaks') AS what_if,
       pg_temp.check(position('Business class' IN c) = 0 AND position('Economy class' IN c) < position('## Facts' IN c),
                     'the manager''s policy holds, before the facts') AS policy,
       pg_temp.check(position('nearest_office: Lisbon office [needs review]' IN c) > 0,
                     'the office derived from the old address is flagged') AS review
  FROM (SELECT cscp.build_context('hr-corp', 'maria', 'chat-7', 'Where does Maria live? Rua Augusta? Madrid?') ->> 'text' AS c) s;
\set ECHO none
RESET ROLE;
