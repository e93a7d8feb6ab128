-- The helpers every suite includes (sql/include/helpers.sql: a fixed secret key, try(), the
-- context and command helpers, snap()/changes(), settle(), the read-only commands declared), on
-- the database pg_regress made with cscp loaded; each suite includes them again, so that it also
-- runs alone (test/scripts/regress-alone.sh).
\i sql/include/helpers.sql
SELECT extname, extversion, extnamespace::regnamespace FROM pg_extension WHERE extname = 'cscp';
SELECT count(*) > 0 AS has_functions FROM pg_proc WHERE pronamespace = 'cscp'::regnamespace;
-- The key is sha256('cscp regression key 25'), so that routing hashes (and the ids and
-- partitions made of them) are the same on every run.
SELECT count(*) AS key_rows, bool_and(key = sha256('cscp regression key 25')) AS fixed_key FROM cscp.secret_key;
SELECT string_agg(command_name, ', ' ORDER BY command_name) AS read_only_commands
  FROM cscp.command_registry WHERE tenant_id = '*' AND NOT mutating;
-- Including them again changes nothing.
SELECT public.snap();
\i sql/include/helpers.sql
SELECT public.changes();
