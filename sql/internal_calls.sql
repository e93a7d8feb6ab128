\i sql/include/helpers.sql
-- internal_calls: cscp's internal functions called by hand, as a superuser, with rows built by
-- hand (null fields, malformed values) and null or odd arguments.  Each refuses what it cannot
-- use with an error (22004 for a null field it reads) or answers; none crashes the server, and
-- nothing is written.  Application roles cannot call them at all (test/pgtap/privileges.sql).
SET cscp.tenant_id = 't';
SELECT count(*) AS contexts_before FROM cscp.context \gset
SELECT count(*) AS commands_before FROM cscp.command \gset

-- The crash of issue 30: the invariant checks query by the row's key.
SELECT try($$SELECT cscp.command_next_allowed(jsonb_populate_record(NULL::cscp.command, '{"state": "executed"}'))$$);
SELECT try($$SELECT cscp.command_next_allowed(row(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
              NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
              NULL, NULL, NULL)::cscp.command)$$);
SELECT cscp.command_next_allowed(jsonb_populate_record(NULL::cscp.command,
         '{"state": "executed", "tenant_id": "t", "command_id": "00000000-0000-0000-0000-000000000001"}'));

-- Pure functions of a row answer for any row.
SELECT cscp.context_touch(jsonb_populate_record(NULL::cscp.context, '{}')) AS touch_nothing;
SELECT cscp.context_touch(jsonb_populate_record(NULL::cscp.context,
         '{"tenant_id": "t", "expires_at": "infinity", "ttl": "-1 mon 30 days 1 hour"}')) AS touch_infinity;
SELECT cscp._frame_state(jsonb_populate_record(NULL::cscp.context, '{"slots": "x", "expires_at": "infinity"}'),
                         '{NULL, NULL}');
SELECT cscp._frame_state(jsonb_populate_record(NULL::cscp.context, '{"slots": {"pending_confirmation": 5}}'),
                         '{{a}, {b}}');
SELECT cscp._frame_state(jsonb_populate_record(NULL::cscp.context, '{}'), '{}');
SELECT cscp._frame_state(NULL, NULL) IS NULL AS frame_of_nothing;
SELECT cscp.evidence_hash(jsonb_populate_record(NULL::cscp.evidence, '{}')) IS NULL AS hash_without_time;
SELECT cscp.evidence_hash(jsonb_populate_record(NULL::cscp.evidence,
         '{"created_at": "2026-01-01 00:00:00+00", "message_ids": [null], "context_ref": "x"}')) ~ '^sha256:' AS hash_of_odd_row;

-- Internal functions of plain arguments: nulls and odd values refused or answered.
SELECT try($$SELECT cscp._id(NULL, NULL)$$);
SELECT try($$SELECT cscp._tenant(NULL)$$);
SELECT try($$SELECT cscp._tenant('*')$$);
SELECT cscp._utc('infinity') AS utc_infinity;
SELECT try($$SELECT cscp.check_lifetime(NULL, NULL, NULL, NULL)$$);
SELECT try($$SELECT cscp.check_lifetime(NULL, NULL, 'context_ttl', 'ttl')$$);
SELECT try($$SELECT cscp.check_lifetime('{"context_ttl": []}', NULL, 'context_ttl', 'ttl')$$);
SELECT try($$SELECT cscp.check_lifetime('"not an object"', '-1 hour', 'context_ttl', 'ttl')$$);
SELECT cscp.check_lifetime('{"max_ttl": "1 day"}', '1 hour', 'context_ttl', 'ttl') AS lifetime;
SELECT try($$SELECT cscp.check_command(NULL, NULL)$$);
SELECT try($$SELECT cscp.check_command('t', '00000000-0000-0000-0000-000000000001')$$);
SELECT try($$SELECT * FROM cscp.evidence_problems(NULL, NULL)$$);
SELECT try($$SELECT cscp.retention_floor(NULL)$$);
SELECT try($$SELECT cscp.proxy_session(NULL, NULL, NULL::text)$$);
SELECT try($$SELECT cscp._evidence_refusal(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)$$);
SELECT try($$SELECT cscp._evidence_refusal('t', 'c', '00000000-0000-0000-0000-000000000001', 'started', 'x',
              '{NULL}', '"not an object"', '[1]')$$);
SELECT try($$SELECT cscp.build_context_given(NULL, NULL, NULL, NULL, NULL, NULL, NULL)$$);
SELECT try($$SELECT cscp.build_context_given('t', 's', 'x', NULL, -1, NULL, '[1, 2]')$$);
SELECT try($$SELECT cscp._expire_contexts(-1)$$);
SELECT try($$SELECT cscp.session_state(NULL, NULL)$$);
SELECT try($$SELECT cscp.approve(NULL, NULL, NULL, NULL, NULL, NULL)$$);
BEGIN;
SELECT outcome FROM cscp.approve('t', 'c', 'a', 'm', true, NULL);
ROLLBACK;
SELECT try($$SELECT cscp._sweep_purge(NULL, NULL)$$);
SELECT try($$SELECT cscp._frame_state(jsonb_populate_record(NULL::cscp.context, '{"slots": [null]}'), '{NULL}')$$);

-- The server is still up, and nothing was written.
SELECT count(*) = :contexts_before AS contexts_unchanged FROM cscp.context;
SELECT count(*) = :commands_before AS commands_unchanged FROM cscp.command;

-- A direct UPDATE that sets a column a trigger reads to NULL is refused (23502), not an internal
-- error (the context trigger read the NULL status as an enum label).
SELECT ctx_in('ic-null', 'active') AS ic_ctx \gset
SELECT try(format('UPDATE cscp.context SET status = NULL WHERE context_id = %L', :'ic_ctx'));
SELECT command_id AS ic_cmd FROM cscp.command_submit('t', 'ic-null', 'actor', 'ic-k', 'lookup', false, '{ic-m}') \gset
SELECT try(format('UPDATE cscp.command SET state = NULL WHERE command_id = %L', :'ic_cmd'));
RESET cscp.tenant_id;
