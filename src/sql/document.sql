-- document.sql: TTL'd namespace documents per session (Conversational Context API).
--
-- Absent or expired is "not found": readers filter on expires_at, and a put into an expired
-- document starts from an empty object, so expired data never comes back, sweep or no sweep.

-- Its column rules (ids not empty, a tenant other than '*', a payload that is an object) are held
-- by the guard trigger below in C, not by CHECK constraints, which PostgreSQL re-reads and
-- re-plans in every writing statement (rowguard.c).
CREATE TABLE cscp.document (
    tenant_id   text        NOT NULL,
    session_id  text        NOT NULL,
    namespace   text        NOT NULL,
    payload     jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT cscp.now(),
    updated_at  timestamptz NOT NULL DEFAULT cscp.now(),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, session_id, namespace)
);
COMMENT ON TABLE cscp.document IS
  'Session documents per (tenant, session, namespace), merged by cscp.doc_put and gone once expired';
CREATE INDEX document_expiry_idx ON cscp.document (expires_at);

CREATE FUNCTION cscp.document_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_document_guard' LANGUAGE C;
COMMENT ON FUNCTION cscp.document_guard() IS
  'Trigger: holds every INSERT and UPDATE of cscp.document to its column rules';
CREATE TRIGGER document_guard BEFORE INSERT OR UPDATE ON cscp.document
    FOR EACH ROW EXECUTE FUNCTION cscp.document_guard();

-- doc_put, doc_get and doc_delete are C (src/document/document.c): one saved statement each.

CREATE FUNCTION cscp.doc_put(tenant_id text, session_id text, namespace text, payload jsonb,
                             ttl_seconds int)
RETURNS text
    AS 'MODULE_PATHNAME', 'cscp_doc_put' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp.doc_put(text, text, text, jsonb, int) IS
  'Merge payload''s top-level keys into the document and reset its TTL; returns the key ''session_id:namespace''';

CREATE FUNCTION cscp.doc_get(tenant_id text, session_id text, namespace text) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_doc_get' LANGUAGE C STABLE;
COMMENT ON FUNCTION cscp.doc_get(text, text, text) IS
  'The document, or NULL when absent or expired';

CREATE FUNCTION cscp.doc_delete(tenant_id text, session_id text, namespace text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cscp_doc_delete' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp.doc_delete(text, text, text) IS
  'Delete the document; true when a live one was deleted, false when it was absent or already expired';
