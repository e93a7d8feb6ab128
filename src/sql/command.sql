-- command.sql: commands (RFC-WF-0018), their context frames, and their functions.
--
-- The lifecycle, its ordering invariants and the evidence of every transition are the C trigger
-- command_guard's (src/command_fsm.c); the functions below add idempotency, snapshot-on-execute
-- frames, the pending-confirmation and pending-approval slots of the context, and recovery.
--
-- Lock order, everywhere: the idempotency key (advisory), then the context row, then command rows.

-- Snapshot-on-execute: the context state a command was formed from, deduplicated per context and
-- hash.  context_hash is generated from state, so no writer can store a hash that does not match.
CREATE TABLE cscp.frame (
    tenant_id        text        NOT NULL,
    frame_id         uuid        NOT NULL,
    conversation_id  text        NOT NULL,
    context_id       uuid        NOT NULL,
    state            jsonb       NOT NULL,
    context_hash     text        NOT NULL GENERATED ALWAYS AS (cscp.canonical_hash(state)) STORED,
    created_at       timestamptz NOT NULL DEFAULT cscp.now(),
    PRIMARY KEY (tenant_id, frame_id)
);
COMMENT ON TABLE cscp.frame IS
  'Context frames: the canonical state of a context a command was formed from, with its hash';
CREATE UNIQUE INDEX frame_context_hash_key ON cscp.frame (tenant_id, context_id, context_hash);

-- Its column rules (ids not empty, payload an object, recovery kind known) are held by the guard trigger in C, not by CHECK
-- constraints, which PostgreSQL re-reads and re-plans in every writing statement (rowguard.c).
CREATE TABLE cscp.command (
    tenant_id           text               NOT NULL,
    command_id          uuid               NOT NULL,
    idempotency_key     text               NOT NULL,
    conversation_id     text               NOT NULL,
    actor_id            text               NOT NULL,
    context_id          uuid,
    frame_id            uuid,
    context_ref         jsonb,
    message_ids         text[]             NOT NULL DEFAULT '{}',
    command_name        text               NOT NULL,
    mutating            boolean            NOT NULL,
    auto_confirm        boolean            NOT NULL DEFAULT false,
    payload             jsonb              NOT NULL DEFAULT '{}',
    target_fingerprint  text,
    state               cscp.command_state NOT NULL DEFAULT 'received',
    reason_code         text,
    detail              jsonb,
    outcome             jsonb,
    target_command_id   uuid,
    recovery_kind       text,
    window_expires_at   timestamptz,
    confirmed_at        timestamptz,
    authorized_at       timestamptz,
    created_at          timestamptz        NOT NULL DEFAULT cscp.now(),
    updated_at          timestamptz        NOT NULL DEFAULT cscp.now(),
    last_transition_at  timestamptz        NOT NULL DEFAULT cscp.now(),
    version             bigint             NOT NULL DEFAULT 1,
    PRIMARY KEY (tenant_id, command_id),
    UNIQUE (tenant_id, idempotency_key)
);
COMMENT ON TABLE cscp.command IS
  'Commands: the RFC-WF-0018 lifecycle, one per idempotency key and tenant';
COMMENT ON COLUMN cscp.command.reason_code IS 'Reason of the latest transition';
COMMENT ON COLUMN cscp.command.detail IS 'Detail of the latest transition (copied into its evidence)';
COMMENT ON COLUMN cscp.command.window_expires_at IS
  'End of the confirmation (confirmation_required) or approval (authz_pending) window';

-- No index of cscp.command names a column that a transition changes (state, reason_code, detail,
-- outcome, window_expires_at, the times, version), so every step is a HOT update: the new
-- version goes on the same page and no index gains an entry.  Open windows and finished
-- commands, which such an index would name (the sweep finds them by time), are listed in
-- cscp.command_window and cscp.command_retired below.  A command is written five or six times
-- within seconds of its insert; the fillfactor leaves room on its page for the next version while
-- pruning reclaims the ones before.
ALTER TABLE cscp.command SET (fillfactor = 50);
CREATE INDEX command_id_idx ON cscp.command (command_id);
CREATE INDEX command_frame_idx ON cscp.command (tenant_id, frame_id) WHERE frame_id IS NOT NULL;
CREATE INDEX command_target_idx ON cscp.command (tenant_id, target_command_id)
    WHERE target_command_id IS NOT NULL;

-- The open confirmation and approval windows, for the sweep: a command in confirmation_required
-- or authz_pending with a window_expires_at has one row here, with that time.  The guard trigger
-- writes it as the owner, whoever writes the command: in with the step that opens the window,
-- out with the step that leaves it; the command_unlist trigger takes it out when the command is
-- deleted.  No key: the rows are found by time, and REPLICA IDENTITY FULL serves the
-- publications that move partitions.
CREATE TABLE cscp.command_window (
    tenant_id          text        NOT NULL,
    conversation_id    text        NOT NULL,
    command_id         uuid        NOT NULL,
    window_expires_at  timestamptz NOT NULL
);
ALTER TABLE cscp.command_window REPLICA IDENTITY FULL;
COMMENT ON TABLE cscp.command_window IS
  'Commands with an open confirmation or approval window, by its end; kept by the command triggers for the sweep';
CREATE INDEX command_window_idx ON cscp.command_window (window_expires_at);

-- The finished commands (rejected, executed, failed, canceled, compensated), for the sweep's
-- purge: one row per command, retired_at its last_transition_at, which changes again only when
-- an executed or failed command is compensated (the row follows).  Kept as cscp.command_window
-- is.  Rows are appended in time order, so the index grows at its right edge.
CREATE TABLE cscp.command_retired (
    tenant_id        text        NOT NULL,
    conversation_id  text        NOT NULL,
    command_id       uuid        NOT NULL,
    retired_at       timestamptz NOT NULL
);
ALTER TABLE cscp.command_retired REPLICA IDENTITY FULL;
COMMENT ON TABLE cscp.command_retired IS
  'Finished commands by the time of their last transition; kept by the command triggers for the sweep''s purge';
CREATE INDEX command_retired_idx ON cscp.command_retired (retired_at);

CREATE FUNCTION cscp.command_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_command_guard' LANGUAGE C;
COMMENT ON FUNCTION cscp.command_guard() IS
  'Trigger: holds every INSERT and UPDATE of cscp.command to the lifecycle and its invariants, and records its evidence';
CREATE TRIGGER command_guard BEFORE INSERT OR UPDATE ON cscp.command
    FOR EACH ROW EXECUTE FUNCTION cscp.command_guard();

CREATE FUNCTION cscp.command_unlist() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_command_unlist' LANGUAGE C;
COMMENT ON FUNCTION cscp.command_unlist() IS
  'Trigger: a command deleted gives up its row in cscp.command_window or cscp.command_retired; TRUNCATE empties both';
CREATE TRIGGER command_unlist BEFORE DELETE ON cscp.command
    FOR EACH ROW EXECUTE FUNCTION cscp.command_unlist();
CREATE TRIGGER command_unlist_all BEFORE TRUNCATE ON cscp.command
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.command_unlist();

CREATE FUNCTION cscp.command_transition_allowed(from_state cscp.command_state,
                                                to_state cscp.command_state) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cscp_command_transition_allowed' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cscp.command_transition_allowed(cscp.command_state, cscp.command_state) IS
  'Whether the command lifecycle''s transition table has from_state -> to_state (invariants aside)';

CREATE FUNCTION cscp._command_refusal(c cscp.command, to_state cscp.command_state) RETURNS text
    AS 'MODULE_PATHNAME', 'cscp_command_refusal' LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION cscp._command_refusal(cscp.command, cscp.command_state) IS
  'Internal: the reason code refusing c -> to_state (table and invariants), or NULL when allowed';

CREATE FUNCTION cscp._command_next_allowed(c cscp.command) RETURNS cscp.command_state[]
    AS 'MODULE_PATHNAME', 'cscp_command_next_allowed' LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION cscp._command_next_allowed(cscp.command) IS
  'Internal: the states c may move to now, invariants included';

-- The canonical state a frame records: ids of pending commands left out (they are random, and
-- the same calls must give the same hash on every database); times in UTC.
CREATE FUNCTION cscp._frame_state(c cscp.context, message_ids text[]) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_frame_state' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp._frame_state(cscp.context, text[]) IS
  'Internal: the canonical context state a command frame records';

-- Clear the pending_confirmation and pending_approval slots that name command_id, and bring the
-- context back to active (with reason why) when nothing is pending any more; a use of the
-- context, so its TTL slides, and the command it names becomes its last one.  Expired or closed
-- contexts stay as they are (they never change).  The caller holds the context's row lock.
-- C (src/command_api.c), shared with cscp.command_transition.
CREATE FUNCTION cscp._context_release(c cscp.context, command_id uuid, why text DEFAULT NULL)
RETURNS void
    AS 'MODULE_PATHNAME', 'cscp_context_release_sql' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp._context_release(cscp.context, uuid, text) IS
  'Internal: clear the pending slots naming a command; the context goes back to active when none is left';

-- What a submit or recovery answers about cmd: the recorded outcome when terminal, an
-- in-progress view while it runs, NULL for a command just formed.
CREATE FUNCTION cscp._command_outcome(cmd cscp.command, replayed boolean) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF cmd.state IN ('rejected', 'executed', 'failed', 'canceled', 'compensated') THEN
        RETURN cmd.outcome;
    ELSIF replayed THEN
        RETURN jsonb_build_object('state', cmd.state,
                                  'in_progress', cmd.state = 'started',
                                  'last_transition_at', cscp._utc(cmd.last_transition_at));
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION cscp._command_outcome(cscp.command, boolean) IS
  'Internal: the outcome command_submit and command_recover return for a command';

-- The advisory lock that serialises every submit of one idempotency key.
CREATE FUNCTION cscp._key_lock(tenant_id text, idempotency_key text) RETURNS void
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock(1668506480,   -- 'cscp'
                                            pg_catalog.hashtext($1 || chr(1) || $2))
$$;
COMMENT ON FUNCTION cscp._key_lock(text, text) IS
  'Internal: a transaction advisory lock on (tenant, idempotency key), taken before a command is formed';

-- Form a command, or replay the one its idempotency key already names (C, src/command_api.c;
-- command_submit's body).  refuse_reason, when given, rejects the new command at once with that
-- reason (a recovery that does not apply); context_required = false forms it without a usable
-- context (a cancel).  Locks: the key (advisory), the context, then command rows.
CREATE FUNCTION cscp._command_create(
    tenant_id text, conversation_id text, actor_id text, idempotency_key text,
    command_name text, mutating boolean, message_ids text[], payload jsonb,
    target_fingerprint text, target_command_id uuid, recovery_kind text,
    refuse_reason text, context_required boolean)
RETURNS TABLE(command_id uuid, state cscp.command_state, replayed boolean, outcome jsonb)
    AS 'MODULE_PATHNAME', 'cscp_command_create' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION cscp._command_create(text, text, text, text, text, boolean, text[], jsonb, text, uuid, text, text, boolean) IS
  'Internal: form a command (frame, confirmation request) or replay the one its idempotency key names';

CREATE FUNCTION cscp._json_object(argname text, value jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF value IS NOT NULL AND jsonb_typeof(value) <> 'object' THEN
        RAISE EXCEPTION '% must be a JSON object', argname
            USING ERRCODE = '22023', DETAIL = format('The value given is a JSON %s.', jsonb_typeof(value)),
                  HINT = 'Pass an object such as ''{}''.';
    END IF;
    RETURN value;
END
$$;
COMMENT ON FUNCTION cscp._json_object(text, jsonb) IS 'Internal: raise 22023 unless value is null or a JSON object';

CREATE FUNCTION cscp.command_submit(tenant_id text, conversation_id text, actor_id text,
                                    idempotency_key text, command_name text, mutating boolean,
                                    message_ids text[], payload jsonb DEFAULT '{}',
                                    target_fingerprint text DEFAULT NULL)
RETURNS TABLE(command_id uuid, state cscp.command_state, replayed boolean, outcome jsonb)
    AS 'MODULE_PATHNAME', 'cscp_command_submit' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION cscp.command_submit(text, text, text, text, text, boolean, text[], jsonb, text) IS
  'Form a command against the live context (frame, confirmation request when mutating), or replay the one its idempotency key names';

-- Lock a command by id (after its context, to keep the lock order), or raise 22023.
CREATE FUNCTION cscp._command_lock(command_id uuid, OUT cmd cscp.command, OUT ctx cscp.context)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_variable
DECLARE
    v_tenant text;
    v_context uuid;
BEGIN
    IF command_id IS NULL THEN
        RAISE EXCEPTION 'command_id must not be null'
            USING ERRCODE = '22023', HINT = 'Pass the command_id returned by cscp.command_submit.';
    END IF;
    SELECT x.tenant_id, x.context_id INTO v_tenant, v_context
      FROM cscp.command x WHERE x.command_id = command_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'command % does not exist', command_id
            USING ERRCODE = '22023',
                  HINT = 'Check the id, and that cscp.tenant_id names the command''s tenant.';
    END IF;
    IF v_context IS NOT NULL THEN
        SELECT * INTO ctx FROM cscp.context x
         WHERE x.tenant_id = v_tenant AND x.context_id = v_context FOR UPDATE;
    END IF;
    SELECT * INTO cmd FROM cscp.command x
     WHERE x.tenant_id = v_tenant AND x.command_id = command_id FOR UPDATE;
END
$$;
COMMENT ON FUNCTION cscp._command_lock(uuid) IS
  'Internal: the command with this id and its context, both locked (context first); 22023 when not found';

-- C (src/command_api.c): the refusal checks of the trigger asked first, so that a refused
-- transition is returned and recorded rather than raised; then the update, the context's slot
-- released or (approval_required) set.
CREATE FUNCTION cscp.command_transition(command_id uuid, to_state cscp.command_state,
                                        reason_code text DEFAULT NULL, detail jsonb DEFAULT NULL)
RETURNS TABLE(accepted boolean, state cscp.command_state, reason_code text)
    AS 'MODULE_PATHNAME', 'cscp_command_transition' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION cscp.command_transition(uuid, cscp.command_state, text, jsonb) IS
  'Move a command along its lifecycle; a refused transition returns accepted = false and leaves invalid_transition_attempt evidence';

CREATE FUNCTION cscp.command_recover(target_command_id uuid, kind text, idempotency_key text,
                                     payload jsonb DEFAULT '{}')
RETURNS TABLE(command_id uuid, state cscp.command_state, replayed boolean, outcome jsonb)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_variable
DECLARE
    t cscp.command;
    r record;
    v_applies boolean;
    v_name text;
    v_mutating boolean;
    v_payload jsonb;
    v_fp text;
    s cscp.command_state;
    c cscp.context;
    rc cscp.command;
BEGIN
    IF target_command_id IS NULL THEN
        RAISE EXCEPTION 'target_command_id must not be null'
            USING ERRCODE = '22023', HINT = 'Pass the id of the command to recover.';
    END IF;
    IF kind IS NULL THEN
        RAISE EXCEPTION 'kind must not be null'
            USING ERRCODE = '22023', HINT = 'Use retry, cancel, reprocess or compensate.';
    END IF;
    IF kind NOT IN ('retry', 'cancel', 'reprocess', 'compensate') THEN
        RAISE EXCEPTION 'unknown recovery kind "%"', kind
            USING ERRCODE = '22023', HINT = 'Use retry, cancel, reprocess or compensate.';
    END IF;
    PERFORM cscp._id('idempotency_key', idempotency_key);
    IF payload IS NULL THEN
        RAISE EXCEPTION 'payload must not be null' USING ERRCODE = '22023', HINT = 'Pass ''{}''.';
    END IF;
    PERFORM cscp._json_object('payload', payload);

    SELECT * INTO t FROM cscp.command x WHERE x.command_id = target_command_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'command % does not exist', target_command_id
            USING ERRCODE = '22023',
                  HINT = 'Check the id, and that cscp.tenant_id names the command''s tenant.';
    END IF;
    PERFORM cscp._tenant(t.tenant_id);

    v_applies := CASE kind
        WHEN 'retry' THEN t.state = 'failed'
        WHEN 'reprocess' THEN t.state IN ('rejected', 'failed', 'canceled')
        WHEN 'cancel' THEN t.state IN ('received', 'canonicalized', 'confirmation_required',
                                       'confirmed', 'authz_pending', 'authorized')
        WHEN 'compensate' THEN t.state IN ('executed', 'failed')
    END;
    IF kind IN ('retry', 'reprocess') THEN
        v_name := t.command_name;
        v_mutating := t.mutating;
        v_payload := t.payload || payload;
        v_fp := t.target_fingerprint;
    ELSE
        v_name := t.command_name || ':' || kind;
        v_mutating := kind = 'compensate';
        v_payload := payload;
    END IF;

    SELECT * INTO r FROM cscp._command_create(t.tenant_id, t.conversation_id, t.actor_id,
        idempotency_key, v_name, v_mutating, t.message_ids, v_payload, v_fp, t.command_id, kind,
        CASE WHEN NOT v_applies THEN 'recovery_not_applicable' END, kind <> 'cancel');
    command_id := r.command_id;
    state := r.state;
    replayed := r.replayed;
    outcome := r.outcome;
    IF NOT r.replayed AND v_applies AND kind = 'cancel' AND r.state = 'canonicalized' THEN
        -- The cancellation is cscp's own to carry out: cancel the target, then record the
        -- recovery command's run through its lifecycle.
        SELECT (l.ctx).* INTO c FROM cscp._command_lock(t.command_id) l;
        UPDATE cscp.command x
           SET state = 'canceled', reason_code = 'canceled_by_recovery',
               detail = jsonb_build_object('recovery_command_id', r.command_id)
         WHERE x.tenant_id = t.tenant_id AND x.command_id = t.command_id;
        IF c.context_id IS NOT NULL THEN
            PERFORM cscp._context_release(c, t.command_id);
        END IF;
        FOREACH s IN ARRAY ARRAY['authz_pending', 'authorized', 'started', 'executed']::cscp.command_state[] LOOP
            UPDATE cscp.command x SET state = s, reason_code = 'cancel_' || s
             WHERE x.tenant_id = t.tenant_id AND x.command_id = r.command_id
            RETURNING * INTO rc;
        END LOOP;
        state := rc.state;
        outcome := cscp._command_outcome(rc, false);
    END IF;
    RETURN NEXT;
END
$$;
COMMENT ON FUNCTION cscp.command_recover(uuid, text, text, jsonb) IS
  'Recover a command with a new one aimed at it: retry (failed), reprocess (rejected, failed, canceled), cancel (before started), compensate (executed, failed)';

CREATE FUNCTION cscp.command_status(command_id uuid)
RETURNS TABLE(state cscp.command_state, last_transition_at timestamptz, terminal boolean,
              outcome jsonb, reason_code text, next_allowed cscp.command_state[],
              recovery_options text[])
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    cmd cscp.command;
BEGIN
    IF command_id IS NULL THEN
        RAISE EXCEPTION 'command_id must not be null'
            USING ERRCODE = '22023', HINT = 'Pass the command_id returned by cscp.command_submit.';
    END IF;
    SELECT * INTO cmd FROM cscp.command x WHERE x.command_id = command_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'command % does not exist', command_id
            USING ERRCODE = '22023',
                  HINT = 'Check the id, and that cscp.tenant_id names the command''s tenant.';
    END IF;
    state := cmd.state;
    last_transition_at := cmd.last_transition_at;
    terminal := cmd.state IN ('rejected', 'executed', 'failed', 'canceled', 'compensated');
    outcome := cmd.outcome;
    reason_code := cmd.reason_code;
    next_allowed := cscp._command_next_allowed(cmd);
    recovery_options := CASE
        WHEN cmd.state = 'failed' THEN ARRAY['retry', 'reprocess', 'compensate']
        WHEN cmd.state = 'executed' THEN ARRAY['compensate']
        WHEN cmd.state IN ('rejected', 'canceled') THEN ARRAY['reprocess']
        WHEN cmd.state IN ('received', 'canonicalized', 'confirmation_required', 'confirmed',
                           'authz_pending', 'authorized') THEN ARRAY['cancel']
        ELSE '{}'::text[] END;
    RETURN NEXT;
END
$$;
COMMENT ON FUNCTION cscp.command_status(uuid) IS
  'A command''s state, outcome, the states it may move to next and the recoveries that apply';
