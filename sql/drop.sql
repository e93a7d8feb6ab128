\i sql/include/helpers.sql
-- Every evidence row the suites left (the suites that forge rows delete or rehash them): the hash
-- cscp.evidence_hash computes, and the one the row carries, are the SHA-256 of the canonical JSON
-- of its fields rebuilt in plain SQL (the definition; test/pgtap/evidence_hash_pinned.sql).
SELECT e.tenant_id,
       count(*) FILTER (WHERE cscp.evidence_hash(e) IS DISTINCT FROM d.hash) AS computed_differently,
       count(*) FILTER (WHERE e.hash IS DISTINCT FROM d.hash) AS carried_differently
  FROM cscp.evidence e,
       LATERAL (SELECT 'sha256:' || encode(sha256(convert_to(cscp.canonical_json(jsonb_build_object(
                   'command_id', e.command_id::text, 'context_ref', e.context_ref,
                   'conversation_id', e.conversation_id,
                   'created_at', to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                   'decision', e.decision, 'detail', e.detail, 'event_type', e.event_type,
                   'from_state', e.from_state, 'message_ids', to_jsonb(e.message_ids),
                   'prev_hash', e.prev_hash, 'reason_code', e.reason_code, 'seq', e.seq,
                   'stage', e.stage, 'tenant_id', e.tenant_id, 'to_state', e.to_state)),
               'UTF8')), 'hex') AS hash) d
 GROUP BY e.tenant_id
HAVING count(*) FILTER (WHERE e.hash IS DISTINCT FROM d.hash OR cscp.evidence_hash(e) IS DISTINCT FROM d.hash) > 0
 ORDER BY 1;
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
