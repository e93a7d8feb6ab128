-- The scale-out suite's second scenario (test/scripts/scaleout.sh): LangGraph's checkpoints and
-- store and OpenAI Agents' sessions (src/sql/checkpoint.sql), through the API only, run once on
-- one node and once through the proxy on two shards; the two outputs must be the same.  Threads
-- and sessions spread over the shards by (tenant, id); a tenant's store lives on one node; a
-- list across threads is merged from every shard, newest first, cut to row_limit.
\set ON_ERROR_STOP 1
\pset footer off
SET client_min_messages = warning;
SET cscp.clock = '2026-06-01 09:00:00+00';
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE;
END
$$;
-- A checkpoint without channel values, as CscpSaver writes it.
CREATE FUNCTION pg_temp.cp(id text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('v', 4, 'id', id, 'ts', '2026-06-01T09:00:00Z',
                              'channel_versions', jsonb_build_object('messages', id), 'versions_seen', '{}'::jsonb)
$$;

\echo '== checkpoints: 12 threads of 3 checkpoints, ids interleaved over the threads'
SELECT sum(1) AS written
  FROM generate_series(1, 12) t, generate_series(1, 3) c,
       LATERAL cscp.checkpoint_put('acme', 'thread-' || lpad(t::text, 2, '0'), '',
                                   format('cp-%s-%s', c, lpad(t::text, 2, '0')),
                                   CASE WHEN c > 1 THEN format('cp-%s-%s', c - 1, lpad(t::text, 2, '0')) END,
                                   pg_temp.cp(format('cp-%s-%s', c, lpad(t::text, 2, '0'))),
                                   jsonb_build_object('step', c, 'source', CASE WHEN t % 2 = 0 THEN 'loop' ELSE 'input' END),
                                   '{messages}', ARRAY[format('cp-%s-%s', c, lpad(t::text, 2, '0'))], '{json}',
                                   ARRAY[convert_to(format('"message %s of thread %s"', c, t), 'UTF8')]) x;
-- The same checkpoint id in two threads and two namespaces: the order's tie-breaks.
SELECT count(cscp.checkpoint_put('acme', th, ns, 'cp-9-same', NULL, pg_temp.cp('cp-9-same'), '{"step": 9}'))
  FROM unnest(ARRAY['thread-01', 'thread-02', 'thread-07']) th, unnest(ARRAY['', 'child']) ns;
SELECT cscp.checkpoint_put_writes('acme', 'thread-05', '', 'cp-3-05', 'task-1', '', '{messages,extra}', '{json,json}',
                                  ARRAY[convert_to('"w1"', 'UTF8'), convert_to('"w2"', 'UTF8')], '{0,1}') AS writes;

\echo '== checkpoint_list across threads: the newest row_limit overall, in order'
SELECT thread, ns, id, parent_id, metadata FROM cscp.checkpoint_list('acme', row_limit => 8);
SELECT count(*) AS all_checkpoints, string_agg(id || '@' || thread || '/' || ns, E'\n' ORDER BY n) AS in_order
  FROM cscp.checkpoint_list('acme') WITH ORDINALITY l(thread, ns, id, parent_id, checkpoint, metadata,
       blob_channels, blob_types, blobs, write_task_ids, write_channels, write_types, write_blobs, n);
SELECT thread, id FROM cscp.checkpoint_list('acme', before => 'cp-2', row_limit => 5);
SELECT thread, id, metadata FROM cscp.checkpoint_list('acme', filter => '{"step": 2, "source": "loop"}', row_limit => 4);
SELECT thread, id FROM cscp.checkpoint_list('acme', checkpoint_ns => 'child');
SELECT thread, id FROM cscp.checkpoint_list('acme', checkpoint_id => 'cp-9-same', row_limit => 2);
SELECT count(*) AS limit_zero FROM cscp.checkpoint_list('acme', row_limit => 0);

\echo '== checkpoint_list of one thread, and a checkpoint with its blobs and writes'
SELECT thread, ns, id, parent_id FROM cscp.checkpoint_list('acme', 'thread-05');
SELECT thread, id FROM cscp.checkpoint_list('acme', 'thread-05', '', row_limit => 2);
SELECT id, checkpoint, blob_channels, blob_types, convert_from(blobs[1], 'UTF8') AS blob,
       write_task_ids, write_channels, write_types
  FROM cscp.checkpoint_get_tuple('acme', 'thread-05');
SELECT id, parent_id FROM cscp.checkpoint_get_tuple('acme', 'thread-05', '', 'cp-2-05');
SELECT count(*) AS absent FROM cscp.checkpoint_get_tuple('acme', 'no-such-thread');

\echo '== checkpoints: bad input, another tenant, delete, expiry'
SELECT pg_temp.try($$SELECT * FROM cscp.checkpoint_list('acme', row_limit => -1)$$) AS negative_limit;
SELECT pg_temp.try($$SELECT * FROM cscp.checkpoint_list('acme', filter => '[1]')$$) AS filter_not_object;
SELECT pg_temp.try($$SELECT * FROM cscp.checkpoint_list('acme', '')$$) AS empty_thread;
SELECT pg_temp.try($$SELECT * FROM cscp.checkpoint_list(NULL)$$) AS no_tenant;
SELECT count(*) AS beta_sees FROM cscp.checkpoint_list('beta');
SELECT cscp.checkpoint_delete_thread('acme', 'thread-07') AS deleted,
       cscp.checkpoint_delete_thread('acme', 'thread-07') AS again;
SELECT count(*) AS after_delete, count(*) FILTER (WHERE thread = 'thread-07') AS of_deleted
  FROM cscp.checkpoint_list('acme');
SELECT count(*) AS thread_01_later FROM cscp.checkpoint_list('acme', 'thread-01');
SET cscp.clock = '2026-07-02 09:00:00+00';
SELECT count(*) AS past_ttl FROM cscp.checkpoint_list('acme');
SELECT count(*) AS past_ttl_one FROM cscp.checkpoint_list('acme', 'thread-01', row_limit => 1);
SET cscp.clock = '2026-06-01 10:00:00+00';

\echo '== store: one tenant''s items, put, get, search, list, delete'
SELECT count(cscp.store_put('acme', ns, 'item-' || k, jsonb_build_object('k', k, 'color', CASE WHEN k % 2 = 0 THEN 'red' ELSE 'blue' END,
                                                                    'text', format('note %s about %s', k, ns[2]))))
  FROM (VALUES ('{users,ana,prefs}'::text[]), ('{users,bo,prefs}'), ('{users,ana,memories}'),
               ('{docs,handbook}'), ('{docs,policies,v2}')) u(ns)
       CROSS JOIN generate_series(1, 4) k;
SELECT cscp.store_put('acme', '{users,ana,prefs}', 'item-1', '{"k": 1, "color": "green", "text": "replaced"}');
SELECT item_namespace, item_key, item_value FROM cscp.store_get('acme', '{users,ana,prefs}', 'item-1');
SELECT count(*) AS absent FROM cscp.store_get('acme', '{users,ana,prefs}', 'item-9');
SELECT item_namespace, item_key FROM cscp.store_search('acme', '{users}', row_limit => 100) ORDER BY 1, 2;
SELECT item_namespace, item_key, item_value ->> 'color' AS color
  FROM cscp.store_search('acme', '{users,ana}', '{"color": "red"}', row_limit => 10);
SELECT item_namespace, item_key, round(score::numeric, 4) AS score
  FROM cscp.store_search('acme', '{}', query => 'note bo', row_limit => 3);
SELECT count(*) AS page FROM cscp.store_search('acme', '{}', row_limit => 5, row_offset => 15);
SELECT cscp.store_list_namespaces('acme') AS ns;
SELECT cscp.store_list_namespaces('acme', '{users}', max_depth => 2) AS ns_prefix_depth;
SELECT cscp.store_list_namespaces('acme', suffix => '{prefs}') AS ns_suffix;
SELECT cscp.store_list_namespaces('acme', row_limit => 2, row_offset => 1) AS ns_page;
SELECT cscp.store_delete('acme', '{docs,handbook}', 'item-2') AS deleted,
       cscp.store_delete('acme', '{docs,handbook}', 'item-2') AS again;
SELECT count(*) AS handbook_left FROM cscp.store_search('acme', '{docs,handbook}');
SELECT pg_temp.try($$SELECT cscp.store_put('acme', '{}', 'k', '{}')$$) AS empty_namespace;
SELECT pg_temp.try($$SELECT cscp.store_put('acme', '{a}', 'k', '[1]')$$) AS value_not_object;
SELECT pg_temp.try($$SELECT * FROM cscp.store_search('acme', '{}', row_limit => -1)$$) AS negative_limit;
SELECT count(*) AS beta_sees FROM cscp.store_search('beta', '{}');

\echo '== store: TTL, refreshed on read, then expired'
SELECT cscp.store_put('acme', '{ttl}', 'short', '{"v": 1}', '10 minutes');
SELECT cscp.store_put('acme', '{ttl}', 'other', '{"v": 2}', '10 minutes');
SET cscp.clock = '2026-06-01 10:08:00+00';
SELECT item_key, expires_at FROM cscp.store_get('acme', '{ttl}', 'short');
SET cscp.clock = '2026-06-01 10:12:00+00';
SELECT item_key FROM cscp.store_search('acme', '{ttl}', refresh_ttl => false);
SELECT cscp.store_list_namespaces('acme', '{ttl}') AS ttl_ns;
SET cscp.clock = '2026-06-01 10:30:00+00';
SELECT count(*) AS expired FROM cscp.store_search('acme', '{ttl}');

\echo '== sessions: items per session, limits, pop, clear, tenants'
SELECT sum(cscp.session_add_items('acme', 'sess-' || s, jsonb_build_array(
           jsonb_build_object('role', 'user', 'content', 'hi ' || s),
           jsonb_build_object('role', 'assistant', 'content', 'hello ' || s)))) AS added
  FROM generate_series(1, 6) s;
SELECT cscp.session_add_items('acme', 'sess-3', '[{"role": "user", "content": "again"}]') AS added;
SELECT cscp.session_get_items('acme', 'sess-3') AS item;
SELECT cscp.session_get_items('acme', 'sess-3', 2) AS latest_two;
SELECT cscp.session_pop_item('acme', 'sess-3') AS popped;
SELECT cscp.session_pop_item('acme', 'no-such-session') AS popped_none;
SELECT cscp.session_clear('acme', 'sess-4') AS cleared, cscp.session_clear('acme', 'sess-4') AS again;
SELECT count(*) AS sess_4_left FROM cscp.session_get_items('acme', 'sess-4');
SELECT count(*) AS beta_sees FROM cscp.session_get_items('beta', 'sess-1');
SELECT pg_temp.try($$SELECT cscp.session_add_items('acme', 'sess-1', '{"not": "an array"}')$$) AS items_not_array;
SELECT pg_temp.try($$SELECT * FROM cscp.session_get_items('acme', 'sess-1', -1)$$) AS negative_limit;

\echo '== 32 threads and 32 sessions of another tenant (the suite checks both shards hold some)'
SELECT count(cscp.checkpoint_put('gamma', 'g-' || i, '', 'cp-1', NULL, pg_temp.cp('cp-1'), '{}')) AS threads,
       sum(cscp.session_add_items('gamma', 'g-' || i, '[{"role": "user", "content": "hi"}]')) AS session_items
  FROM generate_series(1, 32) i;
SELECT count(*) AS listed, count(DISTINCT thread) AS distinct_threads FROM cscp.checkpoint_list('gamma', row_limit => 40);
