-- conversation.sql: multi-turn conversations (OpenWOP RFC 0005): conversations, turns, events.
--
-- The rules live in C, on the tables: conversation_guard (src/conversation/conversation_fsm.c) holds every
-- write to cscp.conversation, turn_guard (src/conversation/turn_guard.c) every turn, so a direct INSERT is held
-- to what the API functions do: the ConversationTurn shape, a gapless turn index kept on the
-- conversation row (O(1) per append), the schema given at start, the closed state, the timeout.
-- The turn trigger also records the turn's event, moves the conversation's counters, and links
-- the turn to its sender's live context.  A conversation's state and counters follow its event
-- log: an UPDATE moves them only as far as the event recorded at next_event_seq says.  Events
-- are written by cscp's C code with the table owner's rights only: application roles read them.
--
-- Lock order: the conversation row, then context rows.

CREATE TYPE cscp.conversation_state AS ENUM ('open', 'closed');
COMMENT ON TYPE cscp.conversation_state IS 'Lifecycle of a conversation: open, then closed (terminal)';

-- Its column rules (ids not empty, counters not negative, closed with a reason) are held by the guard trigger in C, not by CHECK
-- constraints, which PostgreSQL re-reads and re-plans in every writing statement (rowguard.c).
CREATE TABLE cscp.conversation (
    tenant_id        text                    NOT NULL,
    conversation_id  text                    NOT NULL,
    agent_id         text                    NOT NULL,
    state            cscp.conversation_state NOT NULL DEFAULT 'open',
    schema           jsonb,
    timeout_ms       bigint,
    deadline         timestamptz,
    causation_id     text,
    opened_at        timestamptz             NOT NULL DEFAULT cscp.now(),
    closed_at        timestamptz,
    outcome          jsonb,
    close_reason     text,
    next_turn_index  int                     NOT NULL DEFAULT 0,
    next_event_seq   int                     NOT NULL DEFAULT 0,
    updated_at       timestamptz             NOT NULL DEFAULT cscp.now(),
    PRIMARY KEY (tenant_id, conversation_id)
);
COMMENT ON TABLE cscp.conversation IS
  'Multi-turn conversations (OpenWOP RFC 0005): open, then closed by a final turn or by the timeout';
COMMENT ON COLUMN cscp.conversation.deadline IS 'opened_at + timeout_ms: past it the conversation times out';
COMMENT ON COLUMN cscp.conversation.next_turn_index IS 'The index the next turn takes (kept by the turn trigger)';
COMMENT ON COLUMN cscp.conversation.next_event_seq IS 'The sequence number the next event takes';
COMMENT ON COLUMN cscp.conversation.close_reason IS 'closed (cscp.conversation_close) or timeout';

-- The sweep: open conversations by deadline; closed ones by age.
CREATE INDEX conversation_deadline_idx ON cscp.conversation (deadline)
    WHERE state = 'open' AND deadline IS NOT NULL;
CREATE INDEX conversation_retired_idx ON cscp.conversation (closed_at) WHERE state = 'closed';

CREATE FUNCTION cscp.conversation_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_conversation_guard' LANGUAGE C;
COMMENT ON FUNCTION cscp.conversation_guard() IS
  'Trigger: a conversation is born open with a supported schema; its state and counters move only with its event log';
CREATE TRIGGER conversation_guard BEFORE INSERT OR UPDATE ON cscp.conversation
    FOR EACH ROW EXECUTE FUNCTION cscp.conversation_guard();

-- Its column rules (ids not empty, role known, index the next one) are held by the turn trigger in
-- C, not by CHECK constraints, which PostgreSQL re-reads and re-plans in every writing statement.
CREATE TABLE cscp.turn (
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
    recorded_at      timestamptz NOT NULL DEFAULT cscp.now(),
    extra            jsonb,
    PRIMARY KEY (tenant_id, conversation_id, turn_index),
    UNIQUE (tenant_id, conversation_id, message_id)
);
COMMENT ON TABLE cscp.turn IS
  'Turns of a conversation (ConversationTurn): gapless turn_index from 0, message_id unique per conversation; never changed';
COMMENT ON COLUMN cscp.turn.sender IS 'The turn''s "from"';
COMMENT ON COLUMN cscp.turn.content IS 'The turn''s content; NULL when the policy turn_content is "reference"';
COMMENT ON COLUMN cscp.turn.content_hash IS 'cscp.canonical_hash(content): replays are compared by it';
COMMENT ON COLUMN cscp.turn.content_size IS 'Bytes of cscp.canonical_json(content)';
COMMENT ON COLUMN cscp.turn.event_id IS 'The event that recorded the turn';
COMMENT ON COLUMN cscp.turn.extra IS
  'The turn''s optional ConversationTurn fields as sent (to, groupId, speakerId, agent); NULL when none';

-- A stored turn as OpenWOP's ConversationTurn (conversation-turn.schema.json): the six fields, the
-- optional ones it was sent with, and, for an agent turn sent without speakerId, its sender as
-- speakerId (RFC 0101 requires one on agent turns; the sender is the speaker).
CREATE FUNCTION cscp.turn_json(t cscp.turn) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.jsonb_build_object('messageId', t.message_id, 'from', t.sender, 'content', t.content,
                                         'ts', t.ts, 'role', t.role, 'turnIndex', t.turn_index)
           OPERATOR(pg_catalog.||) CASE WHEN t.role OPERATOR(pg_catalog.=) 'agent'
                                        THEN pg_catalog.jsonb_build_object('speakerId', t.sender)
                                        ELSE '{}'::pg_catalog.jsonb END
           OPERATOR(pg_catalog.||) coalesce(t.extra, '{}'::pg_catalog.jsonb)
$$;
COMMENT ON FUNCTION cscp.turn_json(cscp.turn) IS
  'A stored turn as a ConversationTurn: messageId, from, content, ts, role, turnIndex and the optional fields it was sent with';

CREATE FUNCTION cscp.turn_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_turn_guard' LANGUAGE C;
COMMENT ON FUNCTION cscp.turn_guard() IS
  'Trigger: holds every turn to the ConversationTurn rules, the gapless index and the schema; records its event; turns never change';
CREATE TRIGGER turn_guard BEFORE INSERT OR UPDATE ON cscp.turn
    FOR EACH ROW EXECUTE FUNCTION cscp.turn_guard();

-- Written only by cscp's C code (events.c), as the table's owner: the id it computes
-- (conversation_id:e<seq>) and the seq it takes from the conversation's next_event_seq (never
-- negative: conversation_guard).  Neither is a generated column nor a CHECK constraint, which
-- PostgreSQL re-reads and re-plans in every INSERT for rules no other writer can break.
CREATE TABLE cscp.event (
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
COMMENT ON TABLE cscp.event IS
  'Events of a conversation: conversation.opened, .exchanged, .closed and replay.diverged, each caused by the one before';
COMMENT ON COLUMN cscp.event.event_id IS 'conversation_id:e<seq>: the same on every database that replays the conversation';

CREATE FUNCTION cscp.conversation_start(tenant_id text, conversation_id text, agent_id text,
                                        initial_turn jsonb, schema jsonb DEFAULT NULL,
                                        timeout_ms bigint DEFAULT NULL,
                                        causation_id text DEFAULT NULL)
RETURNS TABLE(event_id text, turn_index int, message_id text)
    AS 'MODULE_PATHNAME', 'cscp_conversation_start' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION cscp.conversation_start(text, text, text, jsonb, jsonb, bigint, text) IS
  'Open a conversation with its first turn (index 0) and event conversation.opened; the same start sent again replays it';

CREATE FUNCTION cscp.conversation_exchange(tenant_id text, conversation_id text, turn jsonb)
RETURNS TABLE(event_id text, turn_index int, message_id text, outcome text, recorded_turn jsonb)
    AS 'MODULE_PATHNAME', 'cscp_conversation_exchange' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION cscp.conversation_exchange(text, text, jsonb) IS
  'Record a turn: outcome exchanged, replayed (same messageId and content; recorded_turn is the cached turn), diverged or aborted (same messageId, other content: replay.diverged recorded, policy keep or error) or timed_out';

CREATE FUNCTION cscp.conversation_close(tenant_id text, conversation_id text, turn jsonb,
                                        outcome jsonb DEFAULT NULL)
RETURNS TABLE(event_id text, turn_index int, message_id text, result text)
    AS 'MODULE_PATHNAME', 'cscp_conversation_close' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION cscp.conversation_close(text, text, jsonb, jsonb) IS
  'Close a conversation with its final turn and event conversation.closed; its live contexts are closed; result closed or timed_out';

-- Inlined into the caller's query (plain SQL, STABLE, not strict), so that a WHERE on
-- turn_index reaches the index; "last" reads only the last turns, from the conversation's
-- next_turn_index, never the ones before them.
CREATE FUNCTION cscp.conversation_turns(tenant_id text, conversation_id text, last int DEFAULT NULL)
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
COMMENT ON FUNCTION cscp.conversation_turns(text, text, int) IS
  'The transcript of a conversation in turn_index order, the same on every call (last: only the last n turns); no rows if it does not exist';

CREATE FUNCTION cscp.conversation_events(tenant_id text, conversation_id text)
RETURNS SETOF cscp.event
LANGUAGE sql STABLE
AS $$
    SELECT e.* FROM cscp.event e
     WHERE e.tenant_id OPERATOR(pg_catalog.=) cscp.check_tenant($1)
       AND e.conversation_id OPERATOR(pg_catalog.=) cscp.check_id('conversation_id', $2)
     ORDER BY e.seq
$$;
COMMENT ON FUNCTION cscp.conversation_events(text, text) IS
  'The events of a conversation in order; no rows if it does not exist';

-- A conversation as readers see it: past its deadline it reads closed (close_reason timeout,
-- closed_at the deadline) whether or not the sweep or a late turn has recorded the timeout yet,
-- as a context past expires_at reads expired.
CREATE FUNCTION cscp.conversation_get(tenant_id text, conversation_id text)
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
COMMENT ON FUNCTION cscp.conversation_get(text, text) IS
  'A conversation with its effective state: closed (timeout) once past its deadline, recorded or not; no row if it does not exist';

-- The conversation as OpenWOP's wire shapes: its turns as ConversationTurn objects, and its
-- conversation.opened / .exchanged / .closed events with the payloads of
-- conversation-event.schema.json (replay.diverged keeps cscp's own payload).
CREATE FUNCTION cscp.conversation_export(tenant_id text, conversation_id text) RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT pg_catalog.jsonb_build_object(
        'conversationId', c.conversation_id,
        'state', c.state,
        'turns', coalesce((SELECT pg_catalog.jsonb_agg(cscp.turn_json(t) ORDER BY t.turn_index)
                             FROM cscp.turn t
                            WHERE t.tenant_id = c.tenant_id AND t.conversation_id = c.conversation_id), '[]'),
        'events', coalesce((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                                      'eventId', e.event_id, 'type', e.type, 'causationId', e.causation_id,
                                      'payload',
                                      CASE e.type
                                      WHEN 'conversation.opened' THEN
                                          pg_catalog.jsonb_build_object('conversationId', c.conversation_id,
                                                                        'agentId', c.agent_id,
                                                                        'initialTurn', cscp.turn_json(t))
                                          || CASE WHEN pg_catalog.jsonb_typeof(c.schema) = 'object'
                                                  THEN pg_catalog.jsonb_build_object('schema', c.schema)
                                                  ELSE '{}'::jsonb END
                                      WHEN 'conversation.exchanged' THEN
                                          pg_catalog.jsonb_build_object('conversationId', c.conversation_id,
                                                                        'turnIndex', t.turn_index,
                                                                        'turn', cscp.turn_json(t))
                                      WHEN 'conversation.closed' THEN
                                          pg_catalog.jsonb_build_object('conversationId', c.conversation_id,
                                                                        'turnIndex', t.turn_index,
                                                                        'finalTurn', cscp.turn_json(t),
                                                                        'outcome', c.outcome)
                                      ELSE e.payload END) ORDER BY e.seq)
                              FROM cscp.event e
                              LEFT JOIN cscp.turn t
                                ON t.tenant_id = e.tenant_id AND t.conversation_id = e.conversation_id
                               AND t.turn_index = e.turn_index AND e.type <> 'replay.diverged'
                             WHERE e.tenant_id = c.tenant_id AND e.conversation_id = c.conversation_id), '[]'))
      FROM cscp.conversation_get($1, $2) c
$$;
COMMENT ON FUNCTION cscp.conversation_export(text, text) IS
  'A conversation as OpenWOP wire shapes: {conversationId, state, turns: [ConversationTurn], events: [{eventId, type, causationId, payload}]}; NULL if it does not exist';

CREATE FUNCTION cscp.capabilities() RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_capabilities' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.capabilities() IS
  'What this cscp implements, for capability advertisement: conversationPrimitive, interrupts, schema keywords, turn roles';

-- The hot loop in one call (src/conversation/message_turn.c): conversation_exchange, context_open with the
-- slots, command_submit bound to the turn's message id -- the same rules, one round trip.
CREATE FUNCTION cscp.message_turn(tenant_id text, conversation_id text, actor_id text, turn jsonb,
                                  slots jsonb DEFAULT '{}', command jsonb DEFAULT NULL)
RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_message_turn' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp.message_turn(text, text, text, jsonb, jsonb, jsonb) IS
  'Record an inbound turn, open (or reuse) the actor''s context with slots, and submit the command the message asks for: one call';
