\i sql/include/helpers.sql
-- DROP EXTENSION cscp leaves nothing behind; CREATE EXTENSION works again afterwards.
-- The suite's own helpers depend on cscp's types; they go first.
DROP FUNCTION ctx_in(text, cscp.context_status), ctx_fixed(text, text, cscp.context_status), try(text),
              step(uuid, cscp.command_state, text);
DROP FUNCTION cmd_key(uuid), cmd_rows(text), with_keys(jsonb), ctx_rows(text), ev_rows(text),
              cscp_tables(), snap(), changes(), settle();
DROP EXTENSION cscp;
SELECT count(*) AS schemas FROM pg_namespace WHERE nspname = 'cscp';
SELECT count(*) AS types FROM pg_type WHERE typname IN ('context_status', 'context', 'document', 'policy');
SELECT count(*) AS functions FROM pg_proc WHERE prosrc LIKE '%cscp%' OR probin LIKE '%cscp%';
SELECT count(*) AS policies_left FROM pg_policy WHERE polname LIKE 'tenant_%';
CREATE EXTENSION cscp;
SELECT extversion FROM pg_extension WHERE extname = 'cscp';
DROP EXTENSION cscp;
SELECT count(*) AS schemas FROM pg_namespace WHERE nspname = 'cscp';
-- The suite leaves the database as it found it: cscp and the helpers, for whatever runs next.
CREATE EXTENSION cscp;
\i sql/include/helpers.sql
SELECT extversion FROM pg_extension WHERE extname = 'cscp';
