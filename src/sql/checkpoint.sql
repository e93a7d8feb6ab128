-- checkpoint.sql: what agent frameworks keep between turns, in the shape they keep it: LangGraph's
-- checkpoints (per-channel blobs, pending writes), LangGraph's store, OpenAI Agents' sessions.
--
-- The client libraries (clients/js, clients/python) are thin: every rule is here.
--   * A thread (cscp.checkpoint_thread) owns its checkpoints, blobs and pending writes by
--     foreign keys with ON DELETE CASCADE: deleting the thread row (checkpoint_delete_thread,
--     cscp.forget_conversation, the sweep) leaves nothing of it behind.
--   * A thread lives for its tenant's policy checkpoint_ttl from its last write (extended only
--     when 1% of the TTL has passed since the last extension, so a busy thread's row is not
--     rewritten on every write).  Past its
--     expires_at it is gone for every read at once (the reads join the thread row on it); a write
--     to it starts it afresh; cscp.sweep deletes it.
--   * A checkpoint row holds the checkpoint without its channel values; each channel's value is
--     a blob keyed by (thread, namespace, channel, version), written only for the channels whose
--     version changed (LangGraph's newVersions), so a long thread's checkpoint does not rewrite
--     its history.  A read joins the blobs named by the checkpoint's channel_versions.
--   * A list that only grows (LangGraph's messages) may be stored as the elements it gained on a
--     base version of the same channel, named by version and digest (checkpoint_put refuses a
--     base not stored as named, so a client that extended another value sends the whole one);
--     a read walks the bases (at most 256) and joins the elements into the whole JSON array.
--   * Store items may carry a TTL (an interval), refreshed on read when asked; an item past
--     expires_at is never returned.
--   * A session's items are numbered by its head row (cscp.agent_session), taken with
--     INSERT ... ON CONFLICT DO UPDATE, so that concurrent writers, the first ones included,
--     never lose an item.
-- Every table is tenant data under row-level security (security.sql); every function runs with
-- its caller's rights.

-- Threads: one row per (tenant, thread id), the parent of everything a thread holds.
CREATE TABLE cscp.checkpoint_thread (
    tenant_id   text        NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    thread_id   text        NOT NULL CHECK (thread_id <> ''),
    created_at  timestamptz NOT NULL DEFAULT cscp.now(),
    updated_at  timestamptz NOT NULL DEFAULT cscp.now(),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, thread_id)
);
COMMENT ON TABLE cscp.checkpoint_thread IS
  'LangGraph threads per tenant: gone for every read once expires_at (the tenant''s checkpoint_ttl after the last write) has passed';
CREATE INDEX checkpoint_thread_expiry_idx ON cscp.checkpoint_thread (expires_at);

-- Checkpoints, without their channel values (see cscp.checkpoint_blob).
CREATE TABLE cscp.checkpoint (
    tenant_id             text        NOT NULL,
    thread_id             text        NOT NULL,
    checkpoint_ns         text        COLLATE "C" NOT NULL,
    checkpoint_id         text        COLLATE "C" NOT NULL CHECK (checkpoint_id <> ''),
    parent_checkpoint_id  text        COLLATE "C",
    checkpoint            jsonb       NOT NULL CHECK (pg_catalog.jsonb_typeof(checkpoint) = 'object'
                                                      AND NOT checkpoint ? 'channel_values'),
    metadata              jsonb       NOT NULL DEFAULT '{}' CHECK (pg_catalog.jsonb_typeof(metadata) = 'object'),
    PRIMARY KEY (tenant_id, thread_id, checkpoint_ns, checkpoint_id),
    FOREIGN KEY (tenant_id, thread_id) REFERENCES cscp.checkpoint_thread ON DELETE CASCADE
);
COMMENT ON TABLE cscp.checkpoint IS
  'LangGraph checkpoints per (tenant, thread, namespace, id), their channel values in cscp.checkpoint_blob';

-- A channel's value at one version, shared by every checkpoint of the thread that names it.
CREATE TABLE cscp.checkpoint_blob (
    tenant_id      text  NOT NULL,
    thread_id      text  NOT NULL,
    checkpoint_ns  text  COLLATE "C" NOT NULL,
    channel        text  NOT NULL,
    version        text  NOT NULL,
    type           text  NOT NULL,
    blob           bytea,
    base           text,
    depth          integer NOT NULL DEFAULT 0 CHECK (depth BETWEEN 0 AND 256),
    digest         bytea,
    PRIMARY KEY (tenant_id, thread_id, checkpoint_ns, channel, version),
    FOREIGN KEY (tenant_id, thread_id) REFERENCES cscp.checkpoint_thread ON DELETE CASCADE,
    CHECK ((base IS NULL) = (depth = 0)),
    CHECK (base IS NULL OR (type = 'json' AND blob IS NOT NULL AND digest IS NOT NULL))
);
COMMENT ON TABLE cscp.checkpoint_blob IS
  'Channel values of LangGraph checkpoints per (tenant, thread, namespace, channel, version), as the client serialised them (type ''empty'': no value); with a base, the JSON array of the elements that follow those of version base';
COMMENT ON COLUMN cscp.checkpoint_blob.base IS
  'NULL: blob is the whole value; else the version of the same channel whose JSON array this value extends by the elements of blob (a JSON array)';
COMMENT ON COLUMN cscp.checkpoint_blob.depth IS
  'How many rows reading the value joins beyond this one: 0 for a whole value, the base''s depth + 1 for an extension';
COMMENT ON COLUMN cscp.checkpoint_blob.digest IS
  'SHA-256 of the whole value of a type ''json'' row holding a JSON array (blob), or of its base''s digest followed by blob for an extension: what a client names a base by; NULL for other values, which no extension can follow';

-- Writes of the tasks of a checkpoint's next step, not yet folded into a checkpoint.
CREATE TABLE cscp.checkpoint_write (
    tenant_id      text     NOT NULL,
    thread_id      text     NOT NULL,
    checkpoint_ns  text     COLLATE "C" NOT NULL,
    checkpoint_id  text     COLLATE "C" NOT NULL,
    task_id        text     COLLATE "C" NOT NULL,
    idx            integer  NOT NULL,
    channel        text     NOT NULL,
    type           text     NOT NULL,
    blob           bytea,
    task_path      text     COLLATE "C" NOT NULL DEFAULT '',
    PRIMARY KEY (tenant_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx),
    FOREIGN KEY (tenant_id, thread_id) REFERENCES cscp.checkpoint_thread ON DELETE CASCADE
);
COMMENT ON TABLE cscp.checkpoint_write IS
  'Pending writes of LangGraph checkpoints per (tenant, thread, namespace, checkpoint, task, index), read in (task_path, task_id, idx) order';

-- Erasing a conversation erases the thread of the same id; no forgotten id starts one again.
CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, thread_id ON cscp.checkpoint_thread
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'thread_id');

-- Scale-out (shard.sql): a thread and all it holds live on the node of (tenant, thread id), where
-- the proxy sends its calls; the shard guard refuses (55000) a row of it written on another.
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, thread_id ON cscp.checkpoint_thread
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'thread_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, thread_id ON cscp.checkpoint
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'thread_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, thread_id ON cscp.checkpoint_blob
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'thread_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, thread_id ON cscp.checkpoint_write
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'thread_id');

-- Raise 22023 with the argument's name unless value is a usable id ('' allowed when empty_ok).
CREATE FUNCTION cscp.checkpoint_check_ns(checkpoint_ns text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF checkpoint_ns IS NULL OR octet_length(checkpoint_ns) > 256 THEN
        RAISE EXCEPTION 'checkpoint_ns must be a string of at most 256 bytes'
            USING ERRCODE = '22023', HINT = 'Pass '''' for the root namespace.';
    END IF;
    RETURN checkpoint_ns;
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_check_ns(text) IS
  'checkpoint_ns when it is a usable checkpoint namespace (a string of at most 256 bytes, '''' the root); 22023 otherwise';

-- Start a thread or extend its life; an expired one is deleted first, so it starts empty.
CREATE FUNCTION cscp.checkpoint_touch(tenant_id text, thread_id text) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := cscp.now();
    v_ttl interval;
    v_expires timestamptz;
BEGIN
    PERFORM cscp.check_tenant(checkpoint_touch.tenant_id);
    PERFORM cscp.check_id('thread_id', checkpoint_touch.thread_id);
    v_ttl := cscp.check_lifetime(cscp.policy_effective(checkpoint_touch.tenant_id), NULL,
                                 'checkpoint_ttl', 'checkpoint_ttl');
    -- A live thread extended within the last 1% of its TTL is left as it is: no row version, no
    -- WAL, no index entry per write of a busy thread.
    SELECT t.expires_at INTO v_expires FROM cscp.checkpoint_thread t
     WHERE t.tenant_id = checkpoint_touch.tenant_id AND t.thread_id = checkpoint_touch.thread_id;
    IF v_expires > v_now AND v_expires >= v_now + v_ttl - v_ttl / 100 THEN
        RETURN v_expires;
    END IF;
    DELETE FROM cscp.checkpoint_thread t
     WHERE t.tenant_id = checkpoint_touch.tenant_id AND t.thread_id = checkpoint_touch.thread_id
       AND t.expires_at <= v_now;
    INSERT INTO cscp.checkpoint_thread AS t (tenant_id, thread_id, created_at, updated_at, expires_at)
    VALUES (checkpoint_touch.tenant_id, checkpoint_touch.thread_id, v_now, v_now, v_now + v_ttl)
    ON CONFLICT (tenant_id, thread_id) DO UPDATE
        SET updated_at = v_now, expires_at = excluded.expires_at
    RETURNING t.expires_at INTO v_expires;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'could not write checkpoint thread "%": the write was skipped', checkpoint_touch.thread_id
            USING ERRCODE = '27000',
                  DETAIL = 'The statement wrote no row: a trigger, a rule or a row-level security policy on the table suppressed it.',
                  HINT = 'A BEFORE ROW trigger on cscp''s tables must return the row, and no rule or policy may hide cscp''s writes.';
    END IF;
    RETURN v_expires;
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_touch(text, text) IS
  'Start a thread, or extend it to the tenant''s checkpoint_ttl from now unless it was within the last 1% of it (an expired one starts empty); returns its expires_at';

-- Its statements keep one generic plan each (plan_cache_mode): a custom plan per call, fitted to
-- the arrays' lengths, cost more to make than the statement took to run.
CREATE FUNCTION cscp.checkpoint_put(tenant_id text, thread_id text, checkpoint_ns text,
                                    checkpoint_id text, parent_checkpoint_id text,
                                    checkpoint jsonb, metadata jsonb,
                                    channels text[] DEFAULT '{}', versions text[] DEFAULT '{}',
                                    types text[] DEFAULT '{}', blobs bytea[] DEFAULT '{}',
                                    bases text[] DEFAULT NULL, base_digests bytea[] DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_expires timestamptz;
    v_channel text;
    v_base text;
    v_depth integer;
    v_written bigint;
    v_same boolean;
    -- Stored without channel_values, and without its id when that is checkpoint_id (a read puts
    -- it back from the column).
    v_checkpoint jsonb := checkpoint_put.checkpoint - 'channel_values'
                          - CASE WHEN checkpoint_put.checkpoint ->> 'id' = checkpoint_put.checkpoint_id
                                 THEN 'id' ELSE '' END;
    r record;
BEGIN
    PERFORM cscp.check_tenant(checkpoint_put.tenant_id);
    PERFORM cscp.check_id('thread_id', checkpoint_put.thread_id);
    PERFORM cscp.checkpoint_check_ns(checkpoint_put.checkpoint_ns);
    PERFORM cscp.check_id('checkpoint_id', checkpoint_put.checkpoint_id);
    IF checkpoint_put.parent_checkpoint_id IS NOT NULL THEN
        PERFORM cscp.check_id('parent_checkpoint_id', checkpoint_put.parent_checkpoint_id);
    END IF;
    IF checkpoint_put.checkpoint IS NULL OR jsonb_typeof(checkpoint_put.checkpoint) <> 'object' THEN
        RAISE EXCEPTION 'checkpoint must be a JSON object'
            USING ERRCODE = '22023', HINT = 'Pass the checkpoint without its channel values, which go in blobs.';
    END IF;
    IF checkpoint_put.metadata IS NOT NULL AND jsonb_typeof(checkpoint_put.metadata) <> 'object' THEN
        RAISE EXCEPTION 'metadata must be a JSON object'
            USING ERRCODE = '22023';
    END IF;
    IF channels IS NULL OR versions IS NULL OR types IS NULL OR blobs IS NULL
       OR cardinality(channels) <> cardinality(versions) OR cardinality(channels) <> cardinality(types)
       OR cardinality(channels) <> cardinality(blobs)
       OR array_position(channels, NULL) IS NOT NULL OR array_position(versions, NULL) IS NOT NULL
       OR array_position(types, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'channels, versions, types and blobs must be arrays of the same length'
            USING ERRCODE = '22023',
                  DETAIL = 'Element i of each describes the value of one changed channel; only blobs may hold nulls.',
                  HINT = 'Pass empty arrays when no channel changed.';
    END IF;
    IF (bases IS NULL) <> (base_digests IS NULL)
       OR (bases IS NOT NULL AND (cardinality(bases) <> cardinality(channels)
                                  OR cardinality(base_digests) <> cardinality(channels))) THEN
        RAISE EXCEPTION 'bases and base_digests must both be NULL or arrays as long as channels'
            USING ERRCODE = '22023',
                  DETAIL = 'Element i of each, when not null, says that blobs[i] holds only the elements that follow those of version bases[i] of channels[i], whose digest is base_digests[i].';
    END IF;
    IF bases IS NOT NULL THEN
        SELECT u.c INTO v_channel
          FROM unnest(channels, types, blobs, bases, base_digests) AS u (c, t, b, base, d)
         WHERE (u.base IS NULL) <> (u.d IS NULL)
            OR (u.base IS NOT NULL AND (u.t <> 'json' OR u.b IS NULL OR octet_length(u.b) < 2
                                        OR get_byte(u.b, 0) <> 91 OR get_byte(u.b, octet_length(u.b) - 1) <> 93))
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'the extension of channel "%" must be a JSON array of type json with a base and its digest', v_channel
                USING ERRCODE = '22023',
                      DETAIL = 'A value stored as an extension of a base version holds, as a JSON array, the elements that follow the base''s.';
        END IF;
    END IF;

    v_expires := cscp.checkpoint_touch(checkpoint_put.tenant_id, checkpoint_put.thread_id);
    IF bases IS NOT NULL THEN
        -- An extension names its base by version and digest: a base stored under that version
        -- with another value (a fork that reused the version number, a thread deleted and
        -- written again) is not the value the client extended, and it must send the whole one.
        SELECT u.c, u.base, p.depth INTO v_channel, v_base, v_depth
          FROM unnest(channels, bases, base_digests) AS u (c, base, d)
          LEFT JOIN LATERAL (
               SELECT p.digest, p.depth FROM cscp.checkpoint_blob p
                WHERE p.tenant_id = checkpoint_put.tenant_id AND p.thread_id = checkpoint_put.thread_id
                  AND p.checkpoint_ns = checkpoint_put.checkpoint_ns AND p.channel = u.c
                  AND p.version = u.base LIMIT 1) p ON true
         WHERE u.base IS NOT NULL AND (p.digest IS DISTINCT FROM u.d OR p.depth >= 256)
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'version "%" of channel "%" is not stored as the base named', v_base, v_channel
                USING ERRCODE = '55000',
                      DETAIL = CASE WHEN v_depth >= 256 THEN 'The base already extends 256 others.'
                                    ELSE 'No value of that version with that digest is stored in the thread.' END,
                      HINT = 'Send the whole value of the channel instead.';
        END IF;
    END IF;
    -- Only the channels that changed: a version already stored keeps its value.  A channel
    -- changed to no value ('empty', never read) at a version with a part of its own (a '.' in
    -- it, as CscpSaver and LangGraph's Python savers make them) is not stored: no other value
    -- can come under that version, and a checkpoint naming a version no row holds reads the
    -- channel as empty.  At a version that only counts it is stored, so that a fork giving the
    -- channel a value at the same version is refused (below).
    INSERT INTO cscp.checkpoint_blob AS b (tenant_id, thread_id, checkpoint_ns, channel, version, type, blob,
                                           base, depth, digest)
    SELECT checkpoint_put.tenant_id, checkpoint_put.thread_id, checkpoint_put.checkpoint_ns, u.c, u.v, u.t, u.b,
           u.base, coalesce(p.depth + 1, 0),
           CASE WHEN u.base IS NOT NULL THEN sha256(p.digest || u.b)
                WHEN u.t = 'json' AND octet_length(u.b) >= 2 AND get_byte(u.b, 0) = 91 THEN sha256(u.b) END
      FROM unnest(channels, versions, types, blobs,
                  coalesce(bases, array_fill(NULL::text, ARRAY[cardinality(channels)]))) AS u (c, v, t, b, base)
      LEFT JOIN LATERAL (
           SELECT p.digest, p.depth FROM cscp.checkpoint_blob p
            WHERE p.tenant_id = checkpoint_put.tenant_id AND p.thread_id = checkpoint_put.thread_id
              AND p.checkpoint_ns = checkpoint_put.checkpoint_ns AND p.channel = u.c
              AND p.version = u.base LIMIT 1) p ON true
     WHERE u.t <> 'empty' OR strpos(u.v, '.') = 0
    ON CONFLICT (tenant_id, thread_id, checkpoint_ns, channel, version) DO NOTHING;
    GET DIAGNOSTICS v_written = ROW_COUNT;
    v_written := v_written + (SELECT count(*) FROM unnest(types, versions) AS u (t, v)
                               WHERE u.t = 'empty' AND strpos(u.v, '.') > 0);
    -- A version names one value.  A version already stored (a retry, another writer of the same
    -- checkpoint) must hold the value given: two checkpoints that gave a channel the same version
    -- with different values (forks whose versions only count, previous + 1) would otherwise read
    -- one value, the first stored.  The same list may be stored whole on one side and as an
    -- extension on the other: then the whole values are compared.
    IF v_written < cardinality(channels) THEN
        FOR r IN
            SELECT u.c, u.v, u.t, u.b, u.base, p.type AS p_type
              FROM unnest(channels, versions, types, blobs,
                          coalesce(bases, array_fill(NULL::text, ARRAY[cardinality(channels)]))) AS u (c, v, t, b, base)
              JOIN cscp.checkpoint_blob p
                ON p.tenant_id = checkpoint_put.tenant_id AND p.thread_id = checkpoint_put.thread_id
               AND p.checkpoint_ns = checkpoint_put.checkpoint_ns AND p.channel = u.c AND p.version = u.v
             WHERE p.type IS DISTINCT FROM u.t OR p.base IS DISTINCT FROM u.base OR p.blob IS DISTINCT FROM u.b
        LOOP
            IF r.p_type = r.t AND r.t = 'json' THEN
                -- The whole values of the version stored and of the base given.
                WITH RECURSIVE w (start, blob, base, depth) AS (
                    SELECT y.version, y.blob, y.base, 0 FROM cscp.checkpoint_blob y
                     WHERE y.tenant_id = checkpoint_put.tenant_id AND y.thread_id = checkpoint_put.thread_id
                       AND y.checkpoint_ns = checkpoint_put.checkpoint_ns AND y.channel = r.c
                       AND (y.version = r.v OR y.version = r.base)
                    UNION ALL
                    SELECT w.start, y.blob, y.base, w.depth + 1
                      FROM w JOIN cscp.checkpoint_blob y
                        ON y.tenant_id = checkpoint_put.tenant_id AND y.thread_id = checkpoint_put.thread_id
                       AND y.checkpoint_ns = checkpoint_put.checkpoint_ns AND y.channel = r.c AND y.version = w.base),
                whole (start, value) AS (
                    SELECT w.start,
                           CASE WHEN pg_catalog.count(*) = 1 THEN (pg_catalog.array_agg(w.blob))[1]
                           ELSE '\x5b'::bytea || coalesce(pg_catalog.string_agg(
                                    pg_catalog.substr(w.blob, 2, pg_catalog.octet_length(w.blob) - 2),
                                    '\x2c'::bytea ORDER BY w.depth DESC)
                                    FILTER (WHERE pg_catalog.octet_length(w.blob) > 2), '\x'::bytea)
                                || '\x5d'::bytea END
                      FROM w GROUP BY w.start)
                SELECT true INTO v_same
                  FROM whole s
                  LEFT JOIN whole g ON g.start = r.base
                 WHERE s.start = r.v
                   AND s.value = CASE WHEN r.base IS NULL THEN r.b
                                      WHEN pg_catalog.octet_length(r.b) <= 2 THEN g.value
                                      ELSE pg_catalog.substr(g.value, 1, pg_catalog.octet_length(g.value) - 1)
                                           || '\x2c'::bytea || pg_catalog.substr(r.b, 2) END;
                CONTINUE WHEN FOUND;
            END IF;
            RAISE EXCEPTION 'version "%" of channel "%" is already stored with another value', r.v, r.c
                USING ERRCODE = '23505',
                      DETAIL = format('Two checkpoints of thread "%s" gave the channel the same version with different values: versions that only count (previous + 1) repeat when checkpoints fork from one parent.',
                                      checkpoint_put.thread_id),
                      HINT = 'Give each new version a part of its own, as CscpSaver does ("<counter>.<random>"); a version stored keeps its value.';
        END LOOP;
    END IF;
    -- The checkpoint row: a new one (every write but a retry) is inserted plainly; one already
    -- stored (a retry, another writer of the same checkpoint) takes the values last given.
    -- Plain insertion in a block costs less than ON CONFLICT DO UPDATE's speculative insertion
    -- (32,000 instructions a call) and logs no confirmation record.
    BEGIN
        INSERT INTO cscp.checkpoint AS c (tenant_id, thread_id, checkpoint_ns, checkpoint_id,
                                          parent_checkpoint_id, checkpoint, metadata)
        VALUES (checkpoint_put.tenant_id, checkpoint_put.thread_id, checkpoint_put.checkpoint_ns,
                checkpoint_put.checkpoint_id, checkpoint_put.parent_checkpoint_id,
                v_checkpoint, coalesce(checkpoint_put.metadata, '{}'));
    EXCEPTION WHEN unique_violation THEN
        UPDATE cscp.checkpoint c
           SET parent_checkpoint_id = checkpoint_put.parent_checkpoint_id,
               checkpoint = v_checkpoint, metadata = coalesce(checkpoint_put.metadata, '{}')
         WHERE c.tenant_id = checkpoint_put.tenant_id AND c.thread_id = checkpoint_put.thread_id
           AND c.checkpoint_ns = checkpoint_put.checkpoint_ns AND c.checkpoint_id = checkpoint_put.checkpoint_id;
        IF NOT FOUND THEN
            -- The row stored is not in this transaction's snapshot (REPEATABLE READ), or was
            -- deleted since: as ON CONFLICT DO UPDATE would, fail to serialize.
            RAISE EXCEPTION 'could not serialize access due to concurrent update'
                USING ERRCODE = '40001',
                      DETAIL = format('Checkpoint "%s" of thread "%s" was written or deleted by a transaction this one cannot see.',
                                      checkpoint_put.checkpoint_id, checkpoint_put.thread_id),
                      HINT = 'Retry the transaction.';
        END IF;
    END;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'could not write checkpoint "%": the write was skipped', checkpoint_put.checkpoint_id
            USING ERRCODE = '27000',
                  DETAIL = 'The statement wrote no row: a trigger, a rule or a row-level security policy on the table suppressed it.',
                  HINT = 'A BEFORE ROW trigger on cscp''s tables must return the row, and no rule or policy may hide cscp''s writes.';
    END IF;
    RETURN v_expires;
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_put(text, text, text, text, text, jsonb, jsonb, text[], text[], text[], bytea[], text[], bytea[]) IS
  'Store a LangGraph checkpoint (without channel_values) and the values of the channels that changed (channels[i] at versions[i], serialised as types[i], blobs[i]; with bases[i], blobs[i] is the JSON array of the elements that follow those of version bases[i], whose digest is base_digests[i]); returns the thread''s new expires_at';

CREATE FUNCTION cscp.checkpoint_put_writes(tenant_id text, thread_id text, checkpoint_ns text,
                                           checkpoint_id text, task_id text, task_path text,
                                           channels text[], types text[], blobs bytea[], idxs int[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    n integer;
BEGIN
    PERFORM cscp.check_tenant(checkpoint_put_writes.tenant_id);
    PERFORM cscp.check_id('thread_id', checkpoint_put_writes.thread_id);
    PERFORM cscp.checkpoint_check_ns(checkpoint_put_writes.checkpoint_ns);
    PERFORM cscp.check_id('checkpoint_id', checkpoint_put_writes.checkpoint_id);
    PERFORM cscp.check_id('task_id', checkpoint_put_writes.task_id);
    IF channels IS NULL OR types IS NULL OR blobs IS NULL OR idxs IS NULL
       OR cardinality(channels) <> cardinality(types) OR cardinality(channels) <> cardinality(blobs)
       OR cardinality(channels) <> cardinality(idxs)
       OR array_position(channels, NULL) IS NOT NULL OR array_position(types, NULL) IS NOT NULL
       OR array_position(idxs, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'channels, types, blobs and idxs must be arrays of the same length'
            USING ERRCODE = '22023',
                  DETAIL = 'Element i of each describes one write; only blobs may hold nulls.';
    END IF;

    PERFORM cscp.checkpoint_touch(checkpoint_put_writes.tenant_id, checkpoint_put_writes.thread_id);
    -- A regular write (idx >= 0) is written once: a retry leaves the stored row as it is.  A
    -- special one (an error, an interrupt: negative idx) replaces the one before it.
    INSERT INTO cscp.checkpoint_write AS w (tenant_id, thread_id, checkpoint_ns, checkpoint_id,
                                            task_id, idx, channel, type, blob, task_path)
    SELECT checkpoint_put_writes.tenant_id, checkpoint_put_writes.thread_id,
           checkpoint_put_writes.checkpoint_ns, checkpoint_put_writes.checkpoint_id,
           checkpoint_put_writes.task_id, u.i, u.c, u.t, u.b, coalesce(checkpoint_put_writes.task_path, '')
      FROM unnest(channels, types, blobs, idxs) AS u (c, t, b, i)
    ON CONFLICT (tenant_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE
        SET channel = excluded.channel, type = excluded.type, blob = excluded.blob,
            task_path = excluded.task_path
        WHERE excluded.idx < 0;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_put_writes(text, text, text, text, text, text, text[], text[], bytea[], int[]) IS
  'Store the pending writes of a task against a checkpoint (regular ones once, special ones with a negative idx replaced); returns the number written';

CREATE FUNCTION cscp.checkpoint_list(tenant_id text, thread_id text DEFAULT NULL,
                                     checkpoint_ns text DEFAULT NULL, checkpoint_id text DEFAULT NULL,
                                     before text DEFAULT NULL, filter jsonb DEFAULT NULL,
                                     row_limit integer DEFAULT NULL)
RETURNS TABLE (thread text, ns text, id text, parent_id text, checkpoint jsonb, metadata jsonb,
               blob_channels text[], blob_types text[], blobs bytea[],
               write_task_ids text[], write_channels text[], write_types text[], write_blobs bytea[])
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM cscp.check_tenant(checkpoint_list.tenant_id);
    IF checkpoint_list.thread_id IS NOT NULL THEN
        PERFORM cscp.check_id('thread_id', checkpoint_list.thread_id);
    END IF;
    IF checkpoint_list.checkpoint_ns IS NOT NULL THEN
        PERFORM cscp.checkpoint_check_ns(checkpoint_list.checkpoint_ns);
    END IF;
    IF checkpoint_list.filter IS NOT NULL AND jsonb_typeof(checkpoint_list.filter) <> 'object' THEN
        RAISE EXCEPTION 'filter must be a JSON object'
            USING ERRCODE = '22023', HINT = 'Pass the metadata keys and values a checkpoint must have.';
    END IF;
    IF checkpoint_list.row_limit < 0 THEN
        RAISE EXCEPTION 'row_limit must not be negative'
            USING ERRCODE = '22023', HINT = 'Pass NULL for no limit.';
    END IF;
    -- The query names only the filters given (fixed fragments; every value a parameter), so that
    -- each call is planned for them: a thread's newest checkpoint is one backward step of the
    -- primary key, whatever the length of the thread.  Each checkpoint found is read, with its
    -- channel values and pending writes, by cscp.checkpoint_get_tuple.
    RETURN QUERY EXECUTE
       'SELECT g.* FROM (SELECT x.tenant_id, x.thread_id, x.checkpoint_ns, x.checkpoint_id FROM cscp.checkpoint x'
    || '          JOIN cscp.checkpoint_thread t ON t.tenant_id = x.tenant_id AND t.thread_id = x.thread_id'
    || '         WHERE x.tenant_id = $1 AND t.expires_at > cscp.now()'
    || CASE WHEN checkpoint_list.thread_id IS NULL THEN '' ELSE ' AND x.thread_id = $2' END
    || CASE WHEN checkpoint_list.checkpoint_ns IS NULL THEN '' ELSE ' AND x.checkpoint_ns = $3' END
    || CASE WHEN checkpoint_list.checkpoint_id IS NULL THEN '' ELSE ' AND x.checkpoint_id = $4' END
    || CASE WHEN checkpoint_list.before IS NULL THEN '' ELSE ' AND x.checkpoint_id < $5' END
    || CASE WHEN checkpoint_list.filter IS NULL THEN '' ELSE ' AND x.metadata OPERATOR(pg_catalog.@>) $6' END
    || '         ORDER BY x.checkpoint_id DESC, x.thread_id, x.checkpoint_ns'
    || CASE WHEN checkpoint_list.row_limit IS NULL THEN '' ELSE ' LIMIT $7' END
    || '       ) c'
    || ' CROSS JOIN LATERAL cscp.checkpoint_get_tuple(c.tenant_id, c.thread_id, c.checkpoint_ns, c.checkpoint_id) g'
    || ' ORDER BY c.checkpoint_id DESC, c.thread_id, c.checkpoint_ns'
    USING checkpoint_list.tenant_id, checkpoint_list.thread_id, checkpoint_list.checkpoint_ns,
          checkpoint_list.checkpoint_id, checkpoint_list.before, checkpoint_list.filter,
          checkpoint_list.row_limit;
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_list(text, text, text, text, text, jsonb, integer) IS
  'Checkpoints of live threads, newest id first, with the blobs of their channel_versions and their pending writes in (task_path, task_id, idx) order; NULL arguments do not filter';

-- held_channels and held_versions (pairs): the values the caller already holds (a client's cache of
-- the values it wrote or read, which a version names once, see checkpoint_put): such a channel
-- of the checkpoint is returned with its type and a NULL blob, its row found by its whole key but
-- neither its extensions walked nor its bytes sent.
CREATE FUNCTION cscp.checkpoint_get_tuple(tenant_id text, thread_id text, checkpoint_ns text DEFAULT '',
                                          checkpoint_id text DEFAULT NULL,
                                          held_channels text[] DEFAULT NULL, held_versions text[] DEFAULT NULL)
RETURNS TABLE (thread text, ns text, id text, parent_id text, checkpoint jsonb, metadata jsonb,
               blob_channels text[], blob_types text[], blobs bytea[],
               write_task_ids text[], write_channels text[], write_types text[], write_blobs bytea[])
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_id text COLLATE "C" := checkpoint_get_tuple.checkpoint_id;
BEGIN
    PERFORM cscp.check_tenant(checkpoint_get_tuple.tenant_id);
    PERFORM cscp.check_id('thread_id', checkpoint_get_tuple.thread_id);
    PERFORM cscp.checkpoint_check_ns(checkpoint_get_tuple.checkpoint_ns);
    IF (held_channels IS NULL) <> (held_versions IS NULL)
       OR cardinality(held_channels) <> cardinality(held_versions) THEN
        RAISE EXCEPTION 'held_channels and held_versions must both be NULL or arrays of the same length'
            USING ERRCODE = '22023',
                  DETAIL = 'Element i of each names a value the caller holds: version held_versions[i] of channel held_channels[i].';
    END IF;
    IF v_id IS NULL THEN
        SELECT x.checkpoint_id INTO v_id FROM cscp.checkpoint x
         WHERE x.tenant_id = checkpoint_get_tuple.tenant_id AND x.thread_id = checkpoint_get_tuple.thread_id
           AND x.checkpoint_ns = checkpoint_get_tuple.checkpoint_ns
         ORDER BY x.checkpoint_id DESC
         LIMIT 1;
    END IF;
    -- Static statements, their plans kept for the session: the checkpoint named, or the newest
    -- of the namespace (one backward step of the primary key, whatever the length of the
    -- thread), of a live thread.  A value stored as extensions of a base is the base's JSON
    -- array followed by the elements of each extension, oldest first: its rows (depth 0 the one
    -- named) are found by walking the bases, and joined into one array; each blob is read by its
    -- whole key (LIMIT 1 keeps the planner from hashing all of a thread's blobs to find a few).
    -- A value the caller holds is its row at depth 0 with no blob and no base to walk.
    RETURN QUERY
    SELECT c.thread_id, c.checkpoint_ns::text, c.checkpoint_id::text, c.parent_checkpoint_id::text,
           jsonb_build_object('id', c.checkpoint_id::text) || c.checkpoint, c.metadata,
           b.channels, b.types, b.blobs, w.task_ids, w.channels, w.types, w.blobs
      FROM cscp.checkpoint c
      JOIN cscp.checkpoint_thread t ON t.tenant_id = c.tenant_id AND t.thread_id = c.thread_id
     CROSS JOIN LATERAL (
           WITH RECURSIVE r (channel, type, blob, base, depth) AS (
                SELECT v.channel, y.type, CASE WHEN h.held THEN NULL ELSE y.blob END,
                       CASE WHEN h.held THEN NULL ELSE y.base END, 0
                  FROM jsonb_each_text(c.checkpoint -> 'channel_versions') v (channel, version)
                 CROSS JOIN LATERAL (
                       SELECT y.type, y.blob, y.base FROM cscp.checkpoint_blob y
                        WHERE y.tenant_id = c.tenant_id AND y.thread_id = c.thread_id
                          AND y.checkpoint_ns = c.checkpoint_ns AND y.channel = v.channel
                          AND y.version = v.version AND y.type <> 'empty' LIMIT 1) y
                 CROSS JOIN LATERAL (
                       SELECT EXISTS (SELECT FROM unnest(checkpoint_get_tuple.held_channels,
                                                         checkpoint_get_tuple.held_versions) AS h (c, v)
                                       WHERE h.c = v.channel AND h.v = v.version) AS held) h
                UNION ALL
                SELECT r.channel, y.type, y.blob, y.base, r.depth + 1
                  FROM r CROSS JOIN LATERAL (
                       SELECT y.type, y.blob, y.base FROM cscp.checkpoint_blob y
                        WHERE y.tenant_id = c.tenant_id AND y.thread_id = c.thread_id
                          AND y.checkpoint_ns = c.checkpoint_ns AND y.channel = r.channel
                          AND y.version = r.base LIMIT 1) y)
           SELECT coalesce(array_agg(j.channel ORDER BY j.channel), '{}') AS channels,
                  coalesce(array_agg(j.type ORDER BY j.channel), '{}') AS types,
                  coalesce(array_agg(j.blob ORDER BY j.channel), '{}') AS blobs
             FROM (SELECT r.channel, (array_agg(r.type ORDER BY r.depth))[1] AS type,
                          CASE WHEN count(*) = 1 THEN (array_agg(r.blob))[1]
                          ELSE '\x5b'::bytea || coalesce(string_agg(
                                   substr(r.blob, 2, octet_length(r.blob) - 2),
                                   '\x2c'::bytea ORDER BY r.depth DESC)
                                   FILTER (WHERE octet_length(r.blob) > 2), '\x'::bytea)
                               || '\x5d'::bytea END AS blob
                     FROM r GROUP BY r.channel) j) b
     CROSS JOIN LATERAL (
           SELECT coalesce(array_agg(z.task_id::text ORDER BY z.task_path, z.task_id, z.idx), '{}') AS task_ids,
                  coalesce(array_agg(z.channel ORDER BY z.task_path, z.task_id, z.idx), '{}') AS channels,
                  coalesce(array_agg(z.type ORDER BY z.task_path, z.task_id, z.idx), '{}') AS types,
                  coalesce(array_agg(z.blob ORDER BY z.task_path, z.task_id, z.idx), '{}') AS blobs
             FROM cscp.checkpoint_write z
            WHERE z.tenant_id = c.tenant_id AND z.thread_id = c.thread_id
              AND z.checkpoint_ns = c.checkpoint_ns AND z.checkpoint_id = c.checkpoint_id) w
     WHERE c.tenant_id = checkpoint_get_tuple.tenant_id AND c.thread_id = checkpoint_get_tuple.thread_id
       AND c.checkpoint_ns = checkpoint_get_tuple.checkpoint_ns
       AND c.checkpoint_id = v_id AND t.expires_at > cscp.now();
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_get_tuple(text, text, text, text, text[], text[]) IS
  'One checkpoint of a live thread as cscp.checkpoint_list returns it: the one named, or the newest of the namespace; a channel at a version the caller holds (held_channels, held_versions) comes with a NULL blob';

CREATE FUNCTION cscp.checkpoint_delete_thread(tenant_id text, thread_id text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_live boolean;
BEGIN
    PERFORM cscp.check_tenant(checkpoint_delete_thread.tenant_id);
    PERFORM cscp.check_id('thread_id', checkpoint_delete_thread.thread_id);
    DELETE FROM cscp.checkpoint_thread t
     WHERE t.tenant_id = checkpoint_delete_thread.tenant_id AND t.thread_id = checkpoint_delete_thread.thread_id
    RETURNING t.expires_at > cscp.now() INTO v_live;
    RETURN coalesce(v_live, false);
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_delete_thread(text, text) IS
  'Delete a thread with every checkpoint, blob and pending write of it; true when a live thread was deleted';

-- LangGraph's store: items of a tenant under a namespace (a path of labels) and a key.
CREATE TABLE cscp.store_item (
    tenant_id   text        NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    namespace   text[]      NOT NULL CHECK (cardinality(namespace) > 0
                                            AND pg_catalog.array_position(namespace, NULL) IS NULL
                                            AND '' <> ALL (namespace)),
    key         text        NOT NULL CHECK (key <> ''),
    value       jsonb       NOT NULL CHECK (pg_catalog.jsonb_typeof(value) = 'object'),
    created_at  timestamptz NOT NULL DEFAULT cscp.now(),
    updated_at  timestamptz NOT NULL DEFAULT cscp.now(),
    ttl         interval,
    expires_at  timestamptz,
    namespace_hash bigint   NOT NULL GENERATED ALWAYS AS (pg_catalog.hash_array_extended(namespace, 0)) STORED,
    PRIMARY KEY (tenant_id, namespace, key),
    CHECK ((ttl IS NULL) = (expires_at IS NULL))
);
COMMENT ON TABLE cscp.store_item IS
  'LangGraph store items per (tenant, namespace, key); with a ttl, gone once expires_at has passed (reads may push it back by ttl)';
CREATE INDEX store_item_expiry_idx ON cscp.store_item (expires_at) WHERE expires_at IS NOT NULL;
-- An item found by its key under row-level security: the policy's tenant test is evaluated
-- before any condition that is not leakproof, and text[] equality is not, so the primary key
-- cannot find (namespace, key) for an application role (every read scanned the tenant's
-- items).  The namespace's hash compared as a bigint is leakproof; the namespace itself is
-- then compared on the one row found.
COMMENT ON COLUMN cscp.store_item.namespace_hash IS
  'hash_array_extended(namespace, 0): how a read finds an item under row-level security (store_item_lookup_idx)';
CREATE INDEX store_item_lookup_idx ON cscp.store_item (tenant_id, namespace_hash, key);

-- Scale-out: a tenant's store lives whole on the node of (tenant, '') (its searches span it).
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id ON cscp.store_item
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', '');

-- Whether a value passes a store filter: per top-level key, equal to the filter's value, or
-- meeting every operator of it ($eq, $ne, $gt, $gte, $lt, $lte, $in, $nin).
CREATE FUNCTION cscp.store_filter_match(value jsonb, filter jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f record;
    o record;
    v jsonb;
    ok boolean;
BEGIN
    IF filter IS NULL THEN
        RETURN true;
    END IF;
    IF jsonb_typeof(filter) <> 'object' THEN
        RAISE EXCEPTION 'filter must be a JSON object'
            USING ERRCODE = '22023', HINT = 'Pass {"field": value} or {"field": {"$gt": value}}.';
    END IF;
    FOR f IN SELECT e.key, e.value FROM jsonb_each(filter) e LOOP
        v := value -> f.key;
        IF jsonb_typeof(f.value) = 'object' AND f.value <> '{}'
           AND NOT EXISTS (SELECT FROM jsonb_object_keys(f.value) k WHERE k NOT LIKE '$%') THEN
            FOR o IN SELECT e.key, e.value FROM jsonb_each(f.value) e LOOP
                CASE o.key
                WHEN '$eq' THEN
                    IF v IS DISTINCT FROM o.value THEN RETURN false; END IF;
                WHEN '$ne' THEN
                    IF v IS NOT DISTINCT FROM o.value THEN RETURN false; END IF;
                WHEN '$gt', '$gte', '$lt', '$lte' THEN
                    IF v IS NULL OR jsonb_typeof(v) <> jsonb_typeof(o.value)
                       OR jsonb_typeof(v) NOT IN ('number', 'string') THEN
                        RETURN false;
                    END IF;
                    ok := CASE o.key WHEN '$gt' THEN v > o.value WHEN '$gte' THEN v >= o.value
                                     WHEN '$lt' THEN v < o.value ELSE v <= o.value END;
                    IF NOT ok THEN
                        RETURN false;
                    END IF;
                WHEN '$in', '$nin' THEN
                    IF jsonb_typeof(o.value) <> 'array' THEN
                        RAISE EXCEPTION 'operator % takes an array', o.key
                            USING ERRCODE = '22023';
                    END IF;
                    IF (v IS NOT NULL AND EXISTS (SELECT FROM jsonb_array_elements(o.value) a WHERE a = v))
                       <> (o.key = '$in') THEN
                        RETURN false;
                    END IF;
                ELSE
                    RAISE EXCEPTION 'unknown filter operator "%"', o.key
                        USING ERRCODE = '22023',
                              HINT = 'Use $eq, $ne, $gt, $gte, $lt, $lte, $in or $nin.';
                END CASE;
            END LOOP;
        ELSIF v IS DISTINCT FROM f.value THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$$;
COMMENT ON FUNCTION cscp.store_filter_match(jsonb, jsonb) IS
  'Whether a store value passes a filter: per top-level field, equal to the value given or meeting each of its operators ($eq, $ne, $gt, $gte, $lt, $lte, $in, $nin)';

-- Whether a namespace starts (or, with from_end, ends) with path, '*' matching any label.
CREATE FUNCTION cscp.store_namespace_match(namespace text[], path text[], from_end boolean DEFAULT false)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT path IS NULL
        OR (cardinality(path) <= cardinality(namespace)
            AND NOT EXISTS (SELECT FROM unnest(path) WITH ORDINALITY p (label, i)
                             WHERE p.label <> '*'
                               AND p.label IS DISTINCT FROM namespace[CASE WHEN from_end
                                   THEN cardinality(namespace) - cardinality(path) + p.i
                                   ELSE p.i END]))
$$;
COMMENT ON FUNCTION cscp.store_namespace_match(text[], text[], boolean) IS
  'Whether a namespace starts with path (ends with it when from_end), ''*'' in path matching any label';

-- Raise 22023 unless namespace is a usable store namespace.
CREATE FUNCTION cscp.store_check_namespace(namespace text[], allow_empty boolean DEFAULT false) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF namespace IS NULL OR (cardinality(namespace) = 0 AND NOT allow_empty)
       OR array_position(namespace, NULL) IS NOT NULL OR '' = ANY (namespace)
       OR EXISTS (SELECT FROM unnest(namespace) l WHERE octet_length(l) > 256 OR strpos(l, '.') > 0) THEN
        RAISE EXCEPTION 'namespace must be a non-empty array of labels'
            USING ERRCODE = '22023',
                  DETAIL = 'Each label is a non-empty string of at most 256 bytes without a period.',
                  HINT = 'Pass a path such as {users,u-1,memories}.';
    END IF;
    RETURN namespace;
END
$$;
COMMENT ON FUNCTION cscp.store_check_namespace(text[], boolean) IS
  'namespace when it is a usable store namespace (labels non-empty, at most 256 bytes, without a period); 22023 otherwise';

CREATE FUNCTION cscp.store_put(tenant_id text, namespace text[], key text, value jsonb,
                               ttl interval DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := cscp.now();
    v_ttl interval;
BEGIN
    PERFORM cscp.check_tenant(store_put.tenant_id);
    PERFORM cscp.store_check_namespace(store_put.namespace);
    PERFORM cscp.check_id('key', store_put.key);
    IF store_put.value IS NULL OR jsonb_typeof(store_put.value) <> 'object' THEN
        RAISE EXCEPTION 'value must be a JSON object'
            USING ERRCODE = '22023', HINT = 'Delete an item with cscp.store_delete.';
    END IF;
    IF store_put.ttl IS NOT NULL THEN
        v_ttl := cscp.check_lifetime(cscp.policy_effective(store_put.tenant_id), store_put.ttl,
                                     'checkpoint_ttl', 'ttl');
    END IF;
    INSERT INTO cscp.store_item AS s (tenant_id, namespace, key, value, created_at, updated_at, ttl, expires_at)
    VALUES (store_put.tenant_id, store_put.namespace, store_put.key, store_put.value, v_now, v_now,
            v_ttl, v_now + v_ttl)
    ON CONFLICT (tenant_id, namespace, key) DO UPDATE
        SET value = excluded.value, updated_at = v_now, ttl = excluded.ttl,
            expires_at = excluded.expires_at,
            -- an expired item is replaced, not updated
            created_at = CASE WHEN s.expires_at <= v_now THEN v_now ELSE s.created_at END;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'could not write store item "%": the write was skipped', store_put.key
            USING ERRCODE = '27000',
                  DETAIL = 'The statement wrote no row: a trigger, a rule or a row-level security policy on the table suppressed it.',
                  HINT = 'A BEFORE ROW trigger on cscp''s tables must return the row, and no rule or policy may hide cscp''s writes.';
    END IF;
END
$$;
COMMENT ON FUNCTION cscp.store_put(text, text[], text, jsonb, interval) IS
  'Store (or replace) an item; with ttl (positive, within max_ttl) it expires that long after its last write or refreshing read';

CREATE FUNCTION cscp.store_get(tenant_id text, namespace text[], key text, refresh_ttl boolean DEFAULT true)
RETURNS TABLE (item_namespace text[], item_key text, item_value jsonb, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := cscp.now();
    v_hash bigint;
BEGIN
    PERFORM cscp.check_tenant(store_get.tenant_id);
    PERFORM cscp.store_check_namespace(store_get.namespace);
    PERFORM cscp.check_id('key', store_get.key);
    v_hash := hash_array_extended(store_get.namespace, 0);
    IF coalesce(store_get.refresh_ttl, true) THEN
        UPDATE cscp.store_item s SET expires_at = v_now + s.ttl
         WHERE s.tenant_id = store_get.tenant_id AND s.namespace_hash = v_hash
           AND s.namespace = store_get.namespace
           AND s.key = store_get.key AND s.ttl IS NOT NULL AND s.expires_at > v_now;
    END IF;
    RETURN QUERY
    SELECT s.namespace, s.key, s.value, s.created_at, s.updated_at, s.expires_at
      FROM cscp.store_item s
     WHERE s.tenant_id = store_get.tenant_id AND s.namespace_hash = v_hash
       AND s.namespace = store_get.namespace
       AND s.key = store_get.key AND (s.expires_at IS NULL OR s.expires_at > v_now);
END
$$;
COMMENT ON FUNCTION cscp.store_get(text, text[], text, boolean) IS
  'A live store item (none when absent or expired); with refresh_ttl (the default) its TTL starts again';

CREATE FUNCTION cscp.store_search(tenant_id text, namespace_prefix text[] DEFAULT '{}',
                                  filter jsonb DEFAULT NULL, query text DEFAULT NULL,
                                  row_limit integer DEFAULT 10, row_offset integer DEFAULT 0,
                                  refresh_ttl boolean DEFAULT true)
RETURNS TABLE (item_namespace text[], item_key text, item_value jsonb, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz, score double precision)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := cscp.now();
    v_query tsquery;
BEGIN
    PERFORM cscp.check_tenant(store_search.tenant_id);
    PERFORM cscp.store_check_namespace(coalesce(store_search.namespace_prefix, '{}'), true);
    PERFORM cscp.store_filter_match('{}', store_search.filter);
    IF store_search.row_limit IS NULL OR store_search.row_limit < 0
       OR store_search.row_offset IS NULL OR store_search.row_offset < 0 THEN
        RAISE EXCEPTION 'row_limit and row_offset must not be negative'
            USING ERRCODE = '22023';
    END IF;
    IF store_search.query IS NOT NULL AND store_search.query <> '' THEN
        v_query := websearch_to_tsquery('simple', store_search.query);
    END IF;
    RETURN QUERY
    WITH hit AS (
        SELECT s.tenant_id, s.namespace, s.key,
               CASE WHEN v_query IS NULL THEN NULL
                    ELSE ts_rank(jsonb_to_tsvector('simple', s.value, '["string", "numeric"]'), v_query)::double precision
               END AS score,
               s.namespace_hash
          FROM cscp.store_item s
         WHERE s.tenant_id = store_search.tenant_id
           AND (s.expires_at IS NULL OR s.expires_at > v_now)
           AND s.namespace[1:cardinality(coalesce(store_search.namespace_prefix, '{}'))]
               = coalesce(store_search.namespace_prefix, '{}')
           AND (v_query IS NULL OR jsonb_to_tsvector('simple', s.value, '["string", "numeric"]') @@ v_query)
           AND cscp.store_filter_match(s.value, store_search.filter)
         ORDER BY 4 DESC NULLS LAST, s.updated_at DESC, s.namespace, s.key
         LIMIT store_search.row_limit OFFSET store_search.row_offset),
    refreshed AS (
        UPDATE cscp.store_item s SET expires_at = v_now + s.ttl
          FROM hit h
         WHERE coalesce(store_search.refresh_ttl, true) AND s.ttl IS NOT NULL
           AND s.tenant_id = h.tenant_id AND s.namespace_hash = h.namespace_hash
           AND s.namespace = h.namespace AND s.key = h.key
        RETURNING s.namespace, s.key, s.expires_at)
    SELECT s.namespace, s.key, s.value, s.created_at, s.updated_at,
           coalesce(r.expires_at, s.expires_at), h.score
      FROM hit h
      JOIN cscp.store_item s ON s.tenant_id = h.tenant_id AND s.namespace_hash = h.namespace_hash
                            AND s.namespace = h.namespace AND s.key = h.key
      LEFT JOIN refreshed r ON r.namespace = h.namespace AND r.key = h.key
     ORDER BY h.score DESC NULLS LAST, s.updated_at DESC, s.namespace, s.key;
END
$$;
COMMENT ON FUNCTION cscp.store_search(text, text[], jsonb, text, integer, integer, boolean) IS
  'Live store items under a namespace prefix that pass filter (cscp.store_filter_match) and, with query, match it as a web search (ranked by ts_rank, best first); newest first otherwise';

CREATE FUNCTION cscp.store_delete(tenant_id text, namespace text[], key text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_live boolean;
BEGIN
    PERFORM cscp.check_tenant(store_delete.tenant_id);
    PERFORM cscp.store_check_namespace(store_delete.namespace);
    PERFORM cscp.check_id('key', store_delete.key);
    DELETE FROM cscp.store_item s
     WHERE s.tenant_id = store_delete.tenant_id
       AND s.namespace_hash = hash_array_extended(store_delete.namespace, 0)
       AND s.namespace = store_delete.namespace AND s.key = store_delete.key
    RETURNING s.expires_at IS NULL OR s.expires_at > cscp.now() INTO v_live;
    RETURN coalesce(v_live, false);
END
$$;
COMMENT ON FUNCTION cscp.store_delete(text, text[], text) IS
  'Delete a store item; true when a live one was deleted';

CREATE FUNCTION cscp.store_list_namespaces(tenant_id text, prefix text[] DEFAULT NULL,
                                           suffix text[] DEFAULT NULL, max_depth integer DEFAULT NULL,
                                           row_limit integer DEFAULT 100, row_offset integer DEFAULT 0)
RETURNS SETOF text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM cscp.check_tenant(store_list_namespaces.tenant_id);
    IF store_list_namespaces.max_depth < 1 THEN
        RAISE EXCEPTION 'max_depth must be at least 1'
            USING ERRCODE = '22023', HINT = 'Pass NULL for namespaces of any depth.';
    END IF;
    IF store_list_namespaces.row_limit IS NULL OR store_list_namespaces.row_limit < 0
       OR store_list_namespaces.row_offset IS NULL OR store_list_namespaces.row_offset < 0 THEN
        RAISE EXCEPTION 'row_limit and row_offset must not be negative'
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT DISTINCT s.namespace[1:coalesce(store_list_namespaces.max_depth, cardinality(s.namespace))]
      FROM cscp.store_item s
     WHERE s.tenant_id = store_list_namespaces.tenant_id
       AND (s.expires_at IS NULL OR s.expires_at > cscp.now())
       AND cscp.store_namespace_match(s.namespace, store_list_namespaces.prefix)
       AND cscp.store_namespace_match(s.namespace, store_list_namespaces.suffix, true)
     ORDER BY 1
     LIMIT store_list_namespaces.row_limit OFFSET store_list_namespaces.row_offset;
END
$$;
COMMENT ON FUNCTION cscp.store_list_namespaces(text, text[], text[], integer, integer, integer) IS
  'The namespaces of live store items matching prefix and suffix (''*'' any label), cut at max_depth, once each, in order';

-- OpenAI Agents sessions: a head row numbering the items, and the items in that order.
CREATE TABLE cscp.agent_session (
    tenant_id   text        NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    session_id  text        NOT NULL CHECK (session_id <> ''),
    next_seq    bigint      NOT NULL DEFAULT 1 CHECK (next_seq > 0),
    created_at  timestamptz NOT NULL DEFAULT cscp.now(),
    updated_at  timestamptz NOT NULL DEFAULT cscp.now(),
    PRIMARY KEY (tenant_id, session_id)
);
COMMENT ON TABLE cscp.agent_session IS
  'Agent sessions (OpenAI Agents SDK) per tenant: the number the next item gets';

CREATE TABLE cscp.session_item (
    tenant_id   text        NOT NULL,
    session_id  text        NOT NULL,
    seq         bigint      NOT NULL,
    item        jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT cscp.now(),
    PRIMARY KEY (tenant_id, session_id, seq),
    FOREIGN KEY (tenant_id, session_id) REFERENCES cscp.agent_session ON DELETE CASCADE
);
COMMENT ON TABLE cscp.session_item IS
  'Items of agent sessions in the order they were added';

CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, session_id ON cscp.agent_session
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'session_id');

-- Scale-out: a session and its items live on the node of (tenant, session id).
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, session_id ON cscp.agent_session
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'session_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, session_id ON cscp.session_item
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'session_id');

CREATE FUNCTION cscp.session_add_items(tenant_id text, session_id text, items jsonb) RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := cscp.now();
    n integer;
    v_written bigint;
    v_first bigint;
BEGIN
    PERFORM cscp.check_tenant(session_add_items.tenant_id);
    PERFORM cscp.check_id('session_id', session_add_items.session_id);
    IF items IS NULL OR jsonb_typeof(items) <> 'array' THEN
        RAISE EXCEPTION 'items must be a JSON array'
            USING ERRCODE = '22023', HINT = 'Pass the items to add, oldest first.';
    END IF;
    n := jsonb_array_length(items);
    IF n = 0 THEN
        RETURN 0;
    END IF;
    -- The head row's lock orders concurrent writers, the first ones of a session included.
    INSERT INTO cscp.agent_session AS s (tenant_id, session_id, next_seq, created_at, updated_at)
    VALUES (session_add_items.tenant_id, session_add_items.session_id, 1 + n, v_now, v_now)
    ON CONFLICT (tenant_id, session_id) DO UPDATE
        SET next_seq = s.next_seq + n, updated_at = v_now
    RETURNING s.next_seq - n INTO v_first;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'could not write session "%": the write was skipped', session_add_items.session_id
            USING ERRCODE = '27000',
                  DETAIL = 'The statement wrote no row: a trigger, a rule or a row-level security policy on the table suppressed it.',
                  HINT = 'A BEFORE ROW trigger on cscp''s tables must return the row, and no rule or policy may hide cscp''s writes.';
    END IF;
    INSERT INTO cscp.session_item (tenant_id, session_id, seq, item, created_at)
    SELECT session_add_items.tenant_id, session_add_items.session_id, v_first + e.ord - 1, e.value, v_now
      FROM jsonb_array_elements(items) WITH ORDINALITY AS e (value, ord);
    GET DIAGNOSTICS v_written = ROW_COUNT;
    IF v_written <> n THEN
        RAISE EXCEPTION 'could not write the items of session "%": % of % writes were skipped',
                        session_add_items.session_id, n - v_written, n
            USING ERRCODE = '27000',
                  DETAIL = 'The statement wrote fewer rows than items: a trigger, a rule or a row-level security policy on the table suppressed some.',
                  HINT = 'A BEFORE ROW trigger on cscp''s tables must return the row, and no rule or policy may hide cscp''s writes.';
    END IF;
    RETURN n;
END
$$;
COMMENT ON FUNCTION cscp.session_add_items(text, text, jsonb) IS
  'Append items (a JSON array) to a session, creating it; atomic under concurrent writers; returns the number added';

CREATE FUNCTION cscp.session_get_items(tenant_id text, session_id text, row_limit integer DEFAULT NULL)
RETURNS SETOF jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM cscp.check_tenant(session_get_items.tenant_id);
    PERFORM cscp.check_id('session_id', session_get_items.session_id);
    IF session_get_items.row_limit < 0 THEN
        RAISE EXCEPTION 'row_limit must not be negative'
            USING ERRCODE = '22023', HINT = 'Pass NULL for every item.';
    END IF;
    RETURN QUERY
    SELECT l.item FROM (
        SELECT i.item, i.seq FROM cscp.session_item i
         WHERE i.tenant_id = session_get_items.tenant_id AND i.session_id = session_get_items.session_id
         ORDER BY i.seq DESC
         LIMIT session_get_items.row_limit) l
     ORDER BY l.seq;
END
$$;
COMMENT ON FUNCTION cscp.session_get_items(text, text, integer) IS
  'A session''s items, oldest first; with row_limit, the latest row_limit of them';

CREATE FUNCTION cscp.session_pop_item(tenant_id text, session_id text) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_item jsonb;
BEGIN
    PERFORM cscp.check_tenant(session_pop_item.tenant_id);
    PERFORM cscp.check_id('session_id', session_pop_item.session_id);
    -- The head row's lock: two pops take two items, never the same one.
    PERFORM FROM cscp.agent_session s
      WHERE s.tenant_id = session_pop_item.tenant_id AND s.session_id = session_pop_item.session_id
        FOR UPDATE;
    DELETE FROM cscp.session_item i
     WHERE i.tenant_id = session_pop_item.tenant_id AND i.session_id = session_pop_item.session_id
       AND i.seq = (SELECT max(x.seq) FROM cscp.session_item x
                     WHERE x.tenant_id = session_pop_item.tenant_id
                       AND x.session_id = session_pop_item.session_id)
    RETURNING i.item INTO v_item;
    RETURN v_item;
END
$$;
COMMENT ON FUNCTION cscp.session_pop_item(text, text) IS
  'Remove and return a session''s latest item; NULL when it has none';

CREATE FUNCTION cscp.session_clear(tenant_id text, session_id text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    n bigint;
BEGIN
    PERFORM cscp.check_tenant(session_clear.tenant_id);
    PERFORM cscp.check_id('session_id', session_clear.session_id);
    DELETE FROM cscp.agent_session s
     WHERE s.tenant_id = session_clear.tenant_id AND s.session_id = session_clear.session_id;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n > 0;
END
$$;
COMMENT ON FUNCTION cscp.session_clear(text, text) IS
  'Delete a session and all its items; true when there was one';

-- The sweep's part (called by cscp.sweep, src/operations/sweep.c): expired threads (with everything they
-- hold, by cascade) and expired store items, up to batch of each, rows others hold skipped.
CREATE FUNCTION cscp._sweep_checkpoints(batch int, v_now timestamptz,
                                        OUT n_threads bigint, OUT n_store_items bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM cscp.checkpoint_thread d
     WHERE d.ctid = ANY (ARRAY(
               SELECT x.ctid FROM cscp.checkpoint_thread x
                WHERE x.expires_at <= v_now
                ORDER BY x.expires_at
                LIMIT batch
                  FOR UPDATE SKIP LOCKED))
       AND d.expires_at <= v_now;
    GET DIAGNOSTICS n_threads = ROW_COUNT;
    DELETE FROM cscp.store_item d
     WHERE d.ctid = ANY (ARRAY(
               SELECT x.ctid FROM cscp.store_item x
                WHERE x.expires_at <= v_now
                ORDER BY x.expires_at
                LIMIT batch
                  FOR UPDATE SKIP LOCKED))
       AND d.expires_at <= v_now;
    GET DIAGNOSTICS n_store_items = ROW_COUNT;
END
$$;
COMMENT ON FUNCTION cscp._sweep_checkpoints(int, timestamptz) IS
  'Internal: the sweep''s deletion of up to batch expired checkpoint threads (with their checkpoints, blobs and writes) and expired store items';
