-- The demo's checks, included (\ir) by each part with ECHO off: every outcome the story tells is
-- checked, a refused step by its SQLSTATE, and the demo stops at the first one that differs.
-- Each check is recorded in demo_check (the throwaway cluster's postgres database), from which
-- `make demo` prints its closing summary.
\set ECHO none
\set ON_ERROR_STOP 1
\set SHOW_CONTEXT never
\pset footer off
RESET ROLE;
RESET cscp.tenant_id;
SET client_min_messages = warning;
CREATE TABLE IF NOT EXISTS public.demo_check (n serial PRIMARY KEY, what text NOT NULL);
GRANT INSERT ON public.demo_check TO PUBLIC;
GRANT USAGE ON SEQUENCE public.demo_check_n_seq TO PUBLIC;
RESET client_min_messages;
-- expect(got, want, what): records the check, or stops the demo when got is not want.
CREATE FUNCTION pg_temp.expect(got text, want text, what text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    IF got IS DISTINCT FROM want THEN
        RAISE EXCEPTION 'demo check failed: %: got %, expected %', what,
                        coalesce(got, 'NULL'), coalesce(want, 'NULL');
    END IF;
    INSERT INTO public.demo_check (what) VALUES (what);
    RETURN 'ok';
END
$$;
-- check(ok, what): the same for a condition; 'ok' when it holds.
CREATE FUNCTION pg_temp.check(ok boolean, what text) RETURNS text
LANGUAGE sql AS $$
    SELECT pg_temp.expect(ok::text, 'true', what)
$$;
\set ECHO queries
