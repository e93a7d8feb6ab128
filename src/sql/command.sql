-- command.sql: commands (RFC-WF-0018), their context frames, and their functions.
--
-- The lifecycle, its ordering invariants and the evidence of every transition are the C trigger
-- command_guard's (src/command/command_fsm.c); the functions below add idempotency, snapshot-on-execute
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

-- Append-only, and each new frame is its context's state as command_submit records it, whoever
-- writes it (src/command/frame.c): a forged frame is refused, not only kept from the application role.
CREATE FUNCTION cscp.frame_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_frame_guard' LANGUAGE C;
COMMENT ON FUNCTION cscp.frame_guard() IS
  'Trigger: a frame records its usable context''s state as cscp.command_submit computes it, and never changes';
CREATE TRIGGER frame_guard BEFORE INSERT OR UPDATE ON cscp.frame
    FOR EACH ROW EXECUTE FUNCTION cscp.frame_guard();

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
    -- The evidence row of the command's last transition (0 and NULL: none yet), kept by the
    -- trigger, so that its next transition appends its evidence without a read (src/command/evidence.c).
    evidence_seq        int                NOT NULL DEFAULT 0,
    evidence_hash       text,
    -- A lower bound of the life of the command's context (NULL: none), kept by the trigger, so
    -- that a step that needs a live context needs no read of it (src/command/command_fsm.c).
    context_live_until  timestamptz,
    PRIMARY KEY (tenant_id, command_id),
    UNIQUE (tenant_id, idempotency_key)
);
-- Snapshot on every path: that a frame a command names is a frame of its own context, with the
-- hash its context_ref gives, and that a command going on from canonicalized has one, is the
-- guard trigger's (command_fsm.c), whoever writes the row.  Not a foreign key on (tenant_id,
-- context_id, frame_id): its check, a locking read of the frame, cost 184k instructions per
-- confirmation cycle (make bench-instructions, W2: 6.69M -> 6.88M), and the guard reads the frame
-- on that insert anyway.
COMMENT ON TABLE cscp.command IS
  'Commands: the RFC-WF-0018 lifecycle, one per idempotency key and tenant';
COMMENT ON COLUMN cscp.command.reason_code IS 'Reason of the latest transition';
COMMENT ON COLUMN cscp.command.detail IS 'Detail of the latest transition (copied into its evidence)';
COMMENT ON COLUMN cscp.command.evidence_seq IS
  'seq of the evidence row of the command''s last transition (0: none yet), after which its next transition appends; kept by the command trigger';
COMMENT ON COLUMN cscp.command.evidence_hash IS
  'hash of the evidence row of the command''s last transition; kept by the command trigger';
COMMENT ON COLUMN cscp.command.context_live_until IS
  'Until when the command''s context is live at least (NULL: not known): set by the step that reads the context, lowered or taken away on every command that could still step forward when the context ends or its end comes nearer; an UPDATE may only lower it';
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
-- publications that move partitions.  Each row also names the command's context and the question
-- it waits on (confirmation: confirmation_required; approval: authz_pending), so that a context
-- asks one question of each kind at a time: the unique index refuses a second command waiting
-- in the same context, whoever writes it and however the writers race, without an index on
-- cscp.command that would name its state.
CREATE TABLE cscp.command_window (
    tenant_id          text        NOT NULL,
    conversation_id    text        NOT NULL,
    command_id         uuid        NOT NULL,
    window_expires_at  timestamptz NOT NULL,
    context_id         uuid,
    question           text        NOT NULL CHECK (question IN ('confirmation', 'approval'))
);
ALTER TABLE cscp.command_window REPLICA IDENTITY FULL;
COMMENT ON TABLE cscp.command_window IS
  'Commands with an open confirmation or approval window, by its end; kept by the command triggers for the sweep';
COMMENT ON COLUMN cscp.command_window.question IS
  'What the command waits for: confirmation (confirmation_required) or approval (authz_pending)';
-- By time for the sweep, and by command for the trigger that takes a command's row out: the
-- commands a statement asks all share one window end, and an index on the time alone would have
-- that DELETE read every one of them (or the whole table).
CREATE INDEX command_window_idx ON cscp.command_window (window_expires_at, tenant_id, command_id);
CREATE UNIQUE INDEX command_window_question_key ON cscp.command_window (tenant_id, context_id, question)
    WHERE context_id IS NOT NULL;

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
-- By time and command, as cscp.command_window's: the commands one transaction finishes share their
-- retired_at.
CREATE INDEX command_retired_idx ON cscp.command_retired (retired_at, tenant_id, command_id);

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

-- Public: cscp.command_status, which runs with its caller's rights, reads it.
CREATE FUNCTION cscp.command_next_allowed(c cscp.command) RETURNS cscp.command_state[]
    AS 'MODULE_PATHNAME', 'cscp_command_next_allowed' LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION cscp.command_next_allowed(cscp.command) IS
  'The states a command (a row of cscp.command) may move to now, invariants included';

-- The canonical state a frame records: ids of pending commands left out (they are random, and
-- the same calls must give the same hash on every database); times in UTC.
CREATE FUNCTION cscp._frame_state(c cscp.context, message_ids text[]) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_frame_state_sql' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp._frame_state(cscp.context, text[]) IS
  'Internal: the canonical context state a command frame records';

CREATE FUNCTION cscp.command_submit(tenant_id text, conversation_id text, actor_id text,
                                    idempotency_key text, command_name text, mutating boolean,
                                    message_ids text[], payload jsonb DEFAULT '{}',
                                    target_fingerprint text DEFAULT NULL)
RETURNS TABLE(command_id uuid, state cscp.command_state, replayed boolean, outcome jsonb)
    AS 'MODULE_PATHNAME', 'cscp_command_submit' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION cscp.command_submit(text, text, text, text, text, boolean, text[], jsonb, text) IS
  'Form a command against the live context (frame, confirmation request when mutating), or replay the one its idempotency key names';

-- C (src/command/command_api.c): the refusal checks of the trigger asked first, so that a refused
-- transition is returned and recorded rather than raised; then the update, the context's slot
-- released or (approval_required) set.
CREATE FUNCTION cscp.command_transition(command_id uuid, to_state cscp.command_state,
                                        reason_code text DEFAULT NULL, detail jsonb DEFAULT NULL)
RETURNS TABLE(accepted boolean, state cscp.command_state, reason_code text)
    AS 'MODULE_PATHNAME', 'cscp_command_transition' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION cscp.command_transition(uuid, cscp.command_state, text, jsonb) IS
  'Move a command along its lifecycle; a refused transition returns accepted = false and leaves invalid_transition_attempt evidence';

-- C (src/command/command_api.c): the target read and checked, the recovery formed as command_submit
-- forms a command, a cancel that applies carried out.
CREATE FUNCTION cscp.command_recover(target_command_id uuid, kind text, idempotency_key text,
                                     payload jsonb DEFAULT '{}')
RETURNS TABLE(command_id uuid, state cscp.command_state, replayed boolean, outcome jsonb)
    AS 'MODULE_PATHNAME', 'cscp_command_recover' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION cscp.command_recover(uuid, text, text, jsonb) IS
  'Recover a command with a new one aimed at it: retry (failed), reprocess (rejected, failed, canceled), cancel (up to started), compensate (executed, failed)';

-- The recovery kinds that apply to a command in state (cscp.command_recover): what
-- command_status and the operators' cscp.command_lifecycle offer.
CREATE FUNCTION cscp.command_recovery_options(state cscp.command_state) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN $1 OPERATOR(pg_catalog.=) 'failed'::cscp.command_state THEN ARRAY['retry', 'reprocess', 'compensate']
        WHEN $1 OPERATOR(pg_catalog.=) 'executed'::cscp.command_state THEN ARRAY['compensate']
        WHEN $1 OPERATOR(pg_catalog.=) ANY (ARRAY['rejected', 'canceled']::cscp.command_state[])
            THEN ARRAY['reprocess']
        WHEN $1 OPERATOR(pg_catalog.=) ANY (ARRAY['received', 'canonicalized', 'confirmation_required', 'confirmed',
                                                  'authz_pending', 'authorized', 'started']::cscp.command_state[])
            THEN ARRAY['cancel']
        ELSE '{}'::text[] END
$$;
COMMENT ON FUNCTION cscp.command_recovery_options(cscp.command_state) IS
  'The recovery kinds (cscp.command_recover) that apply to a command in this state';

CREATE FUNCTION cscp.command_status(command_id uuid)
RETURNS TABLE(state cscp.command_state, last_transition_at timestamptz, terminal boolean,
              outcome jsonb, reason_code text, next_allowed cscp.command_state[],
              recovery_options text[])
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    cmd cscp.command;
    n int := 0;
    r cscp.command;
BEGIN
    IF command_id IS NULL THEN
        RAISE EXCEPTION 'command_id must not be null'
            USING ERRCODE = '22023', HINT = 'Pass the command_id returned by cscp.command_submit.';
    END IF;
    -- Ids are keyed per tenant: the session's tenant's command (row-level security binds an
    -- application role to it; the owner behind the gateway is held to it here).
    FOR r IN SELECT * FROM cscp.command x
              WHERE x.command_id = command_id
                AND x.tenant_id = coalesce(cscp.current_tenant(), x.tenant_id)
              LIMIT 2 LOOP
        cmd := r;
        n := n + 1;
    END LOOP;
    IF n > 1 THEN
        RAISE EXCEPTION 'command id % is held by more than one tenant''s command', command_id
            USING ERRCODE = '21000',
                  DETAIL = 'A role that row-level security does not bind sees the commands of every tenant.',
                  HINT = 'Set cscp.tenant_id to the command''s tenant.';
    END IF;
    IF n = 0 THEN
        RAISE EXCEPTION 'command % does not exist', command_id
            USING ERRCODE = '22023',
                  HINT = 'Check the id, and that cscp.tenant_id names the command''s tenant.';
    END IF;
    state := cmd.state;
    last_transition_at := cmd.last_transition_at;
    terminal := cmd.state IN ('rejected', 'executed', 'failed', 'canceled', 'compensated');
    outcome := cmd.outcome;
    reason_code := cmd.reason_code;
    next_allowed := cscp.command_next_allowed(cmd);
    recovery_options := cscp.command_recovery_options(cmd.state);
    RETURN NEXT;
END
$$;
COMMENT ON FUNCTION cscp.command_status(uuid) IS
  'A command''s state, outcome, the states it may move to next and the recoveries that apply';
