-- views.sql: redacted views for operators, every read of them filtered and audited.
--
-- Operators see no idempotency keys, fingerprints, tokens or raw slot values.  What they do
-- see follows the tenant's policy "detail_level":
--   none     ids, status and times only; the actor as a digest
--   summary  + the names of the slots set
--            and of the context's intent, a redacted target marker, and the commands'
--            names and reason codes
--   full     + each slot's JSON type and size, the pending confirmation's or approval's
--            command id and expiry, a short digest of the target, the actor id itself,
--            and each command's path through its evidence
-- Whether a confirmation or approval is pending, and the last command's state, show at
-- every level.
-- The redacting views cscp._active_context and cscp._command_lifecycle are granted to nobody.
-- Operators read them only through cscp.inspect_active_context and
-- cscp.inspect_command_lifecycle (inspect.c), which the views cscp.active_context and
-- cscp.command_lifecycle select from: each read shows the tenants the asking role may see (all,
-- for an operator granted without tenants; only the tenant in cscp.tenant_id when it is set)
-- and records one row of cscp.inspection_log per conversation shown, naming the role that asked
-- (current_user), plus a LOG line that survives a rollback.

-- The digest that stands for an actor or a target where its value must not show.  Every name in
-- the body is qualified: it is inlined into the caller's query (views.sql, invariants.sql).
CREATE FUNCTION cscp._pseudonym(value text) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
AS $$
    SELECT pg_catalog.textcat('sha256:', pg_catalog.left(pg_catalog.encode(
               pg_catalog.sha256(pg_catalog.convert_to(value, 'UTF8')), 'hex'), 16))
$$;
COMMENT ON FUNCTION cscp._pseudonym(text) IS
  'Internal: ''sha256:'' and the first 16 hex digits of the SHA-256 of a value, to tell values apart without showing them';

-- What an operator sees of an actor at a detail level: the id at full, else its digest.
-- Inlined like cscp._pseudonym, so its names are qualified (texteq is text = text).
CREATE FUNCTION cscp._redact_actor(actor_id text, detail_level text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN pg_catalog.texteq(detail_level, 'full') THEN actor_id
                ELSE cscp._pseudonym(actor_id) END
$$;
COMMENT ON FUNCTION cscp._redact_actor(text, text) IS
  'Internal: what an operator may see of an actor at a detail level';

CREATE FUNCTION cscp._redact_slots(slots jsonb, detail_level text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE detail_level
        WHEN 'none' THEN NULL
        WHEN 'full' THEN
            (SELECT coalesce(jsonb_object_agg(e.key,
                        CASE WHEN e.key IN ('pending_confirmation', 'pending_approval')
                                  AND jsonb_typeof(e.value) = 'object'
                             THEN jsonb_build_object('command_id', e.value -> 'command_id',
                                                     'expires_at', e.value -> 'expires_at')
                             ELSE jsonb_build_object('type', jsonb_typeof(e.value),
                                                     'bytes', octet_length(e.value::text))
                        END), '{}'::jsonb)
               FROM jsonb_each(slots) e)
        ELSE
            (SELECT coalesce(jsonb_agg(k ORDER BY k), '[]'::jsonb) FROM jsonb_object_keys(slots) k)
    END
$$;
COMMENT ON FUNCTION cscp._redact_slots(jsonb, text) IS
  'Internal: what an operator may see of a context''s slots at a detail level';

CREATE VIEW cscp._active_context WITH (security_barrier) AS
SELECT c.tenant_id,
       c.context_id,
       c.conversation_id,
       cscp._redact_actor(c.actor_id, d.level) AS actor,
       CASE WHEN cscp.context_usable(c.status, c.expires_at, cscp.now()) THEN c.status
            ELSE 'expired'::cscp.context_status END AS status,
       c.created_at,
       c.updated_at,
       c.expires_at,
       c.version,
       d.level AS detail_level,
       cscp._redact_slots(c.slots, d.level) AS slots,
       -- The intent is a name the application chose ("cancel_order"), shown from summary up;
       -- a derived (hashed) intent shows as such.
       CASE WHEN d.level = 'none' OR NOT c.slots ? 'active_intent' THEN NULL
            WHEN jsonb_typeof(c.slots -> 'active_intent') = 'string' THEN c.slots ->> 'active_intent'
            WHEN c.slots -> 'active_intent' ? 'derived' THEN '[derived]'
            ELSE '[' || jsonb_typeof(c.slots -> 'active_intent') || ']' END AS intent,
       -- The target never shows: at full, a short digest to tell two targets apart.
       CASE WHEN d.level = 'none' OR NOT c.slots ? 'active_target' THEN NULL
            WHEN d.level = 'full' THEN cscp._pseudonym((c.slots -> 'active_target')::text)
            ELSE '[redacted]' END AS target,
       coalesce(jsonb_typeof(c.slots -> 'pending_confirmation') = 'object', false)
           AND cscp.context_usable(c.status, c.expires_at, cscp.now()) AS confirmation_pending,
       coalesce(jsonb_typeof(c.slots -> 'pending_approval') = 'object', false)
           AND cscp.context_usable(c.status, c.expires_at, cscp.now()) AS approval_pending,
       m.state AS last_command_state
  FROM cscp.context_live l
  JOIN cscp.context c ON c.tenant_id = l.tenant_id AND c.context_id = l.context_id
  CROSS JOIN LATERAL (
       SELECT coalesce(cscp.policy_effective(c.tenant_id) ->> 'detail_level', 'summary') AS level) d
  LEFT JOIN cscp.command m ON m.tenant_id = c.tenant_id AND m.command_id = c.last_command_id
 WHERE c.status IN ('active', 'pending', 'blocked');
COMMENT ON VIEW cscp._active_context IS
  'Internal: every tenant''s live contexts, redacted per the tenant''s detail_level; read through cscp.inspect_active_context';

CREATE VIEW cscp._command_lifecycle WITH (security_barrier) AS
SELECT m.tenant_id,
       m.command_id,
       m.conversation_id,
       cscp._redact_actor(m.actor_id, d.level) AS actor,
       CASE WHEN d.level = 'none' THEN NULL ELSE m.command_name END AS command_name,
       m.mutating,
       m.auto_confirm,
       m.state,
       m.state IN ('rejected', 'executed', 'failed', 'canceled', 'compensated') AS terminal,
       CASE WHEN d.level = 'none' THEN NULL ELSE m.reason_code END AS reason_code,
       m.confirmed_at IS NOT NULL AS confirmed,
       m.authorized_at IS NOT NULL AS authorized,
       m.recovery_kind,
       m.target_command_id,
       m.context_id,
       m.created_at,
       m.last_transition_at,
       m.window_expires_at,
       d.level AS detail_level,
       -- At full, the path the command took, from its evidence.
       CASE WHEN d.level = 'full' THEN
           (SELECT array_agg(e.event_type ORDER BY e.seq) FROM cscp.evidence e
             WHERE e.tenant_id = m.tenant_id AND e.command_id = m.command_id)
       END AS events,
       -- What may come next (SMCL X): the steps the lifecycle allows now, and the recoveries.
       cscp.command_next_allowed(m) AS next_allowed,
       cscp.command_recovery_options(m.state) AS recovery_options
  FROM cscp.command m
  CROSS JOIN LATERAL (
       SELECT coalesce(cscp.policy_effective(m.tenant_id) ->> 'detail_level', 'summary') AS level) d;
COMMENT ON VIEW cscp._command_lifecycle IS
  'Internal: every tenant''s commands, redacted per detail_level; read through cscp.inspect_command_lifecycle';

CREATE TABLE cscp.inspection_log (
    tenant_id        text        NOT NULL,
    inspected_at     timestamptz NOT NULL DEFAULT cscp.now(),
    inspection_id    bigint      NOT NULL DEFAULT cscp._row_id(),   -- time-ordered, no shared counter
    inspector        name        NOT NULL DEFAULT current_user,
    conversation_id  text        NOT NULL,
    rows_shown       int         NOT NULL,
    source           text        NOT NULL DEFAULT 'show_active_context',
    PRIMARY KEY (tenant_id, inspection_id)
);
COMMENT ON TABLE cscp.inspection_log IS
  'Every operator read of live contexts or commands: which role (current_user) saw how many rows of which conversation, through which view or function, and when';

CREATE FUNCTION cscp.inspect_active_context(tenant_id text DEFAULT NULL, conversation_id text DEFAULT NULL)
RETURNS SETOF cscp._active_context
    AS 'MODULE_PATHNAME', 'cscp_inspect_active_context' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp.inspect_active_context(text, text) IS
  'Operators: the redacted live contexts of the tenants the role may see (of one tenant or conversation when named); each read is recorded in cscp.inspection_log and the server log';

CREATE FUNCTION cscp.inspect_command_lifecycle(tenant_id text DEFAULT NULL, conversation_id text DEFAULT NULL)
RETURNS SETOF cscp._command_lifecycle
    AS 'MODULE_PATHNAME', 'cscp_inspect_command_lifecycle' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp.inspect_command_lifecycle(text, text) IS
  'Operators: the redacted commands of the tenants the role may see (of one tenant or conversation when named); each read is recorded in cscp.inspection_log and the server log';

CREATE VIEW cscp.active_context AS
SELECT * FROM cscp.inspect_active_context();
COMMENT ON VIEW cscp.active_context IS
  'Live contexts for operators, redacted per the tenant''s detail_level (no raw slot values, keys or fingerprints); only the tenants the role may see; every read audited';

CREATE VIEW cscp.command_lifecycle AS
SELECT * FROM cscp.inspect_command_lifecycle();
COMMENT ON VIEW cscp.command_lifecycle IS
  'Commands for operators: state, reason and timing, redacted per detail_level (no keys, fingerprints, payloads or outcomes); only the tenants the role may see; every read audited';

CREATE FUNCTION cscp.show_active_context(tenant_id text, conversation_id text)
RETURNS SETOF cscp.active_context
    AS 'MODULE_PATHNAME', 'cscp_show_active_context' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp.show_active_context(text, text) IS
  'Operators: the redacted live contexts of one conversation; each call is recorded in cscp.inspection_log (also when it shows nothing) and the server log';
