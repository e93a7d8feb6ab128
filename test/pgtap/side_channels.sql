-- Side channels between tenants, tried as an application role (cscp.grant_app, cscp.tenant_id):
-- routing ids are keyed hashes whose key the role cannot read or set; notification tags are
-- keyed per tenant and given only for the session's tenant; evidence ids are times, not a
-- counter every tenant shares; an erasure locks its own (tenant, id), not what another tenant's
-- writes of the same id lock; a submit's idempotency-key lock is likewise its own tenant's.
BEGIN;
SELECT plan(30);

CREATE ROLE tap_side_a;
SELECT cscp.grant_app('tap_side_a');
SELECT cscp.secret_key_set(sha256('side channel key'), force => true) AS fingerprint \gset

-- What the superuser computes from the key, for the role to compare with.
CREATE FUNCTION pg_temp.hmac(msg bytea) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
    k bytea := sha256('side channel key');
    ipad bytea := '';
    opad bytea := '';
BEGIN
    FOR i IN 0..63 LOOP
        ipad := ipad || set_byte('\x00'::bytea, 0, CASE WHEN i < 32 THEN get_byte(k, i) ELSE 0 END # 54);
        opad := opad || set_byte('\x00'::bytea, 0, CASE WHEN i < 32 THEN get_byte(k, i) ELSE 0 END # 92);
    END LOOP;
    RETURN sha256(opad || sha256(ipad || msg));
END
$$;
CREATE TEMP TABLE expect AS
SELECT encode(substr(pg_temp.hmac('\x6e00'::bytea || convert_to('side-a', 'UTF8')), 1, 16), 'hex') AS tag_a,
       encode(substr(pg_temp.hmac('\x6e00'::bytea || convert_to('side-b', 'UTF8')), 1, 16), 'hex') AS tag_b,
       ('x' || encode(substr(pg_temp.hmac('\x6300'::bytea || convert_to('wa:+351910000001', 'UTF8')), 1, 4), 'hex'))::bit(32)::int AS conv_hash;
GRANT SELECT ON expect TO tap_side_a;

-- Another tenant's evidence, written between two of side-a's rows below.
SET cscp.clock = '2026-08-01 10:00:00+00';

SET ROLE tap_side_a;

-- Notification tags.
SELECT throws_ok($$SELECT cscp.notify_tag()$$, '42501', 'cscp.tenant_id is not set',
                 'without cscp.tenant_id there is no notification tag');
SET cscp.tenant_id = 'side-a';
SELECT is(cscp.notify_tag(), (SELECT tag_a FROM expect),
          'the tag is the first 16 bytes of HMAC-SHA256(key, ''n'' NUL tenant), in hex');
SELECT is(length(cscp.notify_tag()), 32, 'a tag is 32 hex digits (128 bits)');
SELECT unalike(cscp.notify_tag(), '%side-a%', 'the tag does not show the tenant id');
SET cscp.tenant_id = 'side-b';
SELECT is(cscp.notify_tag(), (SELECT tag_b FROM expect), 'another tenant has another tag');
SELECT isnt(cscp.notify_tag(), (SELECT tag_a FROM expect), 'tags of two tenants differ');
SET cscp.tenant_id = 'side-a';

-- Routing hashes: keyed, computed for the role, the key out of its reach.
SELECT is(cscp.routing_conversation_hash('wa:+351910000001'), (SELECT conv_hash FROM expect),
          'the routing hash is the first 32 bits of HMAC-SHA256(key, ''c'' NUL conversation_id)');
SELECT isnt(cscp.routing_conversation_hash('wa:+351910000001'), hashtext('wa:+351910000001'),
            'the routing hash is not the unkeyed hashtext');
SELECT is(cscp.routing_hash((cscp.context_open('side-a', 'wa:+351910000001', 'ana')).context_id),
          (SELECT conv_hash FROM expect), 'a context id the role makes carries the keyed hash');
SELECT is(cscp.routing_hash(cscp.routing_id('wa:+351910000001')), (SELECT conv_hash FROM expect),
          'cscp.routing_id carries the keyed hash');
SELECT throws_ok($$SELECT * FROM cscp.secret_key$$, '42501', NULL, 'the role cannot read the key');
SELECT throws_ok($$SELECT cscp.secret_key_set(sha256('mine'), true)$$, '42501', NULL,
                 'the role cannot set the key');
SELECT throws_ok($$INSERT INTO cscp.secret_key (key) VALUES (sha256('mine'))$$, '42501', NULL,
                 'the role cannot insert a key');
SELECT throws_ok($$DELETE FROM cscp.secret_key$$, '42501', NULL, 'the role cannot delete the key');
SELECT throws_ok($$UPDATE cscp.secret_key SET key = sha256('mine')$$, '42501', NULL,
                 'the role cannot change the key');
SELECT throws_ok($$SELECT cscp.context_open('side-a', 'x', 'y', ttl => interval '1 hour',
                   correlation_id => (SELECT encode(key, 'hex') FROM cscp.secret_key))$$, '42501', NULL,
                 'nor read it through a subquery of an API call');

-- Evidence ids: times, increasing, not a counter shared with other tenants.
SELECT lives_ok($$SELECT cscp.command_submit('side-a', 'wa:+351910000001', 'ana', 'side:k1', 'lookup', false, '{side:m1}')$$,
                'a command of the role''s own');
RESET ROLE;
SELECT count(*) AS other_tenant_commands
  FROM generate_series(1, 50) i,
       LATERAL cscp.command_submit('side-b', 'b-' || i, 'bob', 'side:b' || i, 'lookup', false, ARRAY['m' || i]) s;
SET ROLE tap_side_a;
SET cscp.tenant_id = 'side-a';
SELECT lives_ok($$SELECT cscp.command_submit('side-a', 'wa:+351910000001', 'ana', 'side:k2', 'lookup', false, '{side:m2}')$$,
                'a second command after another tenant wrote 50');
SELECT ok((SELECT count(*) FROM cscp.evidence) >= 2, 'the role reads its own evidence');
SELECT is((SELECT count(*) FROM cscp.evidence e
            WHERE abs((e.evidence_id >> 12) - (extract(epoch FROM clock_timestamp() - timestamptz '2020-01-01 00:00:00+00') * 1e6)::bigint)
                  > 600 * 1000000::bigint),
          0::bigint, 'an evidence id is the microseconds since 2020 it was written at (within minutes), not a count');
SELECT ok((SELECT max(evidence_id) - min(evidence_id) FROM cscp.evidence) > 4096 * 50,
          'the ids of two of its rows are not 50-odd apart: the other tenant''s rows left no gap to count');
SELECT is((SELECT array_agg(e.seq ORDER BY e.evidence_id) FROM cscp.evidence e
            WHERE e.command_id = (SELECT command_id FROM cscp.command WHERE idempotency_key = 'side:k1')),
          (SELECT array_agg(e.seq ORDER BY e.seq) FROM cscp.evidence e
            WHERE e.command_id = (SELECT command_id FROM cscp.command WHERE idempotency_key = 'side:k1')),
          'evidence ids follow the order rows were written in');
RESET ROLE;
SELECT is(pg_get_serial_sequence('cscp.evidence', 'evidence_id'), NULL,
          'evidence_id has no sequence');
SELECT is(pg_get_serial_sequence('cscp.inspection_log', 'inspection_id'), NULL,
          'inspection_id has no sequence');
SET ROLE tap_side_a;
SET cscp.tenant_id = 'side-a';

-- Erasure locks (tenant, id): the key of the lock is the SHA-256 of kind NUL tenant NUL id, so
-- another tenant's write of the same conversation id takes another lock.
SELECT lives_ok($$SELECT cscp.forget_conversation('side-a', 'wa:+351910000001')$$, 'the role erases its conversation');
CREATE TEMP TABLE erase_locks AS
SELECT l.classid::bigint AS key1, l.objid::bigint AS key2, l.mode
  FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 25446 AND l.pid = pg_backend_pid();
SELECT is((SELECT count(*) FROM erase_locks el
            WHERE el.mode = 'ExclusiveLock'
              AND el.key1 = ('x' || encode(substr(sha256(convert_to('conversation', 'UTF8') || '\x00'::bytea
                     || convert_to('side-a', 'UTF8') || '\x00'::bytea || convert_to('wa:+351910000001', 'UTF8')), 1, 4), 'hex'))::bit(32)::bigint
              AND el.key2 = ('x' || encode(substr(sha256(convert_to('conversation', 'UTF8') || '\x00'::bytea
                     || convert_to('side-a', 'UTF8') || '\x00'::bytea || convert_to('wa:+351910000001', 'UTF8')), 5, 4), 'hex'))::bit(32)::bigint),
          1::bigint, 'the erasure holds the lock of its own (tenant, conversation), exclusively');
SELECT is((SELECT count(*) FROM erase_locks el
            WHERE el.key1 = ('x' || encode(substr(sha256(convert_to('conversation', 'UTF8') || '\x00'::bytea
                     || convert_to('side-b', 'UTF8') || '\x00'::bytea || convert_to('wa:+351910000001', 'UTF8')), 1, 4), 'hex'))::bit(32)::bigint),
          0::bigint, 'and not the lock another tenant''s write of the same conversation id takes');

-- Idempotency keys: the submit's lock is keyed by 64 bits of the SHA-256 of tenant NUL key (class
-- 25451, "ck"), so no tenant can choose keys whose lock another tenant's submits wait on (a
-- 32-bit hashtext of tenant and key could be made to collide offline).
SELECT lives_ok($$SELECT cscp.context_open('side-a', 'conv-key', 'ana')$$, 'the role opens a context');
SELECT lives_ok($$SELECT cscp.command_submit('side-a', 'conv-key', 'ana', 'key-1', 'lookup', false, '{m-1}')$$,
                'the role submits a command');
CREATE TEMP TABLE key_locks AS
SELECT l.classid::bigint AS key1, l.objid::bigint AS key2
  FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 25451 AND l.pid = pg_backend_pid()
   AND l.mode = 'ExclusiveLock';
SELECT is((SELECT count(*) FROM key_locks k
            WHERE k.key1 = ('x' || encode(substr(sha256(convert_to('side-a', 'UTF8') || '\x00'::bytea
                     || convert_to('key-1', 'UTF8')), 1, 4), 'hex'))::bit(32)::bigint
              AND k.key2 = ('x' || encode(substr(sha256(convert_to('side-a', 'UTF8') || '\x00'::bytea
                     || convert_to('key-1', 'UTF8')), 5, 4), 'hex'))::bit(32)::bigint),
          1::bigint, 'the submit holds the lock of its own (tenant, idempotency key)');

RESET cscp.tenant_id;
RESET ROLE;
SELECT * FROM finish();
ROLLBACK;
