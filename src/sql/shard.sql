-- shard.sql: what a node of a scale-out deployment knows about its place (README "Scale-out").
--
-- A PL/Proxy proxy (proxy/cscp_proxy) routes every call by a 32-bit hash to partition
-- hash & (partition_count - 1), and each partition lives on one shard.  The hashes, keyed by the
-- secret key every node shares (cscp.secret_key, keys.sql):
--   conversation-scoped rows and calls   cscp.routing_conversation_hash(conversation_id)
--                                        (= cscp.routing_hash of their ids)
--   subject-scoped (identity, fact)      cscp.routing_key_hash(tenant_id, subject_id)
--   session-scoped (document, working set, environment, agent session and its items)
--                                        cscp.routing_key_hash(tenant_id, session_id)
--   LangGraph threads (checkpoints, blobs, writes)
--                                        cscp.routing_key_hash(tenant_id, thread_id)
--   LangGraph store items                cscp.routing_key_hash(tenant_id, '')
--   (the triggers of the last three are in checkpoint.sql, beside their tables)
-- cscp.shard names the partitions this node holds; with no row (one node) it holds them all.
-- The C trigger shard_guard (shard.c) refuses, 55000, any row the node does not hold, so a write
-- that bypasses the proxy cannot land on the wrong shard.  Policies and authority ranks are
-- tenant settings every shard keeps whole (the proxy writes them to all shards): not guarded.

CREATE TABLE cscp.shard (
    singleton        boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    partition_count  int         NOT NULL,
    partitions       int[]       NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE cscp.shard IS
  'The partitions this node holds in a scale-out deployment (one row), or none: one node holds everything';

-- Every backend caches cscp.shard; a change drops the caches (the trigger only sends a relcache
-- invalidation for the table it fires on, which is all the policy cache needs too).
CREATE TRIGGER shard_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cscp.shard
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.policy_changed();

CREATE FUNCTION cscp.shard_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_shard_guard' LANGUAGE C;
COMMENT ON FUNCTION cscp.shard_guard() IS
  'Trigger: refuses (55000) a row whose routing hash falls in a partition this node does not hold';

CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF conversation_id ON cscp.context
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('conversation_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF conversation_id ON cscp.command
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('conversation_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF conversation_id ON cscp.frame
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('conversation_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF conversation_id ON cscp.answer
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('conversation_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF conversation_id ON cscp.evidence
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('conversation_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF conversation_id ON cscp.conversation
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('conversation_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF conversation_id ON cscp.turn
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('conversation_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF conversation_id ON cscp.event
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('conversation_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF conversation_id ON cscp.inspection_log
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('conversation_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, subject_id ON cscp.identity
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'subject_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, subject_id ON cscp.fact
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'subject_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, session_id ON cscp.document
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'session_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, session_id ON cscp.working_set
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'session_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, session_id ON cscp.environment
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'session_id');

-- Administration (not granted to application roles): name this node's partitions, or, with a
-- NULL count, make it a single node again.  Rows already stored are not checked: when
-- partitions move, the new shard takes them first and the old one lets them go afterwards
-- (cscp.shard_misplaced lists what it still keeps).
CREATE FUNCTION cscp.shard_set(partition_count int, partitions int[]) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_variable
DECLARE
    p int;
BEGIN
    IF partition_count IS NULL THEN
        DELETE FROM cscp.shard;
        RETURN '{"partition_count": null, "partitions": []}'::jsonb;
    END IF;
    IF partition_count < 1 OR partition_count > 65536
       OR (partition_count & (partition_count - 1)) <> 0 THEN
        RAISE EXCEPTION 'partition_count must be a power of two between 1 and 65536'
            USING ERRCODE = '22023', DETAIL = format('The count given is %s.', partition_count),
                  HINT = 'PL/Proxy maps a hash to partition hash & (count - 1); use as many partitions as the proxy''s cluster has.';
    END IF;
    IF partitions IS NULL OR cardinality(partitions) = 0 THEN
        RAISE EXCEPTION 'partitions must name at least one partition'
            USING ERRCODE = '22023',
                  HINT = 'Pass the partition numbers (0 to partition_count - 1) this node holds, or a NULL partition_count for a single node.';
    END IF;
    FOREACH p IN ARRAY partitions LOOP
        IF p IS NULL OR p < 0 OR p >= partition_count THEN
            RAISE EXCEPTION 'partition % is not between 0 and %', coalesce(p::text, 'NULL'), partition_count - 1
                USING ERRCODE = '22023', HINT = 'Partitions are numbered from 0 to partition_count - 1.';
        END IF;
    END LOOP;
    IF (SELECT count(DISTINCT x) FROM unnest(partitions) x) <> cardinality(partitions) THEN
        RAISE EXCEPTION 'partitions must not repeat a partition'
            USING ERRCODE = '22023', DETAIL = format('The partitions given are %s.', partitions);
    END IF;
    INSERT INTO cscp.shard AS s (partition_count, partitions)
    VALUES (partition_count, ARRAY(SELECT x FROM unnest(partitions) x ORDER BY x))
    ON CONFLICT (singleton) DO UPDATE
        SET partition_count = excluded.partition_count, partitions = excluded.partitions,
            updated_at = pg_catalog.now();
    RETURN (SELECT jsonb_build_object('partition_count', s.partition_count, 'partitions', to_jsonb(s.partitions))
              FROM cscp.shard s);
END
$$;
COMMENT ON FUNCTION cscp.shard_set(int, int[]) IS
  'Administration: the partitions this node holds out of partition_count (a power of two); NULL count: a single node';

-- Rows this node keeps that belong to partitions it does not hold (after partitions moved away),
-- per table and partition: what to delete once the new shard has them.  Each table's rows are
-- counted per key first, and each distinct key hashed once (a conversation has rows in many
-- tables, a turn or evidence row per step); a node that holds every partition reads nothing.
CREATE FUNCTION cscp.shard_misplaced() RETURNS TABLE(table_name text, partition int, row_count bigint)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
-- One large query, run rarely: compiling it would cost more than running it.
SET jit = off
AS $$
    WITH cfg AS (SELECT s.partition_count AS n, s.partitions FROM cscp.shard s),
    -- The rows of each table per conversation, then per tenant and subject, session or thread key.
    conv AS MATERIALIZED (
        SELECT 'context' AS t, x.conversation_id AS k, count(*) AS c FROM cscp.context x GROUP BY 2
        UNION ALL SELECT 'context_live', x.conversation_id, count(*) FROM cscp.context_live x GROUP BY 2
        UNION ALL SELECT 'context_retired', x.conversation_id, count(*) FROM cscp.context_retired x GROUP BY 2
        UNION ALL SELECT 'command', x.conversation_id, count(*) FROM cscp.command x GROUP BY 2
        UNION ALL SELECT 'command_window', x.conversation_id, count(*) FROM cscp.command_window x GROUP BY 2
        UNION ALL SELECT 'command_retired', x.conversation_id, count(*) FROM cscp.command_retired x GROUP BY 2
        UNION ALL SELECT 'frame', x.conversation_id, count(*) FROM cscp.frame x GROUP BY 2
        UNION ALL SELECT 'answer', x.conversation_id, count(*) FROM cscp.answer x GROUP BY 2
        UNION ALL SELECT 'evidence', x.conversation_id, count(*) FROM cscp.evidence x GROUP BY 2
        UNION ALL SELECT 'conversation', x.conversation_id, count(*) FROM cscp.conversation x GROUP BY 2
        UNION ALL SELECT 'turn', x.conversation_id, count(*) FROM cscp.turn x GROUP BY 2
        UNION ALL SELECT 'event', x.conversation_id, count(*) FROM cscp.event x GROUP BY 2
        UNION ALL SELECT 'inspection_log', x.conversation_id, count(*) FROM cscp.inspection_log x GROUP BY 2
    ),
    keyed AS MATERIALIZED (
        SELECT 'identity' AS t, x.tenant_id AS a, x.subject_id AS k, count(*) AS c FROM cscp.identity x GROUP BY 2, 3
        UNION ALL SELECT 'fact', x.tenant_id, x.subject_id, count(*) FROM cscp.fact x GROUP BY 2, 3
        UNION ALL SELECT 'document', x.tenant_id, x.session_id, count(*) FROM cscp.document x GROUP BY 2, 3
        UNION ALL SELECT 'working_set', x.tenant_id, x.session_id, count(*) FROM cscp.working_set x GROUP BY 2, 3
        UNION ALL SELECT 'environment', x.tenant_id, x.session_id, count(*) FROM cscp.environment x GROUP BY 2, 3
        UNION ALL SELECT 'checkpoint_thread', x.tenant_id, x.thread_id, count(*) FROM cscp.checkpoint_thread x GROUP BY 2, 3
        UNION ALL SELECT 'checkpoint', x.tenant_id, x.thread_id, count(*) FROM cscp.checkpoint x GROUP BY 2, 3
        UNION ALL SELECT 'checkpoint_blob', x.tenant_id, x.thread_id, count(*) FROM cscp.checkpoint_blob x GROUP BY 2, 3
        UNION ALL SELECT 'checkpoint_write', x.tenant_id, x.thread_id, count(*) FROM cscp.checkpoint_write x GROUP BY 2, 3
        UNION ALL SELECT 'agent_session', x.tenant_id, x.session_id, count(*) FROM cscp.agent_session x GROUP BY 2, 3
        UNION ALL SELECT 'session_item', x.tenant_id, x.session_id, count(*) FROM cscp.session_item x GROUP BY 2, 3
        -- a tenant's store lives on the node of (tenant, '')
        UNION ALL SELECT 'store_item', x.tenant_id, '', count(*) FROM cscp.store_item x GROUP BY 2
    ),
    -- Each distinct key hashed once (a keyed hash costs microseconds; a conversation has rows in
    -- many tables), kept when its partition is not this node's.
    conv_away AS MATERIALIZED (
        SELECT d.k, p.p
          FROM (SELECT DISTINCT v.k FROM conv v) d, cfg,
               LATERAL (SELECT cscp.routing_conversation_hash(d.k) & (cfg.n - 1) AS p) p
         WHERE NOT p.p = ANY (cfg.partitions)
    ),
    keyed_away AS MATERIALIZED (
        SELECT d.a, d.k, p.p
          FROM (SELECT DISTINCT v.a, v.k FROM keyed v) d, cfg,
               LATERAL (SELECT cscp.routing_key_hash(d.a, d.k) & (cfg.n - 1) AS p) p
         WHERE NOT p.p = ANY (cfg.partitions)
    ),
    h AS (
        SELECT v.t, w.p, v.c FROM conv v JOIN conv_away w ON w.k = v.k
        UNION ALL
        SELECT v.t, w.p, v.c FROM keyed v JOIN keyed_away w ON w.a = v.a AND w.k = v.k
    )
    -- (Nothing is read when this node holds every partition, or is the only one.)
    SELECT h.t, h.p, sum(h.c)::bigint
      FROM h
     WHERE EXISTS (SELECT FROM cfg WHERE cardinality(cfg.partitions) < cfg.n)
     GROUP BY 1, 2
     ORDER BY 1, 2
$$;
COMMENT ON FUNCTION cscp.shard_misplaced() IS
  'Administration: rows kept here whose partition this node no longer holds, per table and partition';

-- Used by the proxy's remote calls (proxy/cscp_proxy), as the role the proxy maps its caller to
-- (an application role: so these are public): the proxy's caller's session settings,
-- for the rest of this shard transaction (each remote call is one), then value unchanged.  The
-- proxy passes its first argument through it, so they are set before the function runs.
-- Naming a tenant is what SET cscp.tenant_id does; the clock stays superuser-only (cscp.clock
-- refuses anyone else, 42501).
CREATE FUNCTION cscp.proxy_session(tenant_id text, clock text, value anyelement) RETURNS anyelement
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    PERFORM pg_catalog.set_config('cscp.tenant_id', coalesce(tenant_id, ''), true);
    IF clock IS NOT NULL AND clock <> '' THEN
        PERFORM pg_catalog.set_config('cscp.clock', clock, true);
    END IF;
    RETURN value;
END
$$;
COMMENT ON FUNCTION cscp.proxy_session(text, text, anyelement) IS
  'For the proxy (cscp_proxy): sets the proxy caller''s cscp.tenant_id (and, for a superuser, cscp.clock) for this transaction; returns value';

-- build_context through the proxy: the session's environment and working set are read on the
-- session's node (session_state), then the context is assembled on the subject's node with them
-- (build_context_given, the same C as cscp.build_context; assemble.c).
CREATE FUNCTION cscp.session_state(tenant_id text, session_id text) RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT cscp.check_tenant($1), cscp.check_id('session_id', $2);
    SELECT jsonb_build_object(
        'environment', (SELECT e.environment FROM cscp.environment e
                         WHERE e.tenant_id = $1 AND e.session_id = $2),
        'working_set', coalesce((SELECT jsonb_agg(jsonb_build_array(w.key, w.value)
                                                  ORDER BY w.updated_at DESC, w.key COLLATE "C")
                                   FROM cscp.working_set w
                                  WHERE w.tenant_id = $1 AND w.session_id = $2
                                    AND w.expires_at > cscp.now()), '[]'))
$$;
COMMENT ON FUNCTION cscp.session_state(text, text) IS
  'For the proxy (cscp_proxy): a session''s environment and live working set ([[key, value], ...], most recent first), for build_context through the proxy';

CREATE FUNCTION cscp.build_context_given(tenant_id text, subject_id text, session_id text,
                                          query text, token_budget int, task_id text,
                                          session_state jsonb) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_build_context_given' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.build_context_given(text, text, text, text, int, text, jsonb) IS
  'For the proxy (cscp_proxy): build_context with the session''s state as cscp.session_state read it on another node';

-- pg_dump keeps a shard's place with its rows.
SELECT pg_catalog.pg_extension_config_dump('cscp.shard', '');
