-- Issue 39, finding 1: no privileged caller's search_path is trusted.  The SQL functions
-- PostgreSQL inlines into the caller's query (or parses under the caller's search_path) name
-- every operator, function and type in pg_catalog or cscp; the larger ones off the hot path pin
-- search_path = pg_catalog, pg_temp as the PL/pgSQL functions do (security.sql).  The C code's
-- statements are qualified in the library itself and need no step here.

CREATE OR REPLACE FUNCTION cscp.turn_json(t cscp.turn) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.jsonb_build_object('messageId', t.message_id, 'from', t.sender, 'content', t.content,
                                         'ts', t.ts, 'role', t.role, 'turnIndex', t.turn_index)
           OPERATOR(pg_catalog.||) CASE WHEN t.role OPERATOR(pg_catalog.=) 'agent'
                                        THEN pg_catalog.jsonb_build_object('speakerId', t.sender)
                                        ELSE '{}'::pg_catalog.jsonb END
           OPERATOR(pg_catalog.||) coalesce(t.extra, '{}'::pg_catalog.jsonb)
$$;

CREATE OR REPLACE FUNCTION cscp.conversation_turns(tenant_id text, conversation_id text, last int DEFAULT NULL)
RETURNS SETOF cscp.turn
LANGUAGE sql STABLE
AS $$
    SELECT t.* FROM cscp.turn t
     WHERE t.tenant_id OPERATOR(pg_catalog.=) cscp.check_tenant($1)
       AND t.conversation_id OPERATOR(pg_catalog.=) cscp.check_id('conversation_id', $2)
       AND t.turn_index OPERATOR(pg_catalog.>=)
           CASE WHEN $3 IS NULL THEN 0
                ELSE (SELECT c.next_turn_index FROM cscp.conversation c
                       WHERE c.tenant_id OPERATOR(pg_catalog.=) $1
                         AND c.conversation_id OPERATOR(pg_catalog.=) $2)
                     OPERATOR(pg_catalog.-) greatest($3, 0)
           END
     ORDER BY t.turn_index
$$;

CREATE OR REPLACE FUNCTION cscp.conversation_events(tenant_id text, conversation_id text)
RETURNS SETOF cscp.event
LANGUAGE sql STABLE
AS $$
    SELECT e.* FROM cscp.event e
     WHERE e.tenant_id OPERATOR(pg_catalog.=) cscp.check_tenant($1)
       AND e.conversation_id OPERATOR(pg_catalog.=) cscp.check_id('conversation_id', $2)
     ORDER BY e.seq
$$;

CREATE OR REPLACE FUNCTION cscp.conversation_get(tenant_id text, conversation_id text)
RETURNS SETOF cscp.conversation
LANGUAGE sql STABLE
AS $$
    SELECT c.tenant_id, c.conversation_id, c.agent_id,
           CASE WHEN due THEN 'closed'::cscp.conversation_state ELSE c.state END,
           c.schema, c.timeout_ms, c.deadline, c.causation_id, c.opened_at,
           CASE WHEN due THEN c.deadline ELSE c.closed_at END,
           c.outcome,
           CASE WHEN due THEN 'timeout' ELSE c.close_reason END,
           c.next_turn_index, c.next_event_seq, c.updated_at
      FROM cscp.conversation c
     CROSS JOIN LATERAL (SELECT c.state OPERATOR(pg_catalog.=) 'open'
                                AND c.deadline OPERATOR(pg_catalog.<=) cscp.now() AS due) d
     WHERE c.tenant_id OPERATOR(pg_catalog.=) cscp.check_tenant($1)
       AND c.conversation_id OPERATOR(pg_catalog.=) cscp.check_id('conversation_id', $2)
$$;

CREATE OR REPLACE FUNCTION cscp.authority_rank(tenant_id text, authority text) RETURNS int
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce((SELECT a.rank FROM cscp.authority a
                      WHERE a.tenant_id OPERATOR(pg_catalog.=) $1 AND a.authority OPERATOR(pg_catalog.=) $2),
                    (SELECT a.rank FROM cscp.authority a
                      WHERE a.tenant_id OPERATOR(pg_catalog.=) '*' AND a.authority OPERATOR(pg_catalog.=) $2))
$$;

CREATE OR REPLACE FUNCTION cscp.api_scopes() RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ARRAY['documents:read', 'documents:write', 'contexts:read', 'contexts:write',
                 'confirmations:write', 'approvals:write', 'commands:read', 'commands:write',
                 'facts:read', 'facts:write', 'conversations:read', 'conversations:write']::pg_catalog.text[]
$$;

CREATE OR REPLACE FUNCTION cscp._http_no_store(body jsonb) RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ROW(200, '{"Cache-Control": "no-store"}'::pg_catalog.jsonb, $1)::cscp.http_response
$$;

CREATE OR REPLACE FUNCTION cscp._http_failure(sqlstate text, message text, detail text DEFAULT NULL)
RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN $1 OPERATOR(pg_catalog.~~) '22%' THEN cscp._http_error(400, 'invalid_parameter', $2, $1, $3)
        WHEN $1 OPERATOR(pg_catalog.=) '42501' THEN cscp._http_error(403, 'forbidden', $2, $1, $3)
        WHEN $1 OPERATOR(pg_catalog.=) '55000' OR $1 OPERATOR(pg_catalog.~~) '23%' THEN
            cscp._http_error(409, 'conflict', $2, $1, $3)
        WHEN $1 OPERATOR(pg_catalog.=) ANY ('{40001,40P01,55P03}') THEN
            cscp._http_error(503, 'try_again', $2, $1, $3, '{"Retry-After": "1"}')
    END
$$;

CREATE OR REPLACE FUNCTION cscp.http_document_key(session_id text, namespace text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT pg_catalog.replace(pg_catalog.replace($1, '%', '%25'), ':', '%3A') OPERATOR(pg_catalog.||) ':'
        OPERATOR(pg_catalog.||) pg_catalog.replace(pg_catalog.replace($2, '%', '%25'), ':', '%3A')
$$;

CREATE OR REPLACE FUNCTION cscp._http_decision(outcome text, command_id uuid, context_id uuid)
RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ROW(200, '{}'::pg_catalog.jsonb,
               pg_catalog.jsonb_build_object('outcome', $1, 'commandId', $2, 'contextId', $3))::cscp.http_response
$$;

CREATE OR REPLACE FUNCTION cscp._http_command_of(tenant_id text, command_id uuid) RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (SELECT FROM cscp.command c
                    WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.command_id OPERATOR(pg_catalog.=) $2)
$$;

CREATE OR REPLACE FUNCTION cscp._http_turn_failure(sqlstate text, message text, detail text DEFAULT NULL)
RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN $1 OPERATOR(pg_catalog.~~) '22%' THEN cscp._http_error(400, 'validation_error', $2, $1, $3)
                ELSE cscp._http_failure($1, $2, $3) END
$$;

CREATE OR REPLACE FUNCTION cscp._http_conversation_of(tenant_id text, conversation_id text) RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (SELECT FROM cscp.conversation c
                    WHERE c.tenant_id OPERATOR(pg_catalog.=) $1
                      AND c.conversation_id OPERATOR(pg_catalog.=) $2)
$$;

ALTER FUNCTION cscp.evidence_problems(text, uuid) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cscp.conversation_export(text, text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cscp.retention_floor(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cscp.shard_misplaced() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cscp.session_state(text, text) SET search_path = pg_catalog, pg_temp;
