\i sql/include/helpers.sql
-- Lifetimes, deadlines and policy intervals (src/shared/lifetime.c): every expiry cscp stores is finite,
-- later than the time it was computed at, and within the tenant's max_ttl, whoever writes it;
-- intervals are judged by where they land, not by the signs of their fields; policy values are
-- bounded (max_ttl and lifetimes at most 10 years, retention at most 100 years).
-- The sweeps below count over the whole database: what earlier tests left is made inert first.
SELECT settle();
SET timezone = 'UTC';
SET cscp.clock = '2026-04-15 12:00:00+00';
CREATE ROLE lt_app;
SELECT cscp.grant_app('lt_app');

-- Policy values out of range: 22023 naming the key, nothing written; through policy_set and
-- through a direct write of cscp.policy as the application role.
SELECT label, try(sql) FROM (VALUES
    ('max_ttl 1000 years',      $$SELECT cscp.policy_set('lt', '{"max_ttl": "1000 years"}')$$),
    ('max_ttl 10 years 1 day',  $$SELECT cscp.policy_set('lt', '{"max_ttl": "10 years 1 day"}')$$),
    ('max_ttl huge days',       $$SELECT cscp.policy_set('lt', '{"max_ttl": "2000000000 days"}')$$),
    ('context_ttl mixed signs', $$SELECT cscp.policy_set('lt', '{"context_ttl": "-1 mon 30 days 1 hour"}')$$),
    ('approval_ttl mixed signs', $$SELECT cscp.policy_set('lt', '{"approval_ttl": "1 day -1 hour"}')$$),
    ('retention 101 years',     $$SELECT cscp.policy_set('lt', '{"retention_evidence": "101 years"}')$$),
    ('defaults too',            $$SELECT cscp.policy_set('*', '{"confirmation_ttl": "11 years"}')$$)
) AS t(label, sql);
SELECT count(*) AS policies_of_lt FROM cscp.policy WHERE tenant_id = 'lt';
-- The largest values allowed.
SELECT cscp.policy_set('lt', '{"max_ttl": "10 years", "retention_evidence": "100 years"}')
       ->> 'max_ttl' AS max_ttl;
SELECT cscp.policy_set('lt', '{"max_ttl": null, "retention_evidence": null}') ->> 'max_ttl' AS back_to_default;

SET cscp.tenant_id = 'lt';
SET ROLE lt_app;
SELECT label, try(sql) FROM (VALUES
    ('insert max_ttl 1000 years', $$INSERT INTO cscp.policy (tenant_id, settings) VALUES ('lt', '{"max_ttl": "1000 years"}')$$),
    ('insert mixed signs',        $$INSERT INTO cscp.policy (tenant_id, settings) VALUES ('lt', '{"context_ttl": "-1 mon 30 days 1 hour"}')$$),
    ('policy_set as the app',     $$SELECT cscp.policy_set('lt', '{"max_ttl": "200 years"}')$$),
    ('update as the app',         $$UPDATE cscp.policy SET settings = '{"retention_turns": "1 mon -40 days"}' WHERE tenant_id = 'lt'$$)
) AS t(label, sql);
SELECT settings FROM cscp.policy WHERE tenant_id = 'lt';
RESET ROLE;

-- An interval whose fields look positive to interval_cmp (a month counts 30 days) but that lands
-- in the past: from April 15th, minus a month is March 15th, 31 days back; plus 30 days and an
-- hour is 23 hours before now.
SELECT interval '-1 mon 30 days 1 hour' > interval '0' AS looks_positive,
       cscp.now() + interval '-1 mon 30 days 1 hour' AS lands_at;
SET ROLE lt_app;
SELECT label, try(sql) FROM (VALUES
    ('context_open',  $$SELECT cscp.context_open('lt', 'c1', 'a', ttl => '-1 mon 30 days 1 hour')$$),
    ('ws_put',        $$SELECT cscp.ws_put('lt', 's1', 'k', '1', '-1 mon 30 days 1 hour')$$),
    ('context insert', $$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
                         VALUES ('lt', 'c1', 'a', cscp.now() + interval '1 hour', '-1 mon 30 days 1 hour')$$)
) AS t(label, sql);
SELECT (SELECT count(*) FROM cscp.context WHERE tenant_id = 'lt') AS contexts,
       (SELECT count(*) FROM cscp.working_set WHERE tenant_id = 'lt') AS items;
RESET ROLE;
-- The same interval from March 1st moves forward (February is short): accepted there.
SET cscp.clock = '2026-03-01 12:00:00+00';
SET ROLE lt_app;
SELECT status, expires_at FROM cscp.context_open('lt', 'c-march', 'a', ttl => '-1 mon 30 days 1 hour');
RESET ROLE;

-- Within max_ttl by where it lands: "1 mon" against the default max_ttl of 30 days is 28 days
-- from February 1st (accepted), 31 days from March 1st (too long).
SET cscp.clock = '2026-02-01 00:00:00+00';
SET ROLE lt_app;
SELECT expires_at FROM cscp.context_open('lt', 'c-feb', 'a', ttl => '1 mon');
RESET ROLE;
SET cscp.clock = '2026-03-01 00:00:00+00';
SET ROLE lt_app;
SELECT try($$SELECT cscp.context_open('lt', 'c-mar', 'a', ttl => '1 mon')$$);
SELECT try($$SELECT cscp.ws_put('lt', 's1', 'k', '1', '1 mon')$$);
SELECT try($$SELECT cscp.ws_put('lt', 's1', 'k', '1', '2000000000 days')$$);
RESET ROLE;

-- A sliding context never slides past max_ttl: opened February 27th for "1 mon" (28 days), used
-- March 1st, when "1 mon" would be 31 days: slid to March 1st + 30 days.
SET cscp.clock = '2026-02-27 00:00:00+00';
SELECT expires_at FROM cscp.context_open('lt', 'c-slide', 'a', ttl => '1 mon');
SET cscp.clock = '2026-03-01 00:00:00+00';
SELECT expires_at FROM cscp.context_open('lt', 'c-slide', 'a');

-- Direct writes of an expiry column, as the application role: finite and within max_ttl of
-- now, else 22023 and nothing changes.
SET cscp.clock = '2026-04-15 12:00:00+00';
SET ROLE lt_app;
SELECT status FROM cscp.context_open('lt', 'c-apr', 'a');
SELECT cscp.doc_put('lt', 's1', 'ns', '{"a": 1}', 60) AS doc;
SELECT cscp.ws_put('lt', 's1', 'k', '1', '1 hour');
SELECT label, try(sql) FROM (VALUES
    ('context insert infinity', $$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
                                  VALUES ('lt', 'c2', 'a', 'infinity', '1 hour')$$),
    ('context insert 31 days',  $$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
                                  VALUES ('lt', 'c2', 'a', cscp.now() + interval '31 days', '1 hour')$$),
    ('context update 200000 AD', $$UPDATE cscp.context SET expires_at = '200000-01-01 00:00:00+00'
                                   WHERE tenant_id = 'lt' AND conversation_id = 'c-apr'$$),
    ('context update ttl',      $$UPDATE cscp.context SET ttl = '-1 mon 30 days 1 hour'
                                  WHERE tenant_id = 'lt' AND conversation_id = 'c-apr'$$),
    ('document insert infinity', $$INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
                                   VALUES ('lt', 's2', 'ns', '{}', 'infinity')$$),
    ('document update 1 year',  $$UPDATE cscp.document SET expires_at = cscp.now() + interval '1 year'
                                  WHERE tenant_id = 'lt'$$),
    ('ws insert 200000 AD',     $$INSERT INTO cscp.working_set (tenant_id, session_id, key, value, expires_at)
                                  VALUES ('lt', 's2', 'k', '1', '200000-01-01 00:00:00+00')$$),
    ('ws update infinity',      $$UPDATE cscp.working_set SET expires_at = 'infinity' WHERE tenant_id = 'lt'$$)
) AS t(label, sql);
SELECT (SELECT count(*) FROM cscp.context WHERE tenant_id = 'lt') AS contexts,
       (SELECT expires_at FROM cscp.context WHERE tenant_id = 'lt' AND conversation_id = 'c-apr') AS c_apr,
       (SELECT ttl FROM cscp.context WHERE tenant_id = 'lt' AND conversation_id = 'c-apr') AS c_apr_ttl,
       (SELECT max(expires_at) FROM cscp.document WHERE tenant_id = 'lt') AS document,
       (SELECT max(expires_at) FROM cscp.working_set WHERE tenant_id = 'lt') AS item;
-- Within max_ttl is allowed.
SELECT try($$UPDATE cscp.document SET expires_at = cscp.now() + interval '30 days' WHERE tenant_id = 'lt'$$);
RESET ROLE;

-- Conversation timeouts: the deadline is computed by the same rule (never in raw arithmetic),
-- through the API and a direct INSERT; a deadline given by the writer is replaced.
SET ROLE lt_app;
SELECT label, try(sql) FROM (VALUES
    ('start: int8 max',     $$SELECT cscp.conversation_start('lt', 'v1', 'ag', '{"from": "ag", "role": "agent", "content": "hi", "ts": 0}', timeout_ms => 9223372036854775807)$$),
    ('start: 31 days',      $$SELECT cscp.conversation_start('lt', 'v1', 'ag', '{"from": "ag", "role": "agent", "content": "hi", "ts": 0}', timeout_ms => 2678400000)$$),
    ('start: negative',     $$SELECT cscp.conversation_start('lt', 'v1', 'ag', '{"from": "ag", "role": "agent", "content": "hi", "ts": 0}', timeout_ms => -1)$$),
    ('insert: int8 max',    $$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id, timeout_ms)
                              VALUES ('lt', 'v1', 'ag', 9223372036854775807)$$)
) AS t(label, sql);
SELECT count(*) AS conversations FROM cscp.conversation WHERE tenant_id = 'lt';
SELECT turn_index FROM cscp.conversation_start('lt', 'v1', 'ag', '{"from": "ag", "role": "agent", "content": "hi", "ts": 0}',
                                               timeout_ms => 2592000000);
INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id, timeout_ms, deadline)
VALUES ('lt', 'v2', 'ag', 60000, '200000-01-01 00:00:00+00');
SELECT conversation_id, timeout_ms, deadline FROM cscp.conversation WHERE tenant_id = 'lt' ORDER BY 1;
RESET ROLE;

-- The windows of confirmation and approval are computed by the same rule.  A policy whose
-- confirmation_ttl exceeds its max_ttl is refused as it is written; one stored before that rule
-- (0.1.0) is stood for by a write with the rule's trigger disabled.
SELECT try($$SELECT cscp.policy_set('lt', '{"confirmation_ttl": "10 years"}')$$);
ALTER TABLE cscp.policy DISABLE TRIGGER policy_lifetimes;
SELECT cscp.policy_set('lt', '{"confirmation_ttl": "10 years"}') ->> 'confirmation_ttl' AS confirmation_ttl;
ALTER TABLE cscp.policy ENABLE TRIGGER policy_lifetimes;
SELECT try($$SELECT cscp.command_submit('lt', 'c-apr', 'a', 'k1', 'pay', true, '{m1}')$$);
SELECT count(*) AS commands FROM cscp.command WHERE tenant_id = 'lt';
SELECT cscp.policy_set('lt', '{"confirmation_ttl": null}') IS NOT NULL AS reset;

-- The sweep works through the longest retention a policy may hold.
SELECT cscp.policy_set('lt', '{"retention_closed": "100 years", "retention_expired": "100 years",
                              "retention_turns": "100 years", "retention_evidence": "100 years"}') IS NOT NULL AS set;
SELECT (cscp.sweep()) IS NOT NULL AS swept;

RESET cscp.tenant_id;
RESET cscp.clock;
DELETE FROM cscp.turn WHERE tenant_id = 'lt';
DELETE FROM cscp.event WHERE tenant_id = 'lt';
DELETE FROM cscp.conversation WHERE tenant_id = 'lt';
DELETE FROM cscp.context WHERE tenant_id = 'lt';
DELETE FROM cscp.document WHERE tenant_id = 'lt';
DELETE FROM cscp.working_set WHERE tenant_id = 'lt';
DELETE FROM cscp.policy WHERE tenant_id = 'lt';
DROP OWNED BY lt_app;
DROP ROLE lt_app;
