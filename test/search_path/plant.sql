-- Shadowing objects a tenant plants for cscp (issue 39, finding 1), run as a superuser by
-- test/pgtap/search_path.sql and test/scripts/worker-test.sh.  Role sp_tenant, an application
-- role of tenant sp-planter with CREATE on schema public (as every role has in a database created
-- before PostgreSQL 15), creates, in public and in its session's pg_temp:
--   * an operator for every operator name cscp uses and every type it compares (text, uuid, int2,
--     int4, int8, numeric, float8, boolean, timestamptz, interval, date, name, bytea, tid, jsonb,
--     json, tsvector, tsquery, their arrays, every enum and domain of cscp's), of the exact types,
--     so that it beats pg_catalog's polymorphic one (anyenum, anyarray) even with pg_catalog
--     first on the search_path, and pg_catalog's own one with pg_catalog last;
--   * functions and aggregates of the exact argument types for the built-ins cscp calls (now,
--     jsonb_build_object, jsonb_typeof, count(*), min, unnest, ...);
--   * domains named as the built-in types (text, jsonb, uuid, ...), whose check runs the trap.
-- Each runs public.sp_hit(what) first and then does what the built-in does, so that a workload
-- that uses one goes on unchanged.  While sp.armed is on, sp_hit counts the hit in sequence
-- public.sp_hits (which no rollback undoes), logs it with the call stack in public.sp_log, and,
-- called by a superuser, makes sp_tenant a superuser: the attack of the finding.  The test then
-- asserts that the sequence was never used and that sp_tenant is no superuser.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) 'sp_tenant') THEN
        CREATE ROLE sp_tenant;
    END IF;
END
$$;
SELECT cscp.grant_app('sp_tenant', ARRAY['sp-planter']);
GRANT CREATE, USAGE ON SCHEMA public TO sp_tenant;
CREATE SEQUENCE public.sp_hits;
GRANT USAGE, SELECT ON SEQUENCE public.sp_hits TO PUBLIC;
CREATE TABLE public.sp_log (what pg_catalog.text, by_role pg_catalog.name, stack pg_catalog.text);
GRANT INSERT, SELECT ON public.sp_log TO PUBLIC;

SET ROLE sp_tenant;
CREATE FUNCTION public.sp_hit(what pg_catalog.text) RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    stack text;
BEGIN
    IF current_setting('sp.armed', true) OPERATOR(pg_catalog.=) 'on' THEN
        PERFORM nextval('public.sp_hits');
        GET DIAGNOSTICS stack = PG_CONTEXT;
        INSERT INTO public.sp_log VALUES (what, current_user, stack);
        IF (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN
            ALTER ROLE sp_tenant SUPERUSER;
        END IF;
    END IF;
    RETURN true;
END
$$;
GRANT EXECUTE ON FUNCTION public.sp_hit(text) TO PUBLIC;

-- plant_operators(schema): every operator of ops over the pairs of types, where pg_catalog has one.
CREATE FUNCTION pg_temp.sp_plant(nsp text) RETURNS int
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    types text[] := ARRAY['text', 'uuid', 'int2', 'int4', 'int8', 'numeric', 'float8', 'bool',
                          'timestamptz', 'interval', 'date', 'name', 'bytea', 'tid', 'jsonb', 'json',
                          'tsvector', 'tsquery', 'text[]', 'uuid[]', 'int4[]', 'int8[]', 'jsonb[]'];
    ops text[] := ARRAY['=', '<>', '<', '<=', '>', '>=', '||', '->', '->>', '#>', '#>>', '@>', '<@',
                        '?', '?|', '?&', '-', '+', '*', '/', '&', '|', '~~', '!~~', '~', '~*', '@@',
                        '#-', '&&'];
    extra text[][] := ARRAY[['jsonb', 'text'], ['jsonb', 'int4'], ['jsonb', 'text[]'],
                            ['json', 'text'], ['json', 'int4'],
                            ['timestamptz', 'interval'], ['interval', 'int4'], ['interval', 'float8'],
                            ['int8', 'int4'], ['int4', 'int8'], ['numeric', 'int4'], ['int2', 'int4'],
                            ['text[]', 'text'], ['text', 'text[]'], ['uuid[]', 'uuid'],
                            ['tsvector', 'tsquery'], ['date', 'int4'], ['date', 'interval'],
                            ['text', 'name'], ['name', 'text']];
    pairs text[][] := '{}';
    l text;
    r text;
    op text;
    res text;
    n int := 0;
    fn text;
BEGIN
    types := types || ARRAY(SELECT 'cscp.' || t.typname FROM pg_type t
                             WHERE t.typnamespace OPERATOR(pg_catalog.=) 'cscp'::regnamespace
                               AND t.typtype OPERATOR(pg_catalog.=) ANY ('{e,d}'));
    FOREACH l IN ARRAY types LOOP
        pairs := pairs || ARRAY[[l, l]];
    END LOOP;
    pairs := pairs || extra;
    FOR i IN 1 .. array_length(pairs, 1) LOOP
        l := pairs[i][1];
        r := pairs[i][2];
        FOREACH op IN ARRAY ops LOOP
            BEGIN
                EXECUTE format('SELECT pg_catalog.pg_typeof(NULL::%s OPERATOR(pg_catalog.%s) NULL::%s)::text', l, op, r)
                   INTO res;
            EXCEPTION WHEN OTHERS THEN
                CONTINUE;
            END;
            n := n OPERATOR(pg_catalog.+) 1;
            fn := format('%I.sp_op_%s', nsp, n);
            EXECUTE format('CREATE FUNCTION %s(a %s, b %s) RETURNS %s LANGUAGE plpgsql '
                           'SET search_path = pg_catalog, pg_temp AS $f$ BEGIN '
                           'PERFORM public.sp_hit(%L); RETURN a OPERATOR(pg_catalog.%s) b; END $f$',
                           fn, l, r, res, format('%s.%s(%s, %s)', nsp, op, l, r), op);
            EXECUTE format('CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s)',
                           nsp, op, l, r, fn);
        END LOOP;
    END LOOP;
    RETURN n;
END
$$;

-- sp_plant_functions(schema): functions of the exact argument types for the built-ins.
CREATE FUNCTION pg_temp.sp_plant_functions(nsp text) RETURNS int
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
DECLARE
    sigs text[] := ARRAY[
        'now()', 'clock_timestamp()', 'statement_timestamp()', 'transaction_timestamp()',
        'lower(text)', 'upper(text)', 'length(text)', 'btrim(text)', 'md5(text)', 'left(text,int4)',
        'replace(text,text,text)', 'translate(text,text,text)', 'concat_ws(text,text,text)', 'chr(int4)',
        'format(text)', 'format(text,text)', 'hashtext(text)', 'octet_length(text)', 'encode(bytea,text)',
        'sha256(bytea)', 'convert_to(text,text)', 'textcat(text,text)', 'texteq(text,text)',
        'to_jsonb(text)', 'to_jsonb(text[])', 'to_jsonb(uuid)', 'to_jsonb(timestamptz)',
        'jsonb_typeof(jsonb)', 'jsonb_array_length(jsonb)', 'jsonb_strip_nulls(jsonb)',
        'jsonb_build_object(text,text)', 'jsonb_build_object(text,jsonb)', 'jsonb_build_object(text,uuid)',
        'jsonb_build_object(text,timestamptz)', 'jsonb_build_object(text,int4)', 'jsonb_build_object(text,bool)',
        'jsonb_build_object(text,text,text,text)', 'jsonb_build_object(text,uuid,text,text)',
        'jsonb_build_object(text,uuid,text,jsonb)', 'jsonb_build_object(text,uuid,text,timestamptz)',
        'jsonb_build_array(text,jsonb)', 'jsonb_set(jsonb,text[],jsonb)', 'jsonb_extract_path_text(jsonb,text[])',
        'array_append(text[],text)', 'array_length(text[],int4)', 'array_to_string(text[],text)',
        'cardinality(text[])', 'greatest(int4,int4)', 'abs(int4)', 'abs(int8)',
        'to_tsvector(regconfig,text)', 'to_tsvector(text)', 'plainto_tsquery(regconfig,text)',
        'websearch_to_tsquery(regconfig,text)', 'ts_rank(tsvector,tsquery)',
        'setweight(tsvector,"char")', 'jsonb_to_tsvector(regconfig,jsonb,jsonb)',
        'date_trunc(text,timestamptz)', 'date_part(text,timestamptz)', 'extract(text,timestamptz)',
        'gen_random_uuid()', 'pg_advisory_xact_lock(int8)', 'pg_advisory_xact_lock(int4,int4)',
        'current_setting(text)', 'current_setting(text,bool)', 'set_config(text,text,bool)',
        'string_to_array(text,text)', 'regexp_replace(text,text,text)', 'substr(text,int4)',
        'substr(text,int4,int4)', 'position(text,text)', 'strpos(text,text)', 'split_part(text,text,int4)',
        'make_interval(int4,int4,int4,int4,int4,int4,float8)', 'to_timestamp(float8)',
        'uuid_send(uuid)', 'digest(text,text)', 'row_to_json(record)'];
    sig text;
    fname text;
    args text[];
    res text;
    call text;
    n int := 0;
BEGIN
    FOREACH sig IN ARRAY sigs LOOP
        fname := split_part(sig, '(', 1);
        args := string_to_array(rtrim(split_part(sig, '(', 2), ')'), ',');
        call := format('pg_catalog.%I(%s)', fname,
                       coalesce((SELECT string_agg(format('$%s', i), ', ' ORDER BY i)
                                   FROM generate_subscripts(args, 1) i), ''));
        BEGIN
            EXECUTE format('SELECT pg_catalog.pg_typeof(pg_catalog.%I(%s))::text', fname,
                           coalesce((SELECT string_agg(format('NULL::%s', a), ', ')
                                       FROM unnest(args) a), ''))
               INTO res;
            EXECUTE format('CREATE FUNCTION %I.%I(%s) RETURNS %s LANGUAGE plpgsql '
                           'SET search_path = pg_catalog, pg_temp AS $f$ BEGIN '
                           'PERFORM public.sp_hit(%L); RETURN %s; END $f$',
                           nsp, fname, array_to_string(args, ', '), res, nsp || '.' || sig, call);
            n := n OPERATOR(pg_catalog.+) 1;
        EXCEPTION WHEN OTHERS THEN
            CONTINUE;
        END;
    END LOOP;
    -- set-returning ones
    EXECUTE format($q$CREATE FUNCTION %1$I.unnest(a text[]) RETURNS SETOF text LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $f$ BEGIN PERFORM public.sp_hit('%1$s.unnest(text[])');
        RETURN QUERY SELECT pg_catalog.unnest(a); END $f$$q$, nsp);
    EXECUTE format($q$CREATE FUNCTION %1$I.jsonb_array_elements_text(a jsonb) RETURNS SETOF text LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $f$ BEGIN PERFORM public.sp_hit('%1$s.jsonb_array_elements_text(jsonb)');
        RETURN QUERY SELECT pg_catalog.jsonb_array_elements_text(a); END $f$$q$, nsp);
    EXECUTE format($q$CREATE FUNCTION %1$I.jsonb_array_elements(a jsonb) RETURNS SETOF jsonb LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $f$ BEGIN PERFORM public.sp_hit('%1$s.jsonb_array_elements(jsonb)');
        RETURN QUERY SELECT pg_catalog.jsonb_array_elements(a); END $f$$q$, nsp);
    EXECUTE format($q$CREATE FUNCTION %1$I.jsonb_object_keys(a jsonb) RETURNS SETOF text LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $f$ BEGIN PERFORM public.sp_hit('%1$s.jsonb_object_keys(jsonb)');
        RETURN QUERY SELECT pg_catalog.jsonb_object_keys(a); END $f$$q$, nsp);
    EXECUTE format($q$CREATE FUNCTION %1$I.jsonb_each_text(a jsonb, OUT key text, OUT value text) RETURNS SETOF record
        LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$ BEGIN
        PERFORM public.sp_hit('%1$s.jsonb_each_text(jsonb)');
        RETURN QUERY SELECT e.key, e.value FROM pg_catalog.jsonb_each_text(a) e; END $f$$q$, nsp);
    EXECUTE format($q$CREATE FUNCTION %1$I.jsonb_each(a jsonb, OUT key text, OUT value jsonb) RETURNS SETOF record
        LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$ BEGIN
        PERFORM public.sp_hit('%1$s.jsonb_each(jsonb)');
        RETURN QUERY SELECT e.key, e.value FROM pg_catalog.jsonb_each(a) e; END $f$$q$, nsp);
    -- aggregates: count(*), and exact-type ones where pg_catalog's is polymorphic or generic
    EXECUTE format($q$CREATE FUNCTION %1$I.sp_agg_count(s int8) RETURNS int8 LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $f$ BEGIN PERFORM public.sp_hit('%1$s.count(*)');
        RETURN s OPERATOR(pg_catalog.+) 1; END $f$$q$, nsp);
    EXECUTE format('CREATE AGGREGATE %1$I.count(*) (SFUNC = %1$I.sp_agg_count, STYPE = int8, INITCOND = 0)', nsp);
    EXECUTE format($q$CREATE FUNCTION %1$I.sp_agg_jsonb(s jsonb, v jsonb) RETURNS jsonb LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $f$ BEGIN PERFORM public.sp_hit('%1$s.jsonb_agg(jsonb)');
        RETURN s OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_array(v); END $f$$q$, nsp);
    EXECUTE format($q$CREATE AGGREGATE %1$I.jsonb_agg(jsonb) (SFUNC = %1$I.sp_agg_jsonb, STYPE = jsonb, INITCOND = '[]')$q$, nsp);
    EXECUTE format($q$CREATE FUNCTION %1$I.sp_agg_min_text(s text, v text) RETURNS text LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $f$ BEGIN PERFORM public.sp_hit('%1$s.min(text)');
        RETURN pg_catalog.least(s, v); END $f$$q$, nsp);
    EXECUTE format('CREATE AGGREGATE %1$I.min(text) (SFUNC = %1$I.sp_agg_min_text, STYPE = text)', nsp);
    EXECUTE format('CREATE AGGREGATE %1$I.max(text) (SFUNC = %1$I.sp_agg_min_text, STYPE = text)', nsp);
    EXECUTE format($q$CREATE FUNCTION %1$I.sp_agg_sum(s int8, v int8) RETURNS int8 LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $f$ BEGIN PERFORM public.sp_hit('%1$s.sum(int8)');
        RETURN coalesce(s, 0) OPERATOR(pg_catalog.+) v; END $f$$q$, nsp);
    EXECUTE format('CREATE AGGREGATE %1$I.sum(int8) (SFUNC = %1$I.sp_agg_sum, STYPE = int8)', nsp);
    EXECUTE format($q$CREATE FUNCTION %1$I.sp_agg_sagg(s text, v text, d text) RETURNS text LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $f$ BEGIN PERFORM public.sp_hit('%1$s.string_agg(text, text)');
        RETURN CASE WHEN s IS NULL THEN v ELSE s OPERATOR(pg_catalog.||) d OPERATOR(pg_catalog.||) v END; END $f$$q$, nsp);
    EXECUTE format('CREATE AGGREGATE %1$I.string_agg(text, text) (SFUNC = %1$I.sp_agg_sagg, STYPE = text)', nsp);
    EXECUTE format($q$CREATE FUNCTION %1$I.sp_agg_oagg(s jsonb, k text, v jsonb) RETURNS jsonb LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $f$ BEGIN PERFORM public.sp_hit('%1$s.jsonb_object_agg(text, jsonb)');
        RETURN s OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(k, v); END $f$$q$, nsp);
    EXECUTE format($q$CREATE AGGREGATE %1$I.jsonb_object_agg(text, jsonb) (SFUNC = %1$I.sp_agg_oagg, STYPE = jsonb, INITCOND = '{}')$q$, nsp);
    RETURN n;
END
$body$;

-- sp_plant_types(schema): domains named as the built-in types cscp names in casts.
CREATE FUNCTION pg_temp.sp_plant_types(nsp text) RETURNS int
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t text;
    n int := 0;
BEGIN
    FOREACH t IN ARRAY ARRAY['text', 'jsonb', 'json', 'uuid', 'int4', 'int8', 'int2', 'bool', 'timestamptz',
                             'name', 'tsquery', 'tsvector', 'regconfig', 'bytea', 'float8', 'date', 'oid'] LOOP
        EXECUTE format('CREATE DOMAIN %I.%I AS pg_catalog.%I CHECK (public.sp_hit(%L))', nsp, t, t,
                       format('%s.%s (a domain)', nsp, t));
        n := n OPERATOR(pg_catalog.+) 1;
    END LOOP;
    RETURN n;
END
$$;

SELECT pg_temp.sp_plant('public') > 100 AS planted_operators,
       pg_temp.sp_plant_functions('public') > 50 AS planted_functions;
SELECT pg_temp.sp_plant('pg_temp') > 100 AS planted_temp_operators,
       pg_temp.sp_plant_functions('pg_temp') > 50 AS planted_temp_functions;
SELECT pg_temp.sp_plant_types('public') AS planted_types, pg_temp.sp_plant_types('pg_temp') AS planted_temp_types;
RESET ROLE;
RESET client_min_messages;
