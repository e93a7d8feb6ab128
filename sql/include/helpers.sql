\set ECHO none
-- The helpers of the regression suites, included by each (\i sql/include/helpers.sql, from the
-- directory pg_regress runs in), so that any suite runs alone on a database holding only the
-- extension.  Idempotent: each suite includes it again, and it changes nothing already in place
-- (the key is set, the commands declared, only where they are not yet); quiet (ECHO none, the
-- results of its statements dropped), so that a suite's expected output shows only its two first
-- lines.
-- A fixed secret key, so that routing hashes (and the ids and partitions made of them) are the
-- same on every run: sha256('cscp regression key 25').
SELECT cscp.secret_key_set(sha256('cscp regression key 25'))
 WHERE NOT EXISTS (SELECT FROM cscp.secret_key k WHERE k.key = sha256('cscp regression key 25')) \g /dev/null
-- try(sql): 'ok', or the SQLSTATE, message and detail of the error sql raised (rolled back),
-- with random ids masked as <uuid>.
CREATE OR REPLACE FUNCTION public.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ' ' || regexp_replace(SQLERRM || coalesce(nullif(' | ' || detail, ' | '), ''),
        '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'g');
END
$$;

-- A fresh context of tenant 't' moved along allowed edges into status st.
CREATE OR REPLACE FUNCTION public.ctx_in(conv text, st cscp.context_status) RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    id uuid := (cscp.context_open('t', conv, 'actor')).context_id;
BEGIN
    IF st <> 'active' THEN
        PERFORM cscp.context_transition(id, st, 'setup');
    END IF;
    RETURN id;
END
$$;

-- A context with a known id (routed, so the trigger accepts it), for tests that show ids.
CREATE OR REPLACE FUNCTION public.ctx_fixed(tenant text, conv text, st cscp.context_status DEFAULT 'active')
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    id uuid := (lpad(to_hex(cscp.routing_conversation_hash(conv)), 8, '0') || '-0000-4000-8000-000000000001')::uuid;
BEGIN
    INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
    VALUES (tenant, id, conv, 'actor', cscp.now() + interval '30 minutes', interval '30 minutes');
    IF st <> 'active' THEN
        PERFORM cscp.context_transition(id, st, 'setup');
    END IF;
    RETURN id;
END
$$;

-- Commands are shown by their idempotency key, never by their random id.
CREATE OR REPLACE FUNCTION public.cmd_key(id uuid) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT c.idempotency_key FROM cscp.command c WHERE c.command_id = id
$$;

-- A JSON value with every command id in it replaced by cmd:<the command's key>.
CREATE OR REPLACE FUNCTION public.with_keys(value jsonb) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    s text := value::text;
    c record;
BEGIN
    FOR c IN SELECT command_id, idempotency_key FROM cscp.command
              WHERE strpos(s, command_id::text) > 0 LOOP
        s := replace(s, c.command_id::text, 'cmd:' || c.idempotency_key);
    END LOOP;
    RETURN s::jsonb;
END
$$;
-- A conversation's commands, contexts and evidence rows, oldest first, ids shown as keys.
CREATE OR REPLACE FUNCTION public.cmd_rows(conv text)
RETURNS TABLE(key text, state text, reason_code text, message_ids text[], detail jsonb)
LANGUAGE sql STABLE AS $$
    SELECT c.idempotency_key, c.state::text, c.reason_code, c.message_ids, public.with_keys(c.detail)
      FROM cscp.command c WHERE c.conversation_id = conv ORDER BY c.created_at, c.idempotency_key
$$;
CREATE OR REPLACE FUNCTION public.ctx_rows(conv text)
RETURNS TABLE(actor_id text, status text, reason text, slots jsonb)
LANGUAGE sql STABLE AS $$
    SELECT c.actor_id, c.status::text, c.reason, public.with_keys(c.slots)
      FROM cscp.context c WHERE c.conversation_id = conv ORDER BY c.created_at, c.actor_id, c.status
$$;
CREATE OR REPLACE FUNCTION public.ev_rows(conv text)
RETURNS TABLE(key text, seq int, event_type text, from_to text, decision text, reason_code text,
              message_ids text[], detail jsonb)
LANGUAGE sql STABLE AS $$
    SELECT public.cmd_key(e.command_id), e.seq, e.event_type,
           coalesce(e.from_state, '') || '->' || coalesce(e.to_state, ''),
           e.decision, e.reason_code, e.message_ids, public.with_keys(e.detail)
      FROM cscp.evidence e WHERE e.conversation_id = conv ORDER BY e.evidence_id
$$;

-- What the command tables hold: snap() remembers it, changes() says what differs since then
-- ('nothing', or per table the rows added, or 'changed' when rows were updated).
CREATE OR REPLACE FUNCTION public.cscp_tables(OUT tbl text, OUT n bigint, OUT digest text) RETURNS SETOF record
LANGUAGE sql STABLE AS $$
    SELECT 'answer', count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM cscp.answer x
    UNION ALL
    SELECT 'command', count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM cscp.command x
    UNION ALL
    SELECT 'command_retired', count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM cscp.command_retired x
    UNION ALL
    SELECT 'command_window', count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM cscp.command_window x
    UNION ALL
    SELECT 'context', count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM cscp.context x
    UNION ALL
    SELECT 'context_live', count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM cscp.context_live x
    UNION ALL
    SELECT 'context_retired', count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM cscp.context_retired x
    UNION ALL
    SELECT 'evidence', count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM cscp.evidence x
    UNION ALL
    SELECT 'frame', count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM cscp.frame x
$$;
CREATE OR REPLACE FUNCTION public.snap() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('pg_temp.cscp_snapshot') IS NULL THEN
        CREATE TEMP TABLE cscp_snapshot (tbl text, n bigint, digest text);
    END IF;
    DELETE FROM pg_temp.cscp_snapshot;
    INSERT INTO pg_temp.cscp_snapshot SELECT * FROM public.cscp_tables();
END
$$;
CREATE OR REPLACE FUNCTION public.changes() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    SELECT coalesce(string_agg(t.tbl || CASE WHEN t.n <> s.n THEN ' ' || to_char(t.n - s.n, 'SG999999FM')
                                             ELSE ' changed' END, ', ' ORDER BY t.tbl), 'nothing')
      INTO r
      FROM public.cscp_tables() t JOIN pg_temp.cscp_snapshot s USING (tbl)
     WHERE t.n <> s.n OR t.digest <> s.digest;
    RETURN r;
END
$$;


-- step(command_id, to_state, reason): one step of a command as the tests drive it: confirmed
-- through the user's answer (cscp.confirm, by message 'yes:' || its idempotency key: only the
-- answer confirms), any other state through cscp.command_transition.
CREATE OR REPLACE FUNCTION public.step(id uuid, to_state cscp.command_state, reason text DEFAULT NULL)
RETURNS TABLE(accepted boolean, state cscp.command_state, reason_code text) LANGUAGE plpgsql AS $$
DECLARE
    c cscp.command;
    outcome text;
BEGIN
    IF to_state <> 'confirmed' THEN
        RETURN QUERY SELECT * FROM cscp.command_transition(id, to_state, reason);
        RETURN;
    END IF;
    SELECT * INTO c FROM cscp.command x WHERE x.command_id = id;
    SELECT a.outcome INTO outcome
      FROM cscp.confirm(c.tenant_id, c.conversation_id, c.actor_id, 'yes:' || c.idempotency_key, true) a;
    SELECT * INTO c FROM cscp.command x WHERE x.command_id = id;
    RETURN QUERY SELECT outcome = 'confirmed', c.state, CASE WHEN outcome = 'confirmed' THEN c.reason_code ELSE outcome END;
END
$$;
-- The read-only commands the suites submit, declared in the defaults of tenant '*' (any other
-- command is mutating under the default policy key undeclared_commands).
SELECT cscp.command_declare('*', n, false)
  FROM unnest(ARRAY['lookup', 'report', 'track_order', 'balance', 'read']) n
 WHERE NOT EXISTS (SELECT FROM cscp.command_registry r
                    WHERE r.tenant_id = '*' AND r.command_name = n AND NOT r.mutating
                      AND NOT r.needs_approval AND r.risk = 'normal') \g /dev/null

-- settle(): what earlier tests left behind made inert for a test that counts what the sweep does
-- to the whole database: every live context expired and everything past retention purged, by
-- sweeps at clocks far past any test's (rows retired then are never due at a test's own clock).
-- The session's clock is put back.
CREATE OR REPLACE FUNCTION public.settle() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    saved text := current_setting('cscp.clock', true);
    at timestamptz;
    n int;
BEGIN
    FOREACH at IN ARRAY ARRAY['2100-01-01 00:00:00+00', '2400-01-01 00:00:00+00']::timestamptz[] LOOP
        PERFORM set_config('cscp.clock', at::text, false);
        FOR i IN 1..100 LOOP
            SELECT count(*) INTO n FROM jsonb_each_text(cscp.sweep()) s WHERE s.value <> '0';
            EXIT WHEN n = 0;
        END LOOP;
    END LOOP;
    PERFORM set_config('cscp.clock', coalesce(saved, ''), false);
    RETURN true;
END
$$;
\set ECHO all
