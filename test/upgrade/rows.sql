-- The upgrade test (test/scripts/upgrade.sh), before ALTER EXTENSION cscp UPDATE: for every table
-- of cscp, a statement that prints its name, its row count and a digest of its rows over the
-- columns it has now.  The statements are saved and run again after the update: rows the old
-- version wrote must all be there, unchanged in the columns they had (new columns are not read).
-- The update's own data changes, each documented in its step, are left out of the digests:
--   cscp.policy          the keys 0.2.0 adds to the defaults of tenant '*' (the input rules
--                        and LangGraph sections of the upgrade script): settings are compared without them;
--   cscp.governance_log  the log rows those changes write, after this snapshot was taken.
\set ON_ERROR_STOP 1
\pset format unaligned
\pset tuples_only on
SELECT pg_catalog.format('SELECT %L, pg_catalog.count(*), pg_catalog.md5(COALESCE(pg_catalog.string_agg(r::text, E''\n'' ORDER BY r::text), '''')) FROM (SELECT %s FROM %s%s) r;',
                         c.oid::regclass,
                         pg_catalog.string_agg(
                             CASE WHEN c.oid = 'cscp.policy'::regclass AND a.attname = 'settings'
                                  THEN 'settings - ''{slot_max_length,slot_refuse_card_numbers,checkpoint_ttl}''::text[] AS settings'
                                  ELSE pg_catalog.quote_ident(a.attname) END,
                             ', ' ORDER BY a.attnum),
                         c.oid::regclass,
                         CASE WHEN c.oid = 'cscp.governance_log'::regclass
                              THEN pg_catalog.format(' WHERE changed_at < %L', pg_catalog.now()) ELSE '' END)
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE c.relnamespace = 'cscp'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
 GROUP BY c.oid
 ORDER BY c.oid::regclass::text;
