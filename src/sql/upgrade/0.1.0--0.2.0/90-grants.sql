-- Last step: what every step above created gets what an install of 0.2.0 gives it.
-- The PL/pgSQL functions (re)created above resolve names in pg_catalog whatever the caller's
-- search_path, as security.sql sets them (CREATE OR REPLACE FUNCTION drops the setting).
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'cscp'::regnamespace AND p.proconfig IS NULL
           AND (p.prolang = (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname = 'plpgsql')
                OR p.oid IN ('cscp._redact_slots(jsonb, text)'::regprocedure,
                             'cscp.evidence_verify(text, uuid)'::regprocedure))
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp', f);
    END LOOP;
END
$$;

-- Roles granted by 0.1.0 get what 0.2.0 grants them, new functions and tables included, exactly
-- as cscp.grant_app, cscp.grant_operator and cscp.grant_gateway would now.  The gateway's roles
-- are not recorded in cscp.tenant_binding: they are the roles that may execute its endpoints,
-- found before an application role's re-grant takes the endpoints from a role that is both.
-- A binding whose role was dropped (after DROP OWNED) is left as it is.
DO $$
DECLARE
    gateway name[] := ARRAY(
        SELECT DISTINCT r.rolname
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a, pg_catalog.pg_roles r
         WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname LIKE 'http\_%' AND p.prosecdef
           AND a.privilege_type = 'EXECUTE' AND r.oid = a.grantee AND a.grantee <> p.proowner
         ORDER BY 1);
    g name;
BEGIN
    PERFORM cscp._grant_app_privileges(b.role)
       FROM cscp.tenant_binding b JOIN pg_catalog.pg_roles r ON r.oid = b.role::oid
      WHERE b.kind = 'app' ORDER BY b.granted_at;
    PERFORM cscp._grant_operator_privileges(b.role)
       FROM cscp.tenant_binding b JOIN pg_catalog.pg_roles r ON r.oid = b.role::oid
      WHERE b.kind = 'operator' ORDER BY b.granted_at;
    FOREACH g IN ARRAY gateway LOOP
        PERFORM cscp.grant_gateway(g);
    END LOOP;
END
$$;

-- As at the end of security.sql: nothing of cscp's is PUBLIC's, what the steps created included.
REVOKE ALL ON ALL TABLES IN SCHEMA cscp FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA cscp FROM PUBLIC;
