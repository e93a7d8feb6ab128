-- forget.sql: erasure of a conversation or a subject, and the tombstones that keep it erased.
--
-- cscp.forget_conversation and cscp.forget_subject (src/operations/forget.c) delete every row about the
-- id in every table, as the tables' owner, once the caller's tenant is checked; each leaves a
-- tombstone keyed by tenant and a SHA-256 of (kind, tenant, id), which records the erasure
-- (when, by which role, how many rows per table) without the id itself.  The trigger
-- forgotten_guard on each table that holds such rows refuses (55000) any later row for a
-- forgotten id, from the API or from direct SQL, so nothing forgotten is written again.

CREATE TABLE cscp.tombstone (
    tenant_id     text        NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    id_hash       text        NOT NULL CHECK (id_hash LIKE 'sha256:%'),
    kind          text        NOT NULL CHECK (kind IN ('conversation', 'subject')),
    forgotten_at  timestamptz NOT NULL,
    forgotten_by  name        NOT NULL DEFAULT session_user,
    counts        jsonb       NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, id_hash)
);
COMMENT ON TABLE cscp.tombstone IS
  'Forgotten conversations and subjects: tenant, sha256 of (kind, tenant, id), when, by whom, rows erased per table; no personal data';
-- Every backend keeps the keys of the tombstones it knows (src/operations/forget.c), so that a row
-- write needs no lookup for an id that has none; a change drops those caches (as for cscp.policy),
-- also during a restore, which runs with session_replication_role = replica.
CREATE TRIGGER tombstone_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cscp.tombstone
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.policy_changed();
ALTER TABLE cscp.tombstone ENABLE ALWAYS TRIGGER tombstone_changed;

CREATE FUNCTION cscp.forget_hash(tenant_id text, kind text, id text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'sha256:' || encode(sha256(convert_to(kind, 'UTF8') || '\x00'::bytea
                                      || convert_to(tenant_id, 'UTF8') || '\x00'::bytea
                                      || convert_to(id, 'UTF8')), 'hex')
$$;
COMMENT ON FUNCTION cscp.forget_hash(text, text, text) IS
  'The tombstone key of a conversation or subject id: sha256 of kind, tenant and id (what cscp.tombstone.id_hash holds)';

CREATE FUNCTION cscp.forget_conversation(tenant_id text, conversation_id text) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_forget_conversation' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp.forget_conversation(text, text) IS
  'Erase every row of a conversation and its session (contexts, frames, commands and their evidence, answers, turns, events, documents, working set, environment, inspections, the LangGraph thread and agent session of the same id) and leave a tombstone; rows erased per table';

CREATE FUNCTION cscp.forget_subject(tenant_id text, subject_id text) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_forget_subject' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp.forget_subject(text, text) IS
  'Erase a subject''s identity and facts, and the contexts, commands (with their evidence) and answers it was the actor of, and leave a tombstone; rows erased per table';

CREATE FUNCTION cscp.forgotten_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_forgotten_guard' LANGUAGE C;
COMMENT ON FUNCTION cscp.forgotten_guard() IS
  'Trigger (arguments: pairs of kind and column): refuses a row naming a forgotten conversation or subject (55000)';

CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, conversation_id, actor_id ON cscp.context
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'conversation_id', 'subject', 'actor_id');
CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, conversation_id, actor_id ON cscp.command
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'conversation_id', 'subject', 'actor_id');
CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, conversation_id ON cscp.frame
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'conversation_id');
CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, conversation_id, answered_by ON cscp.answer
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'conversation_id', 'subject', 'answered_by');
CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, conversation_id ON cscp.conversation
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'conversation_id');
CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, conversation_id ON cscp.turn
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'conversation_id');
CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, session_id ON cscp.document
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'session_id');
CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, session_id ON cscp.working_set
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'session_id');
CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, session_id ON cscp.environment
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'session_id');
CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, conversation_id ON cscp.inspection_log
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'conversation_id');
CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, subject_id ON cscp.identity
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('subject', 'subject_id');
CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, subject_id ON cscp.fact
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('subject', 'subject_id');
