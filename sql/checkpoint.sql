\i sql/include/helpers.sql
-- LangGraph's checkpoints and store, agent sessions (checkpoint.sql), through the API and through
-- direct SQL as an application role bound to its tenant.
SET timezone = 'UTC';
SET cscp.clock = '2026-05-01 10:00:00+00';
CREATE ROLE cp_app;
SELECT cscp.grant_app('cp_app', '{cp}');
SELECT cscp.policy_set('cp', '{"checkpoint_ttl": "1 hour"}') ->> 'checkpoint_ttl' AS ttl;
-- a row of another tenant, which the application must never see
SELECT cscp.checkpoint_put('other', 'th-1', '', 'c-1', NULL, '{"v": 4, "channel_versions": {}}', '{}') AS other_expires;
SET ROLE cp_app;
SET cscp.tenant_id = 'cp';

-- A checkpoint stores its changed channels as blobs; the checkpoint row holds no values.
SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-1', NULL,
       '{"v": 4, "id": "c-1", "channel_values": {"x": 1}, "channel_versions": {"messages": 1, "n": 1}}',
       '{"source": "input", "step": -1}', '{messages,n}', '{1,1}', '{json,json}',
       ARRAY['\x5b2268695d'::bytea, '\x31']) AS expires_at;
SELECT checkpoint ? 'channel_values' AS values_in_row FROM cscp.checkpoint WHERE checkpoint_id = 'c-1';
-- Its id, when it is checkpoint_id, is kept once (the column) and read back in the JSON; another
-- id is kept as given.
SELECT checkpoint ? 'id' AS id_in_row FROM cscp.checkpoint WHERE checkpoint_id = 'c-1';
SELECT checkpoint ->> 'id' AS id FROM cscp.checkpoint_get_tuple('cp', 'th-1', '', 'c-1');
SELECT cscp.checkpoint_put('cp', 'th-id', '', 'c-1', NULL, '{"v": 4, "id": "other", "channel_versions": {}}', '{}') IS NOT NULL AS put;
SELECT (SELECT checkpoint ->> 'id' FROM cscp.checkpoint WHERE thread_id = 'th-id') AS id_in_row,
       (SELECT checkpoint ->> 'id' FROM cscp.checkpoint_get_tuple('cp', 'th-id')) AS id_read;
SELECT cscp.checkpoint_delete_thread('cp', 'th-id') AS deleted;
-- The next one changes messages only: one new blob, n read at its old version.
SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-2', 'c-1',
       '{"v": 4, "id": "c-2", "channel_versions": {"messages": 2, "n": 1}}',
       '{"source": "loop", "step": 0}', '{messages}', '{2}', '{json}', ARRAY['\x5b226869215d'::bytea]) IS NOT NULL AS put;
SELECT count(*) AS blobs FROM cscp.checkpoint_blob;
SELECT id, parent_id, blob_channels, blobs FROM cscp.checkpoint_get_tuple('cp', 'th-1');
SELECT id, blob_channels, blobs FROM cscp.checkpoint_get_tuple('cp', 'th-1', '', 'c-1');
-- A channel changed to no value ('empty') is not returned.
SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-3', 'c-2',
       '{"v": 4, "id": "c-3", "channel_versions": {"messages": 2, "n": 2}}',
       '{"source": "loop", "step": 1}', '{n}', '{2}', '{empty}', ARRAY[NULL::bytea]) IS NOT NULL AS put;
SELECT id, blob_channels FROM cscp.checkpoint_get_tuple('cp', 'th-1');
-- A value the caller holds (held_channels, held_versions: a client's cache) comes with its type
-- and no blob; a pair the checkpoint does not name (another version, another channel) does not
-- hide the value stored.
SELECT id, blob_channels, blob_types, blobs
  FROM cscp.checkpoint_get_tuple('cp', 'th-1', '', 'c-2', '{messages,n,x}', '{2,9,1}');
SELECT id, blob_channels, blobs FROM cscp.checkpoint_get_tuple('cp', 'th-1', '', 'c-2', '{n}', '{2}');

-- Pending writes: in (task_path, task_id, idx) order; a regular one written once, a special one
-- (negative idx) replaced.
SELECT cscp.checkpoint_put_writes('cp', 'th-1', '', 'c-3', 'task-b', '~1', '{messages}', '{json}', ARRAY['\x01'::bytea], '{0}') AS n;
SELECT cscp.checkpoint_put_writes('cp', 'th-1', '', 'c-3', 'task-a', '~1', '{messages,n}', '{json,json}', ARRAY['\x02'::bytea, '\x03'], '{0,1}') AS n;
SELECT cscp.checkpoint_put_writes('cp', 'th-1', '', 'c-3', 'task-a', '~1', '{messages}', '{json}', ARRAY['\x09'::bytea], '{0}') AS n_again;
SELECT cscp.checkpoint_put_writes('cp', 'th-1', '', 'c-3', 'task-c', '', '{__error__}', '{json}', ARRAY['\x04'::bytea], '{-1}') AS n;
SELECT cscp.checkpoint_put_writes('cp', 'th-1', '', 'c-3', 'task-c', '', '{__error__}', '{json}', ARRAY['\x05'::bytea], '{-1}') AS n_replaced;
SELECT write_task_ids, write_channels, write_blobs FROM cscp.checkpoint_get_tuple('cp', 'th-1');
-- One call with regular and special writes, some already stored (a retry): the regular ones
-- stored keep their value, the new ones are written, the special one replaces its predecessor.
SELECT cscp.checkpoint_put_writes('cp', 'th-w', '', 'c-1', 't', '', '{a,b}', '{json,json}', ARRAY['\x01'::bytea, '\x02'], '{0,1}') AS n;
SELECT cscp.checkpoint_put_writes('cp', 'th-w', '', 'c-1', 't', '', '{a,c,__interrupt__}', '{json,json,json}',
       ARRAY['\x09'::bytea, '\x03', '\x04'], '{0,2,-3}') AS n_retry_mixed;
SELECT cscp.checkpoint_put_writes('cp', 'th-w', '', 'c-1', 't', '', '{b,__interrupt__}', '{json,json}',
       ARRAY['\x09'::bytea, '\x05'], '{1,-3}') AS n_special_replaced;
-- Two values for one index in one call: refused (21000), nothing written.
SELECT try($$SELECT cscp.checkpoint_put_writes('cp', 'th-w', '', 'c-1', 't', '', '{d,e}', '{json,json}',
             ARRAY['\x06'::bytea, '\x07'], '{3,3}')$$) AS same_idx_twice;
SELECT try($$SELECT cscp.checkpoint_put_writes('cp', 'th-w', '', 'c-1', 't', '', '{d,__error__,__error__}', '{json,json,json}',
             ARRAY['\x06'::bytea, '\x07', '\x08'], '{3,-1,-1}')$$) AS same_special_twice;
SELECT idx, channel, blob FROM cscp.checkpoint_write WHERE thread_id = 'th-w' ORDER BY idx;
-- A checkpoint written again (a retry) keeps one row, with the metadata and parent last given.
SELECT cscp.checkpoint_put('cp', 'th-w', '', 'c-1', NULL, '{"v": 4, "channel_versions": {"a": 1}}', '{"step": 0}',
       '{a}', '{1}', '{json}', ARRAY['\x31'::bytea]) IS NOT NULL AS put;
SELECT cscp.checkpoint_put('cp', 'th-w', '', 'c-1', 'c-0', '{"v": 4, "channel_versions": {"a": 1}}', '{"step": 1}',
       '{a}', '{1}', '{json}', ARRAY['\x31'::bytea]) IS NOT NULL AS put_again;
SELECT parent_checkpoint_id, metadata, (SELECT count(*) FROM cscp.checkpoint_blob WHERE thread_id = 'th-w') AS blobs
  FROM cscp.checkpoint WHERE thread_id = 'th-w';
SELECT cscp.checkpoint_delete_thread('cp', 'th-w') AS deleted;

-- list: newest first, filtered by namespace, metadata, before, limit.
SELECT cscp.checkpoint_put('cp', 'th-1', 'child:1', 'c-4', NULL, '{"v": 4, "channel_versions": {}}', '{"source": "loop"}') IS NOT NULL AS put;
SELECT cscp.checkpoint_put('cp', 'th-2', '', 'c-5', NULL, '{"v": 4, "channel_versions": {}}', '{"source": "input"}') IS NOT NULL AS put;
SELECT thread, ns, id FROM cscp.checkpoint_list('cp');
SELECT thread, ns, id FROM cscp.checkpoint_list('cp', 'th-1', '');
SELECT id FROM cscp.checkpoint_list('cp', filter => '{"source": "loop"}');
SELECT id FROM cscp.checkpoint_list('cp', 'th-1', before => 'c-3', row_limit => 1);
SELECT count(*) AS none_of_other FROM cscp.checkpoint_list('cp', 'th-1') WHERE id = 'c-1' AND parent_id IS NOT NULL;

-- Bad input: a clear error, nothing changed.
SELECT try($$SELECT cscp.checkpoint_put('cp', '', '', 'c-9', NULL, '{}', '{}')$$);
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', NULL, 'c-9', NULL, '{}', '{}')$$);
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-9', NULL, '[]', '{}')$$);
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-9', NULL, '{}', '"x"')$$);
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-9', NULL, '{}', '{}', '{a}', '{}', '{json}', '{}')$$);
SELECT try($$SELECT cscp.checkpoint_put_writes('cp', 'th-1', '', 'c-3', 't', '', '{a}', '{json}', '{}', '{0}')$$);
SELECT try($$SELECT cscp.checkpoint_put_writes('cp', 'th-1', '', 'c-3', '', '', '{}', '{}', '{}', '{}')$$);
SELECT try($$SELECT * FROM cscp.checkpoint_list('cp', filter => '[1]')$$);
SELECT try($$SELECT * FROM cscp.checkpoint_list('cp', row_limit => -1)$$);
SELECT try($$SELECT * FROM cscp.checkpoint_list('other')$$);
SELECT try($$SELECT * FROM cscp.checkpoint_get_tuple('other', 'th-1')$$);
SELECT try($$SELECT * FROM cscp.checkpoint_get_tuple('cp', 'th-1', NULL)$$);
SELECT try($$SELECT * FROM cscp.checkpoint_get_tuple('cp', '')$$);
SELECT try($$SELECT * FROM cscp.checkpoint_get_tuple('cp', 'th-1', '', NULL, '{messages}', NULL)$$);
SELECT try($$SELECT * FROM cscp.checkpoint_get_tuple('cp', 'th-1', '', NULL, '{messages}', '{1,2}')$$);
SELECT try($$SELECT * FROM cscp.checkpoint_get_tuple('other', 'th-1', '', NULL, '{}', '{}')$$);
-- A namespace without checkpoints, an id not stored: no row.
SELECT count(*) AS none_in_ns FROM cscp.checkpoint_get_tuple('cp', 'th-1', 'nope');
SELECT count(*) AS none_of_id FROM cscp.checkpoint_get_tuple('cp', 'th-1', '', 'c-404');
SELECT try($$SELECT cscp.checkpoint_put('other', 'th-9', '', 'c-9', NULL, '{}', '{}')$$);
SELECT count(*) AS checkpoints, (SELECT count(*) FROM cscp.checkpoint_thread) AS threads FROM cscp.checkpoint;

-- Direct SQL as the application role: row-level security, the column rules, the thread as parent.
SELECT try($$INSERT INTO cscp.checkpoint_thread (tenant_id, thread_id, expires_at) VALUES ('other', 'th-9', cscp.now())$$);
SELECT try($$INSERT INTO cscp.checkpoint (tenant_id, thread_id, checkpoint_ns, checkpoint_id, checkpoint)
             VALUES ('cp', 'th-1', '', 'c-9', '{"channel_values": {}}')$$);
SELECT try($$INSERT INTO cscp.checkpoint (tenant_id, thread_id, checkpoint_ns, checkpoint_id, checkpoint)
             VALUES ('cp', 'th-none', '', 'c-9', '{}')$$);
SELECT try($$INSERT INTO cscp.store_item (tenant_id, namespace, key, value) VALUES ('cp', '{a,""}', 'k', '{}')$$);
SELECT try($$INSERT INTO cscp.store_item (tenant_id, namespace, key, value, ttl) VALUES ('cp', '{a}', 'k', '{}', '1 hour')$$);
SELECT count(*) AS visible_threads FROM cscp.checkpoint_thread;

-- A list that only grows is stored as its new elements on a base, named by version and digest
-- (SHA-256 of the base's whole value, or of its base's digest and its own elements), and read
-- back whole.
SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-6', 'c-3',
       '{"v": 4, "id": "c-6", "channel_versions": {"messages": 3, "n": 2}}', '{}', '{messages}', '{3}', '{json}',
       ARRAY[convert_to('["hi"]', 'UTF8')]) IS NOT NULL AS put;
SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-7', 'c-6',
       '{"v": 4, "id": "c-7", "channel_versions": {"messages": 4, "n": 2}}', '{}', '{messages}', '{4}', '{json}',
       ARRAY[convert_to('["ok"]', 'UTF8')], '{3}', ARRAY[sha256(convert_to('["hi"]', 'UTF8'))]) IS NOT NULL AS put;
SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-8', 'c-7',
       '{"v": 4, "id": "c-8", "channel_versions": {"messages": 5, "n": 2}}', '{}', '{messages}', '{5}', '{json}',
       ARRAY[convert_to('["a",{"b":[1]}]', 'UTF8')], '{4}',
       ARRAY[sha256(sha256(convert_to('["hi"]', 'UTF8')) || convert_to('["ok"]', 'UTF8'))]) IS NOT NULL AS put;
SELECT id, blob_channels, convert_from(blobs[1], 'UTF8') AS messages
  FROM cscp.checkpoint_list('cp', 'th-1') WHERE id IN ('c-6', 'c-7', 'c-8');
-- held, a value stored as extensions is neither walked nor sent
SELECT id, blob_channels, blobs FROM cscp.checkpoint_get_tuple('cp', 'th-1', '', 'c-8', '{messages}', '{5}');
SELECT version, base, depth, digest IS NOT NULL AS digest
  FROM cscp.checkpoint_blob WHERE thread_id = 'th-1' AND channel = 'messages' ORDER BY version;
-- A base not stored as named (another digest, another version) is refused with 55000, so the
-- client sends the whole value; a malformed extension with 22023; none writes anything.
SELECT count(*) AS blobs_before FROM cscp.checkpoint_blob WHERE thread_id = 'th-1';
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-9', 'c-8', '{"v": 4, "channel_versions": {"messages": 6}}', '{}',
             '{messages}', '{6}', '{json}', ARRAY['\x5b315d'::bytea], '{5}', ARRAY['\x00'::bytea])$$);
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-9', 'c-8', '{"v": 4, "channel_versions": {"messages": 6}}', '{}',
             '{messages}', '{6}', '{json}', ARRAY['\x5b315d'::bytea], '{99}', ARRAY[sha256('\x5b315d')])$$);
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-9', 'c-8', '{"v": 4, "channel_versions": {"messages": 6}}', '{}',
             '{messages}', '{6}', '{json}', ARRAY['\x31'::bytea], '{5}', ARRAY[sha256('\x31')])$$);
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-9', 'c-8', '{"v": 4, "channel_versions": {"messages": 6}}', '{}',
             '{messages}', '{6}', '{bytes}', ARRAY['\x5b315d'::bytea], '{5}', ARRAY[sha256('\x31')])$$);
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-9', 'c-8', '{"v": 4, "channel_versions": {"messages": 6}}', '{}',
             '{messages}', '{6}', '{json}', ARRAY['\x5b315d'::bytea], '{5}', NULL)$$);
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-9', 'c-8', '{"v": 4, "channel_versions": {"messages": 6}}', '{}',
             '{messages}', '{6}', '{json}', ARRAY['\x5b315d'::bytea], '{5}', '{}')$$);
-- a value that is not a JSON array has no digest, so nothing extends it
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-9', 'c-8', '{"v": 4, "channel_versions": {"n": 6}}', '{}',
             '{n}', '{6}', '{json}', ARRAY['\x5b315d'::bytea], '{1}', ARRAY[sha256('\x31')])$$);
SELECT channel, version, digest IS NOT NULL AS digest FROM cscp.checkpoint_blob WHERE thread_id = 'th-1' AND channel = 'n';
-- and directly: an extension row without its digest or depth
SELECT try($$INSERT INTO cscp.checkpoint_blob (tenant_id, thread_id, checkpoint_ns, channel, version, type, blob, base, depth)
             VALUES ('cp', 'th-1', '', 'messages', '6', 'json', '\x5b315d', '5', 3)$$);
SELECT try($$INSERT INTO cscp.checkpoint_blob (tenant_id, thread_id, checkpoint_ns, channel, version, type, blob, base, digest)
             VALUES ('cp', 'th-1', '', 'messages', '6', 'json', '\x5b315d', '5', '\x00')$$);
SELECT count(*) AS blobs_after, (SELECT count(*) FROM cscp.checkpoint WHERE thread_id = 'th-1') AS checkpoints
  FROM cscp.checkpoint_blob WHERE thread_id = 'th-1';

-- A version names one value: a version stored again with the same value (a retry; the same list
-- whole rather than as an extension) is accepted, one with another value (a fork whose versions
-- only count) refused with 23505, writing nothing.
SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-8', 'c-7',
       '{"v": 4, "id": "c-8", "channel_versions": {"messages": 5, "n": 2}}', '{}', '{messages}', '{5}', '{json}',
       ARRAY[convert_to('["hi","ok","a",{"b":[1]}]', 'UTF8')]) IS NOT NULL AS same_value_whole;
SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-7', 'c-6',
       '{"v": 4, "id": "c-7", "channel_versions": {"messages": 4, "n": 2}}', '{}', '{messages}', '{4}', '{json}',
       ARRAY[convert_to('["ok"]', 'UTF8')], '{3}', ARRAY[sha256(convert_to('["hi"]', 'UTF8'))]) IS NOT NULL AS same_extension;
SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-6b', 'c-6',
       '{"v": 4, "id": "c-6b", "channel_versions": {"messages": 4, "n": 2}}', '{}', '{messages}', '{4}', '{json}',
       ARRAY[convert_to('["hi","ok"]', 'UTF8')]) IS NOT NULL AS fork_same_value;
SELECT count(*) AS blobs_before FROM cscp.checkpoint_blob WHERE thread_id = 'th-1';
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-f', 'c-7', '{"v": 4, "channel_versions": {"messages": 5}}', '{}',
             '{messages}', '{5}', '{json}', ARRAY[convert_to('["hi","ok","other"]', 'UTF8')])$$) AS fork_whole;
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-f', 'c-6', '{"v": 4, "channel_versions": {"messages": 4}}', '{}',
             '{messages}', '{4}', '{json}', ARRAY[convert_to('["other"]', 'UTF8')], '{3}',
             ARRAY[sha256(convert_to('["hi"]', 'UTF8'))])$$) AS fork_extension;
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-f', 'c-8', '{"v": 4, "channel_versions": {"n": 1}}', '{}',
             '{n}', '{1}', '{json}', ARRAY['\x32'::bytea])$$) AS fork_scalar;
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-f', 'c-8', '{"v": 4, "channel_versions": {"n": 2}}', '{}',
             '{n}', '{2}', '{json}', ARRAY['\x31'::bytea])$$) AS fork_empty_to_value;
SELECT try($$SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-f', 'c-8', '{"v": 4, "channel_versions": {"n": 9}}', '{}',
             '{n,n}', '{9,9}', '{json,json}', ARRAY['\x31'::bytea, '\x32'])$$) AS two_values_in_one_put;
SELECT count(*) AS blobs_after, (SELECT count(*) FROM cscp.checkpoint WHERE checkpoint_id = 'c-f') AS fork_checkpoints
  FROM cscp.checkpoint_blob WHERE thread_id = 'th-1';
SELECT id, convert_from(blobs[1], 'UTF8') AS messages FROM cscp.checkpoint_list('cp', 'th-1') WHERE id IN ('c-6b', 'c-7', 'c-8');

-- A channel changed to no value at a version with a part of its own ("<counter>.<random>") is
-- not stored, and reads as empty; one at a version that only counts is (fork_empty_to_value).
SELECT cscp.checkpoint_put('cp', 'th-1', '', 'c-9', 'c-8',
       '{"v": 4, "id": "c-9", "channel_versions": {"messages": 5, "n": "a3.x7Qz0b"}}', '{}',
       '{n}', '{a3.x7Qz0b}', '{empty}', ARRAY[NULL::bytea]) IS NOT NULL AS put_empty_random;
SELECT count(*) AS empty_rows FROM cscp.checkpoint_blob WHERE thread_id = 'th-1' AND channel = 'n' AND version = 'a3.x7Qz0b';
SELECT blob_channels FROM cscp.checkpoint_get_tuple('cp', 'th-1', '', 'c-9');

-- deleteThread leaves nothing of the thread, in any namespace.
SELECT cscp.checkpoint_delete_thread('cp', 'th-1') AS deleted, cscp.checkpoint_delete_thread('cp', 'th-1') AS again;
SELECT (SELECT count(*) FROM cscp.checkpoint WHERE thread_id = 'th-1') AS checkpoints,
       (SELECT count(*) FROM cscp.checkpoint_blob WHERE thread_id = 'th-1') AS blobs,
       (SELECT count(*) FROM cscp.checkpoint_write WHERE thread_id = 'th-1') AS writes;
-- and a read naming the values it held gets nothing of it
SELECT count(*) AS held_after_delete FROM cscp.checkpoint_get_tuple('cp', 'th-1', '', NULL, '{messages}', '{5}');

-- A thread past its TTL is gone for every read at once, before any sweep; a put starts it afresh.
RESET ROLE;
SET cscp.clock = '2026-05-01 11:00:01+00';
SET ROLE cp_app;
SELECT count(*) AS listed FROM cscp.checkpoint_list('cp');
SELECT count(*) AS got FROM cscp.checkpoint_get_tuple('cp', 'th-2');
SELECT count(*) AS got_named FROM cscp.checkpoint_get_tuple('cp', 'th-2', '', 'c-5');
SELECT count(*) AS got_held FROM cscp.checkpoint_get_tuple('cp', 'th-2', '', 'c-5', '{messages}', '{1}');
SELECT count(*) AS rows_still_stored FROM cscp.checkpoint WHERE thread_id = 'th-2';
SELECT cscp.checkpoint_put('cp', 'th-2', '', 'c-6', NULL, '{"v": 4, "channel_versions": {}}', '{}') AS expires_at;
SELECT id FROM cscp.checkpoint_list('cp', 'th-2');
RESET ROLE;
SET cscp.clock = '2026-05-01 12:00:02+00';
SET ROLE cp_app;
SELECT cscp.sweep(100) -> 'checkpoint_threads_deleted' AS threads_swept;
SELECT count(*) AS left_of_tenant FROM cscp.checkpoint;

-- The policy key is checked like the other lifetimes.
SELECT try($$SELECT cscp.policy_set('cp', '{"checkpoint_ttl": "-1 hour"}')$$);
SELECT try($$SELECT cscp.policy_set('cp', '{"checkpoint_ttl": 3600}')$$);

-- The store: namespaces, filters, a ranked text query, pagination, namespaces listed.
SELECT cscp.store_put('cp', '{users,u-1,memories}', 'm-1', '{"text": "likes green tea", "rank": 1, "kind": "food"}');
SELECT cscp.store_put('cp', '{users,u-1,memories}', 'm-2', '{"text": "drinks tea every morning with green tea", "rank": 2, "kind": "habit"}');
SELECT cscp.store_put('cp', '{users,u-2,memories}', 'm-3', '{"text": "prefers coffee", "rank": 3, "kind": "food"}');
SELECT cscp.store_put('cp', '{docs}', 'd-1', '{"text": "tea ceremony", "rank": 4}');
SELECT item_namespace, item_key, item_value ->> 'text' AS text FROM cscp.store_get('cp', '{users,u-1,memories}', 'm-1');
SELECT item_key FROM cscp.store_search('cp', '{users}', '{"kind": "food"}');
SELECT item_key FROM cscp.store_search('cp', '{}', '{"rank": {"$gte": 2, "$lt": 4}}');
SELECT item_key FROM cscp.store_search('cp', '{}', '{"kind": {"$in": ["habit", "x"]}}');
SELECT item_key FROM cscp.store_search('cp', '{}', '{"kind": {"$ne": "food"}}');
SELECT item_key, round(score::numeric, 4) AS score FROM cscp.store_search('cp', '{}', query => 'green tea');
SELECT item_key FROM cscp.store_search('cp', '{users}', row_limit => 1, row_offset => 1);
SELECT cscp.store_list_namespaces('cp');
SELECT cscp.store_list_namespaces('cp', prefix => '{users}', max_depth => 2);
SELECT cscp.store_list_namespaces('cp', prefix => '{users,*,memories}');
SELECT cscp.store_list_namespaces('cp', suffix => '{memories}', row_limit => 1, row_offset => 1);
SELECT cscp.store_put('cp', '{users,u-1,memories}', 'm-1', '{"text": "likes black tea"}');
SELECT item_value FROM cscp.store_get('cp', '{users,u-1,memories}', 'm-1');
SELECT cscp.store_delete('cp', '{users,u-1,memories}', 'm-1') AS deleted, cscp.store_delete('cp', '{users,u-1,memories}', 'm-1') AS again;
SELECT try($$SELECT cscp.store_put('cp', '{}', 'k', '{}')$$);
SELECT try($$SELECT cscp.store_put('cp', '{a.b}', 'k', '{}')$$);
SELECT try($$SELECT cscp.store_put('cp', '{a}', 'k', '[1]')$$);
SELECT try($$SELECT cscp.store_put('cp', '{a}', 'k', '{}', '-5 minutes')$$);
SELECT try($$SELECT cscp.store_put('cp', '{a}', 'k', '{}', '100 years')$$);
SELECT try($$SELECT * FROM cscp.store_search('cp', '{}', '{"x": {"$regex": "a"}}')$$);
SELECT try($$SELECT * FROM cscp.store_search('cp', '{}', row_limit => -1)$$);
SELECT try($$SELECT * FROM cscp.store_list_namespaces('cp', max_depth => 0)$$);
SELECT try($$SELECT * FROM cscp.store_get('other', '{a}', 'k')$$);
SELECT count(*) AS items FROM cscp.store_item;

-- An item is found by its key, not by scanning the tenant's items, under row-level security
-- (the namespace's hash, a leakproof comparison, leads store_item_lookup_idx): through the API
-- and as the application role's own SQL; a row the role inserted directly is found too.
SELECT count(*) AS put FROM generate_series(0, 399) i, cscp.store_put('cp', ARRAY['bulk', 'n-' || i / 10], 'k-' || i % 10, '{}');
INSERT INTO cscp.store_item (tenant_id, namespace, key, value) VALUES ('cp', '{bulk,direct}', 'k-1', '{"direct": true}');
RESET ROLE;
ANALYZE cscp.store_item;
SET ROLE cp_app;
BEGIN;
SELECT item_key FROM cscp.store_get('cp', '{bulk,n-7}', 'k-3');
SELECT item_value FROM cscp.store_get('cp', '{bulk,direct}', 'k-1');
SELECT cscp.store_delete('cp', '{bulk,n-8}', 'k-4') AS deleted;
SELECT t.seq_scan AS store_seq_scans, t.idx_scan >= 3 AS found_by_key
  FROM pg_catalog.pg_stat_xact_user_tables t WHERE t.relid = 'cscp.store_item'::regclass;
COMMIT;
SET plan_cache_mode = force_generic_plan;
PREPARE store_lookup(text[], text) AS SELECT s.key FROM cscp.store_item s
 WHERE s.tenant_id = 'cp' AND s.namespace_hash = pg_catalog.hash_array_extended($1, 0)
   AND s.namespace = $1 AND s.key = $2;
EXPLAIN (COSTS OFF) EXECUTE store_lookup('{bulk,n-7}', 'k-3');
EXECUTE store_lookup('{bulk,n-7}', 'k-3');
DEALLOCATE store_lookup;
RESET plan_cache_mode;
SELECT try($$INSERT INTO cscp.store_item (tenant_id, namespace, key, value, namespace_hash) VALUES ('cp', '{x}', 'k', '{}', 1)$$);
DELETE FROM cscp.store_item WHERE namespace[1] = 'bulk';

-- Store TTL: a read refreshes it (unless asked not to); an expired item is never returned.
SELECT cscp.store_put('cp', '{ttl}', 'k', '{"v": 1}', '10 minutes');
RESET ROLE;
SET cscp.clock = '2026-05-01 12:09:00+00';
SET ROLE cp_app;
SELECT expires_at FROM cscp.store_get('cp', '{ttl}', 'k');
SELECT expires_at FROM cscp.store_get('cp', '{ttl}', 'k', refresh_ttl => false);
RESET ROLE;
SET cscp.clock = '2026-05-01 12:18:00+00';
SET ROLE cp_app;
SELECT item_key, expires_at FROM cscp.store_search('cp', '{ttl}');
RESET ROLE;
SET cscp.clock = '2026-05-01 12:40:00+00';
SET ROLE cp_app;
SELECT count(*) AS got FROM cscp.store_get('cp', '{ttl}', 'k');
SELECT count(*) AS found FROM cscp.store_search('cp', '{ttl}');
SELECT count(*) AS namespaces FROM cscp.store_list_namespaces('cp', prefix => '{ttl}');
SELECT cscp.sweep(100) -> 'store_items_deleted' AS items_swept;

-- Agent sessions: items in order, the latest popped, cleared.
SELECT cscp.session_add_items('cp', 's-1', '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]') AS added;
SELECT cscp.session_add_items('cp', 's-1', '[{"role": "user", "content": "bye"}]') AS added;
SELECT cscp.session_get_items('cp', 's-1');
SELECT cscp.session_get_items('cp', 's-1', 2);
SELECT cscp.session_pop_item('cp', 's-1') AS popped;
SELECT cscp.session_add_items('cp', 's-1', '[{"role": "user", "content": "again"}]') AS added;
SELECT seq, item ->> 'content' AS content FROM cscp.session_item ORDER BY seq;
SELECT try($$SELECT cscp.session_add_items('cp', 's-1', '{"a": 1}')$$);
SELECT try($$SELECT cscp.session_add_items('cp', '', '[]')$$);
SELECT try($$SELECT cscp.session_get_items('other', 's-1')$$);
SELECT cscp.session_clear('cp', 's-1') AS cleared, cscp.session_pop_item('cp', 's-1') AS popped;
SELECT count(*) AS items_left FROM cscp.session_item;

-- forget_conversation erases the thread and the session of the id; the tombstone refuses them.
SELECT cscp.checkpoint_put('cp', 'conv-9', '', 'c-1', NULL, '{"v": 4, "channel_versions": {"a": 1}}', '{}', '{a}', '{1}', '{json}', ARRAY['\x01'::bytea]) IS NOT NULL AS put;
SELECT cscp.checkpoint_put_writes('cp', 'conv-9', '', 'c-1', 't', '', '{a}', '{json}', ARRAY['\x02'::bytea], '{0}') AS n;
SELECT cscp.session_add_items('cp', 'conv-9', '[{"a": 1}]') AS added;
SELECT f ->> 'checkpoint_threads' AS threads, f ->> 'agent_sessions' AS sessions
  FROM cscp.forget_conversation('cp', 'conv-9') f;
SELECT (SELECT count(*) FROM cscp.checkpoint WHERE thread_id = 'conv-9')
     + (SELECT count(*) FROM cscp.checkpoint_blob WHERE thread_id = 'conv-9')
     + (SELECT count(*) FROM cscp.checkpoint_write WHERE thread_id = 'conv-9')
     + (SELECT count(*) FROM cscp.session_item WHERE session_id = 'conv-9') AS rows_left;
SELECT try($$SELECT cscp.checkpoint_put('cp', 'conv-9', '', 'c-2', NULL, '{}', '{}')$$);
SELECT try($$SELECT cscp.session_add_items('cp', 'conv-9', '[{"a": 2}]')$$);

RESET ROLE;
RESET cscp.tenant_id;
RESET cscp.clock;
SELECT cscp.revoke_app('cp_app');
DROP ROLE cp_app;
DELETE FROM cscp.checkpoint_thread;
DELETE FROM cscp.store_item;
DELETE FROM cscp.agent_session;
DELETE FROM cscp.policy WHERE tenant_id = 'cp';
DELETE FROM cscp.tombstone WHERE tenant_id = 'cp';

-- The tuple read and the put keep their plans (no planning per LangGraph call): static statements
-- under plan_cache_mode = force_generic_plan.
SELECT p.proname, 'plan_cache_mode=force_generic_plan' = ANY (p.proconfig) AS generic_plans,
       p.prosrc !~* 'EXECUTE' AS static
  FROM pg_proc p WHERE p.pronamespace = 'cscp'::regnamespace
   AND p.proname IN ('checkpoint_get_tuple', 'checkpoint_put') ORDER BY 1;
