\i sql/include/helpers.sql
-- A frame written with its message ids alone is completed by its guard from the context it reads
-- (issue 41: command_submit forms its frame without reading the context first), through direct
-- SQL as a tenant-bound application role and through the API: the state completed is the one
-- command_submit records; a context that is not usable, or of another conversation, takes no
-- frame (55000, no row); a submit refused for its context's sake, replayed or refused for its
-- key writes no frame and leaves the context as it was.
SET timezone = 'UTC';
SET cscp.clock = '2026-09-01 09:00:00+00';
\set SHOW_CONTEXT never
CREATE ROLE fc_app;
SELECT cscp.grant_app('fc_app', '{fc}');
CREATE FUNCTION pg_temp.ctx(conv text) RETURNS uuid LANGUAGE sql AS $$
    SELECT c.context_id FROM cscp.context c
     WHERE c.tenant_id = 'fc' AND c.conversation_id = conv ORDER BY c.created_at DESC LIMIT 1
$$;
CREATE FUNCTION pg_temp.frames(conv text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM cscp.frame f WHERE f.tenant_id = 'fc' AND f.conversation_id = conv
$$;
SET cscp.tenant_id = 'fc';
SET ROLE fc_app;

---------------------------------------------------------------------------------------------------
-- 1. Direct SQL: the message ids alone, completed from the context.
SELECT (cscp.context_open('fc', 'c1', 'ana', '{"active_intent": "pay"}')).status;
CREATE TEMP TABLE direct AS
WITH f AS (INSERT INTO cscp.frame (tenant_id, frame_id, conversation_id, context_id, state)
           VALUES ('fc', cscp.routing_id('c1'), 'c1', pg_temp.ctx('c1'), '{"message_ids": ["d1"]}')
           RETURNING frame_id, state, context_hash)
SELECT * FROM f;
SELECT state - 'expires_at' AS state, state ->> 'expires_at' AS expires_at FROM direct;
-- The API forming a command from the same state and message ids names that very frame (frames
-- are unique by context and hash): the state completed is the one command_submit computes.
SELECT state FROM cscp.command_submit('fc', 'c1', 'ana', 'k1', 'lookup', false, '{d1}', '{}');
SELECT c.frame_id = d.frame_id AS same_frame, c.context_ref ->> 'context_hash' = d.context_hash AS same_hash
  FROM cscp.command c, direct d WHERE c.idempotency_key = 'k1';
-- The next command, formed after the context moved on, gets a frame of its own.
SELECT state FROM cscp.command_submit('fc', 'c1', 'ana', 'k2', 'lookup', false, '{d2}', '{}');
SELECT c.frame_id <> d.frame_id AS new_frame, f.state -> 'message_ids' AS message_ids,
       f.state ->> 'last_message_id' AS last_message_id
  FROM cscp.command c JOIN cscp.frame f ON f.tenant_id = c.tenant_id AND f.frame_id = c.frame_id, direct d
 WHERE c.idempotency_key = 'k2';
SELECT pg_temp.frames('c1') AS frames;

---------------------------------------------------------------------------------------------------
-- 2. The message ids alone, for a context of another conversation, or closed: 55000, no row.
SELECT (cscp.context_open('fc', 'c2', 'ana')).status;
SELECT try(format($$INSERT INTO cscp.frame (tenant_id, frame_id, conversation_id, context_id, state)
                    VALUES ('fc', cscp.routing_id('c1'), 'c1', %L, '{"message_ids": ["d3"]}')$$,
                  pg_temp.ctx('c2'))) AS other_conversation;
SELECT (cscp.context_transition(pg_temp.ctx('c2'), 'closed')).status;
SELECT try(format($$INSERT INTO cscp.frame (tenant_id, frame_id, conversation_id, context_id, state)
                    VALUES ('fc', cscp.routing_id('c2'), 'c2', %L, '{"message_ids": ["d3"]}')$$,
                  pg_temp.ctx('c2'))) AS closed;
SELECT pg_temp.frames('c2') AS frames;

---------------------------------------------------------------------------------------------------
-- 3. Through the API: a blocked context refuses a mutating command (no frame, the context
-- untouched: same version), and frames a read-only one; a closed context refuses both.
SELECT (cscp.context_open('fc', 'c3', 'ana')).status;
SELECT (cscp.context_transition(pg_temp.ctx('c3'), 'blocked')).status;
CREATE TEMP TABLE before3 AS SELECT version, expires_at, last_command_id FROM cscp.context WHERE context_id = pg_temp.ctx('c3');
SELECT state, outcome ->> 'reason_code' AS reason FROM cscp.command_submit('fc', 'c3', 'ana', 'k3', 'pay', true, '{d4}', '{}');
SELECT c.version = b.version AS untouched, c.expires_at = b.expires_at AS same_expiry,
       c.last_command_id IS NOT DISTINCT FROM b.last_command_id AS same_last_command
  FROM cscp.context c, before3 b WHERE c.context_id = pg_temp.ctx('c3');
SELECT pg_temp.frames('c3') AS frames;
SELECT state FROM cscp.command_submit('fc', 'c3', 'ana', 'k4', 'lookup', false, '{d5}', '{}');
SELECT f.state ->> 'status' AS framed_status, x.last_command_id = c.command_id AS context_used
  FROM cscp.command c JOIN cscp.frame f ON f.tenant_id = c.tenant_id AND f.frame_id = c.frame_id
  JOIN cscp.context x ON x.tenant_id = c.tenant_id AND x.context_id = c.context_id
 WHERE c.idempotency_key = 'k4';
SELECT state, outcome ->> 'reason_code' AS reason FROM cscp.command_submit('fc', 'c2', 'ana', 'k5', 'lookup', false, '{d6}', '{}');
SELECT pg_temp.frames('c2') AS frames;

---------------------------------------------------------------------------------------------------
-- 4. A replay (the same request under a key already used) and a conflict (another request under
-- it: 23505) write no frame and leave the context as it was: the key is looked up before the
-- context is locked or framed.
CREATE TEMP TABLE before4 AS SELECT version, expires_at FROM cscp.context WHERE context_id = pg_temp.ctx('c1');
SELECT state, replayed FROM cscp.command_submit('fc', 'c1', 'ana', 'k2', 'lookup', false, '{d2}', '{}');
SELECT try($$SELECT state FROM cscp.command_submit('fc', 'c1', 'ana', 'k2', 'lookup', false, '{d9}', '{"x": 1}')$$) AS conflict;
SELECT c.version = b.version AS untouched, c.expires_at = b.expires_at AS same_expiry
  FROM cscp.context c, before4 b WHERE c.context_id = pg_temp.ctx('c1');
SELECT pg_temp.frames('c1') AS frames;

RESET ROLE;
SELECT kind, count(*) FROM cscp.check_invariants('fc') GROUP BY kind ORDER BY kind;
RESET cscp.clock;
SELECT cscp.forget_conversation('fc', c) IS NOT NULL AS forgotten FROM unnest('{c1,c2,c3}'::text[]) c;
DELETE FROM cscp.tombstone WHERE tenant_id = 'fc';
SELECT cscp.revoke_app('fc_app');
RESET cscp.tenant_id;
DROP OWNED BY fc_app;
DROP ROLE fc_app;
