\i sql/include/helpers.sql
-- The evidence trail (RFC-WF-0018 section IX, DESIGN.md section 5): one row per transition with
-- its event type, states, decision and context reference; refused attempts; seq numbering and
-- hash chaining per command; append-only even for the superuser; cscp.evidence_verify catching
-- altered, missing and re-linked rows; canonical JSON and hashes that are the same on every run.
-- Rows of this file belong to tenants 'te' and 'te-*'; ids are random and never printed.
SET cscp.clock = '2026-05-01 09:00:00+00';
SET timezone = 'UTC';
\set SHOW_CONTEXT never

-- The evidence of one command, labelled by its idempotency key, in chain order.
CREATE FUNCTION pg_temp.trail(key text)
RETURNS TABLE (seq int, event_type text, from_state text, to_state text, decision text,
               reason_code text, message_ids text[])
LANGUAGE sql AS $$
    SELECT e.seq, e.event_type, e.from_state, e.to_state, e.decision, e.reason_code, e.message_ids
      FROM cscp.evidence e JOIN cscp.command c ON c.tenant_id = e.tenant_id AND c.command_id = e.command_id
     WHERE c.idempotency_key = key AND c.tenant_id LIKE 'te%'
     ORDER BY e.seq
$$;
CREATE FUNCTION pg_temp.cmd(key text) RETURNS uuid LANGUAGE sql AS $$
    SELECT c.command_id FROM cscp.command c WHERE c.idempotency_key = key AND c.tenant_id LIKE 'te%'
$$;
-- Move a command through the given states with cscp.command_transition, one call each.
CREATE FUNCTION pg_temp.walk(key text, states cscp.command_state[], reason text DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    s cscp.command_state;
    r record;
    result text := '';
BEGIN
    FOREACH s IN ARRAY states LOOP
        SELECT * INTO r FROM public.step(pg_temp.cmd(key), s,
                                                     CASE WHEN reason IS NOT NULL THEN reason || '-' || s END);
        result := result || CASE WHEN result = '' THEN '' ELSE ' ' END
                  || CASE WHEN r.accepted THEN s::text ELSE 'refused:' || r.reason_code END;
    END LOOP;
    RETURN result;
END
$$;

---------------------------------------------------------------------------------------------------
-- 1. One row per transition, with RFC-WF-0018 section IX event types (authz.requested and
-- execution.canceled are cscp's documented extensions for the edges the RFC names no event for).

-- The happy path of a mutating command: confirmed by the user, authorized, run.
SELECT (cscp.context_open('te', 'ev-1', 'alice')).status;
SELECT state FROM cscp.command_submit('te', 'ev-1', 'alice', 'pay', 'transfer', true, '{ev-1:m1}',
                                      '{"amount": 25}', 'acct:7');
SELECT outcome FROM cscp.confirm('te', 'ev-1', 'alice', 'ev-1:m2', true, 'acct:7');
SELECT pg_temp.walk('pay', '{authz_pending,authorized,started,executed}', 'ok');
SELECT * FROM pg_temp.trail('pay');

-- Refused attempts are recorded too, as invalid_transition_attempt, with the reason; the
-- command's state is their from_state, the requested state their to_state.
SELECT pg_temp.walk('pay', '{started,canceled}');
SELECT * FROM pg_temp.trail('pay') WHERE seq > 6;
SELECT seq, detail FROM cscp.evidence WHERE command_id = pg_temp.cmd('pay') AND seq >= 8 ORDER BY seq;

-- Every other decision and event type:
-- declined (confirm no) -> execution.rejected, decision reject;
SELECT (cscp.context_open('te', 'ev-2', 'alice')).status;
SELECT state FROM cscp.command_submit('te', 'ev-2', 'alice', 'decline', 'transfer', true, '{ev-2:m1}');
SELECT outcome FROM cscp.confirm('te', 'ev-2', 'alice', 'ev-2:m2', false);
SELECT * FROM pg_temp.trail('decline');
-- superseded -> execution.rejected with reason confirmation_superseded;
SELECT state FROM cscp.command_submit('te', 'ev-2', 'alice', 'first', 'transfer', true, '{ev-2:m3}');
SELECT state FROM cscp.command_submit('te', 'ev-2', 'alice', 'second', 'transfer', true, '{ev-2:m4}');
SELECT * FROM pg_temp.trail('first');
-- (second is superseded in turn by the compensate recovery below, a mutating command too.)
-- authorization denied -> authz.decided, decision deny; allowed -> authz.decided, decision allow;
SELECT state FROM cscp.command_submit('te', 'ev-2', 'alice', 'deny', 'lookup', false, '{ev-2:m5}');
SELECT pg_temp.walk('deny', '{authz_pending,rejected}', 'policy');
SELECT * FROM pg_temp.trail('deny');
-- canceled -> execution.canceled, decision cancel;
SELECT state FROM cscp.command_submit('te', 'ev-2', 'alice', 'cancel', 'lookup', false, '{ev-2:m6}');
SELECT pg_temp.walk('cancel', '{authz_pending,authorized,canceled}');
SELECT * FROM pg_temp.trail('cancel');
-- failed, then compensated by an executed compensate recovery -> execution.failed,
-- compensation.compensated.
SELECT state FROM cscp.command_submit('te', 'ev-2', 'alice', 'fail', 'lookup', false, '{ev-2:m7}');
SELECT pg_temp.walk('fail', '{authz_pending,authorized,started,failed}');
SELECT state FROM cscp.command_recover(pg_temp.cmd('fail'), 'compensate', 'fail:undo');
SELECT pg_temp.walk('fail:undo', '{confirmed,authz_pending,authorized,started,executed}');
SELECT * FROM pg_temp.trail('fail');
SELECT * FROM pg_temp.trail('fail:undo');
-- auto-confirmed by policy -> command.accepted with decision auto_confirm.
SELECT cscp.policy_set('te', '{"auto_confirm": ["refresh"]}') -> 'auto_confirm' AS auto_confirm;
SELECT state FROM cscp.command_submit('te', 'ev-2', 'alice', 'auto', 'refresh', true, '{ev-2:m8}');
SELECT pg_temp.walk('auto', '{authz_pending,authorized,started,executed}');
SELECT * FROM pg_temp.trail('auto');
-- An answer that confirms nothing is recorded on the command it was aimed at: a "yes" for
-- another target (target_mismatch) leaves an invalid_transition_attempt in the command's chain,
-- with the answering message; the right "yes" then confirms it.
SELECT (cscp.context_open('te', 'ev-4', 'alice')).status;
SELECT state FROM cscp.command_submit('te', 'ev-4', 'alice', 'mismatch', 'transfer', true, '{ev-4:m1}', '{}', 'acct:1');
SELECT outcome FROM cscp.confirm('te', 'ev-4', 'alice', 'ev-4:m2', true, 'acct:2');
SELECT outcome FROM cscp.confirm('te', 'ev-4', 'alice', 'ev-4:m3', true, 'acct:1');
SELECT * FROM pg_temp.trail('mismatch');
-- A rejected submit (no usable context) leaves its acceptance and its rejection.
SELECT state FROM cscp.command_submit('te', 'ev-none', 'alice', 'nocontext', 'lookup', false, '{m}');
SELECT * FROM pg_temp.trail('nocontext');
-- A "yes" with nothing pending confirms nothing: its invalid_transition_attempt belongs to no
-- command, and stands alone (seq 1, no prev_hash).
SELECT (cscp.context_open('te', 'ev-3', 'alice')).status;
SELECT outcome FROM cscp.confirm('te', 'ev-3', 'alice', 'ev-3:yes', true);
SELECT seq, stage, event_type, from_state, to_state, decision, reason_code, message_ids,
       prev_hash IS NULL AS unlinked, context_ref ? 'context_id' AS has_context
  FROM cscp.evidence WHERE tenant_id = 'te' AND conversation_id = 'ev-3';

-- Exactly one evidence row per transition: every command of the tenant has as many rows (besides
-- refused attempts) as transitions (version counts them: 1 at birth as canonicalized), ...
SELECT c.idempotency_key, c.state, c.version,
       count(e.*) FILTER (WHERE e.event_type <> 'invalid_transition_attempt') AS transitions,
       count(e.*) FILTER (WHERE e.event_type = 'invalid_transition_attempt') AS refused
  FROM cscp.command c LEFT JOIN cscp.evidence e ON e.tenant_id = c.tenant_id AND e.command_id = c.command_id
 WHERE c.tenant_id = 'te'
 GROUP BY c.idempotency_key, c.state, c.version ORDER BY c.idempotency_key;
-- ... each transition row's to_state is where the next one starts, and the last is the state;
SELECT count(*) AS bad_steps FROM (
    SELECT e.from_state, lag(e.to_state) OVER w AS prev_to, e.seq
      FROM cscp.evidence e
     WHERE e.tenant_id = 'te' AND e.command_id IS NOT NULL AND e.event_type <> 'invalid_transition_attempt'
    WINDOW w AS (PARTITION BY e.command_id ORDER BY e.seq)) s
 WHERE s.from_state IS DISTINCT FROM coalesce(s.prev_to, 'received');
SELECT count(*) AS bad_ends FROM cscp.command c
 WHERE c.tenant_id = 'te' AND c.state::text IS DISTINCT FROM
       (SELECT e.to_state FROM cscp.evidence e
         WHERE e.tenant_id = c.tenant_id AND e.command_id = c.command_id
           AND e.event_type <> 'invalid_transition_attempt' ORDER BY e.seq DESC LIMIT 1);
-- ... seq runs 1..n per command in the order rows were written, and each row links the one
-- before it by hash (the first links nothing); the hash is the recomputed one.
SELECT count(*) AS rows, count(*) FILTER (WHERE seq <> n) AS bad_seq,
       count(*) FILTER (WHERE prev_hash IS DISTINCT FROM prev_row_hash) AS bad_links,
       count(*) FILTER (WHERE hash <> cscp.evidence_hash(e)) AS bad_hashes,
       count(*) FILTER (WHERE hash !~ '^sha256:[0-9a-f]{64}$') AS bad_format
  FROM (SELECT e, e.seq, e.hash, e.prev_hash,
               row_number() OVER w AS n, lag(e.hash) OVER w AS prev_row_hash
          FROM cscp.evidence e WHERE e.tenant_id = 'te' AND e.command_id IS NOT NULL
        WINDOW w AS (PARTITION BY e.command_id ORDER BY e.evidence_id)) s;

-- context_ref holds the frame the command was formed from: context_id, frame_id, context_hash
-- (the frame's, deterministic under the pinned clock) and the context's expires_at.
SELECT e.seq, jsonb_object_keys(e.context_ref) AS key
  FROM cscp.evidence e WHERE e.command_id = pg_temp.cmd('pay') AND e.seq = 1 ORDER BY 2;
SELECT e.seq,
       e.context_ref ->> 'context_id' = x.context_id::text AS context_id,
       e.context_ref ->> 'frame_id' = f.frame_id::text AS frame_id,
       e.context_ref ->> 'context_hash' = f.context_hash AS hash_is_frames,
       e.context_ref ->> 'context_hash' AS context_hash,
       e.context_ref ->> 'expires_at' AS expires_at
  FROM cscp.evidence e
  JOIN cscp.command c ON c.tenant_id = e.tenant_id AND c.command_id = e.command_id
  JOIN cscp.context x ON x.tenant_id = c.tenant_id AND x.context_id = c.context_id
  JOIN cscp.frame f ON f.tenant_id = c.tenant_id AND f.frame_id = c.frame_id
 WHERE c.idempotency_key = 'pay' AND c.tenant_id = 'te' ORDER BY e.seq;
-- The frame's state, hashed by hand: the same hash.
SELECT cscp.canonical_hash('{"tenant_id": "te", "conversation_id": "ev-1", "actor_id": "alice",
                             "status": "active", "expires_at": "2026-05-01T09:30:00.000000Z",
                             "last_message_id": null, "slots": {}, "message_ids": ["ev-1:m1"]}')
       = (SELECT context_ref ->> 'context_hash' FROM cscp.evidence
           WHERE command_id = pg_temp.cmd('pay') AND seq = 1) AS same_hash;

---------------------------------------------------------------------------------------------------
-- 2. Append-only: no UPDATE, no DELETE inside retention_evidence, no TRUNCATE, not even for the
-- superuser running this file.
SELECT current_setting('is_superuser') AS superuser;
SELECT try(format('UPDATE cscp.evidence SET reason_code = %L WHERE command_id = %L AND seq = 1', 'forged', pg_temp.cmd('pay')));
SELECT try(format('UPDATE cscp.evidence SET seq = seq WHERE command_id = %L', pg_temp.cmd('pay')));
SELECT try(format('DELETE FROM cscp.evidence WHERE command_id = %L', pg_temp.cmd('pay')));
SELECT try($$DELETE FROM cscp.evidence WHERE tenant_id = 'te'$$);
SELECT try('TRUNCATE cscp.evidence');
SELECT count(*) AS rows_of_pay, count(*) FILTER (WHERE reason_code = 'forged') AS forged
  FROM cscp.evidence WHERE command_id = pg_temp.cmd('pay');
-- The refusal as a user sees it.
\set VERBOSITY default
DELETE FROM cscp.evidence WHERE command_id = pg_temp.cmd('pay') AND seq = 1;
TRUNCATE cscp.evidence;
\set VERBOSITY terse
-- Past its tenant's retention_evidence a row may be deleted (that is what the sweep does).
SELECT cscp.policy_set('te-ret', '{"retention_evidence": "1 day"}') ->> 'retention_evidence' AS retention;
SELECT (cscp.context_open('te-ret', 'ret', 'alice')).status;
SELECT state FROM cscp.command_submit('te-ret', 'ret', 'alice', 'ret:old', 'lookup', false, '{m}');
SET cscp.clock = '2026-05-01 21:00:00+00';
SELECT try($$DELETE FROM cscp.evidence WHERE tenant_id = 'te-ret'$$);
SET cscp.clock = '2026-05-02 09:00:00+00';
SELECT try($$DELETE FROM cscp.evidence WHERE tenant_id = 'te-ret'$$);
SELECT count(*) AS left_of_te_ret FROM cscp.evidence WHERE tenant_id = 'te-ret';
SET cscp.clock = '2026-05-01 09:00:00+00';

---------------------------------------------------------------------------------------------------
-- 3. cscp.evidence_verify: nothing to report on an intact trail; every kind of damage a
-- superuser can do with the trigger switched off (session_replication_role = replica) is found.
SELECT count(*) AS problems FROM cscp.evidence_verify('te');
SELECT count(*) AS problems FROM cscp.evidence_verify('te', pg_temp.cmd('pay'));

-- Four commands of tenant te-v, each with a trail of 5 transitions, one per kind of damage.
SELECT (cscp.context_open('te-v', 'v', 'alice')).status;
SELECT k, s.state FROM unnest('{altered,middle,last,relinked}'::text[]) k,
       LATERAL cscp.command_submit('te-v', 'v', 'alice', k, 'lookup', false, ARRAY[k || ':m']) s;
SELECT k, pg_temp.walk(k, '{authz_pending,authorized,started,executed}')
  FROM unnest('{altered,middle,last,relinked}'::text[]) k;
CREATE FUNCTION pg_temp.verify(tenant text)
RETURNS TABLE (command text, seq int, problem text) LANGUAGE sql AS $$
    SELECT coalesce(c.idempotency_key, '(none)'), v.seq, v.problem
      FROM cscp.evidence_verify(tenant) v
      LEFT JOIN cscp.command c ON c.tenant_id = tenant AND c.command_id = v.command_id
     ORDER BY 1, 2 NULLS LAST, 3
$$;
SELECT * FROM pg_temp.verify('te-v');
SELECT seq, to_state FROM cscp.evidence e
 WHERE e.tenant_id = 'te-v' AND command_id = (SELECT command_id FROM cscp.command WHERE tenant_id = 'te-v' AND idempotency_key = 'altered')
 ORDER BY seq;

SET session_replication_role = replica;
-- A row whose content was changed.
UPDATE cscp.evidence e SET reason_code = 'looked_fine'
 WHERE e.tenant_id = 'te-v' AND e.seq = 3
   AND e.command_id = (SELECT command_id FROM cscp.command WHERE tenant_id = 'te-v' AND idempotency_key = 'altered');
-- A row taken out of the middle.
DELETE FROM cscp.evidence e
 WHERE e.tenant_id = 'te-v' AND e.seq = 3
   AND e.command_id = (SELECT command_id FROM cscp.command WHERE tenant_id = 'te-v' AND idempotency_key = 'middle');
-- The last row taken off: the chain now ends in started, the command is executed.
DELETE FROM cscp.evidence e
 WHERE e.tenant_id = 'te-v' AND e.seq = 5
   AND e.command_id = (SELECT command_id FROM cscp.command WHERE tenant_id = 'te-v' AND idempotency_key = 'last');
-- A row re-linked past its predecessor, with a hash recomputed to match its new content: the row
-- itself looks intact, its link does not, nor does the next row's link to it.
UPDATE cscp.evidence e
   SET prev_hash = p.hash
  FROM cscp.evidence p
 WHERE e.tenant_id = 'te-v' AND p.tenant_id = 'te-v' AND e.command_id = p.command_id
   AND e.seq = 3 AND p.seq = 1
   AND e.command_id = (SELECT command_id FROM cscp.command WHERE tenant_id = 'te-v' AND idempotency_key = 'relinked');
UPDATE cscp.evidence e SET hash = cscp.evidence_hash(e)
 WHERE e.tenant_id = 'te-v' AND e.seq = 3
   AND e.command_id = (SELECT command_id FROM cscp.command WHERE tenant_id = 'te-v' AND idempotency_key = 'relinked');
RESET session_replication_role;
SELECT * FROM pg_temp.verify('te-v');
-- One command at a time.
SELECT v.seq, v.problem FROM cscp.evidence_verify('te-v',
       (SELECT command_id FROM cscp.command WHERE tenant_id = 'te-v' AND idempotency_key = 'last')) v;
-- Other tenants' trails are untouched.
SELECT count(*) AS problems FROM cscp.evidence_verify('te');
SELECT try($$SELECT cscp.evidence_verify(NULL)$$);

---------------------------------------------------------------------------------------------------
-- 4. Canonical JSON and hashes: the same value gives the same text and hash however it was typed,
-- on every database; so the same calls under a pinned clock give the same frame hash.

-- Two conversations formed the same way at the same pinned time, their slots given in another key
-- order: the frames differ only by conversation_id.  The hashes are printed, so any change of the
-- canonical form, or of what a frame records, shows up here.
SET cscp.clock = '2026-05-01 12:00:00+00';
SELECT (cscp.context_open('te-h1', 'h', 'alice', '{"active_intent": "pay", "x_note": "a"}')).status;
SELECT (cscp.context_open('te-h1', 'h2', 'alice', '{"x_note": "a", "active_intent": "pay"}')).status;
SELECT state FROM cscp.command_submit('te-h1', 'h', 'alice', 'h:1', 'lookup', false, '{h:m1,h:m2}');
SELECT state FROM cscp.command_submit('te-h1', 'h2', 'alice', 'h2:1', 'lookup', false, '{h:m1,h:m2}');
SELECT c.idempotency_key, f.context_hash, cscp.canonical_hash(f.state) = f.context_hash AS recomputed,
       cscp.canonical_json(f.state) AS canonical_state
  FROM cscp.command c JOIN cscp.frame f ON f.tenant_id = c.tenant_id AND f.frame_id = c.frame_id
 WHERE c.tenant_id = 'te-h1' ORDER BY 1;

-- canonical_hash is 'sha256:' and the SHA-256 of canonical_json.
SELECT cscp.canonical_hash(v) = 'sha256:' || encode(sha256(convert_to(cscp.canonical_json(v), 'UTF8')), 'hex') AS same,
       cscp.canonical_hash(v)
  FROM (VALUES ('{}'::jsonb), ('{"a": [1, "x", null]}')) t(v);

-- Keys sorted by their UTF-8 bytes at every depth (jsonb's own order is shortest first), no
-- whitespace, arrays kept in order, duplicate keys as jsonb keeps them (the last one).
SELECT v AS input, cscp.canonical_json(v::jsonb)
  FROM (VALUES ('{"b": 1, "a": {"d": [3, 1, 2], "c": null}}'),
               ('{"aa": 1, "b": 2, "a": 3}'),
               ('{"é": 1, "z": 2, "Z": 3, "a": 4, "_": 5, "1": 6}'),
               ('  [ { "y" : true , "x" : false } ,  null ]  '),
               ('{"a": 1, "a": 2}'),
               ('{}'), ('[]'), ('[[], {}]'), ('"text"'), ('true'), ('null')) t(v);
SELECT cscp.canonical_json('{"b": 1,  "a": 2}') = cscp.canonical_json('{"a":2,"b":1}') AS whitespace_and_order;

-- Numbers: one text per number.
SELECT v AS input, cscp.canonical_json(v::jsonb)
  FROM (VALUES ('1.50'), ('1.5'), ('1.0'), ('100'), ('1e2'), ('1E+2'), ('-0'), ('-0.0'), ('0.000'),
               ('-1.2300e-3'), ('0.1'), ('123456789012345678901234567890.1000'), ('[1.50, 1.5, -0]')) t(v);
SELECT cscp.canonical_hash('{"amount": 1.50}') = cscp.canonical_hash('{"amount": 1.5}') AS "1.50 = 1.5",
       cscp.canonical_hash('-0') = cscp.canonical_hash('0') AS "-0 = 0",
       cscp.canonical_hash('1.5') = cscp.canonical_hash('"1.5"') AS "number = string";

-- Strings: only the escapes JSON requires; other characters, non-ASCII included, as they are.
SELECT v AS input, cscp.canonical_json(v::jsonb)
  FROM (VALUES ('"é"'), ('"\u00e9"'), ('"caf\u00e9 ☕"'), ('"\ud83d\ude00"'), ('"a\"b\\c"'), ('"\/"'),
               ('"\b\f\n\r\t"'), ('"\u0001\u001f"'), ('"\u0041"')) t(v);
SELECT cscp.canonical_json('"\u007f"') = E'"\x7f"' AS del_as_is,
       cscp.canonical_hash('"\u00e9"') = cscp.canonical_hash('"é"') AS escaped_same,
       cscp.canonical_hash('"e\u0301"') = cscp.canonical_hash('"é"') AS decomposed_same_no_unicode_normalization;
SELECT cscp.canonical_json(NULL) IS NULL AS strict;

RESET cscp.clock;
