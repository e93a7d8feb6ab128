\i sql/include/helpers.sql
-- cscp.confirm and cscp.approve: every outcome of DESIGN.md sections 4 and 5, what each leaves
-- behind (the command's state, the context's status and slots, the evidence), replays by
-- message id, and the sweep lapsing windows.  Commands are shown by their idempotency keys,
-- command ids in slots and evidence as cmd:<key>; random ids are compared, never printed.
-- Defaults: context_ttl 30 minutes (sliding), confirmation_ttl 5 minutes, approval_ttl 1 hour.
-- The sweeps below count over the whole database: what earlier tests left is made inert first.
SELECT settle();
SET timezone = 'UTC';
\set SHOW_CONTEXT never

-- A mutating command of conversation conv, confirmed, waiting for mgr-1's approval (window 1
-- hour); its context lives for ttl (3 hours unless given).
CREATE FUNCTION approval_pending(conv text, key text, ttl interval DEFAULT '3 hours',
                                 actor text DEFAULT 'actor') RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    id uuid;
BEGIN
    PERFORM cscp.context_open('t', conv, actor, '{}', ttl);
    id := (cscp.command_submit('t', conv, actor, key, 'pay', true, ARRAY['m-' || key])).command_id;
    PERFORM cscp.confirm('t', conv, actor, 'yes-' || key, true);
    PERFORM cscp.command_transition(id, 'authz_pending', 'approval_required', '{"approver_id": "mgr-1"}');
    RETURN id;
END
$$;

------------------------------------------------------------------------------------------------
-- confirm: confirmed.  A yes inside the window, with the fingerprint of the pending target.
SET cscp.clock = '2026-05-01 10:00:00+00';
SELECT context_id AS ctx FROM cscp.context_open('t', 'cf-yes', 'actor') \gset
SELECT command_id AS cmd, state FROM cscp.command_submit('t', 'cf-yes', 'actor', 'yes-1', 'pay', true,
                                                         '{m1}', '{"amount": 5}', 'fp-acct-1') \gset
SELECT :'state' AS submitted, * FROM ctx_rows('cf-yes');
SET cscp.clock = '2026-05-01 10:04:59+00';
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.confirm('t', 'cf-yes', 'actor', 'm2', true, 'fp-acct-1');
SELECT changes();
SELECT * FROM cmd_rows('cf-yes');
SELECT * FROM ctx_rows('cf-yes');
SELECT * FROM ev_rows('cf-yes');
SELECT outcome, answered_by, cmd_key(command_id) AS command FROM cscp.answer
 WHERE conversation_id = 'cf-yes';

-- Replay: the same message again (even saying no now) answers the first outcome, writes nothing.
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.confirm('t', 'cf-yes', 'actor', 'm2', false);
SELECT changes();

-- A further yes, now that nothing is pending: nothing_pending, bound to no command.
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.confirm('t', 'cf-yes', 'actor', 'm3', true);
SELECT * FROM ev_rows('cf-yes') WHERE key IS NULL;
SELECT * FROM cmd_rows('cf-yes');

-- A yes without a fingerprint confirms as well.
SELECT context_id AS ctx FROM cscp.context_open('t', 'cf-yes-nofp', 'actor') \gset
SELECT command_id AS cmd FROM cscp.command_submit('t', 'cf-yes-nofp', 'actor', 'yes-2', 'pay', true,
                                                  '{m1}', '{}', 'fp-acct-2') \gset
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.confirm('t', 'cf-yes-nofp', 'actor', 'm2', true);
SELECT * FROM cmd_rows('cf-yes-nofp');
SELECT * FROM ctx_rows('cf-yes-nofp');

------------------------------------------------------------------------------------------------
-- confirm: declined.  A no rejects the command; the context is active again.
SET cscp.clock = '2026-05-01 11:00:00+00';
SELECT context_id AS ctx FROM cscp.context_open('t', 'cf-no', 'actor') \gset
SELECT command_id AS cmd FROM cscp.command_submit('t', 'cf-no', 'actor', 'no-1', 'pay', true,
                                                  '{m1}', '{}', 'fp-acct-1') \gset
SET cscp.clock = '2026-05-01 11:01:00+00';
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.confirm('t', 'cf-no', 'actor', 'm2', false, 'fp-acct-1');
SELECT changes();
SELECT * FROM cmd_rows('cf-no');
SELECT * FROM ctx_rows('cf-no');
SELECT * FROM ev_rows('cf-no');
SELECT state, terminal, outcome FROM cscp.command_status(:'cmd');
-- Replay, now saying yes: still declined, nothing written, the command stays rejected.
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command FROM cscp.confirm('t', 'cf-no', 'actor', 'm2', true);
SELECT changes();

------------------------------------------------------------------------------------------------
-- confirm: no_context.  The conversation never had a context (for this actor).
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id FROM cscp.confirm('t', 'cf-none', 'actor', 'm1', true);
SELECT changes();
SELECT * FROM ev_rows('cf-none');
SELECT outcome, cmd_key(command_id) AS command, context_id FROM cscp.answer WHERE conversation_id = 'cf-none';
-- Another actor's context does not count.
SELECT context_id IS NOT NULL AS opened FROM cscp.context_open('t', 'cf-none', 'someone-else');
SELECT outcome FROM cscp.confirm('t', 'cf-none', 'actor', 'm2', true);
-- Replay of the first message: no_context again, nothing written.
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id FROM cscp.confirm('t', 'cf-none', 'actor', 'm1', false);
SELECT changes();

------------------------------------------------------------------------------------------------
-- confirm: expired.  The context's TTL (2 minutes) ends before the confirmation window (5
-- minutes); no sweep has run.  The pending command is rejected with context_expired.
SET cscp.clock = '2026-05-01 12:00:00+00';
SELECT context_id AS ctx FROM cscp.context_open('t', 'cf-exp', 'actor', '{}', interval '2 minutes') \gset
SELECT command_id AS cmd FROM cscp.command_submit('t', 'cf-exp', 'actor', 'exp-1', 'pay', true,
                                                  '{m1}', '{}', 'fp-acct-1') \gset
SELECT * FROM ctx_rows('cf-exp');
SET cscp.clock = '2026-05-01 12:02:00+00';
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.confirm('t', 'cf-exp', 'actor', 'm2', true, 'fp-acct-1');
SELECT changes();
SELECT * FROM cmd_rows('cf-exp');
SELECT * FROM ctx_rows('cf-exp');
SELECT * FROM ev_rows('cf-exp');
-- Replay: expired again, nothing written; a no is not interpreted either.
SELECT snap();
SELECT outcome FROM cscp.confirm('t', 'cf-exp', 'actor', 'm2', true);
SELECT changes();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.confirm('t', 'cf-exp', 'actor', 'm3', false);
SELECT * FROM cmd_rows('cf-exp');

------------------------------------------------------------------------------------------------
-- confirm: nothing_pending.  A yes to a live context with no pending confirmation; also after
-- the pending command moved on by itself (canceled): the slot is gone, nothing is confirmed.
SET cscp.clock = '2026-05-01 13:00:00+00';
SELECT context_id AS ctx FROM cscp.context_open('t', 'cf-nothing', 'actor', '{"active_intent": "pay"}') \gset
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.confirm('t', 'cf-nothing', 'actor', 'm1', true);
SELECT changes();
SELECT * FROM ctx_rows('cf-nothing');
SELECT * FROM ev_rows('cf-nothing');
-- A non-mutating command asks for no confirmation: a yes still has nothing to confirm.
SELECT command_id AS cmd, state FROM cscp.command_submit('t', 'cf-nothing', 'actor', 'nothing-1', 'balance',
                                                         false, '{m2}') \gset
SELECT :'state' AS read_only_state, outcome, cmd_key(command_id) AS command
  FROM cscp.confirm('t', 'cf-nothing', 'actor', 'm3', true);
-- The first message, replayed after a confirmation became pending, still says nothing_pending
-- and leaves the pending command alone.
SELECT command_id AS cmd FROM cscp.command_submit('t', 'cf-nothing', 'actor', 'nothing-2', 'pay', true,
                                                  '{m4}') \gset
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command FROM cscp.confirm('t', 'cf-nothing', 'actor', 'm1', true);
SELECT changes();
SELECT * FROM cmd_rows('cf-nothing');
-- The pending one is then confirmed by a new message.
SELECT outcome, cmd_key(command_id) AS command FROM cscp.confirm('t', 'cf-nothing', 'actor', 'm5', true);

------------------------------------------------------------------------------------------------
-- confirm: confirmation_expired before any sweep.  The window (5 minutes) has passed while the
-- context is still live: the command is rejected, the slot cleared, the context active again.
SET cscp.clock = '2026-05-01 14:00:00+00';
SELECT context_id AS ctx FROM cscp.context_open('t', 'cf-late', 'actor') \gset
SELECT command_id AS cmd FROM cscp.command_submit('t', 'cf-late', 'actor', 'late-1', 'pay', true,
                                                  '{m1}', '{}', 'fp-acct-1') \gset
SET cscp.clock = '2026-05-01 14:05:00+00';
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.confirm('t', 'cf-late', 'actor', 'm2', true, 'fp-acct-1');
SELECT changes();
SELECT * FROM cmd_rows('cf-late');
SELECT * FROM ctx_rows('cf-late');
SELECT * FROM ev_rows('cf-late');
-- Replay: the same, nothing written.  A new message also hears confirmation_expired.
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command FROM cscp.confirm('t', 'cf-late', 'actor', 'm2', true);
SELECT changes();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.confirm('t', 'cf-late', 'actor', 'm3', true);

------------------------------------------------------------------------------------------------
-- confirm: target_mismatch.  A yes carrying another fingerprint confirms nothing; the command
-- stays pending.  A no with a wrong fingerprint is a mismatch too.
SET cscp.clock = '2026-05-01 15:00:00+00';
SELECT context_id AS ctx FROM cscp.context_open('t', 'cf-target', 'actor') \gset
SELECT command_id AS cmd FROM cscp.command_submit('t', 'cf-target', 'actor', 'target-1', 'pay', true,
                                                  '{m1}', '{"to": "acct-1"}', 'fp-acct-1') \gset
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.confirm('t', 'cf-target', 'actor', 'm2', true, 'fp-acct-2');
SELECT changes();
SELECT outcome FROM cscp.confirm('t', 'cf-target', 'actor', 'm3', false, 'fp-acct-2');
SELECT * FROM cmd_rows('cf-target');
SELECT * FROM ctx_rows('cf-target');
SELECT * FROM ev_rows('cf-target');
-- Replay of m2, now with the right fingerprint: still target_mismatch, nothing written.
SELECT snap();
SELECT outcome FROM cscp.confirm('t', 'cf-target', 'actor', 'm2', true, 'fp-acct-1');
SELECT changes();

-- A newer confirmation request supersedes the pending one: a yes with the fingerprint of the
-- superseded request is a mismatch and confirms neither command.
SELECT command_id AS cmd2 FROM cscp.command_submit('t', 'cf-target', 'actor', 'target-2', 'pay', true,
                                                   '{m4}', '{"to": "acct-9"}', 'fp-acct-9') \gset
SELECT * FROM cmd_rows('cf-target');
SELECT * FROM ctx_rows('cf-target');
SELECT outcome, cmd_key(command_id) AS command
  FROM cscp.confirm('t', 'cf-target', 'actor', 'm5', true, 'fp-acct-1');
SELECT * FROM cmd_rows('cf-target');
-- With the current fingerprint the newest request is confirmed; the superseded one stays rejected.
SELECT outcome, cmd_key(command_id) AS command
  FROM cscp.confirm('t', 'cf-target', 'actor', 'm6', true, 'fp-acct-9');
SELECT * FROM cmd_rows('cf-target');
SELECT * FROM ctx_rows('cf-target');
SELECT * FROM ev_rows('cf-target') WHERE seq > 2 OR key = 'target-2';

------------------------------------------------------------------------------------------------
-- approve: approved.  mgr-1 approves inside the window; the command is authorized.
SET cscp.clock = '2026-05-02 10:00:00+00';
SELECT approval_pending('ap-yes', 'ap-yes-1') AS cmd \gset
SELECT context_id AS ctx FROM cscp.context WHERE conversation_id = 'ap-yes' \gset
SELECT * FROM cmd_rows('ap-yes');
SELECT * FROM ctx_rows('ap-yes');
SET cscp.clock = '2026-05-02 10:59:59+00';
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.approve('t', 'ap-yes', 'mgr-1', 'a1', true);
SELECT changes();
SELECT * FROM cmd_rows('ap-yes');
SELECT * FROM ctx_rows('ap-yes');
SELECT * FROM ev_rows('ap-yes');
-- Replay, now denying: still approved, nothing written.
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.approve('t', 'ap-yes', 'mgr-1', 'a1', false);
SELECT changes();
-- The authorized command may start.
SELECT accepted, state FROM cscp.command_transition(:'cmd', 'started');

-- Naming the command works as well.
SELECT approval_pending('ap-yes-named', 'ap-yes-2') AS cmd \gset
SELECT outcome, cmd_key(command_id) AS command
  FROM cscp.approve('t', 'ap-yes-named', 'mgr-1', 'a1', true, :'cmd');
SELECT * FROM cmd_rows('ap-yes-named');

------------------------------------------------------------------------------------------------
-- approve: denied.
SET cscp.clock = '2026-05-02 11:00:00+00';
SELECT approval_pending('ap-no', 'ap-no-1') AS cmd \gset
SELECT context_id AS ctx FROM cscp.context WHERE conversation_id = 'ap-no' \gset
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.approve('t', 'ap-no', 'mgr-1', 'a1', false);
SELECT changes();
SELECT * FROM cmd_rows('ap-no');
SELECT * FROM ctx_rows('ap-no');
SELECT * FROM ev_rows('ap-no') WHERE seq > 3;
SELECT snap();
SELECT outcome FROM cscp.approve('t', 'ap-no', 'mgr-1', 'a1', true);
SELECT changes();

------------------------------------------------------------------------------------------------
-- approve: no_context.  The conversation has no context at all.
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id FROM cscp.approve('t', 'ap-none', 'mgr-1', 'a1', true);
SELECT changes();
SELECT * FROM ev_rows('ap-none');
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id FROM cscp.approve('t', 'ap-none', 'mgr-1', 'a1', false);
SELECT changes();

------------------------------------------------------------------------------------------------
-- approve: expired.  The context (TTL 2 minutes) ends inside the approval window; no sweep has
-- run.  The command is rejected with context_expired and the context recorded expired.
SET cscp.clock = '2026-05-02 12:00:00+00';
SELECT approval_pending('ap-exp', 'ap-exp-1', interval '2 minutes') AS cmd \gset
SELECT context_id AS ctx FROM cscp.context WHERE conversation_id = 'ap-exp' \gset
SET cscp.clock = '2026-05-02 12:02:00+00';
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.approve('t', 'ap-exp', 'mgr-1', 'a1', true);
SELECT changes();
SELECT * FROM cmd_rows('ap-exp');
SELECT * FROM ctx_rows('ap-exp');
SELECT * FROM ev_rows('ap-exp') WHERE seq > 3;
SELECT snap();
SELECT outcome FROM cscp.approve('t', 'ap-exp', 'mgr-1', 'a1', true);
SELECT changes();
-- Naming the command, with a new message: expired as well.
SELECT outcome, cmd_key(command_id) AS command
  FROM cscp.approve('t', 'ap-exp', 'mgr-1', 'a2', true, :'cmd');

-- The same, naming the command from the start.
SET cscp.clock = '2026-05-02 12:10:00+00';
SELECT approval_pending('ap-exp-named', 'ap-exp-2', interval '2 minutes') AS cmd \gset
SET cscp.clock = '2026-05-02 12:12:00+00';
SELECT outcome, cmd_key(command_id) AS command
  FROM cscp.approve('t', 'ap-exp-named', 'mgr-1', 'a1', true, :'cmd');
SELECT * FROM cmd_rows('ap-exp-named');
SELECT * FROM ctx_rows('ap-exp-named');

------------------------------------------------------------------------------------------------
-- approve: nothing_pending.  A live context without a pending approval; a command named that
-- is not waiting for one.
SET cscp.clock = '2026-05-02 13:00:00+00';
SELECT context_id AS ctx FROM cscp.context_open('t', 'ap-nothing', 'actor') \gset
-- approve answers for a conversation, not an actor: with nothing pending it names no context.
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.approve('t', 'ap-nothing', 'mgr-1', 'a1', true);
SELECT changes();
SELECT * FROM ev_rows('ap-nothing');
SELECT command_id AS cmd FROM cscp.command_submit('t', 'ap-nothing', 'actor', 'ap-nothing-1', 'pay', true,
                                                  '{m1}') \gset
SELECT outcome, cmd_key(command_id) AS command
  FROM cscp.approve('t', 'ap-nothing', 'mgr-1', 'a2', true, :'cmd');
SELECT * FROM cmd_rows('ap-nothing');
SELECT * FROM ev_rows('ap-nothing') WHERE event_type = 'invalid_transition_attempt';
SELECT outcome FROM cscp.confirm('t', 'ap-nothing', 'actor', 'm2', false);

------------------------------------------------------------------------------------------------
-- approve: approval_expired before any sweep.  The window (1 hour) has passed; the context
-- (TTL 3 hours) is still live.
SET cscp.clock = '2026-05-02 14:00:00+00';
SELECT approval_pending('ap-late', 'ap-late-1', interval '3 hours') AS cmd \gset
SELECT context_id AS ctx FROM cscp.context WHERE conversation_id = 'ap-late' \gset
SET cscp.clock = '2026-05-02 15:00:00+00';
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.approve('t', 'ap-late', 'mgr-1', 'a1', true);
SELECT changes();
SELECT * FROM cmd_rows('ap-late');
SELECT * FROM ctx_rows('ap-late');
SELECT * FROM ev_rows('ap-late') WHERE seq > 3;
SELECT snap();
SELECT outcome FROM cscp.approve('t', 'ap-late', 'mgr-1', 'a1', true);
SELECT changes();
-- New messages, naming the command or not, hear approval_expired too.
SELECT outcome, cmd_key(command_id) AS command
  FROM cscp.approve('t', 'ap-late', 'mgr-1', 'a2', true, :'cmd');
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.approve('t', 'ap-late', 'mgr-1', 'a3', true);

------------------------------------------------------------------------------------------------
-- approve: approver_mismatch.  Only the approver the request names may decide.
SET cscp.clock = '2026-05-02 16:00:00+00';
SELECT approval_pending('ap-who', 'ap-who-1') AS cmd \gset
SELECT context_id AS ctx FROM cscp.context WHERE conversation_id = 'ap-who' \gset
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx' AS same_context
  FROM cscp.approve('t', 'ap-who', 'mgr-2', 'a1', true);
SELECT changes();
SELECT outcome FROM cscp.approve('t', 'ap-who', 'actor', 'a2', false);
SELECT * FROM cmd_rows('ap-who');
SELECT * FROM ctx_rows('ap-who');
SELECT * FROM ev_rows('ap-who') WHERE seq > 3;
SELECT snap();
SELECT outcome FROM cscp.approve('t', 'ap-who', 'mgr-1', 'a1', true);
SELECT changes();
-- The named approver, with a new message, decides.
SELECT outcome, cmd_key(command_id) AS command FROM cscp.approve('t', 'ap-who', 'mgr-1', 'a3', true);

------------------------------------------------------------------------------------------------
-- approve: command_mismatch.  The command named is of this conversation but is not the one
-- waiting for approval.
SET cscp.clock = '2026-05-02 17:00:00+00';
SELECT approval_pending('ap-which', 'ap-which-1') AS cmd \gset
SELECT command_id AS other FROM cscp.command_submit('t', 'ap-which', 'actor', 'ap-which-2', 'balance',
                                                    false, '{m9}') \gset
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command
  FROM cscp.approve('t', 'ap-which', 'mgr-1', 'a1', true, :'other');
SELECT changes();
SELECT * FROM cmd_rows('ap-which');
SELECT * FROM ctx_rows('ap-which');
SELECT * FROM ev_rows('ap-which') WHERE event_type = 'invalid_transition_attempt';
SELECT snap();
SELECT outcome FROM cscp.approve('t', 'ap-which', 'mgr-1', 'a1', true, :'other');
SELECT changes();
SELECT outcome, cmd_key(command_id) AS command
  FROM cscp.approve('t', 'ap-which', 'mgr-1', 'a2', false, :'cmd');

------------------------------------------------------------------------------------------------
-- approve: ambiguous.  Two actors of one conversation each wait for an approval; a decision
-- that names no command cannot tell which.
SET cscp.clock = '2026-05-02 18:00:00+00';
SELECT approval_pending('ap-two', 'ap-two-1', actor => 'alice') AS cmd1 \gset
SELECT approval_pending('ap-two', 'ap-two-2', actor => 'bob') AS cmd2 \gset
SELECT * FROM ctx_rows('ap-two');
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id FROM cscp.approve('t', 'ap-two', 'mgr-1', 'a1', true);
SELECT changes();
SELECT * FROM cmd_rows('ap-two');
SELECT * FROM ev_rows('ap-two') WHERE event_type = 'invalid_transition_attempt';
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id FROM cscp.approve('t', 'ap-two', 'mgr-1', 'a1', true);
SELECT changes();
-- Naming each command decides it.
SELECT outcome, cmd_key(command_id) AS command
  FROM cscp.approve('t', 'ap-two', 'mgr-1', 'a2', true, :'cmd1');
SELECT outcome, cmd_key(command_id) AS command
  FROM cscp.approve('t', 'ap-two', 'mgr-1', 'a3', false, :'cmd2');
SELECT * FROM cmd_rows('ap-two');
SELECT * FROM ctx_rows('ap-two');

------------------------------------------------------------------------------------------------
-- command_transition to authorized releases the pending question that names the command, as
-- approve does.  An approval asked for and granted through command_transition itself: the
-- pending_approval slot is cleared and the context is active again.
SET cscp.clock = '2026-05-02 15:00:00+00';
SELECT approval_pending('ct-ap', 'ct-ap-1') AS cmd \gset
SELECT * FROM ctx_rows('ct-ap');
SELECT accepted, state FROM cscp.command_transition(:'cmd', 'authorized', 'approved_by_policy');
SELECT * FROM ctx_rows('ct-ap');
-- No approval asked for (authz_pending with policy_check), but the context holds a
-- pending_approval naming the command, written by hand: authorized releases it too.
SELECT context_id AS ctx FROM cscp.context_open('t', 'ct-hand', 'actor') \gset
SELECT command_id AS cmd FROM cscp.command_submit('t', 'ct-hand', 'actor', 'ct-hand-1', 'lookup', false,
                                                  '{m-ct-hand-1}') \gset
SELECT accepted FROM cscp.command_transition(:'cmd', 'authz_pending', 'policy_check');
-- (Written around the triggers: slot_set refuses a pending slot naming a command that does not
-- wait for that answer, confirm_binding.sql.)
SET session_replication_role = replica;
UPDATE cscp.context x
   SET slots = x.slots || jsonb_build_object('pending_approval',
                              jsonb_build_object('command_id', :'cmd', 'approver_id', 'mgr-1',
                                                 'expires_at', '2026-05-02 16:00:00+00'))
 WHERE x.context_id = :'ctx';
RESET session_replication_role;
SELECT * FROM ctx_rows('ct-hand');
SELECT accepted, state FROM cscp.command_transition(:'cmd', 'authorized', 'policy_ok');
SELECT * FROM ctx_rows('ct-hand');
-- A pending question naming another command stays, and the context is not written at all.
SELECT command_id AS cmd FROM cscp.command_submit('t', 'ct-hand', 'actor', 'ct-hand-2', 'lookup', false,
                                                  '{m-ct-hand-2}') \gset
SELECT accepted FROM cscp.command_transition(:'cmd', 'authz_pending', 'policy_check');
SET session_replication_role = replica;
UPDATE cscp.context x
   SET slots = x.slots || '{"pending_approval": {"command_id": "5b0c4a6e-8f7a-4c1e-9d2b-3e4f5a6b7c8d",
                            "approver_id": "mgr-1", "expires_at": "2026-05-02 16:00:00+00"}}'
 WHERE x.context_id = :'ctx';
RESET session_replication_role;
SELECT version AS v FROM cscp.context WHERE context_id = :'ctx' \gset
SELECT accepted, state FROM cscp.command_transition(:'cmd', 'authorized', 'policy_ok');
SELECT * FROM ctx_rows('ct-hand');
SELECT version = :v AS context_unchanged FROM cscp.context WHERE context_id = :'ctx';
SELECT status FROM cscp.slot_set(:'ctx', 'pending_approval', 'null');
SELECT * FROM ev_rows('ct-hand') WHERE from_to LIKE '%->authorized';

------------------------------------------------------------------------------------------------
-- Nothing above is still waiting.
SELECT count(*) AS still_pending FROM cscp.command WHERE tenant_id = 't' AND state IN ('confirmation_required', 'authz_pending');

------------------------------------------------------------------------------------------------
-- The sweep lapses windows; answers after it say the same as before it.  At 10:00 four
-- questions are asked:
--   sw-conf  a confirmation (window to 10:05), context live for 30 minutes;
--   sw-ctx   a confirmation (window to 10:05), context live for 2 minutes;
--   sw-appr  an approval (window to 11:00), context live for 3 hours;
--   sw-actx  an approval (window to 11:00), context live for 2 minutes.
SET cscp.clock = '2026-05-03 10:00:00+00';
SELECT context_id AS ctx_conf FROM cscp.context_open('t', 'sw-conf', 'actor') \gset
SELECT command_id AS cmd_conf FROM cscp.command_submit('t', 'sw-conf', 'actor', 'sw-conf-1', 'pay', true,
                                                       '{m1}', '{}', 'fp-acct-1') \gset
SELECT context_id AS ctx_ctx FROM cscp.context_open('t', 'sw-ctx', 'actor', '{}', interval '2 minutes') \gset
SELECT command_id AS cmd_ctx FROM cscp.command_submit('t', 'sw-ctx', 'actor', 'sw-ctx-1', 'pay', true,
                                                      '{m1}', '{}', 'fp-acct-1') \gset
SELECT approval_pending('sw-appr', 'sw-appr-1', interval '3 hours') AS cmd_appr \gset
SELECT context_id AS ctx_appr FROM cscp.context WHERE conversation_id = 'sw-appr' \gset
SELECT approval_pending('sw-actx', 'sw-actx-1', interval '2 minutes') AS cmd_actx \gset
SELECT context_id AS ctx_actx FROM cscp.context WHERE conversation_id = 'sw-actx' \gset

-- 10:03: the two short contexts expire; no window is due yet.
SET cscp.clock = '2026-05-03 10:03:00+00';
SELECT s ->> 'confirmations_lapsed' AS confirmations_lapsed, s ->> 'approvals_lapsed' AS approvals_lapsed
  FROM cscp.sweep() s;
SELECT * FROM ctx_rows('sw-ctx') UNION ALL SELECT * FROM ctx_rows('sw-actx');
-- confirm on the swept context: expired, and its pending command is rejected (context_expired).
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx_ctx' AS same_context
  FROM cscp.confirm('t', 'sw-ctx', 'actor', 'm2', true, 'fp-acct-1');
SELECT * FROM cmd_rows('sw-ctx');
SELECT * FROM ev_rows('sw-ctx') WHERE seq > 2 OR key IS NULL;
-- approve on the swept context, not naming the command and naming it: expired, the command
-- rejected (context_expired).
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx_actx' AS same_context
  FROM cscp.approve('t', 'sw-actx', 'mgr-1', 'a1', true);
SELECT outcome, cmd_key(command_id) AS command
  FROM cscp.approve('t', 'sw-actx', 'mgr-1', 'a2', true, :'cmd_actx');
SELECT * FROM cmd_rows('sw-actx');

-- 10:05: the confirmation window of sw-conf has passed: one confirmation lapses.
SET cscp.clock = '2026-05-03 10:05:00+00';
SELECT s ->> 'confirmations_lapsed' AS confirmations_lapsed, s ->> 'approvals_lapsed' AS approvals_lapsed
  FROM cscp.sweep() s;
SELECT * FROM cmd_rows('sw-conf');
SELECT * FROM ctx_rows('sw-conf');
SELECT * FROM ev_rows('sw-conf');
-- The answer after the sweep is the answer before it: confirmation_expired, for this command.
SELECT snap();
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx_conf' AS same_context
  FROM cscp.confirm('t', 'sw-conf', 'actor', 'm2', true, 'fp-acct-1');
SELECT changes();
SELECT * FROM cmd_rows('sw-conf');
SELECT * FROM ev_rows('sw-conf') WHERE seq > 3 OR key IS NULL;
-- A second sweep finds nothing more.
SELECT s ->> 'confirmations_lapsed' AS confirmations_lapsed, s ->> 'approvals_lapsed' AS approvals_lapsed
  FROM cscp.sweep() s;

-- 11:00: the approval window of sw-appr has passed: one approval lapses.
SET cscp.clock = '2026-05-03 11:00:00+00';
SELECT s ->> 'confirmations_lapsed' AS confirmations_lapsed, s ->> 'approvals_lapsed' AS approvals_lapsed
  FROM cscp.sweep() s;
SELECT * FROM cmd_rows('sw-appr');
SELECT * FROM ctx_rows('sw-appr');
SELECT * FROM ev_rows('sw-appr') WHERE seq > 3;
SELECT outcome, cmd_key(command_id) AS command, context_id = :'ctx_appr' AS same_context
  FROM cscp.approve('t', 'sw-appr', 'mgr-1', 'a1', true);
SELECT outcome, cmd_key(command_id) AS command
  FROM cscp.approve('t', 'sw-appr', 'mgr-1', 'a2', true, :'cmd_appr');
SELECT * FROM cmd_rows('sw-appr');
SELECT * FROM ev_rows('sw-appr') WHERE seq > 4 OR key IS NULL;

-- Several windows in one sweep: two confirmations and an approval.
SET cscp.clock = '2026-05-03 12:00:00+00';
SELECT count(*) AS asked FROM (
    SELECT cscp.command_submit('t', 'sw-many-' || i, 'actor', 'sw-many-' || i, 'pay', true, '{m1}')
      FROM (SELECT i, cscp.context_open('t', 'sw-many-' || i, 'actor') FROM generate_series(1, 2) i) o) s;
SELECT approval_pending('sw-many-3', 'sw-many-3', interval '3 hours') IS NOT NULL AS asked;
SET cscp.clock = '2026-05-03 13:00:00+00';
SELECT s ->> 'confirmations_lapsed' AS confirmations_lapsed, s ->> 'approvals_lapsed' AS approvals_lapsed
  FROM cscp.sweep() s;
SELECT key, state, reason_code FROM cmd_rows('sw-many-1') UNION ALL
SELECT key, state, reason_code FROM cmd_rows('sw-many-2') UNION ALL
SELECT key, state, reason_code FROM cmd_rows('sw-many-3') ORDER BY key;

SELECT count(*) AS still_pending FROM cscp.command WHERE tenant_id = 't' AND state IN ('confirmation_required', 'authz_pending');
-- Every chain written above is intact.
SELECT count(*) AS chain_problems FROM cscp.evidence_verify('t');

DROP FUNCTION approval_pending(text, text, interval, text);
RESET cscp.clock;
