-- cscp.fact_current names a fact as supersedes does: by id first, else by key, the one valid fact
-- of the subject with that key (its chain's head); a key with several valid facts (in different
-- scopes) is ambiguous (22023), an unknown one 22023.  As an application role, through the API.
BEGIN;
SELECT plan(7);

CREATE ROLE tap_fl_app;
SELECT cscp.grant_app('tap_fl_app', '{acme}');
SET cscp.clock = '2026-09-01 10:00:00+00';
SET ROLE tap_fl_app;
SET cscp.tenant_id = 'acme';
SELECT cscp.fact_write('acme', 'ana', 'a-1', 'home_city', '"Lisbon"');
SELECT cscp.fact_write('acme', 'ana', 'a-2', 'home_city', '"Porto"', supersedes => 'home_city');
-- A fact whose id is another fact's key: the id wins.
SELECT cscp.fact_write('acme', 'ana', 'mood', 'note', '"an id that is also a key"');
SELECT cscp.fact_write('acme', 'ana', 'm-1', 'mood', '"calm"');
SELECT cscp.fact_write('acme', 'ana', 't-1', 'budget', '"10k"', scope => 'task', scope_id => 'q1');
SELECT cscp.fact_write('acme', 'ana', 't-2', 'budget', '"12k"', scope => 'task', scope_id => 'q2');

SELECT is((cscp.fact_current('acme', 'ana', 'a-1')).fact_id, 'a-2', 'by id: the head of its chain');
SELECT is((cscp.fact_current('acme', 'ana', 'home_city')).fact_id, 'a-2', 'by key: the valid fact with that key');
SELECT is((cscp.fact_current('acme', 'ana', 'home_city')).value, '"Porto"'::jsonb, 'by key: its value');
SELECT is((cscp.fact_current('acme', 'ana', 'mood')).fact_id, 'mood', 'an id is looked up before a key');
SELECT throws_ok($$SELECT cscp.fact_current('acme', 'ana', 'budget')$$, '22023',
                 'key "budget" names more than one valid fact', 'a key with two valid facts is ambiguous');
SELECT throws_ok($$SELECT cscp.fact_current('acme', 'ana', 'no_such')$$, '22023',
                 'fact "no_such" does not exist', 'neither an id nor a key');
SELECT throws_ok($$SELECT cscp.fact_current('acme', 'bob', 'home_city')$$, '22023', NULL,
                 'a key of another subject names nothing');
RESET ROLE;
SELECT * FROM finish();
ROLLBACK;
