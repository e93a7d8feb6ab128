\i sql/include/helpers.sql
-- Bad input to every function: an ERROR with the SQLSTATE of DESIGN.md section 10, and no row
-- changed.
SET cscp.clock = '2026-06-01 10:00:00+00';
SELECT context_id AS id FROM cscp.context_open('b', 'bad', 'a') \gset
CREATE TEMP TABLE before AS
    SELECT (SELECT count(*) FROM cscp.context) AS contexts,
           (SELECT count(*) FROM cscp.document) AS documents,
           (SELECT count(*) FROM cscp.policy) AS policies,
           (SELECT version FROM cscp.context WHERE context_id = :'id') AS version;

SELECT label, try(sql) AS result FROM (VALUES
    ('open: null tenant',        $$SELECT cscp.context_open(NULL, 'c', 'a')$$),
    ('open: empty tenant',       $$SELECT cscp.context_open('', 'c', 'a')$$),
    ('open: reserved tenant',    $$SELECT cscp.context_open('*', 'c', 'a')$$),
    ('open: long tenant',        format('SELECT cscp.context_open(%L, %L, %L)', repeat('t', 257), 'c', 'a')),
    ('open: null conversation',  $$SELECT cscp.context_open('b', NULL, 'a')$$),
    ('open: empty actor',        $$SELECT cscp.context_open('b', 'c', '')$$),
    ('open: slots not object',   $$SELECT cscp.context_open('b', 'c', 'a', '"x"')$$),
    ('open: unknown slot',       $$SELECT cscp.context_open('b', 'c', 'a', '{"color": 1}')$$),
    ('open: negative ttl',       $$SELECT cscp.context_open('b', 'c', 'a', '{}', interval '-1 minute')$$),
    ('open: zero ttl',           $$SELECT cscp.context_open('b', 'c', 'a', '{}', interval '0')$$),
    ('open: absurd ttl',         $$SELECT cscp.context_open('b', 'c', 'a', '{}', interval '100 years')$$),
    ('get: null actor',          $$SELECT cscp.context_get('b', 'c', NULL)$$),
    ('get: empty tenant',        $$SELECT cscp.context_get('', 'c', 'a')$$),
    ('slot_set: null id',        $$SELECT cscp.slot_set(NULL, 'x_a', '1')$$),
    ('slot_set: unknown id',     $$SELECT cscp.slot_set('00000000-0000-4000-8000-000000000000', 'x_a', '1')$$),
    ('slot_set: null slot',      format('SELECT cscp.slot_set(%L, NULL, %L)', :'id', '1')),
    ('slot_set: empty slot',     format('SELECT cscp.slot_set(%L, %L, %L)', :'id', '', '1')),
    ('transition: null status',  format('SELECT cscp.context_transition(%L, NULL)', :'id')),
    ('transition: null id',      $$SELECT cscp.context_transition(NULL, 'closed')$$),
    ('transition: bad status',   format('SELECT cscp.context_transition(%L, %L)', :'id', 'done')),
    ('policy: null settings',    $$SELECT cscp.policy_set('b', NULL)$$),
    ('policy: not an object',    $$SELECT cscp.policy_set('b', '"fast"')$$),
    ('policy: empty tenant',     $$SELECT cscp.policy_set('', '{}')$$),
    ('doc_put: null namespace',  $$SELECT cscp.doc_put('b', 's', NULL, '{}', 60)$$),
    ('doc_put: array payload',   $$SELECT cscp.doc_put('b', 's', 'n', '[]', 60)$$),
    ('doc_put: negative ttl',    $$SELECT cscp.doc_put('b', 's', 'n', '{}', -1)$$),
    ('doc_get: empty tenant',    $$SELECT cscp.doc_get('', 's', 'n')$$),
    ('doc_delete: null tenant',  $$SELECT cscp.doc_delete(NULL, 's', 'n')$$),
    ('sweep: negative batch',    $$SELECT cscp.sweep(-1)$$),
    ('grant_app: no such role',  $$SELECT cscp.grant_app('no_such_role')$$),
    ('grant_app: null role',     $$SELECT cscp.grant_app(NULL)$$),
    ('show: null conversation',  $$SELECT cscp.show_active_context('b', NULL)$$)) AS b(label, sql);

SELECT (SELECT count(*) FROM cscp.context) = contexts AS contexts_unchanged,
       (SELECT count(*) FROM cscp.document) = documents AS documents_unchanged,
       (SELECT count(*) FROM cscp.policy) = policies AS policies_unchanged,
       (SELECT version FROM cscp.context WHERE context_id = :'id') = version AS context_unchanged
  FROM before;

-- What a user sees: message, detail and hint.
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT cscp.context_open('b', '', 'a');
SELECT cscp.context_open('b', 'c', 'a', '{}', interval '100 years');
SELECT cscp.slot_set('00000000-0000-4000-8000-000000000000', 'x_a', '1');
SELECT cscp.doc_put('b', 's', 'n', '[]', 60);
