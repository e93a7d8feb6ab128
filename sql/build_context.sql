\i sql/include/helpers.sql
-- build_context (DESIGN section 8) under a pinned clock: sections in order, valid facts only,
-- scopes (hypothetical, draft, other task, other session never), relevance ranking with ties by
-- recency, the token budget with constraints first and the policy's fact share, needs_review
-- marks, the working set's TTL, determinism; and token_count.
SET timezone = 'UTC';
SET cscp.clock = '2026-07-01 08:00:00+00';

-- token_count: runs of letters and digits cost one token per 4 characters, other visible
-- characters one each, white space nothing.
SELECT s AS txt, cscp.token_count(s) AS tokens
  FROM unnest(ARRAY['', '   ', 'Hello, world!', 'launch_date', 'internationalization', 'Olá, São Paulo',
                    '## Facts', '- home_city: Porto', NULL]) s;

-- Ana's state.
SELECT cscp.authority_set('bc', 'cfo', 500);
SELECT cscp.identity_set('bc', 'ana', '{"user_name": "Ana", "authority": "employee", "department": "Finance",
                                        "organization": "Acme", "permissions": ["expenses.submit"]}');
SELECT cscp.env_set('bc', 's-1', '{"location": "Lisbon office", "device": "laptop", "now": "1999-01-01"}');
SELECT (cscp.fact_write('bc', 'ana', 'c-budget', 'expense_limit', '"500 EUR per trip"',
                       '{"type": "policy", "authority": "cfo"}', is_constraint => true, constraint_type => 'budget')).fact_id;
SELECT (cscp.fact_write('bc', 'ana', 'c-travel', 'travel_class', '"economy only"',
                       '{"type": "policy", "authority": "policy"}', is_constraint => true)).fact_id;
SELECT (cscp.fact_write('bc', 'ana', 'home-1', 'home_city', '"Lisbon"')).fact_id;
SELECT (cscp.fact_write('bc', 'ana', 'launch', 'launch_date', '"Monday March 18"')).fact_id;
SELECT (cscp.fact_write('bc', 'ana', 'hypo', 'unit_price', '"$45 per unit if they buy 1000"', scope => 'hypothetical')).fact_id;
SELECT (cscp.fact_write('bc', 'ana', 'draft', 'reply', '"Dear Mr Smith, we accept"', scope => 'draft')).fact_id;
SELECT (cscp.fact_write('bc', 'ana', 'task-1', 'task_step', '"collect receipts"', scope => 'task', scope_id => 't-1')).fact_id;
SELECT (cscp.fact_write('bc', 'ana', 'task-2', 'task_step', '"book the venue"', scope => 'task', scope_id => 't-2')).fact_id;
SELECT (cscp.fact_write('bc', 'ana', 'sess-1', 'mood', '"in a hurry"', scope => 'session', scope_id => 's-1')).fact_id;
SELECT (cscp.fact_write('bc', 'ana', 'sess-2', 'mood', '"relaxed"', scope => 'session', scope_id => 's-2')).fact_id;
SET cscp.clock = '2026-07-01 08:05:00+00';
SELECT (cscp.fact_write('bc', 'ana', 'color', 'favourite_color', '"blue"')).fact_id;
SELECT (cscp.fact_write('bc', 'ana', 'ship', 'shipping_address', '"Rua Augusta 1, Lisbon"', depends_on => '{home-1}')).fact_id;
SET cscp.clock = '2026-07-01 08:10:00+00';
SELECT (cscp.fact_write('bc', 'ana', 'home-2', 'home_city', '"Porto"', supersedes => 'home_city')).fact_id;
SELECT cscp.ws_put('bc', 's-1', 'open_form', '"expense report #12"', interval '1 hour');
SELECT cscp.ws_put('bc', 's-1', 'last_search', '"hotels in Porto"', interval '10 minutes');
SELECT cscp.ws_put('bc', 's-2', 'open_form', '"leave request"', interval '1 hour');

-- Everything, no query, no budget: identity, environment (the time is cscp.now(), not the
-- environment's own "now"), constraints, facts newest first, working set newest first.
SET cscp.clock = '2026-07-01 08:15:00+00';
SELECT r ->> 'text' AS text, jsonb_pretty(r - 'text') AS meta
  FROM cscp.build_context('bc', 'ana', 's-1') r;

-- Valid facts only; never hypothetical, draft, another task's or another session's.
SELECT position('Lisbon"' IN r ->> 'text') > 0 AS old_home, position('$45' IN r ->> 'text') > 0 AS hypothetical,
       position('Dear Mr Smith' IN r ->> 'text') > 0 AS draft, position('receipts' IN r ->> 'text') > 0 AS task_1,
       position('venue' IN r ->> 'text') > 0 AS task_2, position('hurry' IN r ->> 'text') > 0 AS session_1,
       position('relaxed' IN r ->> 'text') > 0 AS session_2, position('leave request' IN r ->> 'text') > 0 AS other_ws
  FROM cscp.build_context('bc', 'ana', 's-1') r;
-- A task's facts only for that task; a session's only for that session.
SELECT r -> 'fact_ids' AS fact_ids, r -> 'working_set' AS working_set
  FROM cscp.build_context('bc', 'ana', 's-1', task_id => 't-1') r;
SELECT r -> 'fact_ids' AS fact_ids, r -> 'working_set' AS working_set
  FROM cscp.build_context('bc', 'ana', 's-2', task_id => 't-2') r;

-- Relevance: the facts that share words with the query come first (constraints stay first).
SELECT r -> 'fact_ids' AS fact_ids FROM cscp.build_context('bc', 'ana', 's-1', 'When is the launch?') r;
SELECT r -> 'fact_ids' AS fact_ids FROM cscp.build_context('bc', 'ana', 's-1', 'Which city is home now, and the shipping address?') r;
SELECT r -> 'fact_ids' AS fact_ids FROM cscp.build_context('bc', 'ana', 's-1', 'the of and') r;
-- Ties by recency: two facts equally relevant, the newer first.
SET cscp.clock = '2026-07-01 08:16:00+00';
SELECT (cscp.fact_write('bc', 'ana', 'car-old', 'car', '"red car"')).fact_id;
SET cscp.clock = '2026-07-01 08:17:00+00';
SELECT (cscp.fact_write('bc', 'ana', 'car-new', 'bike', '"red bike"')).fact_id;
SELECT r -> 'fact_ids' AS fact_ids FROM cscp.build_context('bc', 'ana', 's-1', 'red') r;

-- The budget: never exceeded; constraints first (no plain fact while a constraint is left out);
-- constraints and facts within the fact share (0.7), then the time, identity and environment,
-- then the working set in what is left.
SELECT b AS budget, (r ->> 'tokens')::int AS tokens, (r ->> 'tokens')::int <= b AS within,
       r -> 'fact_budget' AS fact_budget, r -> 'fact_ids' AS fact_ids, r -> 'working_set' AS ws,
       r -> 'facts_omitted' AS omitted, r -> 'truncated' AS truncated
  FROM unnest(ARRAY[0, 10, 40, 60, 80, 120, 200, 1000]) b, cscp.build_context('bc', 'ana', 's-1', 'launch', b) r;
SELECT r ->> 'text' AS text FROM cscp.build_context('bc', 'ana', 's-1', 'launch', 80) r;
-- Identity is always told (the spec's order: identity, environment, then facts within 0.7 of
-- what remains, then the working set): at 20, 60 and 80 tokens too, and at 60 the relevant fact
-- (launch) goes before the irrelevant ones.
SELECT b AS budget, position('user_name: Ana' IN r ->> 'text') > 0 AS identity,
       position('now: ' IN r ->> 'text') > 0 AS time, r -> 'fact_budget' AS fact_budget, r -> 'fact_ids' AS fact_ids
  FROM unnest(ARRAY[20, 60, 80, 140, 160]) b, cscp.build_context('bc', 'ana', 's-1', 'launch', b) r;
-- Every budget from 0 to 300: within it, except that the identity and the time are always told
-- (their tokens are the floor), and a plain fact only when every constraint is in.
SELECT count(*) AS budgets,
       bool_and((r ->> 'tokens')::int <= greatest(b, (SELECT (f ->> 'tokens')::int
                                                        FROM cscp.build_context('bc', 'ana', 's-1', 'launch', 0) f))) AS all_within,
       bool_and(position('user_name: Ana' IN r ->> 'text') > 0) AS identity_always,
       bool_and(cscp.token_count(r ->> 'text') = (r ->> 'tokens')::int) AS tokens_are_token_count,
       bool_and(NOT (r -> 'fact_ids' ? 'launch') OR (r -> 'fact_ids' ?& '{c-budget,c-travel}')) AS constraints_first
  FROM generate_series(0, 300) b, cscp.build_context('bc', 'ana', 's-1', 'launch', b) r;
-- A smaller fact share: fewer facts, and their room goes to identity, environment and working set.
SELECT cscp.policy_set('bc', '{"fact_budget_share": 0.3}') ->> 'fact_budget_share' AS share;
SELECT r -> 'fact_budget' AS fact_budget, r -> 'fact_ids' AS fact_ids, r -> 'working_set' AS ws
  FROM cscp.build_context('bc', 'ana', 's-1', 'launch', 200) r;
DELETE FROM cscp.policy WHERE tenant_id = 'bc';

-- The working set is filtered by relevance to the query: only items sharing a word with it,
-- most relevant first; without a query (or one with no words), every live item.
SELECT cscp.ws_put('bc', 's-1', 'launch_checklist', '"book the launch venue"', interval '1 hour');
SELECT q AS query, r -> 'working_set' AS working_set
  FROM unnest(ARRAY['launch', 'hotels Porto', 'expense report', 'unrelated words', 'the of', NULL]) q,
       cscp.build_context('bc', 'ana', 's-1', q) r;
DELETE FROM cscp.working_set WHERE tenant_id = 'bc' AND key = 'launch_checklist';

-- The environment's time: current_date, and local_time for a timezone PostgreSQL knows.
SELECT cscp.env_set('bc', 's-tz', '{"timezone": "America/New_York", "current_date": "1999-01-01"}');
SELECT r ->> 'text' AS text FROM cscp.build_context('bc', 'nobody', 's-tz') r;
SELECT cscp.env_set('bc', 's-tz', '{"timezone": "Asia/Kolkata"}');
SELECT r ->> 'text' AS text FROM cscp.build_context('bc', 'nobody', 's-tz') r;
SELECT try($$SELECT cscp.env_set('bc', 's-tz', '{"timezone": "Mars/Olympus"}')$$);
SELECT try($$SELECT cscp.env_set('bc', 's-tz', '{"timezone": 5}')$$);
SELECT try($$INSERT INTO cscp.environment (tenant_id, session_id, environment) VALUES ('bc', 's-tz2', '{"timezone": "Nowhere/City"}')$$);
SELECT environment FROM cscp.environment WHERE tenant_id = 'bc' AND session_id LIKE 's-tz%';

-- The same state and clock give the same output.
SELECT a = b AS same, md5(a::text) = md5(b::text) AS same_bytes
  FROM cscp.build_context('bc', 'ana', 's-1', 'launch', 150) a, cscp.build_context('bc', 'ana', 's-1', 'launch', 150) b;

-- The working set's TTL: at 08:20 "last_search" has expired and is gone from the context.
SET cscp.clock = '2026-07-01 08:20:00+00';
SELECT r -> 'working_set' AS working_set, r ->> 'now' AS now FROM cscp.build_context('bc', 'ana', 's-1') r;

-- A subject with nothing: only the time.
SELECT r ->> 'text' AS text, r -> 'fact_ids' AS fact_ids FROM cscp.build_context('bc', 'nobody', 's-9') r;

-- Bad input: 22023.
SELECT try($$SELECT cscp.build_context('bc', 'ana', 's-1', NULL, -1)$$);
SELECT try($$SELECT cscp.build_context('bc', NULL, 's-1')$$);
SELECT try($$SELECT cscp.build_context('bc', 'ana', NULL)$$);
SELECT try($$SELECT cscp.build_context('bc', 'ana', 's-1', task_id => '')$$);
SELECT try($$SELECT cscp.build_context(NULL, 'ana', 's-1')$$);

DELETE FROM cscp.fact WHERE tenant_id = 'bc';
DELETE FROM cscp.identity WHERE tenant_id = 'bc';
DELETE FROM cscp.authority WHERE tenant_id = 'bc';
DELETE FROM cscp.working_set WHERE tenant_id = 'bc';
DELETE FROM cscp.environment WHERE tenant_id = 'bc';
RESET cscp.clock;
