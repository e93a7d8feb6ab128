-- The plain tables under `make bench` (test/scripts/bench.sh): cscp's tables as plain tables in
-- schema :"schema" -- the same columns, keys and indexes (so each row write costs the same in heap
-- and index maintenance), but no trigger, no CHECK, no enum type, no row-level security, no
-- generated column.  Loaded twice: as bench_floor, which the floor scripts (test/bench/*_floor.sql)
-- write with plain SQL and no checks, and as bench_naive, on which test/bench/baseline_plpgsql.sql
-- then adds the PL/pgSQL triggers and functions a user would hand-write.
-- Two differences, on purpose: the context table keeps the indexes a user would write by hand (a
-- partial unique index for "one live context", on which the floor's and naive upserts arbitrate,
-- and two partial indexes for a sweep), and so does the command table (partial indexes on open
-- windows and on finished commands), both with the default fillfactor.  cscp keeps these lists in
-- tables of their own instead (cscp.context_live and context_retired, cscp.command_window and
-- command_retired), so that its context and command updates are HOT; a hand-written schema gets
-- that only by keeping such tables too, which is cscp's work, not the floor's.
--   psql -v schema=bench_floor -v role=<the role pgbench connects as> -f floor_schema.sql

CREATE SCHEMA :"schema";

CREATE TABLE :"schema".context (
    tenant_id        text        NOT NULL,
    context_id       uuid        NOT NULL DEFAULT gen_random_uuid(),
    conversation_id  text        NOT NULL,
    actor_id         text        NOT NULL,
    status           text        NOT NULL DEFAULT 'active',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,
    slots            jsonb       NOT NULL DEFAULT '{}',
    last_message_id  text,
    last_command_id  uuid,
    correlation_id   text,
    reason           text,
    ttl              interval    NOT NULL,
    version          bigint      NOT NULL DEFAULT 1,
    PRIMARY KEY (tenant_id, context_id)
);
CREATE UNIQUE INDEX context_live_key ON :"schema".context (tenant_id, conversation_id, actor_id)
    WHERE status IN ('active', 'pending', 'blocked');
CREATE INDEX context_triple_idx ON :"schema".context (tenant_id, conversation_id, actor_id, created_at);
CREATE INDEX context_id_idx ON :"schema".context (context_id);
CREATE INDEX context_expiry_idx ON :"schema".context (expires_at)
    WHERE status IN ('active', 'pending', 'blocked');
CREATE INDEX context_retired_idx ON :"schema".context (updated_at)
    WHERE status IN ('expired', 'closed');

CREATE TABLE :"schema".frame (
    tenant_id        text        NOT NULL,
    frame_id         uuid        NOT NULL DEFAULT gen_random_uuid(),
    conversation_id  text        NOT NULL,
    context_id       uuid        NOT NULL,
    state            jsonb       NOT NULL,
    context_hash     text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, frame_id)
);
CREATE UNIQUE INDEX frame_context_hash_key ON :"schema".frame (tenant_id, context_id, context_hash);

CREATE TABLE :"schema".command (
    tenant_id           text        NOT NULL,
    command_id          uuid        NOT NULL DEFAULT gen_random_uuid(),
    idempotency_key     text        NOT NULL,
    conversation_id     text        NOT NULL,
    actor_id            text        NOT NULL,
    context_id          uuid,
    frame_id            uuid,
    context_ref         jsonb,
    message_ids         text[]      NOT NULL DEFAULT '{}',
    command_name        text        NOT NULL,
    mutating            boolean     NOT NULL,
    auto_confirm        boolean     NOT NULL DEFAULT false,
    payload             jsonb       NOT NULL DEFAULT '{}',
    target_fingerprint  text,
    state               text        NOT NULL DEFAULT 'received',
    reason_code         text,
    detail              jsonb,
    outcome             jsonb,
    target_command_id   uuid,
    recovery_kind       text,
    window_expires_at   timestamptz,
    confirmed_at        timestamptz,
    authorized_at       timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    last_transition_at  timestamptz NOT NULL DEFAULT now(),
    version             bigint      NOT NULL DEFAULT 1,
    PRIMARY KEY (tenant_id, command_id),
    UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX command_id_idx ON :"schema".command (command_id);
CREATE INDEX command_frame_idx ON :"schema".command (tenant_id, frame_id) WHERE frame_id IS NOT NULL;
CREATE INDEX command_target_idx ON :"schema".command (tenant_id, target_command_id)
    WHERE target_command_id IS NOT NULL;
CREATE INDEX command_window_idx ON :"schema".command (window_expires_at)
    WHERE state IN ('confirmation_required', 'authz_pending') AND window_expires_at IS NOT NULL;
CREATE INDEX command_retired_idx ON :"schema".command (last_transition_at)
    WHERE state IN ('rejected', 'executed', 'failed', 'canceled', 'compensated');

CREATE TABLE :"schema".evidence (
    tenant_id        text        NOT NULL,
    evidence_id      bigint      GENERATED ALWAYS AS IDENTITY,
    conversation_id  text        NOT NULL,
    command_id       uuid,
    seq              int         NOT NULL,
    stage            text        NOT NULL,
    event_type       text        NOT NULL,
    from_state       text,
    to_state         text,
    message_ids      text[],
    context_ref      jsonb,
    decision         text,
    reason_code      text,
    detail           jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    prev_hash        text,
    hash             text        NOT NULL,
    PRIMARY KEY (tenant_id, evidence_id)
);
CREATE UNIQUE INDEX evidence_chain_key ON :"schema".evidence (tenant_id, command_id, seq);
CREATE INDEX evidence_conversation_idx ON :"schema".evidence (tenant_id, conversation_id, evidence_id);
CREATE INDEX evidence_age_idx ON :"schema".evidence (created_at);

CREATE TABLE :"schema".answer (
    tenant_id        text        NOT NULL,
    conversation_id  text        NOT NULL,
    kind             text        NOT NULL,
    message_id       text        NOT NULL,
    answered_by      text        NOT NULL,
    outcome          text        NOT NULL,
    command_id       uuid,
    context_id       uuid,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, conversation_id, kind, message_id)
);

CREATE TABLE :"schema".conversation (
    tenant_id        text        NOT NULL,
    conversation_id  text        NOT NULL,
    agent_id         text        NOT NULL,
    state            text        NOT NULL DEFAULT 'open',
    schema           jsonb,
    timeout_ms       bigint,
    deadline         timestamptz,
    causation_id     text,
    opened_at        timestamptz NOT NULL DEFAULT now(),
    closed_at        timestamptz,
    outcome          jsonb,
    close_reason     text,
    next_turn_index  int         NOT NULL DEFAULT 0,
    next_event_seq   int         NOT NULL DEFAULT 0,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, conversation_id)
);
CREATE INDEX conversation_deadline_idx ON :"schema".conversation (deadline)
    WHERE state = 'open' AND deadline IS NOT NULL;
CREATE INDEX conversation_retired_idx ON :"schema".conversation (closed_at) WHERE state = 'closed';

CREATE TABLE :"schema".turn (
    tenant_id        text        NOT NULL,
    conversation_id  text        NOT NULL,
    turn_index       int         NOT NULL,
    message_id       text        NOT NULL,
    role             text        NOT NULL,
    sender           text        NOT NULL,
    content          jsonb,
    content_hash     text        NOT NULL,
    content_size     int         NOT NULL,
    ts               numeric     NOT NULL,
    event_id         text        NOT NULL,
    recorded_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, conversation_id, turn_index),
    UNIQUE (tenant_id, conversation_id, message_id)
);

CREATE TABLE :"schema".event (
    tenant_id        text        NOT NULL,
    conversation_id  text        NOT NULL,
    event_id         text        NOT NULL,
    seq              int         NOT NULL,
    type             text        NOT NULL,
    causation_id     text,
    turn_index       int,
    payload          jsonb       NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, conversation_id, seq)
);

CREATE TABLE :"schema".document (
    tenant_id   text        NOT NULL,
    session_id  text        NOT NULL,
    namespace   text        NOT NULL,
    payload     jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, session_id, namespace)
);
CREATE INDEX document_expiry_idx ON :"schema".document (expires_at);

GRANT USAGE ON SCHEMA :"schema" TO :"role";
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA :"schema" TO :"role";
