\i sql/include/helpers.sql
-- Session documents: merge-upsert, TTL reset on every put, expired data never comes back,
-- namespaces independent.
SET timezone = 'UTC';
SET cscp.clock = '2026-03-01 10:00:00+00';
SELECT cscp.doc_put('d', 'sess-1', 'cart', '{"items": ["tea"], "currency": "EUR"}', 60) AS key;
SELECT cscp.doc_get('d', 'sess-1', 'cart');

-- Merge keeps old keys and overwrites the given ones.
SELECT cscp.doc_put('d', 'sess-1', 'cart', '{"items": ["tea", "milk"], "note": "ring twice"}', 60) AS key;
SELECT cscp.doc_get('d', 'sess-1', 'cart');

-- Every put resets the TTL.
SET cscp.clock = '2026-03-01 10:00:50+00';
SELECT cscp.doc_put('d', 'sess-1', 'cart', '{"step": 2}', 60) AS key;
SELECT expires_at FROM cscp.document WHERE session_id = 'sess-1' AND namespace = 'cart';
SET cscp.clock = '2026-03-01 10:01:30+00';
SELECT cscp.doc_get('d', 'sess-1', 'cart') ->> 'step' AS still_there;

-- Expired: reads NULL (no sweep has run), and a put starts from empty.
SET cscp.clock = '2026-03-01 10:01:50+00';
SELECT cscp.doc_get('d', 'sess-1', 'cart') IS NULL AS expired_reads_null;
SELECT count(*) AS row_still_stored FROM cscp.document WHERE session_id = 'sess-1';
SELECT cscp.doc_put('d', 'sess-1', 'cart', '{"items": ["coffee"]}', 60) AS key;
SELECT cscp.doc_get('d', 'sess-1', 'cart') AS fresh;

-- Namespaces of one session never touch each other.
SELECT cscp.doc_put('d', 'sess-1', 'profile', '{"lang": "nl"}', 600) AS key;
SELECT cscp.doc_get('d', 'sess-1', 'cart') AS cart, cscp.doc_get('d', 'sess-1', 'profile') AS profile;
SELECT cscp.doc_delete('d', 'sess-1', 'cart') AS deleted;
SELECT cscp.doc_get('d', 'sess-1', 'cart') AS cart, cscp.doc_get('d', 'sess-1', 'profile') AS profile;
SELECT cscp.doc_delete('d', 'sess-1', 'cart') AS deleted_again;
SELECT cscp.doc_get('d', 'sess-2', 'profile') AS other_session;

-- Deleting an expired document answers false (it was not found) and removes it.
SELECT cscp.doc_put('d', 'sess-3', 'ns', '{"a": 1}', 1) AS key;
SET cscp.clock = '2026-03-01 10:05:00+00';
SELECT cscp.doc_delete('d', 'sess-3', 'ns') AS deleted, count(*) AS left_behind
  FROM cscp.document WHERE session_id = 'sess-3';

-- Bad input: 22023, nothing written.
SELECT label, try(sql) AS result FROM (VALUES
    ('array payload', $$SELECT cscp.doc_put('d', 's', 'n', '[1]', 60)$$),
    ('scalar payload', $$SELECT cscp.doc_put('d', 's', 'n', '"x"', 60)$$),
    ('null payload', $$SELECT cscp.doc_put('d', 's', 'n', NULL, 60)$$),
    ('zero ttl', $$SELECT cscp.doc_put('d', 's', 'n', '{}', 0)$$),
    ('negative ttl', $$SELECT cscp.doc_put('d', 's', 'n', '{}', -5)$$),
    ('null ttl', $$SELECT cscp.doc_put('d', 's', 'n', '{}', NULL)$$),
    ('absurd ttl', $$SELECT cscp.doc_put('d', 's', 'n', '{}', 2000000000)$$),
    ('null tenant', $$SELECT cscp.doc_put(NULL, 's', 'n', '{}', 60)$$),
    ('null session', $$SELECT cscp.doc_put('d', NULL, 'n', '{}', 60)$$),
    ('empty namespace', $$SELECT cscp.doc_put('d', 's', '', '{}', 60)$$),
    ('get null session', $$SELECT cscp.doc_get('d', NULL, 'n')$$),
    ('delete null namespace', $$SELECT cscp.doc_delete('d', 's', NULL)$$)) AS b(label, sql);
SELECT count(*) AS written FROM cscp.document WHERE tenant_id = 'd' AND session_id = 's';
