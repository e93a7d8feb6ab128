\i sql/include/helpers.sql
-- The context lifecycle: every (from, to) pair, through cscp.context_transition and through a
-- direct UPDATE. Allowed pairs succeed; every other is refused with 55000 and changes nothing.
SET cscp.clock = '2026-03-01 10:00:00+00';

CREATE FUNCTION pg_temp.matrix(direct boolean)
RETURNS TABLE (from_status cscp.context_status, to_status cscp.context_status, allowed boolean,
               result text, status_after cscp.context_status, version_after bigint)
LANGUAGE plpgsql AS $$
DECLARE
    f cscp.context_status;
    t cscp.context_status;
    id uuid;
    v_before bigint;
BEGIN
    FOR f IN SELECT unnest(enum_range(NULL::cscp.context_status)) LOOP
        FOR t IN SELECT unnest(enum_range(NULL::cscp.context_status)) LOOP
            id := ctx_in(format('m-%s-%s-%s', direct, f, t), f);
            SELECT version INTO v_before FROM cscp.context c WHERE c.context_id = id;
            from_status := f;
            to_status := t;
            allowed := cscp.context_transition_allowed(f, t);
            IF direct THEN
                result := try(format('UPDATE cscp.context SET status = %L WHERE context_id = %L', t, id));
            ELSE
                result := try(format('SELECT cscp.context_transition(%L, %L, %L)', id, t, 'test'));
            END IF;
            SELECT c.status, c.version - v_before INTO status_after, version_after
              FROM cscp.context c WHERE c.context_id = id;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END
$$;

-- Through the function (a same-status "transition" is refused too).
SELECT * FROM pg_temp.matrix(false);
-- Through direct UPDATEs (an UPDATE that leaves a live status as it is is not a transition).
SELECT * FROM pg_temp.matrix(true);

-- The refusal as a user sees it.
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT cscp.context_transition(ctx_fixed('t', 'show-1', 'closed'), 'active');
SELECT cscp.context_transition(ctx_fixed('t', 'show-2', 'blocked'), 'pending');
SELECT ctx_fixed('t', 'show-3', 'expired') AS show3 \gset
UPDATE cscp.context SET status = 'active' WHERE context_id = :'show3';
\set VERBOSITY terse

-- Identity columns never change; reason and version are kept.
SELECT try(format('UPDATE cscp.context SET conversation_id = %L WHERE context_id = %L', 'other', ctx_in('ident-1', 'active')));
SELECT try(format('UPDATE cscp.context SET tenant_id = %L WHERE context_id = %L', 'u', ctx_in('ident-2', 'active')));
SELECT status, reason, version FROM cscp.context_transition(ctx_in('reason-1', 'pending'), 'active', 'answered');

-- One live context per (tenant, conversation, actor): open returns the live one.
SELECT (cscp.context_open('t', 'one', 'a')).context_id = (cscp.context_open('t', 'one', 'a')).context_id AS same_context;
SELECT try($$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('t', 'one', 'a', cscp.now() + interval '1 hour', interval '1 hour')$$);
-- A direct INSERT must start active.
SELECT try($$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, status, expires_at, ttl)
             VALUES ('t', 'two', 'a', 'pending', cscp.now() + interval '1 hour', interval '1 hour')$$);
-- After close, open starts a new one; context_get returns the new live one.
SELECT (cscp.context_transition((cscp.context_open('t', 'one', 'a')).context_id, 'closed')).status;
SELECT status, version FROM cscp.context_open('t', 'one', 'a');
SELECT status FROM cscp.context_get('t', 'one', 'a');
SELECT status, count(*) FROM cscp.context WHERE conversation_id = 'one' GROUP BY status ORDER BY status;
SELECT count(*) AS no_context FROM cscp.context_get('t', 'none', 'a');
