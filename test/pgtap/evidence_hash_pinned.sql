-- The hash of an evidence row is a contract (README, "Evidence"): sha256 of the canonical JSON of
-- its fields, prev_hash included, keys in bytewise order.  Pinned here three ways: a fixed row's
-- hash as a literal; the same hash built in SQL from the definition (cscp.canonical_json of the
-- fields, then sha256); and every row the API writes, as an application role, against that SQL
-- definition and cscp.evidence_verify.  A change of what is hashed, or of how, fails here.
BEGIN;
SELECT plan(9);

-- The definition, in SQL: the canonical JSON object of the hashed fields, then its SHA-256.
CREATE FUNCTION pg_temp.defined_hash(e cscp.evidence) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT 'sha256:' || pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(cscp.canonical_json(
               pg_catalog.jsonb_build_object(
                   'command_id', e.command_id::text, 'context_ref', e.context_ref,
                   'conversation_id', e.conversation_id, 'created_at',
                   pg_catalog.to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                   'decision', e.decision, 'detail', e.detail, 'event_type', e.event_type,
                   'from_state', e.from_state, 'message_ids', pg_catalog.to_jsonb(e.message_ids),
                   'prev_hash', e.prev_hash, 'reason_code', e.reason_code, 'seq', e.seq,
                   'stage', e.stage, 'tenant_id', e.tenant_id, 'to_state', e.to_state)),
               'UTF8')), 'hex')
$$;

-- A fixed row: escapes, non-ASCII, a nested object with keys out of order, numbers to normalise,
-- a null element in message_ids.
CREATE TEMP TABLE pinned AS
SELECT pg_catalog.jsonb_populate_record(NULL::cscp.evidence, $j${
    "tenant_id": "tenant \"q\"", "evidence_id": 1, "conversation_id": "conv\n1 é",
    "command_id": "0b7c2a34-5d7e-4f8a-9b1c-2d3e4f5a6b7c", "seq": 3, "stage": "authorized",
    "event_type": "authorized", "from_state": "authz_pending", "to_state": "authorized",
    "message_ids": ["m1", null, "m\\3"],
    "context_ref": {"frame_id": null, "context_id": "c", "expires_at": "2026-05-01T09:30:00.000000Z",
                    "context_hash": "sha256:00", "z": [1.50, -0, {"b": true, "a": false}]},
    "decision": "allowed", "reason_code": null, "detail": {"ü": "x", "u": 2.0},
    "created_at": "2026-05-01 09:00:00.123456+02", "prev_hash": "sha256:ab",
    "hash": "unused"}$j$::jsonb) AS e;
CREATE TEMP TABLE pinned_null AS
SELECT pg_catalog.jsonb_populate_record(NULL::cscp.evidence, $j${
    "tenant_id": "t", "conversation_id": "c", "seq": 1, "stage": "confirmed",
    "event_type": "invalid_transition_attempt", "created_at": "2026-05-01 09:00:00+00",
    "hash": "unused"}$j$::jsonb) AS e;

SELECT is((SELECT cscp.evidence_hash(e) FROM pinned),
          'sha256:b97940d307cb528f61e408f17f733a9ee9964b980c77983cebafc62e64276f3c',
          'a fixed row''s hash is the pinned value');
SELECT is((SELECT cscp.evidence_hash(e) FROM pinned), (SELECT pg_temp.defined_hash(e) FROM pinned),
          'a fixed row''s hash is the SHA-256 of the canonical JSON of its fields');
SELECT is((SELECT cscp.evidence_hash(e) FROM pinned_null),
          'sha256:86d366afa638ba8c745557fc75f741a0f6b39502b1aa50b0d51069066af95018',
          'a row of nulls: its hash is the pinned value');
SELECT is((SELECT cscp.evidence_hash(e) FROM pinned_null), (SELECT pg_temp.defined_hash(e) FROM pinned_null),
          'a row of nulls: its hash is the SHA-256 of the canonical JSON of its fields');

-- created_at as hashed: UTC, microseconds, whatever the session's TimeZone; years of four digits
-- and the rest (before year 1, after 9999) alike.
SET TimeZone = 'America/St_Johns';
SELECT is((SELECT pg_catalog.string_agg(cscp._utc(t), ' ' ORDER BY t) FROM pg_catalog.unnest(ARRAY[
               '0001-01-01 00:00:00+00', '1969-12-31 23:59:59.999999+00', '1999-12-31 23:59:59.5+00',
               '2000-01-01 00:00:00+00', '2026-05-01 09:00:00.123456+02', '9999-12-31 23:59:59.000001+00',
               '10000-01-01 00:00:00+00', '0002-03-04 05:06:07.000008+00 BC', 'infinity',
               '-infinity']::timestamptz[]) t),
          '-infinity -001-03-04T05:06:07.000008Z 0001-01-01T00:00:00.000000Z '
          '1969-12-31T23:59:59.999999Z 1999-12-31T23:59:59.500000Z 2000-01-01T00:00:00.000000Z '
          '2026-05-01T07:00:00.123456Z 9999-12-31T23:59:59.000001Z 10000-01-01T00:00:00.000000Z infinity',
          'timestamps are hashed as UTC text with microseconds');
RESET TimeZone;

-- Rows the API writes, as an application role: chains of several events per call, a refused
-- attempt, an answer to nothing (a chain of one).
CREATE ROLE tap_eh_app;
SELECT cscp.grant_app('tap_eh_app', ARRAY['eh']);
SET cscp.clock = '2026-10-02 10:00:00+00';
SET ROLE tap_eh_app;
SET cscp.tenant_id = 'eh';
SELECT (cscp.context_open('eh', 'c1', 'u')).status;
SELECT command_id AS a FROM cscp.command_submit('eh', 'c1', 'u', 'k1', 'transfer', true, '{m1}') \gset
SELECT outcome FROM cscp.confirm('eh', 'c1', 'u', 'm2', true);
SELECT accepted FROM cscp.command_transition(:'a', 'authz_pending', 'policy_check');
SELECT accepted FROM cscp.command_transition(:'a', 'authorized');
SELECT accepted FROM cscp.command_transition(:'a', 'confirmed');
SELECT accepted FROM cscp.command_transition(:'a', 'started');
SELECT accepted FROM cscp.command_transition(:'a', 'executed');
SELECT state FROM cscp.command_submit('eh', 'c1', 'u', 'k2', 'lookup', false, '{"m\"3"}');
SELECT outcome FROM cscp.confirm('eh', 'c1', 'u', 'm4', true);
SELECT outcome FROM cscp.confirm('eh', 'c9', 'u', 'm5', true);

SELECT cmp_ok((SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'eh'), '>=', 10::bigint,
              'the calls wrote evidence');
SELECT is((SELECT count(*) FROM cscp.evidence e
            WHERE e.tenant_id = 'eh' AND e.hash IS DISTINCT FROM pg_temp.defined_hash(e)), 0::bigint,
          'every row the API wrote carries the SHA-256 of the canonical JSON of its fields');
SELECT is((SELECT count(*) FROM cscp.evidence e
            WHERE e.tenant_id = 'eh' AND e.hash IS DISTINCT FROM cscp.evidence_hash(e)), 0::bigint,
          'every row the API wrote carries cscp.evidence_hash of itself');
SELECT is_empty($$SELECT * FROM cscp.evidence_verify('eh')$$, 'cscp.evidence_verify finds every chain intact');
RESET ROLE;
SELECT * FROM finish();
ROLLBACK;
