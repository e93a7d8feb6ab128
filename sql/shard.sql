\i sql/include/helpers.sql
-- The shard guard: a node holding some partitions refuses rows that hash to the others.
-- Hashes used below (partition = hash & 1 with two partitions):
--   conversations: routing_conversation_hash('s-b') & 1 = 0, ('s-a') & 1 = 1 (setup.sql's key)
--   subjects and sessions of tenant t: routing_key_hash('t', 's-e') & 1 = 0, ('t', 's-c') & 1 = 1
--   LangGraph threads and agent sessions of tenant t: the same as sessions
--   a tenant's LangGraph store: routing_key_hash('u', '') & 1 = 0, ('t', '') & 1 = 1
SET cscp.clock = '2026-03-01 09:00:00+00';
SELECT cscp.routing_key_hash('t', 's-e') <> hashtext('t/s-e') AS key_hash_is_keyed;
SELECT cscp.routing_key_hash(NULL, 's-e') IS NULL AS key_hash_strict;

-- One node (no row in cscp.shard) holds everything.
SELECT count(*) AS config_rows FROM cscp.shard;
SELECT try($$SELECT cscp.context_open('t', 's-a', 'a')$$) AS one_node_open;

-- Bad configurations are refused with 22023 and change nothing.
SELECT try($$SELECT cscp.shard_set(3, '{0}')$$);
SELECT try($$SELECT cscp.shard_set(0, '{0}')$$);
SELECT try($$SELECT cscp.shard_set(131072, '{0}')$$);
SELECT try($$SELECT cscp.shard_set(2, '{}')$$);
SELECT try($$SELECT cscp.shard_set(2, NULL)$$);
SELECT try($$SELECT cscp.shard_set(2, '{2}')$$);
SELECT try($$SELECT cscp.shard_set(2, '{-1}')$$);
SELECT try($$SELECT cscp.shard_set(2, '{0,NULL}')$$);
SELECT try($$SELECT cscp.shard_set(4, '{1,1}')$$);
SELECT count(*) AS config_rows FROM cscp.shard;

-- This node holds partition 0 of 2.
SELECT cscp.shard_set(2, '{0}');
-- Conversation-scoped rows: the API and direct SQL alike.
SELECT try($$SELECT cscp.context_open('t', 's-b', 'a')$$) AS held_open;
SELECT try($$SELECT cscp.context_open('t', 's-a', 'b')$$) AS other_open;
SELECT try($$SELECT cscp.conversation_start('t', 's-a', 'agent',
    '{"from": "agent", "role": "agent", "content": "hi", "ts": 1}')$$) AS other_start;
SELECT try($$SELECT cscp.conversation_start('t', 's-b', 'agent',
    '{"from": "agent", "role": "agent", "content": "hi", "ts": 1}')$$) AS held_start;
SELECT try($$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('t', 's-a', 'direct', cscp.now() + interval '1 hour', interval '1 hour')$$) AS other_insert;
SELECT count(*) AS written_for_other FROM cscp.context WHERE conversation_id = 's-a' AND actor_id IN ('b', 'direct');
-- Evidence, which cscp inserts below the executor, is held to the guard as well.
SELECT try($$SELECT cscp._evidence_refusal('t', 's-b', NULL, 'confirmed', 'no_pending_confirmation',
                                           ARRAY['m-held'], NULL, NULL)$$) AS held_evidence;
SELECT try($$SELECT cscp._evidence_refusal('t', 's-a', NULL, 'confirmed', 'no_pending_confirmation',
                                           ARRAY['m-other'], NULL, NULL)$$) AS other_evidence;
SELECT count(*) AS evidence_for_other FROM cscp.evidence WHERE conversation_id = 's-a';
-- Subject- and session-scoped rows.
SELECT try($$SELECT cscp.fact_write('t', 's-e', 'f1', 'city', '"Porto"')$$) AS held_fact;
SELECT try($$SELECT cscp.fact_write('t', 's-c', 'f1', 'city', '"Porto"')$$) AS other_fact;
SELECT try($$SELECT cscp.identity_set('t', 's-c', '{"user_name": "Ana"}')$$) AS other_identity;
SELECT try($$SELECT cscp.doc_put('t', 's-e', 'ns', '{"a": 1}', 60)$$) AS held_doc;
SELECT try($$SELECT cscp.doc_put('t', 's-c', 'ns', '{"a": 1}', 60)$$) AS other_doc;
SELECT try($$SELECT cscp.ws_put('t', 's-c', 'k', '1')$$) AS other_ws;
SELECT try($$SELECT cscp.env_set('t', 's-c', '{"tz": "UTC"}')$$) AS other_env;
-- LangGraph threads (checkpoints, blobs, writes), agent sessions and their items by (tenant,
-- id); a tenant's store by (tenant, ''): the API and direct SQL alike.
SELECT try($$SELECT cscp.checkpoint_put('t', 's-e', '', 'c-1', NULL, '{"v": 4, "channel_versions": {"m": "1"}}', '{}',
             '{m}', '{1}', '{json}', ARRAY['\x5b315d'::bytea])$$) AS held_checkpoint;
SELECT try($$SELECT cscp.checkpoint_put_writes('t', 's-e', '', 'c-1', 'task', '', '{m}', '{json}', ARRAY['\x31'::bytea], '{0}')$$) AS held_writes;
SELECT try($$SELECT cscp.checkpoint_put('t', 's-c', '', 'c-1', NULL, '{"v": 4, "channel_versions": {}}', '{}')$$) AS other_checkpoint;
SELECT try($$SELECT cscp.checkpoint_put_writes('t', 's-c', '', 'c-1', 'task', '', '{m}', '{json}', ARRAY['\x31'::bytea], '{0}')$$) AS other_writes;
SELECT try($$INSERT INTO cscp.checkpoint_thread (tenant_id, thread_id, expires_at) VALUES ('t', 's-c', cscp.now() + interval '1 hour')$$) AS other_thread_insert;
SELECT try($$INSERT INTO cscp.checkpoint_blob (tenant_id, thread_id, checkpoint_ns, channel, version, type, blob)
             VALUES ('t', 's-c', '', 'm', '1', 'json', '\x31')$$) AS other_blob_insert;
SELECT try($$INSERT INTO cscp.checkpoint_write (tenant_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type)
             VALUES ('t', 's-c', '', 'c-1', 'task', 0, 'm', 'json')$$) AS other_write_insert;
SELECT try($$INSERT INTO cscp.checkpoint (tenant_id, thread_id, checkpoint_ns, checkpoint_id, checkpoint)
             VALUES ('t', 's-c', '', 'c-1', '{}')$$) AS other_checkpoint_insert;
SELECT try($$SELECT cscp.session_add_items('t', 's-e', '[{"role": "user"}]')$$) AS held_session;
SELECT try($$SELECT cscp.session_add_items('t', 's-c', '[{"role": "user"}]')$$) AS other_session;
SELECT try($$INSERT INTO cscp.session_item (tenant_id, session_id, seq, item) VALUES ('t', 's-c', 1, '{}')$$) AS other_item_insert;
SELECT try($$SELECT cscp.store_put('u', '{notes}', 'k', '{"a": 1}')$$) AS held_store;
SELECT try($$SELECT cscp.store_put('t', '{notes}', 'k', '{"a": 1}')$$) AS other_store;
SELECT try($$INSERT INTO cscp.store_item (tenant_id, namespace, key, value) VALUES ('t', '{notes}', 'd', '{}')$$) AS other_store_insert;
SELECT try($$UPDATE cscp.store_item SET tenant_id = 't' WHERE tenant_id = 'u'$$) AS store_move_out;
SELECT (SELECT count(*) FROM cscp.checkpoint_thread WHERE tenant_id = 't' AND thread_id = 's-c')
     + (SELECT count(*) FROM cscp.agent_session WHERE tenant_id = 't' AND session_id = 's-c')
     + (SELECT count(*) FROM cscp.store_item WHERE tenant_id = 't') AS framework_rows_for_other;
-- The same session id of another tenant hashes elsewhere: the tenant is part of the hash.
SELECT cscp.routing_key_hash('u', 's-c') <> cscp.routing_key_hash('t', 's-c') AS tenant_in_hash;
-- An UPDATE moving a row to a partition not held is refused; within the partition it is not.
SELECT try($$UPDATE cscp.document SET session_id = 's-c' WHERE tenant_id = 't' AND session_id = 's-e'$$) AS move_out;
SELECT try($$UPDATE cscp.document SET payload = '{"a": 2}' WHERE tenant_id = 't' AND session_id = 's-e'$$) AS update_in_place;
-- Policies and authority ranks are on every shard: not guarded.
SELECT try($$SELECT cscp.policy_set('t', '{"context_ttl": "10 minutes"}')$$) AS policy;

-- An application role is held to it too (it cannot read cscp.shard, the guard can).
CREATE ROLE shard_app;
SELECT cscp.grant_app('shard_app');
SET ROLE shard_app;
SET cscp.tenant_id = 't';
SELECT try($$SELECT cscp.context_open('t', 's-a', 'app')$$) AS app_other_open;
SELECT try($$SELECT cscp.context_open('t', 's-b', 'app')$$) AS app_held_open;
SELECT try($$SELECT cscp.checkpoint_put('t', 's-c', '', 'c-1', NULL, '{"v": 4, "channel_versions": {}}', '{}')$$) AS app_other_checkpoint;
SELECT try($$SELECT cscp.session_add_items('t', 's-c', '[{"role": "user"}]')$$) AS app_other_session;
SELECT try($$SELECT cscp.store_put('t', '{notes}', 'k', '{"a": 1}')$$) AS app_other_store;
SELECT try($$INSERT INTO cscp.store_item (tenant_id, namespace, key, value) VALUES ('t', '{notes}', 'd', '{}')$$) AS app_other_store_insert;
SELECT try($$SELECT cscp.shard_set(NULL, NULL)$$) AS app_shard_set;
SELECT try($$SELECT * FROM cscp.shard$$) AS app_reads_shard;
RESET cscp.tenant_id;
RESET ROLE;

-- Rows of partitions no longer held, after partition 1 moved here and 0 moved away.
SELECT cscp.shard_set(2, '{1}');
-- (shard_misplaced counts over the whole database; shown are this file's rows: tenant t, ids 's-...'.)
SELECT m.table_name, m.partition, m.row_count - CASE m.table_name
         WHEN 'context' THEN (SELECT count(*) FROM cscp.context x WHERE NOT (x.tenant_id = 't' AND x.conversation_id LIKE 's-%')
                                 AND cscp.routing_conversation_hash(x.conversation_id) & 1 = m.partition)
         WHEN 'conversation' THEN (SELECT count(*) FROM cscp.conversation x WHERE NOT (x.tenant_id = 't' AND x.conversation_id LIKE 's-%')
                                      AND cscp.routing_conversation_hash(x.conversation_id) & 1 = m.partition)
         WHEN 'document' THEN (SELECT count(*) FROM cscp.document x WHERE NOT (x.tenant_id = 't' AND x.session_id LIKE 's-%')
                                  AND cscp.routing_key_hash(x.tenant_id, x.session_id) & 1 = m.partition)
         WHEN 'fact' THEN (SELECT count(*) FROM cscp.fact x WHERE NOT (x.tenant_id = 't' AND x.subject_id LIKE 's-%')
                              AND cscp.routing_key_hash(x.tenant_id, x.subject_id) & 1 = m.partition)
       END AS row_count
  FROM cscp.shard_misplaced() m WHERE m.table_name IN ('context', 'fact', 'document', 'conversation');
-- LangGraph's and agent sessions' tables are counted too (this file's threads, session and store).
SELECT DISTINCT m.table_name FROM cscp.shard_misplaced() m
 WHERE m.table_name IN ('checkpoint_thread', 'checkpoint', 'checkpoint_blob', 'checkpoint_write',
                        'agent_session', 'session_item', 'store_item')
 ORDER BY 1;
-- Every table and partition: the counts are those of hashing each row of the whole database
-- (4 partitions, 2 held); holding every partition, nothing is misplaced.
SELECT cscp.shard_set(4, '{1,2}');
CREATE TEMP VIEW per_row AS
WITH h AS (
    SELECT 'context' AS t, cscp.routing_conversation_hash(x.conversation_id) AS hash FROM cscp.context x
    UNION ALL SELECT 'context_live', cscp.routing_conversation_hash(x.conversation_id) FROM cscp.context_live x
    UNION ALL SELECT 'context_retired', cscp.routing_conversation_hash(x.conversation_id) FROM cscp.context_retired x
    UNION ALL SELECT 'command', cscp.routing_conversation_hash(x.conversation_id) FROM cscp.command x
    UNION ALL SELECT 'command_window', cscp.routing_conversation_hash(x.conversation_id) FROM cscp.command_window x
    UNION ALL SELECT 'command_retired', cscp.routing_conversation_hash(x.conversation_id) FROM cscp.command_retired x
    UNION ALL SELECT 'frame', cscp.routing_conversation_hash(x.conversation_id) FROM cscp.frame x
    UNION ALL SELECT 'answer', cscp.routing_conversation_hash(x.conversation_id) FROM cscp.answer x
    UNION ALL SELECT 'evidence', cscp.routing_conversation_hash(x.conversation_id) FROM cscp.evidence x
    UNION ALL SELECT 'conversation', cscp.routing_conversation_hash(x.conversation_id) FROM cscp.conversation x
    UNION ALL SELECT 'turn', cscp.routing_conversation_hash(x.conversation_id) FROM cscp.turn x
    UNION ALL SELECT 'event', cscp.routing_conversation_hash(x.conversation_id) FROM cscp.event x
    UNION ALL SELECT 'inspection_log', cscp.routing_conversation_hash(x.conversation_id) FROM cscp.inspection_log x
    UNION ALL SELECT 'identity', cscp.routing_key_hash(x.tenant_id, x.subject_id) FROM cscp.identity x
    UNION ALL SELECT 'fact', cscp.routing_key_hash(x.tenant_id, x.subject_id) FROM cscp.fact x
    UNION ALL SELECT 'document', cscp.routing_key_hash(x.tenant_id, x.session_id) FROM cscp.document x
    UNION ALL SELECT 'working_set', cscp.routing_key_hash(x.tenant_id, x.session_id) FROM cscp.working_set x
    UNION ALL SELECT 'environment', cscp.routing_key_hash(x.tenant_id, x.session_id) FROM cscp.environment x
    UNION ALL SELECT 'checkpoint_thread', cscp.routing_key_hash(x.tenant_id, x.thread_id) FROM cscp.checkpoint_thread x
    UNION ALL SELECT 'checkpoint', cscp.routing_key_hash(x.tenant_id, x.thread_id) FROM cscp.checkpoint x
    UNION ALL SELECT 'checkpoint_blob', cscp.routing_key_hash(x.tenant_id, x.thread_id) FROM cscp.checkpoint_blob x
    UNION ALL SELECT 'checkpoint_write', cscp.routing_key_hash(x.tenant_id, x.thread_id) FROM cscp.checkpoint_write x
    UNION ALL SELECT 'agent_session', cscp.routing_key_hash(x.tenant_id, x.session_id) FROM cscp.agent_session x
    UNION ALL SELECT 'session_item', cscp.routing_key_hash(x.tenant_id, x.session_id) FROM cscp.session_item x
    UNION ALL SELECT 'store_item', cscp.routing_key_hash(x.tenant_id, '') FROM cscp.store_item x
)
SELECT h.t AS table_name, h.hash & 3 AS partition, count(*) AS row_count
  FROM h WHERE NOT (h.hash & 3) = ANY ('{1,2}') GROUP BY 1, 2;
SELECT NOT EXISTS (SELECT * FROM per_row EXCEPT ALL SELECT * FROM cscp.shard_misplaced())
       AND NOT EXISTS (SELECT * FROM cscp.shard_misplaced() EXCEPT ALL SELECT * FROM per_row) AS same_as_per_row,
       (SELECT count(DISTINCT table_name) FROM cscp.shard_misplaced()) >= 5 AS tables_seen;
DROP VIEW per_row;
SELECT cscp.shard_set(2, '{1,0}');
SELECT count(*) AS all_held_misplaced FROM cscp.shard_misplaced();
SELECT cscp.shard_set(2, '{1}');
-- A change is seen by the next statement of the same session.
SELECT try($$SELECT cscp.context_open('t', 's-a', 'b')$$) AS now_held;
SELECT try($$SELECT cscp.context_open('t', 's-b', 'c')$$) AS now_other;

-- Back to one node.
SELECT cscp.shard_set(NULL, NULL);
SELECT count(*) AS config_rows FROM cscp.shard;
SELECT try($$SELECT cscp.context_open('t', 's-b', 'c')$$) AS one_node_again;
SELECT * FROM cscp.shard_misplaced();
-- (this file's thread, session and store item go, so that no other file counts them)
SELECT cscp.checkpoint_delete_thread('t', 's-e') AS thread_deleted, cscp.session_clear('t', 's-e') AS session_cleared,
       cscp.store_delete('u', '{notes}', 'k') AS store_item_deleted;
DROP OWNED BY shard_app;
DROP ROLE shard_app;
RESET cscp.clock;
