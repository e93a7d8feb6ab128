-- The upgrade test (test/scripts/upgrade.sh), after the update: every application role bound by
-- cscp.grant_app reads, with cscp.tenant_id naming one of its tenants, every row of that tenant
-- in every table it may read.  Prints "role tenant table: visible of stored" for each, and
-- "TENANT MISMATCH" lines when a role sees fewer (or more) rows than the tenant holds.
\set ON_ERROR_STOP 1
\pset format unaligned
\pset tuples_only on
CREATE TEMP TABLE tenant_expected AS
SELECT b.role::text AS role, t.tenant_id, c.oid::regclass::text AS tbl, 0::bigint AS stored
  FROM cscp.tenant_binding b
 CROSS JOIN (SELECT DISTINCT x.tenant_id FROM cscp.context x
             UNION SELECT y.tenant_id FROM cscp.document y
             UNION SELECT z.tenant_id FROM cscp.conversation z) t
 CROSS JOIN pg_catalog.pg_class c
 WHERE b.kind = 'app' AND (b.tenants IS NULL OR t.tenant_id = ANY (b.tenants))
   AND c.relnamespace = 'cscp'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
   AND EXISTS (SELECT FROM pg_catalog.pg_attribute a
                WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
   AND pg_catalog.has_table_privilege(b.role::oid, c.oid, 'SELECT');
GRANT SELECT ON tenant_expected TO PUBLIC;
SELECT pg_catalog.format('UPDATE tenant_expected SET stored = (SELECT pg_catalog.count(*) FROM %s WHERE tenant_id OPERATOR(pg_catalog.=) %L) WHERE tbl = %L AND tenant_id = %L',
                         e.tbl, e.tenant_id, e.tbl, e.tenant_id)
  FROM (SELECT DISTINCT tbl, tenant_id FROM tenant_expected) e
\gexec
SELECT s
  FROM (SELECT e.role, e.tenant_id, 0 AS o, e.tbl,
               pg_catalog.format('SET ROLE %s', e.role) AS s
          FROM (SELECT DISTINCT role, tenant_id, '' AS tbl FROM tenant_expected) e
        UNION ALL
        SELECT e.role, e.tenant_id, 1, e.tbl,
               pg_catalog.format('SET cscp.tenant_id = %L', e.tenant_id)
          FROM (SELECT DISTINCT role, tenant_id, '' AS tbl FROM tenant_expected) e
        UNION ALL
        SELECT e.role, e.tenant_id, 2, e.tbl,
               pg_catalog.format('SELECT CASE WHEN n = %s THEN %L ELSE %L END || n || '' of %s'' FROM (SELECT pg_catalog.count(*) AS n FROM %s WHERE tenant_id OPERATOR(pg_catalog.=) %L) v',
                                 e.stored, e.role || ' ' || e.tenant_id || ' ' || e.tbl || ': ',
                                 'TENANT MISMATCH ' || e.role || ' ' || e.tenant_id || ' ' || e.tbl || ': ',
                                 e.stored, e.tbl, e.tenant_id)
          FROM tenant_expected e
        UNION ALL
        SELECT e.role, e.tenant_id, 3, e.tbl, 'RESET ROLE'
          FROM (SELECT DISTINCT role, tenant_id, '' AS tbl FROM tenant_expected) e) q
 ORDER BY q.role, q.tenant_id, q.o, q.tbl
\gexec
RESET cscp.tenant_id;
SELECT 'tenant checks: ' || pg_catalog.count(*) || ' (role, tenant, table), '
       || pg_catalog.count(*) FILTER (WHERE stored > 0) || ' of them with rows'
  FROM tenant_expected;
