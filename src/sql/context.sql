-- context.sql: contexts (RFC-WF-0034) and their functions.
--
-- The lifecycle, the expiry invariant and the slot rules are enforced by the C trigger
-- context_guard on the table, so the functions below stay thin: they resolve policy,
-- lock the row, and let the trigger refuse what is not allowed.

-- Its column rules (ids not empty, ttl positive) are held by the guard trigger in C, not by CHECK
-- constraints, which PostgreSQL re-reads and re-plans in every writing statement (rowguard.c).
CREATE TABLE cscp.context (
    tenant_id        text                NOT NULL,
    context_id       uuid                NOT NULL,
    conversation_id  text                NOT NULL,
    actor_id         text                NOT NULL,
    status           cscp.context_status NOT NULL DEFAULT 'active',
    created_at       timestamptz         NOT NULL DEFAULT cscp.now(),
    updated_at       timestamptz         NOT NULL DEFAULT cscp.now(),
    expires_at       timestamptz         NOT NULL,
    slots            jsonb               NOT NULL DEFAULT '{}',
    last_message_id  text,
    last_command_id  uuid,
    correlation_id   text,
    reason           text,
    ttl              interval            NOT NULL,
    version          bigint              NOT NULL DEFAULT 1,
    PRIMARY KEY (tenant_id, context_id)
) WITH (fillfactor = 45);
COMMENT ON TABLE cscp.context IS
  'Conversation contexts: at most one live (active, pending, blocked) per tenant, conversation and actor';

-- No index of cscp.context names a column that a use or a retirement changes (status, expires_at,
-- updated_at, slots, version), so both are HOT updates: the new version goes on the same page and
-- no index gains an entry.  Liveness and retirement, which such an index would name, are kept in
-- cscp.context_live and cscp.context_retired below.  The fillfactor leaves room on each page for
-- a new version of every row on it, a little larger than the row (an expiry adds its reason):
-- contexts created together tend to expire together, and the sweep retires a page's rows in one
-- go.  (At 50, 29 rows of an empty context fill a page and 27 of their expired versions fit
-- beside them.)
-- The latest context of a triple, for cscp.context_get.
CREATE INDEX context_triple_idx ON cscp.context (tenant_id, conversation_id, actor_id, created_at);
-- Lookups by id alone (slot_set, context_transition).
CREATE INDEX context_id_idx ON cscp.context (context_id);

-- The live context of each (tenant, conversation, actor).  Its primary key is the rule "at most
-- one live context per triple", and it serialises concurrent opens.  The guard trigger keeps it
-- as contexts are written, whoever writes them: a row goes in with a new context, out when the
-- context expires, closes or is deleted.  expires_at is a lower bound of the context's own, at
-- most a minute behind (a use rewrites this row only when it extends the context into a later
-- minute, see context_fsm.c), for the sweep; readers never rely on it.  Only the owner writes it
-- (owner.c).
CREATE TABLE cscp.context_live (
    tenant_id        text        NOT NULL,
    conversation_id  text        NOT NULL,
    actor_id         text        NOT NULL,
    context_id       uuid        NOT NULL,
    expires_at       timestamptz NOT NULL,
    CONSTRAINT context_live_key PRIMARY KEY (tenant_id, conversation_id, actor_id)
);
COMMENT ON TABLE cscp.context_live IS
  'The live context of each tenant, conversation and actor, kept by the context_guard trigger; expires_at is a lower bound for the sweep';
-- The sweep: live contexts by expiry.
CREATE INDEX context_live_expiry_idx ON cscp.context_live (expires_at);

-- The retired contexts, for the sweep's purge: a context that expires or closes gets a row here,
-- written by the guard trigger as the owner in the same statement that takes it out of
-- cscp.context_live; retired_at is the context's updated_at, which never changes after that.
-- The context_unlist trigger takes the row out when the context is deleted.  An index on the
-- contexts could not serve the purge: one on status or updated_at would make every retirement
-- (or every use) a non-HOT update.  Rows are appended in time order, so the index grows at its
-- right edge; no index here names a random id.  No key: REPLICA IDENTITY FULL, for the
-- publications that move partitions.
CREATE TABLE cscp.context_retired (
    tenant_id        text                NOT NULL,
    conversation_id  text                NOT NULL,
    context_id       uuid                NOT NULL,
    status           cscp.context_status NOT NULL,
    retired_at       timestamptz         NOT NULL
);
ALTER TABLE cscp.context_retired REPLICA IDENTITY FULL;
COMMENT ON TABLE cscp.context_retired IS
  'The expired and closed contexts by the time they retired, kept by the context triggers for the sweep''s purge';
-- The purge, by status (each has its own retention) and age.
CREATE INDEX context_retired_idx ON cscp.context_retired (status, retired_at);

CREATE FUNCTION cscp.context_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_context_guard' LANGUAGE C;
COMMENT ON FUNCTION cscp.context_guard() IS
  'Trigger: holds every INSERT and UPDATE of cscp.context to the lifecycle, expiry and slot rules';

CREATE TRIGGER context_guard BEFORE INSERT OR UPDATE ON cscp.context
    FOR EACH ROW EXECUTE FUNCTION cscp.context_guard();

CREATE FUNCTION cscp.context_unlist() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_context_unlist' LANGUAGE C;
COMMENT ON FUNCTION cscp.context_unlist() IS
  'Trigger: a context deleted gives up its row in cscp.context_live or cscp.context_retired; TRUNCATE empties both';

CREATE TRIGGER context_unlist BEFORE DELETE ON cscp.context
    FOR EACH ROW EXECUTE FUNCTION cscp.context_unlist();
CREATE TRIGGER context_unlist_all BEFORE TRUNCATE ON cscp.context
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.context_unlist();

CREATE FUNCTION cscp.context_transition_allowed(from_status cscp.context_status,
                                                to_status cscp.context_status) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cscp_context_transition_allowed' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cscp.context_transition_allowed(cscp.context_status, cscp.context_status) IS
  'Whether the context lifecycle allows from_status -> to_status';

-- "Context usable" in SQL, beside cscp_context_usable in C (src/shared/enums.c): a live status and an
-- expiry still ahead of the clock given (cscp.now() for a statement of its own).  A SQL function
-- of one expression, not STRICT, so that the planner inlines it into the statement that calls it
-- (no call at run time; a partial index on the live statuses still matches); its body is parsed
-- once, here, so it means the same whatever the caller's search_path.
CREATE FUNCTION cscp.context_usable(status cscp.context_status, expires_at timestamptz,
                                    as_of timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}'::cscp.context_status[])
   AND expires_at OPERATOR(pg_catalog.>) as_of;
COMMENT ON FUNCTION cscp.context_usable(cscp.context_status, timestamptz, timestamptz) IS
  'Whether a context of this status and expires_at is usable at the time given: a live status (active, pending, blocked) and expires_at later';

CREATE FUNCTION cscp.slots_visible(tenant_id text, slots jsonb) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_slots_visible_sql' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cscp.slots_visible(text, jsonb) IS
  'The slots readers see: names outside the minimum set, x_* and the policy''s extension_slots left out';

-- The expires_at a use of context c sets: extended under a sliding TTL, kept under a fixed one
-- (the tenant's context_ttl_mode), kept once passed.  In C (cscp_context_touch), which the API's
-- statements call per row; public, because they run with their caller's rights.
CREATE FUNCTION cscp.context_touch(c cscp.context) RETURNS timestamptz
    AS 'MODULE_PATHNAME', 'cscp_context_touch_sql' LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION cscp.context_touch(cscp.context) IS
  'The expires_at a use of the context sets: extended under a sliding TTL, kept under a fixed one or once passed';

CREATE FUNCTION cscp.context_open(tenant_id text, conversation_id text, actor_id text,
                                  slots jsonb DEFAULT '{}', ttl interval DEFAULT NULL,
                                  correlation_id text DEFAULT NULL)
RETURNS cscp.context
    AS 'MODULE_PATHNAME', 'cscp_context_open' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp.context_open(text, text, text, jsonb, interval, text) IS
  'The live usable context of (tenant, conversation, actor), or a new active one; given slots are merged in';

CREATE FUNCTION cscp.context_get(tenant_id text, conversation_id text, actor_id text)
RETURNS SETOF cscp.context
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    c cscp.context;
BEGIN
    PERFORM cscp.check_tenant(context_get.tenant_id);
    PERFORM cscp.check_id('conversation_id', context_get.conversation_id);
    PERFORM cscp.check_id('actor_id', context_get.actor_id);
    SELECT * INTO c FROM cscp.context x
     WHERE x.tenant_id = context_get.tenant_id
       AND x.conversation_id = context_get.conversation_id
       AND x.actor_id = context_get.actor_id
     ORDER BY x.status IN ('active', 'pending', 'blocked') DESC, x.created_at DESC, x.version DESC
     LIMIT 1;
    IF FOUND THEN
        -- As readers see it: the effective status (expired once past expires_at), visible slots.
        IF c.status IN ('active', 'pending', 'blocked')
           AND NOT cscp.context_usable(c.status, c.expires_at, cscp.now()) THEN
            c.status := 'expired';
        END IF;
        c.slots := cscp.slots_visible(c.tenant_id, c.slots);
        RETURN NEXT c;
    END IF;
END
$$;
COMMENT ON FUNCTION cscp.context_get(text, text, text) IS
  'The latest context of (tenant, conversation, actor) with its effective status (expired once past expires_at); no row if none';

CREATE FUNCTION cscp.slot_set(context_id uuid, slot text, value jsonb) RETURNS cscp.context
    AS 'MODULE_PATHNAME', 'cscp_slot_set' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp.slot_set(uuid, text, jsonb) IS
  'Set one slot of a live context (SQL NULL removes it); unknown, forbidden or oversized slots are refused (22023)';

-- In C (context_api.c): the row locked, then one UPDATE that the trigger holds to the lifecycle
-- and the expiry invariant; a move to a live status is a use (cscp_context_touch).
CREATE FUNCTION cscp.context_transition(context_id uuid, to_status cscp.context_status,
                                        reason text DEFAULT NULL)
RETURNS cscp.context
    AS 'MODULE_PATHNAME', 'cscp_context_transition' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp.context_transition(uuid, cscp.context_status, text) IS
  'Move a context along its lifecycle; a refused transition raises 55000 and changes nothing';
