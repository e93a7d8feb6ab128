\i sql/include/helpers.sql
-- Bounded work for hostile input (src/shared/jsonschema.c): a turn's content, sent by an end user, is
-- validated in time about linear in its size whatever it holds.  uniqueItems sorts instead of
-- comparing pair by pair (no hash that crafted elements could make collide); patterns that make
-- the regex engine backtrack are refused when the schema is declared, with 22023 and the path
-- of the keyword; a schema is at most 64 kB and 32 levels deep.
-- statement_timeout is the guard: a regression fails these statements instead of hanging them.
SET timezone = 'UTC';
SET cscp.clock = '2026-05-01 09:00:00+00';
CREATE ROLE js_app;
SELECT cscp.grant_app('js_app');

-- Elements that all have the same jsonb_hash: [x, "" x 31, x] (the hash rotates one bit per
-- element, so the two x cancel out after 32 steps).
CREATE TABLE public.colliding AS
SELECT jsonb_agg(jsonb_build_array(i) || (SELECT jsonb_agg(''::text) FROM generate_series(1, 31))
                 || jsonb_build_array(i) ORDER BY i) AS a
  FROM generate_series(1, 6000) i;
SELECT jsonb_array_length(a) AS elements,
       (SELECT count(DISTINCT jsonb_hash(e)) FROM jsonb_array_elements(a) e) AS distinct_hashes,
       pg_column_size(a::text::jsonb) BETWEEN 700000 AND 1048576 AS about_a_megabyte
  FROM public.colliding;
GRANT SELECT ON public.colliding TO js_app;

SET cscp.tenant_id = 'js';
SET ROLE js_app;
SET statement_timeout = '5s';
SELECT cscp.jsonschema_validate('{"uniqueItems": true}', a) AS all_distinct FROM public.colliding;
SELECT cscp.jsonschema_validate('{"uniqueItems": true}', a || jsonb_build_array(a -> 4321)) AS duplicate
  FROM public.colliding;
-- Numbers compare by value (1 and 1.0 are equal), objects whatever their key order.
SELECT cscp.jsonschema_validate('{"uniqueItems": true}', '[2, 1, 3, 1.0]') AS numbers,
       cscp.jsonschema_validate('{"uniqueItems": true}', '[{"a": 1, "b": [2]}, "x", {"b": [2], "a": 1}]') AS objects,
       cscp.jsonschema_validate('{"uniqueItems": true}', '[[1, 2], [2, 1], null, "1", 1, true, false]') AS distinct_kinds;

-- Through the API and direct SQL, as the application role: a conversation whose turns carry such
-- arrays.
SELECT turn_index FROM cscp.conversation_start('js', 'u1', 'agent',
    '{"from": "agent", "role": "agent", "content": [], "ts": 0}',
    '{"type": "array", "uniqueItems": true}');
SELECT turn_index, outcome
  FROM public.colliding,
       cscp.conversation_exchange('js', 'u1', jsonb_build_object('from', 'maria', 'role', 'user', 'content', a, 'ts', 1));
SELECT try(format($$SELECT cscp.conversation_exchange('js', 'u1', %L)$$,
                  jsonb_build_object('from', 'maria', 'role', 'user', 'content', a || jsonb_build_array(a -> 17), 'ts', 2)))
  FROM public.colliding;
SELECT try(format($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts)
                    VALUES ('js', 'u1', 'user', 'maria', %L, 2)$$, a || jsonb_build_array(a -> 5999)))
  FROM public.colliding;
SELECT count(*) AS turns FROM cscp.turn WHERE tenant_id = 'js';
RESET statement_timeout;

-- A conversation without a schema, removed and started again under its id with one: its turns
-- are held to the new schema from the first (a backend remembers schema-less conversations only
-- to skip a read, never to skip the check).
SELECT turn_index FROM cscp.conversation_start('js', 'again', 'agent', '{"from": "agent", "role": "agent", "content": 1, "ts": 0}');
SELECT outcome FROM cscp.conversation_exchange('js', 'again', '{"from": "maria", "role": "user", "content": "free text", "ts": 1}');
RESET ROLE;
DELETE FROM cscp.turn WHERE tenant_id = 'js' AND conversation_id = 'again';
DELETE FROM cscp.event WHERE tenant_id = 'js' AND conversation_id = 'again';
DELETE FROM cscp.conversation WHERE tenant_id = 'js' AND conversation_id = 'again';
SET ROLE js_app;
SELECT turn_index FROM cscp.conversation_start('js', 'again', 'agent', '{"from": "agent", "role": "agent", "content": 1, "ts": 0}',
                                               '{"type": "integer"}');
SELECT try($$SELECT cscp.conversation_exchange('js', 'again', '{"from": "maria", "role": "user", "content": "free text", "ts": 1}')$$) AS stale;
SELECT outcome FROM cscp.conversation_exchange('js', 'again', '{"from": "maria", "role": "user", "content": 2, "ts": 1}');
SELECT try($$SELECT cscp.conversation_exchange('js', 'again', '{"from": "maria", "role": "user", "content": "more text", "ts": 2}')$$) AS after;
SELECT turn_index, content FROM cscp.conversation_turns('js', 'again');

-- Patterns that need backtracking: refused where the schema is declared, with the path of the
-- keyword, through conversation_start, a direct INSERT and jsonschema_check; nothing written.
SELECT label, try(format($$SELECT cscp.conversation_start('js', 'p1', 'agent',
                             '{"from": "agent", "role": "agent", "content": {}, "ts": 0}', %L)$$, schema))
  FROM (VALUES
    ('back-reference',     '{"properties": {"name": {"type": "string", "pattern": "^((.+)\\2)+$"}}}'::jsonb),
    ('back-reference deep', '{"items": {"allOf": [true, {"properties": {"x y": {"pattern": "(a)\\1"}}}]}}'),
    ('lookahead',          '{"properties": {"code": {"pattern": "^(?=.*[0-9])[a-z0-9]+$"}}}'),
    ('negative lookahead', '{"pattern": "^(?!admin)"}'),
    ('lookbehind',         '{"anyOf": [{"pattern": "(?<=a)b"}]}'),
    ('too many states',    '{"not": {"pattern": "^[a-z]{1,250}$"}}'),
    ('does not compile',   '{"pattern": "(unclosed"}')
  ) AS t(label, schema);
SELECT try($$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id, schema)
             VALUES ('js', 'p2', 'agent', '{"properties": {"a": {"pattern": "(x+)\\1y"}}}')$$) AS direct_insert;
SELECT count(*) AS conversations FROM cscp.conversation WHERE tenant_id = 'js';
SELECT try($$SELECT cscp.jsonschema_check('{"items": {"pattern": "(?<!x)y"}}')$$) AS check_only;
-- Patterns the DFA matches in one pass are accepted and work.
SELECT cscp.jsonschema_validate('{"pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"}',
                                '"123e4567-e89b-12d3-a456-426614174000"') AS uuid,
       cscp.jsonschema_validate('{"pattern": "^(\\w+\\s?)*$"}', to_jsonb(repeat('word ', 100000) || '!')) AS nested_star;

-- A schema is bounded: at most 64 kB and 32 levels deep; a large "required" is checked for
-- duplicates by sorting.
SELECT try(format('SELECT cscp.jsonschema_check(%L)',
                  jsonb_build_object('enum', (SELECT jsonb_agg(repeat('x', 20) || i) FROM generate_series(1, 5000) i))))
       AS too_large;
SELECT try(format('SELECT cscp.jsonschema_check(%L)',
                  repeat('{"not": ', 33) || '{}' || repeat('}', 33))) AS too_deep;
SELECT try(format('SELECT cscp.jsonschema_check(%L)',
                  jsonb_build_object('required', (SELECT jsonb_agg('p' || (i % 4000)) FROM generate_series(1, 4001) i))))
       AS duplicate_required;
RESET ROLE;

RESET cscp.tenant_id;
RESET cscp.clock;
DROP TABLE public.colliding;
DELETE FROM cscp.turn WHERE tenant_id = 'js';
DELETE FROM cscp.event WHERE tenant_id = 'js';
DELETE FROM cscp.conversation WHERE tenant_id = 'js';
DROP OWNED BY js_app;
DROP ROLE js_app;
