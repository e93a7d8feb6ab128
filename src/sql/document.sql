-- document.sql: TTL'd namespace documents per session (Conversational Context API).
--
-- Absent or expired is "not found": readers filter on expires_at, and a put into an expired
-- document starts from an empty object, so expired data never comes back, sweep or no sweep.

CREATE TABLE cscp.document (
    tenant_id   text        NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    session_id  text        NOT NULL CHECK (session_id <> ''),
    namespace   text        NOT NULL CHECK (namespace <> ''),
    payload     jsonb       NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    created_at  timestamptz NOT NULL DEFAULT cscp.now(),
    updated_at  timestamptz NOT NULL DEFAULT cscp.now(),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, session_id, namespace)
);
COMMENT ON TABLE cscp.document IS
  'Session documents per (tenant, session, namespace), merged by cscp.doc_put and gone once expired';
CREATE INDEX document_expiry_idx ON cscp.document (expires_at);

-- Checks shared by the document functions.
CREATE FUNCTION cscp._doc_args(tenant_id text, session_id text, namespace text) RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM cscp._tenant(tenant_id);
    PERFORM cscp._id('session_id', session_id);
    PERFORM cscp._id('namespace', namespace);
END
$$;
COMMENT ON FUNCTION cscp._doc_args(text, text, text) IS 'Internal: argument checks of the document functions';

CREATE FUNCTION cscp.doc_put(tenant_id text, session_id text, namespace text, payload jsonb,
                             ttl_seconds int)
RETURNS text
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := cscp.now();
    v_ttl interval;
BEGIN
    PERFORM cscp._doc_args(doc_put.tenant_id, doc_put.session_id, doc_put.namespace);
    IF doc_put.payload IS NULL OR jsonb_typeof(doc_put.payload) <> 'object' THEN
        RAISE EXCEPTION 'payload must be a JSON object'
            USING ERRCODE = '22023',
                  DETAIL = format('The payload given is %s.', coalesce(jsonb_typeof(doc_put.payload), 'null')),
                  HINT = 'Pass an object; its top-level keys are merged into the document.';
    END IF;
    IF doc_put.ttl_seconds IS NULL THEN
        RAISE EXCEPTION 'ttl_seconds must not be null'
            USING ERRCODE = '22023', HINT = 'Pass the document''s lifetime in seconds.';
    END IF;
    v_ttl := cscp._ttl(cscp.policy_effective(doc_put.tenant_id),
                       make_interval(secs => doc_put.ttl_seconds), 'max_ttl', 'ttl_seconds');

    INSERT INTO cscp.document AS d (tenant_id, session_id, namespace, payload, created_at,
                                    updated_at, expires_at)
    VALUES (doc_put.tenant_id, doc_put.session_id, doc_put.namespace, doc_put.payload, v_now,
            v_now, v_now + v_ttl)
    ON CONFLICT (tenant_id, session_id, namespace) DO UPDATE
        SET payload = CASE WHEN d.expires_at <= v_now THEN excluded.payload
                           ELSE d.payload || excluded.payload END,
            created_at = CASE WHEN d.expires_at <= v_now THEN v_now ELSE d.created_at END,
            updated_at = v_now,
            expires_at = excluded.expires_at;
    RETURN doc_put.session_id || ':' || doc_put.namespace;
END
$$;
COMMENT ON FUNCTION cscp.doc_put(text, text, text, jsonb, int) IS
  'Merge payload''s top-level keys into the document and reset its TTL; returns the key ''session_id:namespace''';

CREATE FUNCTION cscp.doc_get(tenant_id text, session_id text, namespace text) RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    v jsonb;
BEGIN
    PERFORM cscp._doc_args(doc_get.tenant_id, doc_get.session_id, doc_get.namespace);
    SELECT d.payload INTO v FROM cscp.document d
     WHERE d.tenant_id = doc_get.tenant_id AND d.session_id = doc_get.session_id
       AND d.namespace = doc_get.namespace AND d.expires_at > cscp.now();
    RETURN v;
END
$$;
COMMENT ON FUNCTION cscp.doc_get(text, text, text) IS
  'The document, or NULL when absent or expired';

CREATE FUNCTION cscp.doc_delete(tenant_id text, session_id text, namespace text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    live boolean;
BEGIN
    PERFORM cscp._doc_args(doc_delete.tenant_id, doc_delete.session_id, doc_delete.namespace);
    DELETE FROM cscp.document d
     WHERE d.tenant_id = doc_delete.tenant_id AND d.session_id = doc_delete.session_id
       AND d.namespace = doc_delete.namespace
    RETURNING d.expires_at > cscp.now() INTO live;
    RETURN coalesce(live, false);
END
$$;
COMMENT ON FUNCTION cscp.doc_delete(text, text, text) IS
  'Delete the document; true when a live one was deleted, false when it was absent or already expired';
