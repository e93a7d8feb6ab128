-- Backup and restore: every table of cscp, its row count and a digest of its rows in a fixed
-- order; the dumped and the restored database must print the same.  The defaults of tenant '*'
-- (policy, authority) are the extension's own, made again by CREATE EXTENSION at its own time:
-- they are compared without their updated_at.
\set ON_ERROR_STOP 1
\pset format unaligned
\pset tuples_only on
SELECT format('SELECT %L AS tbl, count(*) AS n, md5(coalesce(string_agg(t::text, E''\n'' ORDER BY t::text), '''')) AS digest FROM %s t %s',
              c.oid::regclass, c.oid::regclass,
              CASE WHEN c.relname IN ('policy', 'authority') THEN 'WHERE t.tenant_id <> ''*''' ELSE '' END)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'cscp' AND c.relkind = 'r'
 ORDER BY c.relname
\gexec
SELECT 'cscp.policy *', count(*), md5(string_agg(settings::text, ',')) FROM cscp.policy WHERE tenant_id = '*';
SELECT 'cscp.authority *', count(*), md5(string_agg(authority || '=' || rank, ',' ORDER BY authority))
  FROM cscp.authority WHERE tenant_id = '*';
