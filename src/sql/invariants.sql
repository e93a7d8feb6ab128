-- invariants.sql: cscp.check_invariants, the read-only diagnosis of what the triggers promise.
--
-- The C triggers keep every rule on every write; this function looks for what could only come
-- from around them (triggers disabled, session_replication_role = replica, a restore without
-- its rows, a storage fault): one row per violation, nothing on a healthy database.  It reads
-- every tenant's rows with its owner's rights (cscp._check_invariants), so operators
-- (cscp.grant_operator) may call it, and shows each only the tenants it may see (inspect.c);
-- application roles may not (cscp.grant_app revokes it).  What it shows is ids and states,
-- never slot values, payloads, idempotency keys or actor ids (an actor shows as a digest).
--
-- Set-based SQL, one pass per kind; the evidence chains are checked by
-- cscp.evidence_problems, the verifier behind cscp.evidence_verify.

CREATE FUNCTION cscp._check_invariants(tenant_id text DEFAULT NULL)
RETURNS TABLE(kind text, tenant_id text, object_id text, detail text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- One large query, run rarely: compiling it would cost more than running it.
SET jit = off
AS $$
    SELECT CASE WHEN $1 IS NOT NULL THEN cscp._id('tenant_id', $1) END;
    WITH
    -- More than one live context for one (tenant, conversation, actor).
    live AS (
        SELECT 'multiple_live_contexts'::text AS kind, c.tenant_id, c.conversation_id AS object_id,
               format('%s live contexts for actor %s: %s', count(*), cscp._pseudonym(c.actor_id),
                      string_agg(c.context_id::text || ' (' || c.status || ')', ', '
                                 ORDER BY c.created_at, c.context_id)) AS detail
          FROM cscp.context c
         WHERE c.status IN ('active', 'pending', 'blocked') AND ($1 IS NULL OR c.tenant_id = $1)
         GROUP BY c.tenant_id, c.conversation_id, c.actor_id
        HAVING count(*) > 1
    ),
    -- cscp.context_live out of step with the contexts: a live context it does not name, or a row
    -- of it naming a context that is not live (or with an expires_at after the context's).
    unlisted AS (
        SELECT 'unlisted_live_context'::text AS kind, c.tenant_id, c.context_id::text AS object_id,
               format('context is %s, but cscp.context_live names %s for its conversation and actor',
                      c.status, coalesce(l.context_id::text, 'none')) AS detail
          FROM cscp.context c
          LEFT JOIN cscp.context_live l
                 ON l.tenant_id = c.tenant_id AND l.conversation_id = c.conversation_id
                AND l.actor_id = c.actor_id
         WHERE c.status IN ('active', 'pending', 'blocked') AND ($1 IS NULL OR c.tenant_id = $1)
           AND l.context_id IS DISTINCT FROM c.context_id
        UNION ALL
        SELECT 'unlisted_live_context', l.tenant_id, l.context_id::text,
               CASE WHEN c.context_id IS NULL THEN 'cscp.context_live names a context that does not exist'
                    WHEN c.status NOT IN ('active', 'pending', 'blocked')
                    THEN format('cscp.context_live names a context that is %s', c.status)
                    ELSE 'cscp.context_live expects it later than the context does' END
          FROM cscp.context_live l
          LEFT JOIN cscp.context c ON c.tenant_id = l.tenant_id AND c.context_id = l.context_id
         WHERE ($1 IS NULL OR l.tenant_id = $1)
           AND (c.context_id IS NULL OR c.status NOT IN ('active', 'pending', 'blocked')
                OR c.conversation_id <> l.conversation_id OR c.actor_id <> l.actor_id
                OR l.expires_at > c.expires_at)
    ),
    -- cscp.context_retired out of step with the contexts: a retired context without its row (with
    -- the context's status and updated_at), or a row naming no such retired context.
    unretired AS (
        SELECT 'unlisted_retired_context'::text AS kind, c.tenant_id, c.context_id::text AS object_id,
               format('context is %s since %s, but cscp.context_retired has no row for it',
                      c.status, c.updated_at) AS detail
          FROM cscp.context c
         WHERE c.status IN ('expired', 'closed') AND ($1 IS NULL OR c.tenant_id = $1)
           AND NOT EXISTS (SELECT FROM cscp.context_retired r
                            WHERE r.tenant_id = c.tenant_id AND r.context_id = c.context_id
                              AND r.status = c.status AND r.retired_at = c.updated_at)
        UNION ALL
        SELECT 'unlisted_retired_context', r.tenant_id, r.context_id::text,
               CASE WHEN c.context_id IS NULL THEN 'cscp.context_retired names a context that does not exist'
                    ELSE format('cscp.context_retired has it %s since %s, the context is %s since %s',
                                r.status, r.retired_at, c.status, c.updated_at) END
          FROM cscp.context_retired r
          LEFT JOIN cscp.context c ON c.tenant_id = r.tenant_id AND c.context_id = r.context_id
         WHERE ($1 IS NULL OR r.tenant_id = $1)
           AND (c.context_id IS NULL OR c.status <> r.status OR c.updated_at <> r.retired_at
                OR c.conversation_id <> r.conversation_id)
    ),
    -- cscp.command_window and cscp.command_retired out of step with the commands: an open window
    -- or a finished command without its row (with the window's end, or the last transition's
    -- time), or a row naming a command that does not exist or differs.
    windows AS (
        SELECT 'unlisted_command'::text AS kind, m.tenant_id, m.command_id::text AS object_id,
               CASE WHEN m.state IN ('confirmation_required', 'authz_pending')
                    THEN format('command is %s until %s, but cscp.command_window has no row for it',
                                m.state, m.window_expires_at)
                    ELSE format('command is %s since %s, but cscp.command_retired has no row for it',
                                m.state, m.last_transition_at) END AS detail
          FROM cscp.command m
         WHERE ($1 IS NULL OR m.tenant_id = $1)
           AND CASE WHEN m.state IN ('confirmation_required', 'authz_pending')
                    THEN m.window_expires_at IS NOT NULL
                         AND NOT EXISTS (SELECT FROM cscp.command_window w
                                          WHERE w.tenant_id = m.tenant_id AND w.command_id = m.command_id
                                            AND w.window_expires_at = m.window_expires_at)
                    WHEN m.state IN ('rejected', 'executed', 'failed', 'canceled', 'compensated')
                    THEN NOT EXISTS (SELECT FROM cscp.command_retired r
                                      WHERE r.tenant_id = m.tenant_id AND r.command_id = m.command_id
                                        AND r.retired_at = m.last_transition_at)
                    ELSE false END
        UNION ALL
        SELECT 'unlisted_command', w.tenant_id, w.command_id::text,
               CASE WHEN m.command_id IS NULL THEN 'cscp.command_window names a command that does not exist'
                    ELSE format('cscp.command_window has its window open until %s, the command is %s%s',
                                w.window_expires_at, m.state,
                                CASE WHEN m.window_expires_at IS NULL THEN ' with no window'
                                     ELSE ' until ' || m.window_expires_at END) END
          FROM cscp.command_window w
          LEFT JOIN cscp.command m ON m.tenant_id = w.tenant_id AND m.command_id = w.command_id
         WHERE ($1 IS NULL OR w.tenant_id = $1)
           AND (m.command_id IS NULL OR m.state NOT IN ('confirmation_required', 'authz_pending')
                OR m.window_expires_at IS DISTINCT FROM w.window_expires_at
                OR m.conversation_id <> w.conversation_id
                OR m.context_id IS DISTINCT FROM w.context_id
                OR w.question <> CASE WHEN m.state = 'confirmation_required' THEN 'confirmation'
                                      ELSE 'approval' END)
        UNION ALL
        SELECT 'unlisted_command', r.tenant_id, r.command_id::text,
               CASE WHEN m.command_id IS NULL THEN 'cscp.command_retired names a command that does not exist'
                    ELSE format('cscp.command_retired has it finished at %s, the command is %s since %s',
                                r.retired_at, m.state, m.last_transition_at) END
          FROM cscp.command_retired r
          LEFT JOIN cscp.command m ON m.tenant_id = r.tenant_id AND m.command_id = r.command_id
         WHERE ($1 IS NULL OR r.tenant_id = $1)
           AND (m.command_id IS NULL
                OR m.state NOT IN ('rejected', 'executed', 'failed', 'canceled', 'compensated')
                OR m.last_transition_at <> r.retired_at OR m.conversation_id <> r.conversation_id)
    ),
    -- The evidence verifier's findings: a command whose state is not where its chain ends, or a
    -- chain that is broken (a row altered, missing or re-linked).
    verified AS (
        SELECT CASE WHEN p.problem LIKE 'chain ends in state %' THEN 'unexplained_command_state'
                    ELSE 'broken_evidence_chain' END AS kind,
               p.tenant_id,
               coalesce(p.command_id::text, 'evidence:' || p.evidence_id) AS object_id,
               p.problem || CASE WHEN p.evidence_id IS NOT NULL
                                 THEN format(' (seq %s, evidence_id %s)', p.seq, p.evidence_id)
                                 ELSE '' END AS detail
          FROM cscp.evidence_problems($1, NULL) p
    ),
    -- A chain of transitions the lifecycle does not allow: each transition must start where the
    -- one before it ended (the first from received) and be an edge of the transition table.
    steps AS (
        SELECT e.tenant_id, e.command_id, e.seq, e.from_state, e.to_state,
               lag(e.to_state) OVER (PARTITION BY e.tenant_id, e.command_id ORDER BY e.seq) AS prev_to
          FROM cscp.evidence e
         WHERE e.command_id IS NOT NULL AND e.event_type <> 'invalid_transition_attempt'
           AND ($1 IS NULL OR e.tenant_id = $1)
    ),
    labels AS (
        SELECT pg_catalog.enum_range(NULL::cscp.command_state)::text[] AS names
    ),
    paths AS (
        SELECT 'unexplained_command_state'::text AS kind, s.tenant_id, s.command_id::text AS object_id,
               format('evidence seq %s records %s -> %s, which %s', s.seq,
                      coalesce(s.from_state, 'nothing'), coalesce(s.to_state, 'nothing'),
                      CASE WHEN s.from_state IS DISTINCT FROM coalesce(s.prev_to, 'received')
                           THEN format('does not follow the state before it (%s)',
                                       coalesce(s.prev_to, 'received'))
                           ELSE 'the command lifecycle does not allow' END) AS detail
          FROM steps s, labels l
         WHERE s.from_state IS DISTINCT FROM coalesce(s.prev_to, 'received')
            OR NOT CASE WHEN s.from_state = ANY (l.names) AND s.to_state = ANY (l.names)
                        THEN cscp.command_transition_allowed(s.from_state::cscp.command_state,
                                                             s.to_state::cscp.command_state)
                        ELSE false END
    ),
    -- Commands that reached started: a mutating one passed confirmed (or was auto-confirmed by a
    -- policy its acceptance records), and every one passed authorized, by its row and by its
    -- evidence.
    begun AS (
        SELECT m.tenant_id, m.command_id, m.state, m.mutating, m.auto_confirm,
               m.confirmed_at, m.authorized_at,
               EXISTS (SELECT 1 FROM cscp.evidence e
                        WHERE e.tenant_id = m.tenant_id AND e.command_id = m.command_id
                          AND e.event_type <> 'invalid_transition_attempt'
                          AND e.to_state = 'confirmed') AS confirmed_evidence,
               EXISTS (SELECT 1 FROM cscp.evidence e
                        WHERE e.tenant_id = m.tenant_id AND e.command_id = m.command_id
                          AND e.event_type <> 'invalid_transition_attempt'
                          AND e.to_state = 'authorized') AS authorized_evidence,
               EXISTS (SELECT 1 FROM cscp.evidence e
                        WHERE e.tenant_id = m.tenant_id AND e.command_id = m.command_id
                          AND e.event_type = 'command.accepted'
                          AND e.decision = 'auto_confirm') AS auto_confirm_evidence
          FROM cscp.command m
         WHERE m.state IN ('started', 'executed', 'failed', 'compensated')
           AND ($1 IS NULL OR m.tenant_id = $1)
    ),
    starts AS (
        SELECT 'start_without_confirmation'::text AS kind, b.tenant_id, b.command_id::text AS object_id,
               format('mutating command is %s but %s', b.state,
                      CASE WHEN b.auto_confirm THEN 'its acceptance records no auto_confirm policy'
                           WHEN b.confirmed_at IS NULL THEN 'it has no confirmed_at'
                           ELSE 'its evidence records no transition to confirmed' END) AS detail
          FROM begun b
         WHERE b.mutating
           AND CASE WHEN b.auto_confirm THEN NOT b.auto_confirm_evidence
                    ELSE b.confirmed_at IS NULL OR NOT b.confirmed_evidence END
        UNION ALL
        SELECT 'start_without_authorization', b.tenant_id, b.command_id::text,
               format('command is %s but %s', b.state,
                      CASE WHEN b.authorized_at IS NULL THEN 'it has no authorized_at'
                           ELSE 'its evidence records no transition to authorized' END)
          FROM begun b
         WHERE b.authorized_at IS NULL OR NOT b.authorized_evidence
    ),
    -- Turn indexes run 0, 1, ... next_turn_index - 1 without a gap.
    turn_steps AS (
        SELECT t.tenant_id, t.conversation_id, t.turn_index,
               lag(t.turn_index) OVER (PARTITION BY t.tenant_id, t.conversation_id
                                       ORDER BY t.turn_index) AS prev_index
          FROM cscp.turn t
         WHERE $1 IS NULL OR t.tenant_id = $1
    ),
    turn_counts AS (
        SELECT s.tenant_id, s.conversation_id, count(*) AS n, max(s.turn_index) AS last_index,
               string_agg(CASE WHEN s.turn_index <> coalesce(s.prev_index, -1) + 1
                               THEN CASE WHEN s.turn_index - coalesce(s.prev_index, -1) = 2
                                         THEN (s.turn_index - 1)::text
                                         ELSE format('%s..%s', coalesce(s.prev_index, -1) + 1,
                                                     s.turn_index - 1) END END,
                          ', ' ORDER BY s.turn_index) AS holes
          FROM turn_steps s
         GROUP BY s.tenant_id, s.conversation_id
    ),
    gaps AS (
        SELECT 'turn_index_gap'::text AS kind, coalesce(t.tenant_id, c.tenant_id) AS tenant_id,
               coalesce(t.conversation_id, c.conversation_id) AS object_id,
               concat_ws('; ',
                   CASE WHEN t.holes IS NOT NULL THEN 'turns missing at index ' || t.holes END,
                   CASE WHEN c.conversation_id IS NULL THEN 'turns without a conversation row'
                        WHEN coalesce(t.last_index + 1, 0) <> c.next_turn_index
                        THEN format('the conversation''s next turn index is %s but its last turn is %s',
                                    c.next_turn_index, coalesce(t.last_index::text, 'none')) END)
                   AS detail
          FROM turn_counts t
          FULL JOIN (SELECT x.tenant_id, x.conversation_id, x.next_turn_index FROM cscp.conversation x
                      WHERE $1 IS NULL OR x.tenant_id = $1) c
            ON c.tenant_id = t.tenant_id AND c.conversation_id = t.conversation_id
         WHERE t.holes IS NOT NULL
            OR c.conversation_id IS NULL
            OR coalesce(t.last_index + 1, 0) <> c.next_turn_index
    ),
    -- A valid fact is the head of its chain: no valid fact supersedes it.
    heads AS (
        SELECT 'valid_fact_with_valid_successor'::text AS kind, f.tenant_id, f.fact_id AS object_id,
               format('fact of subject %s is valid, and so is fact %s, which supersedes it',
                      f.subject_id, n.fact_id) AS detail
          FROM cscp.fact f
          JOIN cscp.fact n ON n.tenant_id = f.tenant_id AND n.subject_id = f.subject_id
                          AND n.supersedes = f.fact_id
         WHERE f.is_valid AND n.is_valid AND ($1 IS NULL OR f.tenant_id = $1)
    ),
    -- Supersession chains end: walking from each chain's first fact (one that supersedes nothing,
    -- or names a fact that is not there) reaches every fact that is in a chain; a superseding
    -- fact it never reaches is on a loop.
    chained AS MATERIALIZED (
        SELECT f.tenant_id, f.subject_id, f.fact_id, f.supersedes
          FROM cscp.fact f
         WHERE f.supersedes IS NOT NULL AND ($1 IS NULL OR f.tenant_id = $1)
    ),
    reached AS (
        WITH RECURSIVE walk AS (
            SELECT c.tenant_id, c.subject_id, c.fact_id
              FROM chained c
             WHERE NOT EXISTS (SELECT 1 FROM cscp.fact p
                                WHERE p.tenant_id = c.tenant_id AND p.subject_id = c.subject_id
                                  AND p.fact_id = c.supersedes AND p.supersedes IS NOT NULL)
            UNION
            SELECT n.tenant_id, n.subject_id, n.fact_id
              FROM walk w
              JOIN cscp.fact n ON n.tenant_id = w.tenant_id AND n.subject_id = w.subject_id
                              AND n.supersedes = w.fact_id
        )
        SELECT * FROM walk
    ),
    -- (Looked for only when the walk reached fewer facts than there are in chains.)
    looped AS (
        SELECT c.* FROM chained c
         WHERE (SELECT count(*) FROM reached) < (SELECT count(*) FROM chained)
           AND NOT EXISTS (SELECT 1 FROM reached r
                            WHERE r.tenant_id = c.tenant_id AND r.subject_id = c.subject_id
                              AND r.fact_id = c.fact_id)
    ),
    loops AS (
        WITH RECURSIVE round AS (
            SELECT l.tenant_id, l.subject_id, l.fact_id AS start, l.supersedes AS next,
                   ARRAY[l.fact_id] AS path
              FROM looped l
            UNION ALL
            SELECT r.tenant_id, r.subject_id, r.start, l.supersedes, r.path || l.fact_id
              FROM round r
              JOIN looped l ON l.tenant_id = r.tenant_id AND l.subject_id = r.subject_id
                           AND l.fact_id = r.next
             WHERE r.next <> r.start AND l.fact_id <> ALL (r.path)
        )
        SELECT 'cyclic_fact_chain'::text AS kind, r.tenant_id, r.start AS object_id,
               format('the supersession chain of subject %s loops: %s -> %s', r.subject_id,
                      array_to_string(r.path, ' -> '), r.start) AS detail
          FROM round r
         WHERE r.next = r.start
           AND r.start = (SELECT min(x COLLATE "C") FROM unnest(r.path) x)
    ),
    -- A pending_confirmation or pending_approval slot naming a command of another tenant,
    -- conversation, actor or context (a slot naming no command at all is left to confirm, which
    -- answers nothing_pending; finished commands may have been purged before their context).
    slot_names AS (
        SELECT c.tenant_id, c.context_id, c.conversation_id, c.actor_id, s.slot,
               (c.slots -> s.slot ->> 'command_id')::uuid AS named
          FROM cscp.context c,
               (VALUES ('pending_confirmation'), ('pending_approval')) AS s (slot)
         WHERE jsonb_typeof(c.slots -> s.slot) = 'object'
           AND (c.slots -> s.slot ->> 'command_id')
               ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
           AND ($1 IS NULL OR c.tenant_id = $1)
    ),
    pendings AS (
        SELECT 'foreign_pending_slot'::text AS kind, n.tenant_id, n.context_id::text AS object_id,
               format('%s names command %s of %s', n.slot, m.command_id,
                      CASE WHEN m.tenant_id <> n.tenant_id THEN 'another tenant'
                           WHEN m.conversation_id <> n.conversation_id THEN 'another conversation'
                           WHEN m.actor_id <> n.actor_id THEN 'another actor'
                           ELSE 'another context' END) AS detail
          FROM slot_names n
          JOIN cscp.command m ON m.command_id = n.named
         WHERE m.tenant_id <> n.tenant_id OR m.conversation_id <> n.conversation_id
            OR m.actor_id <> n.actor_id OR m.context_id IS DISTINCT FROM n.context_id
    ),
    -- A context asking the same question twice: more than one of its commands waiting for a
    -- confirmation (confirmation_required) or for an approval (authz_pending with a window).
    questions AS (
        SELECT 'multiple_waiting_commands'::text AS kind, m.tenant_id, m.context_id::text AS object_id,
               format('%s commands wait for %s: %s', count(*),
                      CASE WHEN m.state = 'confirmation_required' THEN 'confirmation' ELSE 'approval' END,
                      string_agg(m.command_id::text, ', ' ORDER BY m.command_id)) AS detail
          FROM cscp.command m
         WHERE ($1 IS NULL OR m.tenant_id = $1) AND m.context_id IS NOT NULL
           AND (m.state = 'confirmation_required'
                OR (m.state = 'authz_pending' AND m.window_expires_at IS NOT NULL))
         GROUP BY m.tenant_id, m.context_id, m.state
        HAVING count(*) > 1
    ),
    -- A command confirmed (by its row or its evidence) with neither a recorded yes for it
    -- (cscp.answer, kind confirm, outcome confirmed) nor an auto_confirm policy its acceptance
    -- records.
    confirmations AS (
        SELECT 'confirmed_without_answer'::text AS kind, m.tenant_id, m.command_id::text AS object_id,
               format('command is %s and was confirmed, but no answer confirmed it', m.state) AS detail
          FROM cscp.command m
         WHERE ($1 IS NULL OR m.tenant_id = $1)
           AND (m.confirmed_at IS NOT NULL
                OR EXISTS (SELECT 1 FROM cscp.evidence e
                            WHERE e.tenant_id = m.tenant_id AND e.command_id = m.command_id
                              AND e.event_type <> 'invalid_transition_attempt'
                              AND e.to_state = 'confirmed'))
           AND NOT EXISTS (SELECT 1 FROM cscp.answer a
                            WHERE a.tenant_id = m.tenant_id AND a.conversation_id = m.conversation_id
                              AND a.kind = 'confirm' AND a.command_id = m.command_id
                              AND a.outcome = 'confirmed')
           AND NOT (m.auto_confirm
                    AND EXISTS (SELECT 1 FROM cscp.evidence e
                                 WHERE e.tenant_id = m.tenant_id AND e.command_id = m.command_id
                                   AND e.event_type = 'command.accepted'
                                   AND e.decision = 'auto_confirm'))
    ),
    -- A step to confirmed, authz_pending, authorized or started taken when the command's context
    -- had ended: at or past its expires_at, or after it was recorded expired or closed (at its
    -- updated_at; a step at that very time, under a pinned clock, may have come first).  A
    -- cancel recovery is not judged by its context (context_ended in src/command/command_fsm.c): a
    -- command is canceled after its context ended too.
    late AS (
        SELECT 'moved_after_context_ended'::text AS kind, m.tenant_id, m.command_id::text AS object_id,
               format('evidence seq %s records %s -> %s at %s; its context %s %s', e.seq,
                      e.from_state, e.to_state, e.created_at, c.context_id,
                      CASE WHEN e.created_at >= c.expires_at
                           THEN format('expired at %s', c.expires_at)
                           ELSE format('was %s at %s', c.status, c.updated_at) END) AS detail
          FROM cscp.command m
          JOIN cscp.context c ON c.tenant_id = m.tenant_id AND c.context_id = m.context_id
          JOIN cscp.evidence e ON e.tenant_id = m.tenant_id AND e.command_id = m.command_id
         WHERE ($1 IS NULL OR m.tenant_id = $1)
           AND m.recovery_kind IS DISTINCT FROM 'cancel'
           AND e.event_type <> 'invalid_transition_attempt'
           AND e.to_state IN ('confirmed', 'authz_pending', 'authorized', 'started')
           AND (e.created_at >= c.expires_at
                OR (c.status IN ('expired', 'closed') AND e.created_at > c.updated_at))
    ),
    -- An expiry that is infinite or later than now + the tenant's max_ttl: contexts, documents
    -- and working-set items.  max_ttl bounds what a write may ask for, so a policy change after
    -- a row's last write (max_ttl lowered) leaves it healthy: such a row is judged by the largest
    -- max_ttl in force since, read from the policy rows cscp.governance_log kept.
    expiries AS (
        SELECT 'cscp.context'::text AS tbl, c.tenant_id, c.context_id::text AS id, c.expires_at,
               c.updated_at AS written_at
          FROM cscp.context c WHERE $1 IS NULL OR c.tenant_id = $1
        UNION ALL
        SELECT 'cscp.document', d.tenant_id, d.session_id || ':' || d.namespace, d.expires_at,
               d.updated_at
          FROM cscp.document d WHERE $1 IS NULL OR d.tenant_id = $1
        UNION ALL
        SELECT 'cscp.working_set', w.tenant_id, w.session_id || ':' || w.key, w.expires_at,
               w.updated_at
          FROM cscp.working_set w WHERE $1 IS NULL OR w.tenant_id = $1
    ),
    max_ttls AS (
        SELECT t.tenant_id,
               coalesce((cscp.policy_effective(t.tenant_id) ->> 'max_ttl')::interval,
                        interval '10 years') AS max_ttl
          FROM (SELECT DISTINCT x.tenant_id FROM expiries x) t
    ),
    lifetimes AS (
        SELECT 'unbounded_expiry'::text AS kind, x.tenant_id, x.id AS object_id,
               format('%s expires at %s, %s', x.tbl, x.expires_at,
                      CASE WHEN NOT isfinite(x.expires_at) THEN 'which is not finite'
                           ELSE format('later than now + max_ttl (%s)', t.max_ttl) END) AS detail
          FROM expiries x JOIN max_ttls t ON t.tenant_id = x.tenant_id
         WHERE NOT isfinite(x.expires_at)
            OR (x.expires_at > cscp.now() + t.max_ttl
                AND x.expires_at > cscp.now() + coalesce(
                    (SELECT max(b.max_ttl)
                       FROM cscp.governance_log g,
                            LATERAL (VALUES ((g.old_value -> 'settings' ->> 'max_ttl')::interval),
                                            ((cscp.policy_effective('*') ->> 'max_ttl')::interval)) b(max_ttl)
                      WHERE g.object = 'policy' AND g.tenant_id IN (x.tenant_id, '*')
                        AND g.changed_at >= x.written_at),
                    t.max_ttl))
    ),
    -- Snapshot-on-execute: a frame whose hash is not its state's; a command whose context_ref
    -- does not match the frame it names (or names a frame that does not exist); a mutating
    -- command that went on from canonicalized without context, frame or message ids.
    frames AS (
        SELECT 'frame_hash_mismatch'::text AS kind, f.tenant_id, f.frame_id::text AS object_id,
               'the frame''s context_hash is not the hash of its state' AS detail
          FROM cscp.frame f
         WHERE ($1 IS NULL OR f.tenant_id = $1)
           AND f.context_hash IS DISTINCT FROM cscp.canonical_hash(f.state)
        UNION ALL
        SELECT 'frame_hash_mismatch', m.tenant_id, m.command_id::text,
               CASE WHEN f.frame_id IS NULL THEN format('command names frame %s, which does not exist', m.frame_id)
                    ELSE format('command''s context_ref does not match its frame %s', m.frame_id) END
          FROM cscp.command m
          LEFT JOIN cscp.frame f ON f.tenant_id = m.tenant_id AND f.frame_id = m.frame_id
         WHERE ($1 IS NULL OR m.tenant_id = $1) AND m.frame_id IS NOT NULL
           AND (f.frame_id IS NULL
                OR f.conversation_id <> m.conversation_id
                OR f.context_id IS DISTINCT FROM m.context_id
                OR m.context_ref ->> 'frame_id' IS DISTINCT FROM m.frame_id::text
                OR m.context_ref ->> 'context_id' IS DISTINCT FROM m.context_id::text
                OR m.context_ref ->> 'context_hash' IS DISTINCT FROM f.context_hash)
        UNION ALL
        SELECT 'unframed_command', m.tenant_id, m.command_id::text,
               format('mutating command is %s without %s', m.state,
                      concat_ws(', ', CASE WHEN m.context_id IS NULL THEN 'a context' END,
                                CASE WHEN m.frame_id IS NULL THEN 'a frame' END,
                                CASE WHEN coalesce(cardinality(m.message_ids), 0) = 0
                                     THEN 'message ids' END))
          FROM cscp.command m
         WHERE ($1 IS NULL OR m.tenant_id = $1) AND m.mutating
           AND m.state IN ('confirmation_required', 'confirmed', 'authz_pending', 'authorized',
                           'started', 'executed', 'failed', 'compensated')
           AND (m.context_id IS NULL OR m.frame_id IS NULL
                OR coalesce(cardinality(m.message_ids), 0) = 0)
    ),
    -- A recovery aimed at a command of another conversation or actor (or at none), or a
    -- compensation that is not mutating (so it skipped the user's confirmation).
    recoveries AS (
        SELECT 'invalid_recovery'::text AS kind, r.tenant_id, r.command_id::text AS object_id,
               CASE WHEN NOT r.mutating AND r.recovery_kind = 'compensate'
                    THEN 'compensate recovery is not mutating'
                    WHEN t.command_id IS NULL
                    THEN format('%s recovery aims at command %s, which does not exist', r.recovery_kind,
                                r.target_command_id)
                    ELSE format('%s recovery aims at command %s of another conversation or actor',
                                r.recovery_kind, r.target_command_id) END AS detail
          FROM cscp.command r
          LEFT JOIN cscp.command t ON t.tenant_id = r.tenant_id AND t.command_id = r.target_command_id
         WHERE ($1 IS NULL OR r.tenant_id = $1) AND r.recovery_kind IS NOT NULL
           AND (t.command_id IS NULL OR t.conversation_id <> r.conversation_id
                OR t.actor_id <> r.actor_id
                OR (NOT r.mutating AND r.recovery_kind = 'compensate'))
    ),
    found AS (
        SELECT * FROM live
        UNION ALL SELECT * FROM unlisted
        UNION ALL SELECT * FROM unretired
        UNION ALL SELECT * FROM windows
        UNION ALL SELECT * FROM verified
        UNION ALL SELECT * FROM paths
        UNION ALL SELECT * FROM starts
        UNION ALL SELECT * FROM gaps
        UNION ALL SELECT * FROM heads
        UNION ALL SELECT * FROM loops
        UNION ALL SELECT * FROM pendings
        UNION ALL SELECT * FROM questions
        UNION ALL SELECT * FROM confirmations
        UNION ALL SELECT * FROM late
        UNION ALL SELECT * FROM lifetimes
        UNION ALL SELECT * FROM frames
        UNION ALL SELECT * FROM recoveries
    )
    SELECT f.kind, f.tenant_id, f.object_id, f.detail
      FROM found f
     ORDER BY f.kind, f.tenant_id COLLATE "C", f.object_id COLLATE "C", f.detail COLLATE "C";
$$;
COMMENT ON FUNCTION cscp._check_invariants(text) IS
  'Internal: cscp.check_invariants for every tenant, or one';

-- What an operator calls: the same rows, for the tenants the asking role may see (inspect.c).
CREATE FUNCTION cscp.check_invariants(tenant_id text DEFAULT NULL)
RETURNS TABLE(kind text, tenant_id text, object_id text, detail text)
    AS 'MODULE_PATHNAME', 'cscp_check_invariants' LANGUAGE C STABLE;
COMMENT ON FUNCTION cscp.check_invariants(text) IS
  'One row per violated invariant (of one tenant, or of all): multiple_live_contexts, unlisted_live_context, unlisted_retired_context, unlisted_command, unexplained_command_state, start_without_confirmation, start_without_authorization, broken_evidence_chain, turn_index_gap, valid_fact_with_valid_successor, cyclic_fact_chain, foreign_pending_slot, multiple_waiting_commands, confirmed_without_answer, moved_after_context_ended, unbounded_expiry, frame_hash_mismatch, unframed_command, invalid_recovery; empty when healthy';
