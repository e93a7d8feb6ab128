\i sql/include/helpers.sql
-- The command lifecycle (RFC-WF-0018, DESIGN.md section 5): every (from, to) pair through
-- cscp.command_transition and through a direct UPDATE, the ordering invariants, command_submit
-- (idempotent replay, context checks, superseded confirmations, frames), command_recover and
-- command_status.  Commands of this file belong to tenant 'tc'; ids are random and never printed.
SET cscp.clock = '2026-03-01 10:00:00+00';
\set SHOW_CONTEXT never

-- A command of tenant 'tc' (key, name, mutating, auto_confirm) inserted directly in state st
-- with the snapshot of a read-only command submitted to the context of conv first (its context,
-- frame, context_ref and message ids): no row reaches canonicalized without the frame it was
-- formed from (issue 39, item 10), so a direct INSERT names one of its own context.
CREATE FUNCTION pg_temp.framed(conv text, key text, name text, mut boolean, auto boolean,
                               st cscp.command_state) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    seed uuid;
    id uuid;
BEGIN
    PERFORM cscp.context_open('tc', conv, 'actor');
    seed := (cscp.command_submit('tc', conv, 'actor', key || ':seed', 'lookup', false,
                                 ARRAY[conv || ':m1'])).command_id;
    INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name,
                              mutating, auto_confirm, state, context_id, frame_id, context_ref,
                              message_ids)
    SELECT 'tc', key, conv, 'actor', name, mut, auto, st, c.context_id, c.frame_id, c.context_ref,
           c.message_ids
      FROM cscp.command c WHERE c.tenant_id = 'tc' AND c.command_id = seed
    RETURNING command_id INTO id;
    RETURN id;
END
$$;

-- A command of tenant 'tc' in conversation conv, driven along allowed edges into state st.
-- received is a direct INSERT with its snapshot (command_submit always canonicalizes); canonicalized is a
-- non-mutating submit; every other state starts from a mutating submit (confirmation_required)
-- and goes on through confirmed, authz_pending, authorized, started; compensated is executed and
-- then compensated by an executed compensate recovery.
CREATE FUNCTION pg_temp.cmd_in(conv text, st cscp.command_state) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    id uuid;
    comp uuid;
    path cscp.command_state[];
    s cscp.command_state;
    r record;
BEGIN
    PERFORM cscp.context_open('tc', conv, 'actor');
    IF st = 'received' THEN
        RETURN pg_temp.framed(conv, conv || ':k', 'lookup', false, false, 'received');
    END IF;
    path := CASE st
        WHEN 'canonicalized' THEN '{}'
        WHEN 'confirmation_required' THEN '{}'
        WHEN 'confirmed' THEN '{confirmed}'
        WHEN 'authz_pending' THEN '{confirmed,authz_pending}'
        WHEN 'authorized' THEN '{confirmed,authz_pending,authorized}'
        WHEN 'started' THEN '{confirmed,authz_pending,authorized,started}'
        WHEN 'executed' THEN '{confirmed,authz_pending,authorized,started,executed}'
        WHEN 'failed' THEN '{confirmed,authz_pending,authorized,started,failed}'
        WHEN 'rejected' THEN '{rejected}'
        WHEN 'canceled' THEN '{canceled}'
        WHEN 'compensated' THEN '{confirmed,authz_pending,authorized,started,executed}'
    END::cscp.command_state[];
    SELECT * INTO r FROM cscp.command_submit('tc', conv, 'actor', conv || ':k',
        CASE WHEN st = 'canonicalized' THEN 'lookup' ELSE 'transfer' END,
        st <> 'canonicalized', ARRAY[conv || ':m1']);
    id := r.command_id;
    FOREACH s IN ARRAY path LOOP
        -- confirmed only through the user's answer (cscp.confirm), never by command_transition
        IF s = 'confirmed' THEN
            SELECT 'confirmed' = a.outcome, a.outcome INTO r
              FROM cscp.confirm('tc', conv, 'actor', conv || ':yes', true) a;
            IF r.outcome <> 'confirmed' THEN
                RAISE EXCEPTION 'cmd_in(%, %): the yes answered %', conv, st, r.outcome;
            END IF;
            CONTINUE;
        END IF;
        SELECT * INTO r FROM cscp.command_transition(id, s, 'step-' || s);
        IF NOT r.accepted THEN
            RAISE EXCEPTION 'cmd_in(%, %): % refused: %', conv, st, s, r.reason_code;
        END IF;
    END LOOP;
    IF st = 'compensated' THEN
        comp := (SELECT c.command_id FROM cscp.command_recover(id, 'compensate', conv || ':comp') c);
        FOREACH s IN ARRAY '{confirmed,authz_pending,authorized,started,executed}'::cscp.command_state[] LOOP
            IF s = 'confirmed' THEN
                PERFORM cscp.confirm('tc', conv, 'actor', conv || ':comp-yes', true);
                CONTINUE;
            END IF;
            SELECT * INTO r FROM cscp.command_transition(comp, s, 'step-' || s);
            IF NOT r.accepted THEN
                RAISE EXCEPTION 'cmd_in(%, %): compensation % refused: %', conv, st, s, r.reason_code;
            END IF;
        END LOOP;
    END IF;
    RETURN id;
END
$$;

-- Every state can be reached this way.
CREATE TEMP TABLE reach AS
SELECT s, pg_temp.cmd_in('reach-' || s, s) AS id FROM unnest(enum_range(NULL::cscp.command_state)) s;
SELECT r.s AS wanted, c.state, c.mutating FROM reach r JOIN cscp.command c ON c.command_id = r.id ORDER BY r.s;

---------------------------------------------------------------------------------------------------
-- 1. Every (from, to) pair.  For each pair a fresh command is put in `from` and asked to move to
-- `to`, through cscp.command_transition (never raises: accepted or a reason code) or through a
-- direct UPDATE (raises 55000).  For executed/failed -> compensated, an executed compensate
-- recovery aimed at the command is prepared first (moved by direct UPDATEs, so that it does not
-- compensate its target by itself), so that the table alone decides every pair.
CREATE FUNCTION pg_temp.matrix(direct boolean)
RETURNS TABLE (from_state cscp.command_state, to_state cscp.command_state, allowed boolean,
               result text, state_after cscp.command_state, version_delta bigint, evidence text)
LANGUAGE plpgsql AS $$
DECLARE
    f cscp.command_state;
    t cscp.command_state;
    id uuid;
    comp uuid;
    conv text;
    v_before bigint;
    e_before int;
    s cscp.command_state;
    r record;
BEGIN
    FOR f IN SELECT unnest(enum_range(NULL::cscp.command_state)) LOOP
        FOR t IN SELECT unnest(enum_range(NULL::cscp.command_state)) LOOP
            conv := format('m-%s-%s-%s', direct, f, t);
            id := pg_temp.cmd_in(conv, f);
            IF t = 'compensated' AND f IN ('executed', 'failed') THEN
                comp := (SELECT c.command_id FROM cscp.command_recover(id, 'compensate', conv || ':comp') c);
                PERFORM cscp.confirm('tc', conv, 'actor', conv || ':comp-yes', true);
                FOREACH s IN ARRAY '{authz_pending,authorized,started,executed}'::cscp.command_state[] LOOP
                    UPDATE cscp.command c SET state = s WHERE c.command_id = comp;
                END LOOP;
            END IF;
            SELECT c.version INTO v_before FROM cscp.command c WHERE c.command_id = id;
            SELECT max(e.seq) INTO e_before FROM cscp.evidence e WHERE e.command_id = id;
            from_state := f;
            to_state := t;
            allowed := cscp.command_transition_allowed(f, t);
            IF direct THEN
                result := try(format('UPDATE cscp.command SET state = %L WHERE command_id = %L', t, id));
            ELSE
                BEGIN
                    SELECT * INTO r FROM cscp.command_transition(id, t, 'matrix');
                    result := CASE WHEN r.accepted THEN 'accepted' ELSE 'refused: ' || r.reason_code END
                              || CASE WHEN r.state IS DISTINCT FROM
                                           (SELECT c.state FROM cscp.command c WHERE c.command_id = id)
                                      THEN ' (but returned state ' || r.state || ')' ELSE '' END;
                EXCEPTION WHEN OTHERS THEN
                    result := 'error: ' || SQLSTATE || ' ' || SQLERRM;
                END;
            END IF;
            SELECT c.state, c.version - v_before INTO state_after, version_delta
              FROM cscp.command c WHERE c.command_id = id;
            SELECT string_agg(e.event_type, ', ' ORDER BY e.seq) INTO evidence
              FROM cscp.evidence e WHERE e.command_id = id AND e.seq > coalesce(e_before, 0);
            RETURN NEXT;
        END LOOP;
    END LOOP;
END
$$;
CREATE TEMP TABLE mf AS SELECT * FROM pg_temp.matrix(false);
CREATE TEMP TABLE md AS SELECT * FROM pg_temp.matrix(true);

-- The grid, one row per from state, one column per to state: 'ok' = the transition happened
-- (state is `to`, version + 1, one evidence row); '-' = refused with reason invalid_transition,
-- state and version unchanged, and one invalid_transition_attempt evidence row; 'ans' = an
-- allowed step that only the user's answer takes (55000: use cscp.confirm), nothing written;
-- anything else would be printed as 'BAD'.
CREATE FUNCTION pg_temp.grid_cell(m mf) RETURNS text LANGUAGE sql AS $$
    SELECT CASE
        WHEN m.result LIKE 'error: 55000 %without the user''s answer' AND m.state_after = m.from_state
             AND m.version_delta = 0 AND m.evidence IS NULL THEN 'ans'
        WHEN m.result = 'accepted' AND m.state_after = m.to_state AND m.version_delta = 1
             AND m.evidence NOT LIKE '%,%' AND m.evidence <> 'invalid_transition_attempt' THEN 'ok'
        WHEN m.result = 'refused: invalid_transition' AND m.state_after = m.from_state
             AND m.version_delta = 0 AND m.evidence = 'invalid_transition_attempt' THEN '-'
        ELSE 'BAD' END
$$;
SELECT from_state,
       max(c) FILTER (WHERE to_state = 'received') AS rcv,
       max(c) FILTER (WHERE to_state = 'canonicalized') AS can,
       max(c) FILTER (WHERE to_state = 'confirmation_required') AS cfr,
       max(c) FILTER (WHERE to_state = 'confirmed') AS cfd,
       max(c) FILTER (WHERE to_state = 'authz_pending') AS azp,
       max(c) FILTER (WHERE to_state = 'authorized') AS aut,
       max(c) FILTER (WHERE to_state = 'rejected') AS rej,
       max(c) FILTER (WHERE to_state = 'started') AS sta,
       max(c) FILTER (WHERE to_state = 'executed') AS exe,
       max(c) FILTER (WHERE to_state = 'failed') AS fai,
       max(c) FILTER (WHERE to_state = 'canceled') AS cnl,
       max(c) FILTER (WHERE to_state = 'compensated') AS cmp
  FROM (SELECT from_state, to_state, pg_temp.grid_cell(m) AS c FROM mf m) g
 GROUP BY from_state ORDER BY from_state;

-- The same grid for direct UPDATEs: 'ok' = it happened, with one evidence row; '-' = 55000,
-- state and version unchanged, no evidence (the refused statement wrote nothing).
CREATE FUNCTION pg_temp.grid_cell_direct(m md) RETURNS text LANGUAGE sql AS $$
    SELECT CASE
        WHEN m.result LIKE '55000 %without the user''s answer%' AND m.state_after = m.from_state
             AND m.version_delta = 0 AND m.evidence IS NULL THEN 'ans'
        WHEN m.result = 'ok' AND m.state_after = m.to_state AND m.version_delta = 1
             AND m.evidence NOT LIKE '%,%' AND m.evidence <> 'invalid_transition_attempt' THEN 'ok'
        WHEN m.result LIKE '55000 %' AND m.state_after = m.from_state
             AND m.version_delta = 0 AND m.evidence IS NULL THEN '-'
        ELSE 'BAD' END
$$;
SELECT from_state,
       max(c) FILTER (WHERE to_state = 'received') AS rcv,
       max(c) FILTER (WHERE to_state = 'canonicalized') AS can,
       max(c) FILTER (WHERE to_state = 'confirmation_required') AS cfr,
       max(c) FILTER (WHERE to_state = 'confirmed') AS cfd,
       max(c) FILTER (WHERE to_state = 'authz_pending') AS azp,
       max(c) FILTER (WHERE to_state = 'authorized') AS aut,
       max(c) FILTER (WHERE to_state = 'rejected') AS rej,
       max(c) FILTER (WHERE to_state = 'started') AS sta,
       max(c) FILTER (WHERE to_state = 'executed') AS exe,
       max(c) FILTER (WHERE to_state = 'failed') AS fai,
       max(c) FILTER (WHERE to_state = 'canceled') AS cnl,
       max(c) FILTER (WHERE to_state = 'compensated') AS cmp
  FROM (SELECT from_state, to_state, pg_temp.grid_cell_direct(m) AS c FROM md m) g
 GROUP BY from_state ORDER BY from_state;

-- Both ways agree with cscp.command_transition_allowed on every pair, but for the answer's own
-- step (confirmation_required -> confirmed, taken only by cscp.confirm): no row is listed.
SELECT f.from_state, f.to_state, f.allowed, f.result AS by_function, d.result AS by_update
  FROM mf f JOIN md d USING (from_state, to_state)
 WHERE pg_temp.grid_cell(f) <> CASE WHEN f.to_state = 'confirmed' AND f.allowed THEN 'ans'
                                    WHEN f.allowed THEN 'ok' ELSE '-' END
    OR pg_temp.grid_cell_direct(d) <> CASE WHEN d.to_state = 'confirmed' AND d.allowed THEN 'ans'
                                           WHEN d.allowed THEN 'ok' ELSE '-' END;
SELECT count(*) FILTER (WHERE allowed) AS allowed_pairs, count(*) AS pairs FROM mf;

-- The allowed pairs and the evidence each left (RFC-WF-0018 section IX event types).
SELECT from_state, to_state, evidence FROM mf WHERE allowed ORDER BY from_state, to_state;

-- The refusals of direct UPDATEs, by message (same state, or not in the table).
SELECT regexp_replace(result, '"[a-z_]+"', '"..."', 'g') AS refusal, count(*)
  FROM md WHERE NOT allowed GROUP BY 1 ORDER BY 1;

-- A refused UPDATE as a user sees it.
\set VERBOSITY default
UPDATE cscp.command SET state = 'started' WHERE command_id = (SELECT id FROM reach WHERE s = 'confirmed');
UPDATE cscp.command SET state = 'confirmed' WHERE command_id = (SELECT id FROM reach WHERE s = 'executed');
\set VERBOSITY terse

-- The columns that say what a command is never change.
SELECT try(format('UPDATE cscp.command SET command_name = %L WHERE command_id = %L', 'other',
                  (SELECT id FROM reach WHERE s = 'canonicalized')));
SELECT try(format('UPDATE cscp.command SET mutating = true, state = %L WHERE command_id = %L', 'authz_pending',
                  (SELECT id FROM reach WHERE s = 'canonicalized')));
-- A new command is born received or canonicalized only.
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                      command_name, mutating, state)
             VALUES ('tc', 'born-started', 'born', 'actor', 'transfer', true, 'started')$$);

---------------------------------------------------------------------------------------------------
-- 2. Invariants beyond the table (checked in C at the transition).

-- canonicalized -> authz_pending: allowed by the table, refused for a mutating command that the
-- policy does not auto-confirm (it must go through confirmation), allowed for a read-only one.
SELECT (cscp.context_open('tc', 'inv-1', 'actor')).status AS opened;
SELECT pg_temp.framed('inv-1', 'inv-1:k', 'transfer', true, false, 'canonicalized') IS NOT NULL AS inserted;
SELECT accepted, state, reason_code
  FROM cscp.command_transition((SELECT command_id FROM cscp.command WHERE idempotency_key = 'inv-1:k'),
                               'authz_pending');
SELECT try($$UPDATE cscp.command SET state = 'authz_pending' WHERE idempotency_key = 'inv-1:k'$$);
SELECT state, version FROM cscp.command WHERE idempotency_key = 'inv-1:k';
SELECT accepted, state FROM cscp.command_transition(pg_temp.cmd_in('inv-2', 'canonicalized'), 'authz_pending');

-- started needs confirmed (mutating) and authorized.  The lifecycle offers no path around them,
-- so the rows below are put in authorized by a superuser with the triggers off, as damage would:
-- the check at started still refuses them.
SET session_replication_role = replica;
INSERT INTO cscp.command (tenant_id, command_id, idempotency_key, conversation_id, actor_id,
                          command_name, mutating, state, version)
VALUES ('tc-forced', cscp.routing_id('forced'), 'forced:unconfirmed', 'forced', 'actor', 'transfer', true,
        'authorized', 1),
       ('tc-forced', cscp.routing_id('forced'), 'forced:unauthorized', 'forced', 'actor', 'lookup', false,
        'authorized', 1);
UPDATE cscp.command SET authorized_at = cscp.now() WHERE idempotency_key = 'forced:unconfirmed';
RESET session_replication_role;
SELECT c.idempotency_key, t.accepted, t.state, t.reason_code
  FROM cscp.command c, cscp.command_transition(c.command_id, 'started') t
 WHERE c.tenant_id = 'tc-forced' ORDER BY 1;
SELECT try($$UPDATE cscp.command SET state = 'started' WHERE idempotency_key = 'forced:unconfirmed'$$);
SELECT try($$UPDATE cscp.command SET state = 'started' WHERE idempotency_key = 'forced:unauthorized'$$);
SELECT idempotency_key, state, version FROM cscp.command WHERE tenant_id = 'tc-forced' ORDER BY 1;
-- A mutating command that was confirmed but never authorized: only authorized_at is missing.
SET session_replication_role = replica;
UPDATE cscp.command SET confirmed_at = cscp.now(), authorized_at = NULL
 WHERE idempotency_key = 'forced:unconfirmed';
RESET session_replication_role;
SELECT accepted, state, reason_code
  FROM cscp.command_transition((SELECT command_id FROM cscp.command WHERE idempotency_key = 'forced:unconfirmed'),
                               'started');

-- Policy auto_confirm: a command it lists skips confirmation, and the policy is recorded with
-- the acceptance (decision auto_confirm, reason policy.auto_confirm).
SELECT cscp.policy_set('tc', '{"auto_confirm": ["refresh_cache"]}') -> 'auto_confirm' AS auto_confirm;
SELECT (cscp.context_open('tc', 'auto-1', 'actor')).status AS opened;
SELECT state, replayed, outcome
  FROM cscp.command_submit('tc', 'auto-1', 'actor', 'auto-1:k', 'refresh_cache', true, '{auto-1:m1}');
SELECT mutating, auto_confirm, confirmed_at IS NULL AS never_confirmed
  FROM cscp.command WHERE idempotency_key = 'auto-1:k';
SELECT seq, event_type, from_state, to_state, decision, reason_code
  FROM cscp.evidence
 WHERE command_id = (SELECT command_id FROM cscp.command WHERE idempotency_key = 'auto-1:k');
-- The context has nothing pending: no confirmation was asked for.
SELECT status, slots FROM cscp.context WHERE tenant_id = 'tc' AND conversation_id = 'auto-1';
SELECT s AS to_state, t.accepted, t.state, t.reason_code
  FROM unnest('{authz_pending,authorized,started,executed}'::cscp.command_state[]) WITH ORDINALITY u(s, n),
       LATERAL cscp.command_transition((SELECT command_id FROM cscp.command WHERE idempotency_key = 'auto-1:k'),
                                       u.s) t
 ORDER BY n;
-- A command the policy does not list is confirmed as usual, even with a listed one's prefix.
SELECT state FROM cscp.command_submit('tc', 'auto-1', 'actor', 'auto-1:k2', 'refresh_cache_all', true, '{auto-1:m2}');
-- A direct INSERT that claims auto_confirm for a command the policy does not list: 22023.
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                      command_name, mutating, auto_confirm, state)
             VALUES ('tc', 'auto-2:k', 'auto-2', 'actor', 'transfer', true, true, 'canonicalized')$$);
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                      command_name, mutating, auto_confirm, state)
             VALUES ('tc-other', 'auto-2:k', 'auto-2', 'actor', 'refresh_cache', true, true, 'canonicalized')$$);
SELECT count(*) AS written FROM cscp.command WHERE idempotency_key = 'auto-2:k';
-- ... and one the policy lists is accepted, its evidence saying so.
SELECT pg_temp.framed('auto-3', 'auto-3:k', 'refresh_cache', true, true, 'canonicalized') IS NOT NULL AS inserted;
SELECT e.event_type, e.decision, e.reason_code
  FROM cscp.evidence e JOIN cscp.command c USING (tenant_id, command_id) WHERE c.idempotency_key = 'auto-3:k';
-- auto_confirm, once recorded, cannot be changed.
SELECT try($$UPDATE cscp.command SET auto_confirm = true, state = 'authz_pending' WHERE idempotency_key = 'inv-1:k'$$);

-- compensated only after a compensate recovery aimed at the command has executed.
CREATE TEMP TABLE comp AS SELECT pg_temp.cmd_in('comp-1', 'executed') AS target;
SELECT accepted, state, reason_code FROM cscp.command_transition((SELECT target FROM comp), 'compensated');
SELECT try(format('UPDATE cscp.command SET state = %L WHERE command_id = %L', 'compensated', (SELECT target FROM comp)));
-- An executed retry or reprocess is not a compensation.
CREATE TEMP TABLE comp2 AS SELECT pg_temp.cmd_in('comp-2', 'failed') AS target;
SELECT r.state FROM comp2, cscp.command_recover(target, 'reprocess', 'comp-2:reprocess') r;
SELECT t.accepted FROM unnest('{confirmed,authz_pending,authorized,started,executed}'::cscp.command_state[])
       WITH ORDINALITY u(s, n),
       LATERAL public.step((SELECT command_id FROM cscp.command WHERE idempotency_key = 'comp-2:reprocess'), u.s) t
 ORDER BY n;
SELECT accepted, state, reason_code FROM cscp.command_transition((SELECT target FROM comp2), 'compensated');
-- A compensation that has not executed yet does not count either.
ALTER TABLE comp ADD COLUMN recovery uuid;
UPDATE comp SET recovery = (SELECT r.command_id FROM cscp.command_recover(target, 'compensate', 'comp-1:comp') r);
SELECT state, mutating, command_name FROM cscp.command WHERE command_id = (SELECT recovery FROM comp);
SELECT accepted, state, reason_code FROM cscp.command_transition((SELECT target FROM comp), 'compensated');
-- Executing it (through command_transition) compensates the target.
SELECT u.s AS to_state, t.accepted, t.state
  FROM unnest('{confirmed,authz_pending,authorized,started,executed}'::cscp.command_state[]) WITH ORDINALITY u(s, n),
       LATERAL public.step((SELECT recovery FROM comp), u.s) t
 ORDER BY n;
SELECT state, reason_code, detail ->> 'compensated_by' = (SELECT recovery FROM comp)::text AS by_the_recovery
  FROM cscp.command WHERE command_id = (SELECT target FROM comp);

-- command_transition refuses a bad call with an ERROR (misuse, not a business outcome).
SELECT try($$SELECT cscp.command_transition(NULL, 'started')$$);
SELECT try($$SELECT cscp.command_transition('00000000-0000-4000-8000-000000000000', 'started')$$);
SELECT try(format('SELECT cscp.command_transition(%L, NULL)', (SELECT id FROM reach WHERE s = 'authorized')));
SELECT try(format('SELECT cscp.command_transition(%L, %L, NULL, %L)', (SELECT id FROM reach WHERE s = 'authorized'),
                  'started', '[1]'));

-- The reason code given to command_transition is the transition's, also when the previous
-- transition had the same one.
CREATE TEMP TABLE rc AS SELECT pg_temp.cmd_in('rc-1', 'confirmed') AS id;
SELECT t.reason_code FROM rc, cscp.command_transition(id, 'authz_pending', 'policy_check') t;
SELECT t.reason_code FROM rc, cscp.command_transition(id, 'authorized', 'policy_check') t;
SELECT e.to_state, e.reason_code FROM rc JOIN cscp.evidence e ON e.command_id = rc.id
 WHERE e.seq > 3 ORDER BY e.seq;

---------------------------------------------------------------------------------------------------
-- 3. command_submit.

-- A command formed against a live context: canonicalized (read-only) or confirmation_required
-- (mutating), with a frame.
SELECT (cscp.context_open('tc', 'sub-1', 'actor')).status AS opened;
SELECT state, replayed, outcome
  FROM cscp.command_submit('tc', 'sub-1', 'actor', 'sub-1:read', 'lookup', false, '{sub-1:m1}');
SELECT state, replayed, outcome
  FROM cscp.command_submit('tc', 'sub-1', 'actor', 'sub-1:pay', 'transfer', true, '{sub-1:m2}',
                           '{"amount": 10}', 'acct:42');
SELECT c.status, c.slots -> 'pending_confirmation' ->> 'command_id' = m.command_id::text AS slot_names_it,
       (c.slots -> 'pending_confirmation') - 'command_id' AS pending_confirmation,
       c.last_command_id = m.command_id AS last_command, c.last_message_id
  FROM cscp.context c JOIN cscp.command m ON m.context_id = c.context_id AND m.idempotency_key = 'sub-1:pay';

-- Replays: the same key and request give the same command, nothing new is written.
CREATE TEMP TABLE counts AS
SELECT (SELECT count(*) FROM cscp.command) AS commands, (SELECT count(*) FROM cscp.evidence) AS evidence,
       (SELECT count(*) FROM cscp.frame) AS frames;
-- ... still waiting for confirmation: an in-progress view.
SELECT s.command_id = c.command_id AS same_command, s.state, s.replayed, s.outcome
  FROM cscp.command_submit('tc', 'sub-1', 'actor', 'sub-1:pay', 'transfer', true, '{sub-1:m2}',
                           '{"amount": 10}', 'acct:42') s
  JOIN cscp.command c ON c.idempotency_key = 'sub-1:pay';
-- ... started: in progress; nothing is run a second time.
SELECT u.s, t.accepted
  FROM unnest('{confirmed,authz_pending,authorized,started}'::cscp.command_state[]) WITH ORDINALITY u(s, n),
       LATERAL public.step((SELECT command_id FROM cscp.command WHERE idempotency_key = 'sub-1:pay'), u.s) t
 ORDER BY n;
SET cscp.clock = '2026-03-01 10:01:00+00';
SELECT state, replayed, outcome
  FROM cscp.command_submit('tc', 'sub-1', 'actor', 'sub-1:pay', 'transfer', true, '{sub-1:m2}',
                           '{"amount": 10}', 'acct:42');
-- ... terminal: the outcome recorded when it ended, whatever the clock says now.
SELECT accepted, state FROM cscp.command_transition((SELECT command_id FROM cscp.command WHERE idempotency_key = 'sub-1:pay'),
                                                    'executed', 'paid', '{"receipt": "r-1"}');
SET cscp.clock = '2026-03-01 10:02:00+00';
SELECT state, replayed, outcome
  FROM cscp.command_submit('tc', 'sub-1', 'actor', 'sub-1:pay', 'transfer', true, '{sub-1:m2}',
                           '{"amount": 10}', 'acct:42');
SELECT state, replayed, outcome
  FROM cscp.command_submit('tc', 'sub-1', 'actor', 'sub-1:read', 'lookup', false, '{sub-1:m1}');
-- ... compensated (section 2): the outcome describes the state the command ended in.
SELECT state, replayed, outcome ->> 'state' AS outcome_state, outcome ->> 'reason_code' AS outcome_reason
  FROM cscp.command_submit('tc', 'comp-1', 'actor', 'comp-1:k', 'transfer', true, '{comp-1:m1}');
SELECT (SELECT count(*) FROM cscp.command) - commands AS new_commands,
       (SELECT count(*) FROM cscp.evidence) - evidence - 5 AS new_evidence_besides_the_5_transitions,
       (SELECT count(*) FROM cscp.frame) - frames AS new_frames
  FROM counts;
-- The same key for a different request: 23505, and nothing is written.
SELECT try($$SELECT cscp.command_submit('tc', 'sub-1', 'actor', 'sub-1:pay', 'transfer', true, '{sub-1:m2}',
                                         '{"amount": 11}', 'acct:42')$$);
SELECT try($$SELECT cscp.command_submit('tc', 'sub-1', 'actor', 'sub-1:pay', 'refund', true, '{sub-1:m2}',
                                         '{"amount": 10}', 'acct:42')$$);
-- (Not a different request: whether 'transfer' mutates is the registry's, and undeclared it is
-- mutating whatever the caller says, so this one replays.)
SELECT try($$SELECT cscp.command_submit('tc', 'sub-1', 'actor', 'sub-1:pay', 'transfer', false, '{sub-1:m2}',
                                         '{"amount": 10}', 'acct:42')$$);
SELECT try($$SELECT cscp.command_submit('tc', 'sub-other', 'actor', 'sub-1:pay', 'transfer', true, '{sub-1:m2}',
                                         '{"amount": 10}', 'acct:42')$$);
SELECT try($$SELECT cscp.command_submit('tc', 'sub-1', 'actor', 'sub-1:pay', 'transfer', true, '{sub-1:m2}',
                                         '{"amount": 10}', 'acct:43')$$);
SELECT (SELECT count(*) FROM cscp.command) - commands AS new_commands,
       (SELECT count(*) FROM cscp.evidence) - evidence - 5 AS new_evidence_besides_the_5_transitions,
       (SELECT count(*) FROM cscp.frame) - frames AS new_frames
  FROM counts;
-- The key is per tenant: another tenant may use it (rejected here only because tc2 has no context).
SELECT state, replayed, outcome ->> 'reason_code' AS reason_code FROM cscp.command_submit('tc2', 'sub-1', 'actor', 'sub-1:pay', 'transfer', true, '{sub-1:m2}');

-- No context ever opened for the triple: rejected, no_context.
SELECT state, replayed, outcome
  FROM cscp.command_submit('tc', 'sub-none', 'actor', 'sub-none:k', 'lookup', false, '{m}');
SELECT context_id IS NULL AS no_context, frame_id IS NULL AS no_frame, context_ref
  FROM cscp.command WHERE idempotency_key = 'sub-none:k';
-- An expired context (past expires_at, not swept yet): rejected, context_expired; the context is
-- recorded as expired, and no frame is formed from it.
SELECT (cscp.context_open('tc', 'sub-exp', 'actor', '{}', interval '1 minute')).status AS opened;
SET cscp.clock = '2026-03-01 10:03:00+00';
SELECT state, replayed, outcome
  FROM cscp.command_submit('tc', 'sub-exp', 'actor', 'sub-exp:k', 'transfer', true, '{m}');
SELECT frame_id IS NULL AS no_frame, context_ref - 'context_id' AS context_ref
  FROM cscp.command WHERE idempotency_key = 'sub-exp:k';
SELECT status, reason FROM cscp.context WHERE tenant_id = 'tc' AND conversation_id = 'sub-exp';
-- A closed context is no better.
SELECT (cscp.context_transition((cscp.context_open('tc', 'sub-closed', 'actor')).context_id, 'closed')).status;
SELECT state, outcome ->> 'reason_code' AS reason_code
  FROM cscp.command_submit('tc', 'sub-closed', 'actor', 'sub-closed:k', 'lookup', false, '{m}');
-- A blocked context: a mutating command is rejected (context_blocked), a read-only one is formed.
SELECT (cscp.context_transition((cscp.context_open('tc', 'sub-blk', 'actor')).context_id, 'blocked')).status;
SELECT state, outcome ->> 'reason_code' AS reason_code
  FROM cscp.command_submit('tc', 'sub-blk', 'actor', 'sub-blk:w', 'transfer', true, '{m1}');
SELECT state, outcome FROM cscp.command_submit('tc', 'sub-blk', 'actor', 'sub-blk:r', 'lookup', false, '{m2}');
SELECT status, slots FROM cscp.context WHERE tenant_id = 'tc' AND conversation_id = 'sub-blk';

-- Only the most recent confirmation request is pending: a second mutating submit supersedes the
-- first (rejected, confirmation_superseded, naming its successor); the slot names the new one.
SELECT (cscp.context_open('tc', 'sup', 'actor')).status AS opened;
SELECT state FROM cscp.command_submit('tc', 'sup', 'actor', 'sup:1', 'transfer', true, '{sup:m1}', '{}', 'acct:1');
SELECT state FROM cscp.command_submit('tc', 'sup', 'actor', 'sup:2', 'transfer', true, '{sup:m2}', '{}', 'acct:2');
SELECT a.state, a.reason_code, a.detail ->> 'superseded_by' = b.command_id::text AS names_successor,
       a.outcome ->> 'reason_code' AS outcome_reason, b.state AS successor_state
  FROM cscp.command a, cscp.command b WHERE a.idempotency_key = 'sup:1' AND b.idempotency_key = 'sup:2';
SELECT c.status, c.slots -> 'pending_confirmation' ->> 'command_id' = b.command_id::text AS slot_names_new,
       c.slots -> 'pending_confirmation' ->> 'target_fingerprint' AS fingerprint
  FROM cscp.context c JOIN cscp.command b ON b.context_id = c.context_id AND b.idempotency_key = 'sup:2';
-- A yes now confirms the new command, not the superseded one.
SELECT outcome, command_id = (SELECT command_id FROM cscp.command WHERE idempotency_key = 'sup:2') AS the_new_one
  FROM cscp.confirm('tc', 'sup', 'actor', 'sup:m3', true);
-- A read-only submit in between supersedes nothing.
SELECT state FROM cscp.command_submit('tc', 'sup', 'actor', 'sup:3', 'transfer', true, '{sup:m4}');
SELECT state FROM cscp.command_submit('tc', 'sup', 'actor', 'sup:4', 'lookup', false, '{sup:m5}');
SELECT state FROM cscp.command WHERE idempotency_key = 'sup:3';

-- Frames (snapshot-on-execute): the same context state and message ids give the same frame;
-- context_hash is the canonical hash of that state, the same on every run under a pinned clock.
SET cscp.clock = '2026-03-01 11:00:00+00';
SELECT (cscp.context_open('tc', 'frm', 'actor')).status AS opened;
SELECT state FROM cscp.command_submit('tc', 'frm', 'actor', 'frm:1', 'lookup', false, '{frm:m1}');
SELECT state FROM cscp.command_submit('tc', 'frm', 'actor', 'frm:2', 'lookup', false, '{frm:m1}');
SELECT state FROM cscp.command_submit('tc', 'frm', 'actor', 'frm:3', 'lookup', false, '{frm:m1}');
SELECT state FROM cscp.command_submit('tc', 'frm', 'actor', 'frm:4', 'lookup', false, '{frm:m1,frm:m2}');
-- frm:1 saw no last message yet; frm:2 and frm:3 saw the same state (one frame); frm:4 has
-- other message ids.
SELECT m.idempotency_key, dense_rank() OVER (ORDER BY f.created_at, f.context_hash) AS frame_no,
       f.context_hash, m.context_ref ->> 'context_hash' = f.context_hash AS ref_matches,
       m.context_ref ->> 'frame_id' = f.frame_id::text AS ref_frame, m.context_ref ->> 'expires_at' AS expires_at
  FROM cscp.command m JOIN cscp.frame f ON f.tenant_id = m.tenant_id AND f.frame_id = m.frame_id
 WHERE m.idempotency_key LIKE 'frm:%' ORDER BY m.idempotency_key;
SELECT count(DISTINCT frame_id) AS frames FROM cscp.command WHERE idempotency_key LIKE 'frm:%';
SELECT jsonb_pretty(f.state) AS state_of_frm_2
  FROM cscp.frame f JOIN cscp.command m ON m.frame_id = f.frame_id WHERE m.idempotency_key = 'frm:2';
-- A pending confirmation is part of the state (its command id is left out: it is random).
SELECT state FROM cscp.command_submit('tc', 'frm', 'actor', 'frm:5', 'transfer', true, '{frm:m3}');
SELECT state FROM cscp.command_submit('tc', 'frm', 'actor', 'frm:6', 'lookup', false, '{frm:m3}');
SELECT f.context_hash, f.state -> 'status' AS status, f.state -> 'slots' AS slots
  FROM cscp.frame f JOIN cscp.command m ON m.frame_id = f.frame_id WHERE m.idempotency_key = 'frm:6';
-- A frame's hash is generated from its state: no writer can store another.
SELECT try($$UPDATE cscp.frame SET context_hash = 'sha256:0' WHERE conversation_id = 'frm'$$);

-- Bad input: 22023, nothing written.
SELECT try($$SELECT cscp.command_submit('tc', 'sub-1', 'actor', 'bad:1', 'lookup', NULL, '{m}')$$);
SELECT try($$SELECT cscp.command_submit('tc', 'sub-1', 'actor', 'bad:2', 'lookup', false, NULL)$$);
SELECT try($$SELECT cscp.command_submit('tc', 'sub-1', 'actor', 'bad:3', 'lookup', false, '{m}', '[]')$$);
SELECT try($$SELECT cscp.command_submit('tc', 'sub-1', 'actor', '', 'lookup', false, '{m}')$$);
SELECT try($$SELECT cscp.command_submit('tc', 'sub-1', 'actor', 'bad:4', 'lookup', false, '{m,""}')$$);
SELECT count(*) AS written FROM cscp.command WHERE idempotency_key LIKE 'bad:%';

---------------------------------------------------------------------------------------------------
-- 4. command_recover: retry (failed), reprocess (rejected, failed, canceled), cancel (before
-- started), compensate (executed, failed).  A recovery is a new command aimed at its target; one
-- that does not apply is formed rejected, reason recovery_not_applicable, and leaves the target
-- as it was.
SET cscp.clock = '2026-03-01 12:00:00+00';
CREATE TEMP TABLE rec AS
SELECT s, pg_temp.cmd_in('rec-' || s, s) AS id
  FROM unnest('{canonicalized,confirmation_required,authorized,started,executed,failed,rejected,canceled}'::cscp.command_state[]) s;
-- In a fixed order per target (the mutating ones supersede each other's confirmation requests).
CREATE TEMP TABLE recovered (target_state cscp.command_state, kind text, state cscp.command_state,
                             replayed boolean, reason_code text, command_id uuid);
DO $$
DECLARE
    r record;
    k text;
BEGIN
    FOR r IN SELECT * FROM rec ORDER BY s LOOP
        FOREACH k IN ARRAY '{retry,reprocess,cancel,compensate}'::text[] LOOP
            INSERT INTO recovered
            SELECT r.s, k, x.state, x.replayed, x.outcome ->> 'reason_code', x.command_id
              FROM cscp.command_recover(r.id, k, 'rec:' || r.s || ':' || k, '{"note": "again"}') x;
        END LOOP;
    END LOOP;
END
$$;
SELECT target_state, kind, state AS recovery_state, reason_code,
       (SELECT c.state FROM cscp.command c WHERE c.command_id = rec.id) AS target_after
  FROM recovered JOIN rec ON rec.s = recovered.target_state
 ORDER BY target_state, kind;
-- What a recovery is: retry and reprocess repeat the command (its payload merged with the
-- recovery's), cancel and compensate are commands of their own; all aim at the target.
SELECT x.target_state, x.kind, c.command_name, c.mutating, c.payload, c.recovery_kind,
       c.target_command_id = r.id AS aims_at_target
  FROM recovered x JOIN cscp.command c ON c.command_id = x.command_id JOIN rec r ON r.s = x.target_state
 WHERE x.reason_code IS DISTINCT FROM 'recovery_not_applicable'
 ORDER BY x.target_state, x.kind;
-- Replay by idempotency key: the same recovery again gives the same command (the retry of the
-- failed command was superseded by the later reprocess: its recorded outcome says so).
SELECT x.command_id = (SELECT command_id FROM recovered WHERE target_state = 'failed' AND kind = 'retry') AS same_command,
       x.state, x.replayed, x.outcome ->> 'reason_code' AS reason_code
  FROM cscp.command_recover((SELECT id FROM rec WHERE s = 'failed'), 'retry', 'rec:failed:retry', '{"note": "again"}') x;
SELECT x.command_id = (SELECT command_id FROM recovered WHERE target_state = 'authorized' AND kind = 'cancel') AS same_command,
       x.state, x.replayed, x.outcome
  FROM cscp.command_recover((SELECT id FROM rec WHERE s = 'authorized'), 'cancel', 'rec:authorized:cancel', '{"note": "again"}') x;
SELECT x.state, x.replayed, x.outcome ->> 'reason_code' AS reason_code
  FROM cscp.command_recover((SELECT id FROM rec WHERE s = 'executed'), 'retry', 'rec:executed:retry', '{"note": "again"}') x;
-- ... the same key for another recovery: 23505.
SELECT try(format('SELECT cscp.command_recover(%L, %L, %L)', (SELECT id FROM rec WHERE s = 'failed'),
                  'reprocess', 'rec:failed:retry'));
SELECT try(format('SELECT cscp.command_recover(%L, %L, %L, %L)', (SELECT id FROM rec WHERE s = 'failed'),
                  'retry', 'rec:failed:retry', '{"note": "other"}'));
-- Bad calls: 22023.
SELECT try(format('SELECT cscp.command_recover(%L, %L, %L)', (SELECT id FROM rec WHERE s = 'failed'), 'undo', 'rec:bad'));
SELECT try($$SELECT cscp.command_recover(NULL, 'retry', 'rec:bad')$$);
SELECT try($$SELECT cscp.command_recover('00000000-0000-4000-8000-000000000000', 'retry', 'rec:bad')$$);
SELECT count(*) AS written FROM cscp.command WHERE idempotency_key = 'rec:bad';

-- cancel cancels the target and clears the context's pending slot: the context is active again,
-- and a yes no longer confirms anything.
SELECT c.status, c.slots, c.reason
  FROM cscp.context c JOIN rec r ON r.s = 'confirmation_required'
  JOIN cscp.command m ON m.command_id = r.id AND m.context_id = c.context_id;
SELECT m.state, m.reason_code, m.detail ->> 'recovery_command_id' =
           (SELECT command_id FROM recovered WHERE target_state = 'confirmation_required' AND kind = 'cancel')::text
           AS names_recovery
  FROM cscp.command m JOIN rec r ON r.s = 'confirmation_required' AND m.command_id = r.id;
SELECT outcome FROM cscp.confirm('tc', 'rec-confirmation_required', 'actor', 'rec-yes', true);
-- The cancel command's own run, in its evidence.
SELECT e.seq, e.event_type, e.from_state, e.to_state, e.reason_code
  FROM cscp.evidence e JOIN recovered x ON x.command_id = e.command_id
 WHERE x.target_state = 'confirmation_required' AND x.kind = 'cancel' ORDER BY e.seq;
-- A cancel needs no usable context: it works on a command whose context has expired.
CREATE TEMP TABLE late AS SELECT pg_temp.cmd_in('late', 'authz_pending') AS id;
SET cscp.clock = '2026-03-01 14:00:00+00';
SELECT x.state, x.outcome ->> 'reason_code' AS reason_code
  FROM late, cscp.command_recover(late.id, 'cancel', 'late:cancel') x;
SELECT c.state AS target_after, c.reason_code FROM late JOIN cscp.command c ON c.command_id = late.id;
-- ... while a retry needs a usable context like any submit: rec-failed's has expired by now.
SELECT x.state, x.outcome ->> 'reason_code' AS reason_code
  FROM cscp.command_recover((SELECT id FROM rec WHERE s = 'failed'), 'retry', 'rec:failed:retry-late') x;

---------------------------------------------------------------------------------------------------
-- 5. command_status: what may come next (the table and the invariants) and which recoveries apply.
SET cscp.clock = '2026-03-01 10:05:00+00';
SELECT r.s, st.state, st.terminal, st.reason_code, st.next_allowed, st.recovery_options,
       st.outcome ->> 'state' AS outcome_state
  FROM reach r, cscp.command_status(r.id) st ORDER BY r.s;
-- Once their contexts have expired, nothing of them moves forward to confirmed, authz_pending,
-- authorized or started (context_expired); a started command may still finish.
SET cscp.clock = '2026-03-01 15:00:00+00';
SELECT r.s, st.next_allowed FROM reach r, cscp.command_status(r.id) st WHERE NOT st.terminal ORDER BY r.s;
-- A mutating command in canonicalized may not go to authz_pending (not confirmed), nor, when it
-- has no context, frame or message ids, to confirmation_required (snapshot_missing): no write
-- makes such a row (a 0.1.0 row or damage may be one), so it is put there with the triggers
-- off; an executed command may not be compensated until a compensation has executed.
SET session_replication_role = replica;
INSERT INTO cscp.command (tenant_id, command_id, idempotency_key, conversation_id, actor_id,
                          command_name, mutating, state, version)
VALUES ('tc-forced', cscp.routing_id('inv-0'), 'inv-0:k', 'inv-0', 'actor', 'transfer', true,
        'canonicalized', 1);
RESET session_replication_role;
SELECT next_allowed FROM cscp.command_status((SELECT command_id FROM cscp.command WHERE idempotency_key = 'inv-0:k'));
SELECT next_allowed FROM cscp.command_status((SELECT target FROM comp2));
SELECT try($$SELECT cscp.command_status(NULL)$$);
SELECT try($$SELECT cscp.command_status('00000000-0000-4000-8000-000000000000')$$);

RESET cscp.clock;
