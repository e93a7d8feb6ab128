-- generate.sql: the generated part of cscp_proxy's install script, written to stdout.
-- Run by proxy/generate.sh (psql -At, from the repository root) against a database where cscp
-- is installed: it reads cscp's functions, types and views from the catalog and how each
-- function is routed from proxy/api.tsv.  Fails when cscp has an API function api.tsv does not
-- classify.  Names and types come from the catalog and are quoted with format's %I and %L.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE TEMP TABLE api_line (line text);
\copy api_line FROM 'proxy/api.tsv' WITH (FORMAT csv, DELIMITER E'\x01', QUOTE E'\x02')
CREATE TEMP TABLE api AS
SELECT f[1] AS name, f[2] AS kind, string_to_array(nullif(f[3], ''), ' ') AS route, f[4] AS merge_order
  FROM (SELECT string_to_array(line, E'\t') AS f FROM api_line
         WHERE line !~ '^\s*(#|$)') s;

-- cscp's API: its functions but the internal ones and the triggers.
CREATE TEMP VIEW shard_api AS
SELECT p.oid, p.proname::text AS name, p.proretset AS retset, p.prorettype,
       pg_get_function_arguments(p.oid) AS args_full,
       pg_get_function_identity_arguments(p.oid) AS args_id,
       pg_get_function_result(p.oid) AS result,
       p.pronargs AS nargs,
       ARRAY(SELECT n FROM unnest(p.proargnames, coalesce(p.proargmodes, array_fill('i'::"char", ARRAY[p.pronargs]))) u(n, m)
              WHERE m IN ('i', 'b', 'v')) AS in_names,
       EXISTS (SELECT FROM unnest(p.proargnames, p.proargmodes) a(n, m), unnest(p.proargnames, p.proargmodes) b(n, m)
                WHERE a.m IN ('i', 'b') AND b.m IN ('o', 't') AND a.n = b.n) AS name_clash
  FROM pg_proc p
 WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname !~ '^_'
   AND p.prorettype <> 'trigger'::regtype;

DO $$
DECLARE
    missing text;
    kinds text;
BEGIN
    SELECT string_agg(s.name, ', ' ORDER BY s.name) INTO missing
      FROM shard_api s WHERE NOT EXISTS (SELECT FROM api a WHERE a.name = s.name);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'cscp functions not classified in proxy/api.tsv: %', missing
            USING HINT = 'Add a line per function with its routing kind, then run proxy/generate.sh.';
    END IF;
    SELECT string_agg(DISTINCT a.kind, ', ') INTO kinds FROM api a
     WHERE a.kind NOT IN ('conversation', 'subject', 'session', 'key_session', 'id', 'id_or_all',
                          'session_or_all', 'tenant', 'any', 'all', 'sum', 'rows', 'subject_session',
                          'local', 'admin');
    IF kinds IS NOT NULL THEN
        RAISE EXCEPTION 'unknown routing kinds in proxy/api.tsv: %', kinds;
    END IF;
    SELECT string_agg(a.name, ', ') INTO missing FROM api a JOIN shard_api s ON s.name = a.name
     WHERE a.kind = 'session_or_all'
       AND (a.merge_order IS NULL OR NOT s.retset OR NOT 'row_limit' = ANY (s.in_names));
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'session_or_all functions without a merge order, rows or row_limit in proxy/api.tsv: %', missing;
    END IF;
END
$$;

-- The routing expression of a kind (PL/Proxy RUN ON ...).  A NULL key goes to partition 0,
-- whose cscp refuses it as it would on one node (22023).
CREATE FUNCTION pg_temp.run_on(kind text, route text[]) RETURNS text LANGUAGE sql AS $$
    SELECT CASE kind
        WHEN 'conversation' THEN format('coalesce(cscp.routing_conversation_hash(%I), 0)', route[1])
        WHEN 'subject' THEN format('coalesce(cscp.routing_key_hash(%I, %I), 0)', route[1], route[2])
        WHEN 'session' THEN format('coalesce(cscp.routing_key_hash(%I, %I), 0)', route[1], route[2])
        WHEN 'session_or_all' THEN format('coalesce(cscp.routing_key_hash(%I, %I), 0)', route[1], route[2])
        WHEN 'tenant' THEN format('coalesce(cscp.routing_key_hash(%I, %L), 0)', route[1], '')
        WHEN 'key_session' THEN format('coalesce(cscp.routing_key_hash(cscp.http_key_tenant(%I), %I), 0)',
                                       route[1], route[2])
        WHEN 'id' THEN format('coalesce(cscp.routing_hash(%I), 0)', route[1])
        WHEN 'id_or_all' THEN format('coalesce(cscp.routing_hash(%I), 0)', route[1])
        WHEN 'any' THEN 'ANY'
        ELSE 'ALL' END
$$;

-- The call on the shard: the first argument passes through cscp.proxy_session, which sets
-- the caller's tenant (and clock) before the function runs; without arguments, an InitPlan
-- gates the call.
CREATE FUNCTION pg_temp.remote(name text, in_names text[]) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN cardinality(in_names) = 0
        THEN format('SELECT * FROM cscp.%I() WHERE (SELECT cscp.proxy_session(_tenant, _clock, true))', name)
        ELSE format('SELECT * FROM cscp.%I(cscp.proxy_session(_tenant, _clock, %I)%s)', name, in_names[1],
                    (SELECT string_agg(', ' || quote_ident(n), '' ORDER BY i)
                       FROM unnest(in_names) WITH ORDINALITY u(n, i) WHERE i > 1))
        END
$$;

-- Positional arguments $1.. for the wrappers, after the caller's tenant and clock.
CREATE FUNCTION pg_temp.pass(nargs int) RETURNS text LANGUAGE sql AS $$
    SELECT 'cscp_proxy.tenant(), cscp_proxy.clock()' ||
           coalesce((SELECT string_agg(', $' || i, '' ORDER BY i) FROM generate_series(1, nargs) i), '')
$$;

\pset format unaligned
\pset tuples_only on

\echo ''
\echo '-- Types: cscp''s enums, and the row types its functions take or return.'
SELECT format('CREATE TYPE cscp.%I AS ENUM (%s);', t.typname,
              (SELECT string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder)
                 FROM pg_enum e WHERE e.enumtypid = t.oid))
  FROM pg_type t
 WHERE t.typnamespace = 'cscp'::regnamespace AND t.typtype = 'e'
 ORDER BY t.typname;

WITH used AS (
    SELECT DISTINCT t AS typ
      FROM shard_api s JOIN pg_proc p ON p.oid = s.oid
      JOIN api a ON a.name = s.name AND a.kind NOT IN ('local', 'admin'),
           unnest(p.proallargtypes || p.proargtypes::oid[] || p.prorettype) t
)
SELECT format('CREATE TYPE cscp.%I AS (%s);', c.relname,
              (SELECT string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
                 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped))
  FROM used JOIN pg_type t ON t.oid = used.typ JOIN pg_class c ON c.oid = t.typrelid
 WHERE t.typnamespace = 'cscp'::regnamespace AND c.relkind IN ('r', 'c')
 ORDER BY c.relname;

\echo ''
\echo '-- Views: the rows of every shard.'
SELECT format(E'CREATE TYPE cscp_proxy.%1$I AS (%2$s);\n'
              'CREATE FUNCTION cscp_proxy.%1$I(_tenant text, _clock text) RETURNS SETOF cscp_proxy.%1$I\n'
              'LANGUAGE plproxy AS $f$\n'
              '    CLUSTER ''cscp'';\n'
              '    RUN ON ALL;\n'
              '    SELECT * FROM cscp.%1$I WHERE (SELECT cscp.proxy_session(_tenant, _clock, true));\n'
              '$f$;\n'
              'CREATE VIEW cscp.%1$I AS SELECT * FROM cscp_proxy.%1$I(cscp_proxy.tenant(), cscp_proxy.clock());\n'
              'COMMENT ON VIEW cscp.%1$I IS %3$L;',
              c.relname,
              (SELECT string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
                 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
              'cscp.' || c.relname || ' of every shard: ' || coalesce(obj_description(c.oid, 'pg_class'), ''))
  FROM pg_class c
 WHERE c.relnamespace = 'cscp'::regnamespace AND c.relkind = 'v'
   AND c.relname !~ '^_'  -- internal views are nobody's: operators read through the audited ones
 ORDER BY c.relname;

\echo ''
\echo '-- Functions: cscp_proxy.<name> runs on the shards (PL/Proxy); cscp.<name> passes the caller''s'
\echo '-- settings to it.'
SELECT format(E'\n-- %s: %s\n', s.name, a.kind || coalesce(' on ' || array_to_string(a.route, ', '), '')) ||
       -- The PL/Proxy function.
       format(E'CREATE FUNCTION cscp_proxy.%I(_tenant text, _clock text%s) RETURNS %s\n'
              'LANGUAGE plproxy AS $f$\n'
              '    CLUSTER ''cscp'';\n'
              '    RUN ON %s;\n'
              '    %s;\n'
              '$f$;\n',
              s.name, coalesce(nullif(', ' || s.args_id, ', '), ''),
              CASE WHEN a.kind IN ('all', 'sum') AND NOT s.retset THEN 'SETOF ' || s.result ELSE s.result END,
              pg_temp.run_on(a.kind, a.route), pg_temp.remote(s.name, s.in_names)) ||
       -- For id_or_all and session_or_all, its twin on every shard.
       CASE WHEN a.kind IN ('id_or_all', 'session_or_all') THEN
           format(E'CREATE FUNCTION cscp_proxy.%I(_tenant text, _clock text%s) RETURNS %s\n'
                  'LANGUAGE plproxy AS $f$\n'
                  '    CLUSTER ''cscp'';\n'
                  '    RUN ON ALL;\n'
                  '    %s;\n'
                  '$f$;\n',
                  s.name || '_all', coalesce(nullif(', ' || s.args_id, ', '), ''), s.result,
                  pg_temp.remote(s.name, s.in_names))
       ELSE '' END ||
       -- The wrapper, under the API's own name and signature.
       format(E'CREATE FUNCTION cscp.%I(%s) RETURNS %s\n', s.name, s.args_full, s.result) ||
       CASE
           WHEN a.kind = 'sum' THEN
               format(E'LANGUAGE sql VOLATILE AS $f$\n'
                      '    SELECT coalesce(jsonb_object_agg(k, total), ''{}'')\n'
                      '      FROM (SELECT e.key AS k, sum((e.value #>> ''{}'')::numeric) AS total\n'
                      '              FROM cscp_proxy.%I(%s) r, jsonb_each(r) e GROUP BY e.key) t\n'
                      '$f$;\n', s.name, pg_temp.pass(s.nargs))
           WHEN a.kind = 'all' AND s.prorettype = 'void'::regtype THEN
               format(E'LANGUAGE sql VOLATILE AS $f$\n'
                      '    SELECT count(*) FROM cscp_proxy.%I(%s)\n'
                      '$f$;\n', s.name, pg_temp.pass(s.nargs))
           WHEN a.kind = 'all' THEN
               format(E'LANGUAGE sql VOLATILE AS $f$\n'
                      '    SELECT r FROM cscp_proxy.%I(%s) r ORDER BY r::text LIMIT 1\n'
                      '$f$;\n', s.name, pg_temp.pass(s.nargs))
           WHEN a.kind = 'id_or_all' THEN
               format(E'LANGUAGE sql VOLATILE AS $f$\n'
                      '    SELECT * FROM cscp_proxy.%1$I(%2$s) WHERE $%3$s IS NOT NULL\n'
                      '    UNION ALL\n'
                      '    SELECT * FROM cscp_proxy.%4$I(%2$s) WHERE $%3$s IS NULL\n'
                      '$f$;\n', s.name, pg_temp.pass(s.nargs),
                      array_position(s.in_names, a.route[1]), s.name || '_all')
           -- The rows of every shard merged in order and cut to row_limit; a negative row_limit
           -- is left to the shards, which refuse it as one node does.
           WHEN a.kind = 'session_or_all' THEN
               format(E'LANGUAGE sql VOLATILE AS $f$\n'
                      '    SELECT * FROM cscp_proxy.%1$I(%2$s) WHERE $%3$s IS NOT NULL\n'
                      '    UNION ALL\n'
                      '    (SELECT * FROM cscp_proxy.%4$I(%2$s) WHERE $%3$s IS NULL\n'
                      '      ORDER BY %5$s LIMIT CASE WHEN $%6$s >= 0 THEN $%6$s END)\n'
                      '$f$;\n', s.name, pg_temp.pass(s.nargs),
                      array_position(s.in_names, a.route[2]), s.name || '_all',
                      a.merge_order, array_position(s.in_names, 'row_limit'))
           WHEN s.name_clash THEN
               format(E'LANGUAGE sql VOLATILE AS $f$\n'
                      '    SELECT * FROM cscp_proxy.%I(%s)\n'
                      '$f$;\n', s.name, pg_temp.pass(s.nargs))
           WHEN s.retset THEN
               format(E'LANGUAGE plpgsql VOLATILE AS $f$\n'
                      'BEGIN\n'
                      '    RETURN QUERY SELECT * FROM cscp_proxy.%I(%s);\n'
                      'END\n'
                      '$f$;\n', s.name, pg_temp.pass(s.nargs))
           WHEN s.prorettype = 'void'::regtype THEN
               format(E'LANGUAGE plpgsql VOLATILE AS $f$\n'
                      'BEGIN\n'
                      '    PERFORM cscp_proxy.%I(%s);\n'
                      'END\n'
                      '$f$;\n', s.name, pg_temp.pass(s.nargs))
           ELSE
               format(E'LANGUAGE plpgsql VOLATILE AS $f$\n'
                      'BEGIN\n'
                      '    RETURN cscp_proxy.%I(%s);\n'
                      'END\n'
                      '$f$;\n', s.name, pg_temp.pass(s.nargs))
       END ||
       format('COMMENT ON FUNCTION cscp.%I(%s) IS %L;', s.name, s.args_id,
              coalesce(obj_description(s.oid, 'pg_proc'), s.name) || ' (through the proxy: ' || a.kind || ')')
  FROM shard_api s JOIN api a ON a.name = s.name
 WHERE a.kind NOT IN ('local', 'admin', 'subject_session')
 ORDER BY s.name;

\echo ''
\echo '-- Nothing of cscp_proxy''s is PUBLIC''s; cscp_proxy.grant_app hands it out.'
\echo 'REVOKE ALL ON ALL FUNCTIONS IN SCHEMA cscp, cscp_proxy FROM PUBLIC;'
\echo 'REVOKE ALL ON ALL TABLES IN SCHEMA cscp FROM PUBLIC;'
