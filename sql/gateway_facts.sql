\i sql/include/helpers.sql
-- Facts through the gateway's functions, without a network: written with supersession and
-- authority as in SQL, read at the head of their chain, assembled by build_context, for the
-- bearer key's tenant only.
SET timezone = 'UTC';
SET cscp.clock = '2026-05-03 09:00:00+00';
SELECT cscp.api_key_create('gf1', 'memory-bot', ARRAY['facts:read', 'facts:write']) AS k1 \gset
SELECT cscp.api_key_create('gf2', 'memory-bot') AS k2 \gset
SELECT cscp.api_key_create('gf1', 'reader', ARRAY['facts:read']) AS kread \gset

SELECT status, headers, body - 'createdAt' AS body
  FROM cscp.http_fact_write('Bearer ' || :'k1', 'ana', 'application/json',
       '{"factId": "home-1", "key": "home_city", "value": "Porto"}');
SELECT status, body ->> 'factId' AS fact_id, body ->> 'supersedes' AS supersedes
  FROM cscp.http_fact_write('Bearer ' || :'k1', 'ana', 'application/json',
       '{"factId": "home-2", "key": "home_city", "value": "Lisbon", "supersedes": "home-1"}');
-- The head of the chain, from the superseded id.
SELECT status, body ->> 'factId' AS fact_id, body -> 'value' AS value, body ->> 'isValid' AS is_valid
  FROM cscp.http_fact_current('Bearer ' || :'kread', 'ana', 'home-1');
SELECT status, body -> 'fact_ids' AS fact_ids, body ->> 'text' LIKE '%Lisbon%' AS has_lisbon,
       body ->> 'text' LIKE '%Porto%' AS has_porto
  FROM cscp.http_build_context('Bearer ' || :'kread', 'ana', 'application/json', '{"sessionId": "s-1", "query": "where does ana live"}');

-- A writer of lower authority cannot supersede a policy fact: 403 (42501), nothing written.
SELECT status FROM cscp.http_fact_write('Bearer ' || :'k1', 'ana', 'application/json',
       '{"factId": "rule-1", "key": "travel_class", "value": "economy", "source": {"type": "policy", "authority": "policy"}, "isConstraint": true}');
SELECT status, body -> 'error' ->> 'code' AS code, body -> 'error' ->> 'sqlstate' AS sqlstate
  FROM cscp.http_fact_write('Bearer ' || :'k1', 'ana', 'application/json',
       '{"factId": "rule-2", "key": "travel_class", "value": "business", "supersedes": "rule-1", "source": {"type": "conversation", "authority": "guest"}}');
SELECT fact_id, is_valid FROM cscp.fact WHERE tenant_id = 'gf1' ORDER BY fact_id;

-- Another tenant's key: not found; the scope of a read-only key: 403.
SELECT status, body -> 'error' ->> 'code' AS code FROM cscp.http_fact_current('Bearer ' || :'k2', 'ana', 'home-2');
SELECT status, body -> 'fact_ids' AS fact_ids
  FROM cscp.http_build_context('Bearer ' || :'k2', 'ana', 'application/json', '{"sessionId": "s-1"}');
SELECT status, body -> 'error' ->> 'code' AS code
  FROM cscp.http_fact_write('Bearer ' || :'kread', 'ana', 'application/json', '{"key": "k", "value": 1}');

-- Bad requests, nothing written.
SELECT label, (r).status, (r).body -> 'error' ->> 'code' AS code, (r).body -> 'error' ->> 'sqlstate' AS sqlstate,
       (r).body -> 'error' ->> 'message' AS message
  FROM (VALUES
    ('write: no value', cscp.http_fact_write('Bearer ' || :'k1', 'ana', 'application/json', '{"key": "k"}')),
    ('write: no key', cscp.http_fact_write('Bearer ' || :'k1', 'ana', 'application/json', '{"value": 1}')),
    ('write: dependsOn of numbers', cscp.http_fact_write('Bearer ' || :'k1', 'ana', 'application/json', '{"key": "k", "value": 1, "dependsOn": [1]}')),
    ('write: unknown scope', cscp.http_fact_write('Bearer ' || :'k1', 'ana', 'application/json', '{"key": "k", "value": 1, "scope": "cosmic"}')),
    ('write: supersedes nothing', cscp.http_fact_write('Bearer ' || :'k1', 'ana', 'application/json', '{"key": "k", "value": 1, "supersedes": "nope"}')),
    ('context: no sessionId', cscp.http_build_context('Bearer ' || :'k1', 'ana', 'application/json', '{}')),
    ('context: budget a string', cscp.http_build_context('Bearer ' || :'k1', 'ana', 'application/json', '{"sessionId": "s", "tokenBudget": "9"}'))
  ) AS t(label, r);
SELECT count(*) AS facts_of_gf1 FROM cscp.fact WHERE tenant_id = 'gf1';

DELETE FROM cscp.api_key;
RESET cscp.clock;
