-- Helpers for the regression suite (the database has cscp loaded by pg_regress).
-- try(sql): 'ok', or the SQLSTATE, message and detail of the error sql raised (rolled back),
-- with random ids masked as <uuid>.
CREATE FUNCTION public.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ' ' || regexp_replace(SQLERRM || coalesce(nullif(' | ' || detail, ' | '), ''),
        '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'g');
END
$$;

-- A fresh context of tenant 't' moved along allowed edges into status st.
CREATE FUNCTION public.ctx_in(conv text, st cscp.context_status) RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    id uuid := (cscp.context_open('t', conv, 'actor')).context_id;
BEGIN
    IF st <> 'active' THEN
        PERFORM cscp.context_transition(id, st, 'setup');
    END IF;
    RETURN id;
END
$$;

-- A context with a known id (routed, so the trigger accepts it), for tests that show ids.
CREATE FUNCTION public.ctx_fixed(tenant text, conv text, st cscp.context_status DEFAULT 'active')
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    id uuid := (lpad(to_hex(hashtext(conv)), 8, '0') || '-0000-4000-8000-000000000001')::uuid;
BEGIN
    INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
    VALUES (tenant, id, conv, 'actor', cscp.now() + interval '30 minutes', interval '30 minutes');
    IF st <> 'active' THEN
        PERFORM cscp.context_transition(id, st, 'setup');
    END IF;
    RETURN id;
END
$$;

SELECT extname, extversion, extnamespace::regnamespace FROM pg_extension WHERE extname = 'cscp';
SELECT count(*) > 0 AS has_functions FROM pg_proc WHERE pronamespace = 'cscp'::regnamespace;
