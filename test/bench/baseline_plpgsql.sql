-- The naive baseline of `make bench` (test/scripts/bench.sh): cscp's rules as a user would
-- hand-write them in PL/pgSQL, on the plain tables of floor_schema.sql loaded as schema
-- bench_naive.  The *_naive.sql scripts run the floor's statements against these tables, minus
-- the evidence inserts, which the triggers below make.
--
-- What naive does:
--   * context: a BEFORE UPDATE trigger looks the status change up in a transition table and
--     refuses a change to a live context past expires_at (the expiry check), and moves
--     updated_at and version;
--   * command: a BEFORE INSERT trigger refuses a command formed from a context that is not live
--     or has expired (expiry check); a BEFORE UPDATE trigger looks the state change up in a
--     transition table, refuses `started` for a mutating command that was never confirmed and for
--     any command that was never authorized, and stamps the change;
--   * evidence: an AFTER INSERT OR UPDATE trigger on command inserts one evidence row per state
--     change (stage and event type from the transition table, seq = max(seq) + 1 of the
--     command's rows, hash = md5 of command id and seq: no chain);
--   * one live context per (tenant, conversation, actor) and one command per idempotency key:
--     the same unique indexes as the floor and cscp (floor_schema.sql);
--   * documents: doc_get and doc_put as PL/pgSQL functions with argument checks (payload an
--     object, positive TTL), the expiry filter and the merge that starts from empty when expired.
-- What naive does not do (and cscp does): canonical JSON and SHA-256 frame hashes, the evidence
-- hash chain and its append-only guard, row-level security and the tenant check, policies (TTLs,
-- slot rules and sizes, auto_confirm), slot name checks, the turn shape, gapless-index and
-- schema checks, replay detection, idempotent replays of submits, the confirmation window,
-- superseding, and refusals recorded as evidence.
--   psql -v role=<the role pgbench connects as> -f baseline_plpgsql.sql   (after floor_schema.sql as bench_naive)

CREATE TABLE bench_naive.context_transition (
    from_status  text NOT NULL,
    to_status    text NOT NULL,
    PRIMARY KEY (from_status, to_status)
);
INSERT INTO bench_naive.context_transition VALUES
    ('active', 'pending'), ('pending', 'active'), ('active', 'closed'), ('pending', 'closed'),
    ('pending', 'expired'), ('blocked', 'expired'), ('blocked', 'active'), ('active', 'expired'),
    ('active', 'blocked'), ('pending', 'blocked'), ('blocked', 'closed');

CREATE TABLE bench_naive.command_transition (
    from_state  text NOT NULL,
    to_state    text NOT NULL,
    stage       text NOT NULL,
    event_type  text NOT NULL,
    PRIMARY KEY (from_state, to_state)
);
INSERT INTO bench_naive.command_transition VALUES
    ('received', 'canonicalized', 'accepted', 'command.accepted'),
    ('canonicalized', 'confirmation_required', 'confirmation', 'command.confirmation.requested'),
    ('canonicalized', 'authz_pending', 'authorization', 'authz.requested'),
    ('canonicalized', 'rejected', 'execution', 'execution.rejected'),
    ('canonicalized', 'canceled', 'execution', 'execution.canceled'),
    ('confirmation_required', 'confirmed', 'confirmation', 'command.confirmation.satisfied'),
    ('confirmation_required', 'rejected', 'confirmation', 'execution.rejected'),
    ('confirmation_required', 'canceled', 'execution', 'execution.canceled'),
    ('confirmed', 'authz_pending', 'authorization', 'authz.requested'),
    ('confirmed', 'canceled', 'execution', 'execution.canceled'),
    ('authz_pending', 'authorized', 'authorization', 'authz.decided'),
    ('authz_pending', 'rejected', 'authorization', 'execution.rejected'),
    ('authz_pending', 'canceled', 'execution', 'execution.canceled'),
    ('authorized', 'started', 'execution', 'execution.started'),
    ('authorized', 'canceled', 'execution', 'execution.canceled'),
    ('started', 'executed', 'execution', 'execution.executed'),
    ('started', 'failed', 'execution', 'execution.failed'),
    ('executed', 'compensated', 'compensation', 'compensation.compensated'),
    ('failed', 'compensated', 'compensation', 'compensation.compensated');

-- Context: the transition table and the expiry check.
CREATE FUNCTION bench_naive.context_check() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF OLD.status IN ('expired', 'closed') THEN
        RAISE EXCEPTION 'context % is %', OLD.context_id, OLD.status USING ERRCODE = '55000';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status THEN
        IF NOT EXISTS (SELECT 1 FROM bench_naive.context_transition t
                        WHERE t.from_status = OLD.status AND t.to_status = NEW.status) THEN
            RAISE EXCEPTION 'context % cannot go from % to %', OLD.context_id, OLD.status, NEW.status
                USING ERRCODE = '55000';
        END IF;
    END IF;
    IF OLD.expires_at <= now() AND NEW.status <> 'expired' THEN
        RAISE EXCEPTION 'context % has expired', OLD.context_id USING ERRCODE = '55000';
    END IF;
    NEW.updated_at := now();
    NEW.version := OLD.version + 1;
    RETURN NEW;
END
$$;
CREATE TRIGGER context_check BEFORE UPDATE ON bench_naive.context
    FOR EACH ROW EXECUTE FUNCTION bench_naive.context_check();

-- Command: formed only from a live, unexpired context; the transition table; confirmed and
-- authorized before started.
CREATE FUNCTION bench_naive.command_check() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    c record;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT status, expires_at INTO c FROM bench_naive.context x
         WHERE x.tenant_id = NEW.tenant_id AND x.context_id = NEW.context_id;
        IF NOT FOUND OR c.status NOT IN ('active', 'pending') OR c.expires_at <= now() THEN
            RAISE EXCEPTION 'no usable context for command %', NEW.idempotency_key USING ERRCODE = '55000';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT EXISTS (SELECT 1 FROM bench_naive.command_transition t
                        WHERE t.from_state = OLD.state AND t.to_state = NEW.state) THEN
            RAISE EXCEPTION 'command % cannot go from % to %', OLD.command_id, OLD.state, NEW.state
                USING ERRCODE = '55000';
        END IF;
        IF NEW.state = 'started' AND (NEW.authorized_at IS NULL
                                      OR (NEW.mutating AND NOT NEW.auto_confirm AND NEW.confirmed_at IS NULL)) THEN
            RAISE EXCEPTION 'command % is not confirmed and authorized', OLD.command_id USING ERRCODE = '55000';
        END IF;
        NEW.last_transition_at := now();
    END IF;
    NEW.updated_at := now();
    NEW.version := OLD.version + 1;
    RETURN NEW;
END
$$;
CREATE TRIGGER command_check BEFORE INSERT OR UPDATE ON bench_naive.command
    FOR EACH ROW EXECUTE FUNCTION bench_naive.command_check();

-- Evidence: one row per state change (two for a command inserted past canonicalized).
CREATE FUNCTION bench_naive.command_evidence() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_seq int;
    v_from text;
    t record;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.state IS NOT DISTINCT FROM OLD.state THEN
            RETURN NULL;
        END IF;
        v_from := OLD.state;
        SELECT coalesce(max(e.seq), 0) INTO v_seq FROM bench_naive.evidence e
         WHERE e.tenant_id = NEW.tenant_id AND e.command_id = NEW.command_id;
    ELSE
        v_seq := 0;
        v_from := 'received';
        IF NEW.state <> 'canonicalized' THEN
            v_seq := 1;
            INSERT INTO bench_naive.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type,
                                              from_state, to_state, message_ids, context_ref, hash)
            VALUES (NEW.tenant_id, NEW.conversation_id, NEW.command_id, 1, 'accepted', 'command.accepted',
                    'received', 'canonicalized', NEW.message_ids, NEW.context_ref, md5(NEW.command_id::text || '1'));
            v_from := 'canonicalized';
        END IF;
    END IF;
    SELECT stage, event_type INTO t FROM bench_naive.command_transition x
     WHERE x.from_state = v_from AND x.to_state = NEW.state;
    INSERT INTO bench_naive.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type, from_state,
                                      to_state, message_ids, context_ref, reason_code, detail, hash)
    VALUES (NEW.tenant_id, NEW.conversation_id, NEW.command_id, v_seq + 1, t.stage, t.event_type, v_from,
            NEW.state, NEW.message_ids, NEW.context_ref, NEW.reason_code, NEW.detail,
            md5(NEW.command_id::text || (v_seq + 1)::text));
    RETURN NULL;
END
$$;
CREATE TRIGGER command_evidence AFTER INSERT OR UPDATE ON bench_naive.command
    FOR EACH ROW EXECUTE FUNCTION bench_naive.command_evidence();

-- Documents: absent or expired is NULL.
CREATE FUNCTION bench_naive.doc_get(tenant_id text, session_id text, namespace text) RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    v jsonb;
BEGIN
    IF tenant_id IS NULL OR session_id IS NULL OR namespace IS NULL THEN
        RAISE EXCEPTION 'tenant, session and namespace are required' USING ERRCODE = '22023';
    END IF;
    SELECT d.payload INTO v FROM bench_naive.document d
     WHERE d.tenant_id = doc_get.tenant_id AND d.session_id = doc_get.session_id
       AND d.namespace = doc_get.namespace AND d.expires_at > now();
    RETURN v;
END
$$;

-- Documents: merge the payload's keys, reset the TTL; an expired document starts from empty.
CREATE FUNCTION bench_naive.doc_put(tenant_id text, session_id text, namespace text, payload jsonb,
                                    ttl_seconds int) RETURNS text
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    IF tenant_id IS NULL OR session_id IS NULL OR namespace IS NULL THEN
        RAISE EXCEPTION 'tenant, session and namespace are required' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(payload) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'payload must be a JSON object' USING ERRCODE = '22023';
    END IF;
    IF ttl_seconds IS NULL OR ttl_seconds <= 0 THEN
        RAISE EXCEPTION 'ttl_seconds must be positive' USING ERRCODE = '22023';
    END IF;
    INSERT INTO bench_naive.document AS d (tenant_id, session_id, namespace, payload, expires_at)
    VALUES (doc_put.tenant_id, doc_put.session_id, doc_put.namespace, doc_put.payload,
            now() + make_interval(secs => doc_put.ttl_seconds))
    ON CONFLICT (tenant_id, session_id, namespace) DO UPDATE
        SET payload = CASE WHEN d.expires_at <= now() THEN excluded.payload ELSE d.payload || excluded.payload END,
            created_at = CASE WHEN d.expires_at <= now() THEN now() ELSE d.created_at END,
            updated_at = now(),
            expires_at = excluded.expires_at;
    RETURN doc_put.session_id || ':' || doc_put.namespace;
END
$$;

GRANT SELECT ON bench_naive.context_transition, bench_naive.command_transition TO :"role";
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA bench_naive TO :"role";
