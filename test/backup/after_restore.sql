-- Backup and restore: the restored database is consistent and cscp works in it.  Every check
-- raises when it fails (test/scripts/backup-restore.sh runs this with ON_ERROR_STOP).  The upgrade
-- test (test/scripts/upgrade.sh) runs it on a database upgraded from release 0.1.0 with
-- -v other_times=1: there the demo's stories hold rows of other times, whose invariants it checks
-- at the real time itself.
\set ON_ERROR_STOP 1
SET cscp.clock = '2026-09-01 10:02:00+00';
\pset tuples_only on
\pset format unaligned
CREATE FUNCTION pg_temp.expect(what text, got anyelement, want anyelement) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    IF got IS DISTINCT FROM want THEN
        RAISE EXCEPTION 'after restore: % is %, expected %', what, got, want;
    END IF;
    RETURN format('ok: %s = %s', what, got);
END
$$;
CREATE FUNCTION pg_temp.problems() RETURNS bigint LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM (SELECT DISTINCT tenant_id FROM cscp.evidence) t,
                                 cscp.evidence_verify(t.tenant_id))
         + (SELECT count(*) FROM cscp.check_invariants())
$$;

-- Every evidence chain verifies; no invariant is broken; the defaults are there once.
\if :{?other_times}
\else
SELECT pg_temp.expect('evidence and invariant problems', pg_temp.problems(), 0::bigint);
\endif
SELECT pg_temp.expect('default policies', (SELECT count(*) FROM cscp.policy WHERE tenant_id = '*'), 1::bigint);
SELECT pg_temp.expect('default authorities', (SELECT count(*) FROM cscp.authority WHERE tenant_id = '*'), 4::bigint);

-- The API works: the command waiting for confirmation is confirmed and run, a key replays, a new
-- command is submitted (its evidence continues the restored identity sequence), a turn appended.
SELECT pg_temp.expect('confirm', (SELECT outcome FROM cscp.confirm('bk', 'c-1', 'ana', 'c-1:m7', true)), 'confirmed');
SELECT pg_temp.expect('run to executed',
       (SELECT string_agg(t.state::text, ' ' ORDER BY n)
          FROM unnest('{authz_pending,authorized,started,executed}'::cscp.command_state[]) WITH ORDINALITY u(s, n),
               LATERAL cscp.command_transition((SELECT command_id FROM cscp.command WHERE idempotency_key = 'pay-3'), s) t),
       'authz_pending authorized started executed');
SELECT pg_temp.expect('replay of a restored key',
       (SELECT replayed FROM cscp.command_submit('bk', 'c-1', 'ana', 'pay-1', 'pay', true, '{c-1:m1}', '{"amount": 10}', 'acct:1')), true);
SELECT pg_temp.expect('new auto-confirmed command',
       (SELECT state::text FROM cscp.command_submit('bk', 'c-1', 'ana', 'ping-2', 'ping', true, '{c-1:m8}')), 'canonicalized');
SELECT pg_temp.expect('a turn appended',
       (SELECT turn_index FROM cscp.conversation_exchange('bk', 'c-1', '{"from": "ana", "role": "user", "content": {"text": "thanks"}, "ts": 3}')), 2);
SELECT pg_temp.expect('head of a restored chain', (SELECT (cscp.fact_current('bk', 'ana', 'home-1')).value), '"Lisbon"'::jsonb);
SELECT pg_temp.expect('a restored TTL', (SELECT status::text FROM cscp.context_get('bk', 'c-3', 'cy')), 'expired');
SELECT pg_temp.expect('the restored key routes the restored ids',
       (SELECT bool_and(cscp.routing_hash(x.context_id) = cscp.routing_conversation_hash(x.conversation_id))
          FROM cscp.context x), true);
SELECT pg_temp.expect('one key, the dumped one', (SELECT count(*) FROM cscp.secret_key), 1::bigint);
SELECT pg_temp.expect('evidence rows after the restored ones',
       (SELECT min(evidence_id) > (SELECT max(e.evidence_id) FROM cscp.evidence e WHERE e.created_at < cscp.now())
          FROM cscp.evidence WHERE created_at = cscp.now()), true);

-- The tombstone came back with the rest: the forgotten conversation stays forgotten.
DO $$
BEGIN
    PERFORM cscp.context_open('bk', 'c-gone', 'dan');
    RAISE EXCEPTION 'after restore: a forgotten conversation was written';
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    RAISE NOTICE 'ok: the forgotten conversation is refused';
END
$$;
\if :{?other_times}
\else
SELECT pg_temp.expect('evidence and invariant problems after use', pg_temp.problems(), 0::bigint);
\endif

-- The bindings came back with the rest, and hold: the bound role acts for its tenant only.
SET ROLE cscp_backup_app;
SET cscp.tenant_id = 'bk';
SELECT pg_temp.expect('a bound role after restore, its tenant',
       (SELECT status::text FROM cscp.context_get('bk', 'c-3', 'cy')), 'expired');
DO $$
BEGIN
    SET LOCAL cscp.tenant_id = 'bk2';
    PERFORM count(*) FROM cscp.context;
    RAISE EXCEPTION 'after restore: a bound role read another tenant';
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'ok: the bound role is refused another tenant';
END
$$;
RESET ROLE;
RESET cscp.tenant_id;
-- An API key made before the dump still opens the tenant's documents through the gateway's functions.
SELECT pg_temp.expect('a restored API key',
       (SELECT r.status FROM cscp.http_doc_get('Bearer ' || (SELECT key FROM public.bk_api_key), 'c-1', 'cart') r), 200);

-- LangGraph's thread, store item and agent session came back and are read through the API
-- (rows a release before 0.2.0 could not write: not in a database upgraded from one).
\if :{?other_times}
\else
SELECT pg_temp.expect('checkpoint with its blob and write',
       (SELECT id || ' ' || blobs[1]::text || ' ' || write_blobs[1]::text
          FROM cscp.checkpoint_get_tuple('bk', 'thread-1')), 'cp-1 \x5b5d \x5b315d');
SELECT pg_temp.expect('store item', (SELECT item_value ->> 'tea' FROM cscp.store_get('bk', '{users,ana}', 'prefs')), 'green');
SELECT pg_temp.expect('session item', (SELECT i ->> 'content' FROM cscp.session_get_items('bk', 'agent-1') i), 'hi');
\endif
