\i sql/include/helpers.sql
-- Validation cost is bounded by the size of the value (src/shared/jsonschema.c): each pattern is compiled
-- once per validation whatever their number, an enum is searched by bisection, and every
-- validation has a work budget that grows with the value's size; a validation that would spend
-- more is refused with 54000 instead of holding the conversation for minutes.  Each case below is
-- a turn of about 1 MB against one of the costliest schemas the supported subset allows, through
-- the API and by direct SQL as the application role; the backend's CPU time for it (user +
-- system, from /proc, in 10 ms ticks) stays under 1 s.
SET timezone = 'UTC';
SET cscp.clock = '2026-05-01 09:00:00+00';
CREATE ROLE jc_app;
SELECT cscp.grant_app('jc_app', ARRAY['jc']);

-- The backend's CPU time so far, in milliseconds.
CREATE FUNCTION public.backend_cpu_ms() RETURNS bigint LANGUAGE sql AS $$
    SELECT (split_part(s, ' ', 14)::bigint + split_part(s, ' ', 15)::bigint) * 10
      FROM pg_read_file('/proc/' || pg_backend_pid() || '/stat') s
$$;
-- Run sql; its outcome as try() gives it, and whether it took under 1 s of this backend's CPU.
CREATE FUNCTION public.within_a_second(sql text, OUT outcome text, OUT under_1s boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    t0 bigint := public.backend_cpu_ms();
BEGIN
    outcome := public.try(sql);
    under_1s := public.backend_cpu_ms() - t0 < 1000;
END
$$;
GRANT EXECUTE ON FUNCTION public.within_a_second(text) TO jc_app;

-- The schemas and contents, each content just under the 1 MB limit of a turn.
CREATE TABLE public.jc_case (name text PRIMARY KEY, schema jsonb, content jsonb, first jsonb);
INSERT INTO public.jc_case
-- 200 distinct patterns (PostgreSQL's regex cache holds 32) applied to each of 150,000 strings.
SELECT 'patterns_200',
       jsonb_build_object('type', 'array', 'items', jsonb_build_object('allOf',
           (SELECT jsonb_agg(jsonb_build_object('pattern', 'x' || i || '|b')) FROM generate_series(1, 200) i))),
       (SELECT jsonb_agg('b'::text) FROM generate_series(1, 200000))
UNION ALL
-- 40 distinct patterns on a 100 kB turn (the issue's reproduction: 25 s of CPU before).
SELECT 'patterns_40_100kB',
       jsonb_build_object('type', 'array', 'items', jsonb_build_object('allOf',
           (SELECT jsonb_agg(jsonb_build_object('pattern', 'x' || i || '|b')) FROM generate_series(1, 40) i))),
       (SELECT jsonb_agg('b'::text) FROM generate_series(1, 20000))
UNION ALL
-- A pattern whose automaton has about 250 states (its DFA misses its cache at every
-- character) on one string of 1,000,000 characters.
SELECT 'pattern_states',
       '{"type": "string", "pattern": "[ab]*a[ab]{250}c"}',
       to_jsonb((SELECT string_agg(CASE WHEN (i::bigint * 2654435761 % 4294967296) >> 20 & 1 = 1 THEN 'a' ELSE 'b' END, '')
                   FROM generate_series(1, 1000000) i))
UNION ALL
-- 1,000 schemas applied to each of 100,000 numbers (allOf: every one is tried).
SELECT 'allof_1000',
       jsonb_build_object('items', jsonb_build_object('allOf',
           (SELECT jsonb_agg(jsonb_build_object('minimum', -i)) FROM generate_series(1, 1000) i))),
       (SELECT jsonb_agg(i % 10) FROM generate_series(1, 85000) i)
UNION ALL
-- Nested combinators: 40 x 40 schemas applying to each element of 2,000 arrays of 50 numbers.
SELECT 'nested_allof',
       jsonb_build_object('items', jsonb_build_object('allOf',
           (SELECT jsonb_agg(jsonb_build_object('items', jsonb_build_object('allOf',
                (SELECT jsonb_agg(jsonb_build_object('maximum', 100 + j)) FROM generate_series(1, 40) j))))
              FROM generate_series(1, 40) i))),
       (SELECT jsonb_agg((SELECT jsonb_agg(k) FROM generate_series(1, 50) k)) FROM generate_series(1, 1700))
UNION ALL
-- anyOf whose last alternative alone matches, on 100,000 strings.
SELECT 'anyof_none',
       jsonb_build_object('items', jsonb_build_object('anyOf',
           (SELECT jsonb_agg(jsonb_build_object('maxLength', 0, 'minLength', i)) FROM generate_series(1, 1000) i)
           || '[{"type": "string"}]'),
           'maxItems', 1000000),
       (SELECT jsonb_agg('ab'::text) FROM generate_series(1, 100000))
UNION ALL
-- An enum of 4,000 strings searched for each of 100,000 strings.
SELECT 'enum_4000',
       jsonb_build_object('items', jsonb_build_object('enum',
           (SELECT jsonb_agg('v' || i) FROM generate_series(1, 4000) i))),
       (SELECT jsonb_agg('v' || (i % 3999 + 1)) FROM generate_series(1, 100000) i)
UNION ALL
-- uniqueItems at two levels, inside anyOf alternatives: 100 arrays of 1,000 distinct strings.
SELECT 'unique_nested',
       jsonb_build_object('uniqueItems', true, 'items', jsonb_build_object('allOf',
           (SELECT jsonb_agg(jsonb_build_object('uniqueItems', true, 'minItems', i)) FROM generate_series(1, 20) i))),
       (SELECT jsonb_agg((SELECT jsonb_agg(j || '-' || i) FROM generate_series(1, 1000) j)) FROM generate_series(1, 100) i)
UNION ALL
-- 1,000 additional properties of 50,000 members.
SELECT 'members_1000',
       jsonb_build_object('additionalProperties', jsonb_build_object('allOf',
           (SELECT jsonb_agg(jsonb_build_object('type', 'integer', 'minimum', -i)) FROM generate_series(1, 1000) i))),
       (SELECT jsonb_object_agg('k' || i, i) FROM generate_series(1, 40000) i);

UPDATE public.jc_case SET first = CASE name WHEN 'pattern_states' THEN to_jsonb('a' || repeat('b', 250) || 'c')
                            WHEN 'members_1000' THEN '{}' ELSE '[]' END;
SELECT name, pg_column_size(schema) <= 65536 AS schema_fits,
       pg_column_size(content::text::jsonb) BETWEEN 90000 AND 1048576 AS content_size_ok
  FROM public.jc_case ORDER BY name;
GRANT SELECT ON public.jc_case TO jc_app;
CHECKPOINT;

-- Each schema declared (accepted), then each content validated, sent through the API and inserted
-- by direct SQL as the application role.
SET cscp.tenant_id = 'jc';
SET ROLE jc_app;
SELECT count(*) AS started
  FROM public.jc_case, cscp.conversation_start('jc', name, 'agent',
        jsonb_build_object('from', 'agent', 'role', 'agent', 'content', first, 'ts', 0), schema);
SELECT name, w.*
  FROM public.jc_case,
       LATERAL public.within_a_second(format('SELECT cscp.jsonschema_validate(%L, %L)', schema, content)) w
 ORDER BY name;
SELECT name, w.*
  FROM public.jc_case,
       LATERAL public.within_a_second(format($$SELECT cscp.conversation_exchange('jc', %L, %L)$$, name,
        jsonb_build_object('from', 'maria', 'role', 'user', 'content', content, 'ts', 1))) w
 ORDER BY name;
SELECT name, w.*
  FROM public.jc_case,
       LATERAL public.within_a_second(format($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts)
                    VALUES ('jc', %L, 'user', 'maria', %L, 2)$$, name, content)) w
 ORDER BY name;
-- A refused turn wrote nothing: each conversation holds its first turn, and the valid ones more.
SELECT c.conversation_id, count(*) AS turns
  FROM cscp.turn t JOIN cscp.conversation c USING (tenant_id, conversation_id)
 WHERE t.tenant_id = 'jc' GROUP BY 1 ORDER BY 1;
RESET ROLE;

-- The same validation gives the same answer every time: work is counted, not timed.
SELECT public.try(format('SELECT cscp.jsonschema_validate(%L, %L)', schema, content)) AS first_time,
       public.try(format('SELECT cscp.jsonschema_validate(%L, %L)', schema, content)) AS again
  FROM public.jc_case WHERE name = 'patterns_40_100kB';
-- Small values keep their exact answers: many patterns, the first failing one reported.
SELECT cscp.jsonschema_validate(jsonb_build_object('items', jsonb_build_object('allOf',
           (SELECT jsonb_agg(jsonb_build_object('pattern', '^(x' || i || '|b)$')) FROM generate_series(1, 100) i))),
       '["b", "b", "c"]') AS third_fails,
       cscp.jsonschema_validate(jsonb_build_object('enum', (SELECT jsonb_agg(i) FROM generate_series(1, 500) i)),
       '250.0') AS in_enum,
       cscp.jsonschema_validate(jsonb_build_object('enum', (SELECT jsonb_agg(i) FROM generate_series(1, 500) i)),
       '501') AS not_in_enum,
       cscp.jsonschema_validate('{"enum": [{"a": [1, 2]}, "x", null, 2]}', '{"a": [1, 2.0]}') AS object_in_enum;

DROP TABLE public.jc_case;
DROP FUNCTION public.within_a_second(text);
DROP FUNCTION public.backend_cpu_ms();
RESET cscp.tenant_id;
RESET cscp.clock;
DELETE FROM cscp.turn WHERE tenant_id = 'jc';
DELETE FROM cscp.event WHERE tenant_id = 'jc';
DELETE FROM cscp.conversation WHERE tenant_id = 'jc';
DROP OWNED BY jc_app;
DROP ROLE jc_app;
