-- StateBench replay through cscp's functions (test/statebench/run.sh loads this into a throwaway
-- database).  One timeline is one subject of a tenant; its session id is the timeline id.
--
-- For each timeline, in order: authority ranks of the data's authorities, the identity, the
-- environment and the clock (initial_state.environment.now, then each event's ts, as UTC), the
-- initial persistent facts and working set, then the events: state_write and supersession
-- writes go through cscp.fact_write (persistent_facts), cscp.env_set (environment) or
-- cscp.ws_put (working_set); every query assembles a context with cscp.build_context and is
-- scored: a resurrection when the context contains a must_not_mention phrase, "all mentioned"
-- when it contains every must_mention phrase.  Conversation turns are not replayed: cscp keeps
-- only the state layers, and the timelines' writes are what a state store is given.
--
-- Write ids repeat in the data (W-AUTO), so a write whose id the subject already has gets
-- "<id>#<n>"; a supersedes or depends_on naming an original id is mapped to the latest fact
-- written under it; anything else in supersedes is passed on as a key, for cscp to resolve.
-- A write cscp refuses (an error) is recorded in statebench.refusal and the replay goes on.
--
-- Mode "markers" additionally maps the text markers some tracks use to cscp scopes (a marked
-- working-set item becomes a fact of that scope):
--   [SCOPE: draft ...]                 -> scope draft
--   [SCOPE: Alice's session]           -> scope session, scope_id the label (not this session)
--   [SCOPE: what-if, sandbox, ...]     -> scope hypothetical
--   [RESTRICTED: ...]                  -> scope task, scope_id 'restricted' (no query runs in it)
--   [INVALIDATED ...] (leading)        -> scope draft (kept in the chain, never told)
-- and, because supersession by key is within one scope, resolves a key to the valid fact's id
-- itself when a marker moved the new fact to another scope.  Mode "raw" maps nothing.
--
-- A context is scored without its section headings ("## Facts" ...): they are cscp's fixed
-- template, not state, and a phrase such as "#" would otherwise match every context.
--
-- Beside cscp, the replay keeps the data's own state (statebench.item), computed from the data's
-- explicit fields and documented markers only, never from cscp nor from a query's ground truth:
-- an item is invalid when a later write's supersedes names its id or its key, when a later
-- environment write sets its key, when the data marks it is_valid false or superseded_by, when its
-- value starts with [INVALIDATED, or when it depends_on an invalid item; it is out of the query's
-- scope when its scope is not global, user or session, or its value carries [SCOPE: ...] or
-- [RESTRICTED: ...].  Each query then records
--   told_invalid: the facts the context told that the data calls invalid or out of scope, and
--   leak_valid:   a resurrection whose every leaked phrase (each leaked alternative of a|b) also
--                 occurs in the data's valid state (identity, environment, the valid in-scope
--                 facts and working-set items): the data itself leaves the phrase valid, so only
--                 reasoning over the conversation could withhold it (kind "needs reasoning").
-- A resurrection that is not leak_valid is one the data's own fields call invalid: a store or
-- harness fault.

CREATE SCHEMA statebench;
CREATE TABLE statebench.raw (line text NOT NULL);
CREATE TABLE statebench.result (
    mode text, timeline_id text, track text, query_no int, prompt text,
    resurrection boolean, all_mentioned boolean, leaked text[], missing text[],
    stale_told int, context text, fact_ids jsonb, told_invalid int, leak_valid boolean);
-- context and fact_ids: what build_context answered, kept to explain a resurrection.
CREATE TABLE statebench.item (
    mode text, timeline_id text, seq serial, layer text, id text, key text, txt text,
    fact_id text, depends_on text[], invalid boolean NOT NULL, out_of_scope boolean NOT NULL);
CREATE INDEX ON statebench.item (mode, timeline_id);
CREATE TABLE statebench.refusal (
    mode text, timeline_id text, track text, write_id text, sqlstate text, message text);

-- Whether txt mentions phrase: case-insensitive substring; 'a|b' either; 'regex:' a regular expression.
CREATE FUNCTION statebench.mentions(txt text, phrase text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN phrase LIKE 'regex:%' THEN txt ~* substr(phrase, 7)
                ELSE EXISTS (SELECT 1 FROM unnest(string_to_array(phrase, '|')) p
                              WHERE btrim(p) <> '' AND strpos(lower(txt), lower(btrim(p))) > 0) END
$$;

-- Whether every alternative of phrase that txt mentions is also mentioned by valid (for 'regex:',
-- whether valid matches it too): the leak is explained by the data's valid state.
CREATE FUNCTION statebench.explained(txt text, valid text, phrase text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN phrase LIKE 'regex:%' THEN NOT statebench.mentions(txt, phrase) OR statebench.mentions(valid, phrase)
                ELSE NOT EXISTS (SELECT 1 FROM unnest(string_to_array(phrase, '|')) p
                                  WHERE statebench.mentions(txt, p) AND NOT statebench.mentions(valid, p)) END
$$;

-- Record one item of the data's own state (see the header): w is the write as the data gives it,
-- fact_id the cscp fact written for it (NULL when none).  Invalidates first what w supersedes.
CREATE FUNCTION statebench.observe(w jsonb, mode text, subject text, fact_id text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    layer text := coalesce(w ->> 'layer', 'persistent_facts');
    value text := CASE jsonb_typeof(w -> 'value') WHEN 'string' THEN w ->> 'value' ELSE (w -> 'value')::text END;
BEGIN
    IF w ->> 'supersedes' IS NOT NULL THEN
        UPDATE statebench.item i SET invalid = true
         WHERE i.mode = observe.mode AND i.timeline_id = subject AND i.layer IN ('persistent_facts', 'working_set')
           AND (i.key = w ->> 'supersedes'
                OR i.seq = (SELECT max(j.seq) FROM statebench.item j      -- ids repeat: the latest
                             WHERE j.mode = observe.mode AND j.timeline_id = subject AND j.id = w ->> 'supersedes'));
    END IF;
    IF layer = 'environment' THEN
        UPDATE statebench.item i SET invalid = true
         WHERE i.mode = observe.mode AND i.timeline_id = subject AND i.layer = 'environment' AND i.key = w ->> 'key';
    END IF;
    INSERT INTO statebench.item (mode, timeline_id, layer, id, key, txt, fact_id, depends_on, invalid, out_of_scope)
    VALUES (mode, subject, layer, w ->> 'id', w ->> 'key',
            CASE WHEN layer = 'working_set' THEN value ELSE (w ->> 'key') || ': ' || value END, fact_id,
            ARRAY(SELECT jsonb_array_elements_text(coalesce(w -> 'depends_on', '[]'))),
            coalesce(value ~* '^\s*\[INVALIDATED' OR (w ->> 'is_valid')::boolean = false
                     OR w ->> 'superseded_by' IS NOT NULL, false),
            coalesce(w ->> 'scope', 'global') NOT IN ('global', 'user', 'session')
            OR coalesce(value ~* '\[(SCOPE|RESTRICTED)\s*:', false));
END
$$;

-- The data's own state of a timeline now: each item, and whether it is valid and in scope (an
-- item depending on an invalid or out-of-scope one is invalid too).
CREATE FUNCTION statebench.data_state(p_mode text, subject text, OUT fact_id text, OUT txt text, OUT valid boolean)
RETURNS SETOF record
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE i AS (
        SELECT * FROM statebench.item WHERE mode = p_mode AND timeline_id = subject
    ), bad AS (
        SELECT i.seq, i.id FROM i WHERE i.invalid OR i.out_of_scope
        UNION
        SELECT i.seq, i.id FROM i JOIN bad ON bad.id = ANY (i.depends_on) AND bad.seq < i.seq
    )
    SELECT i.fact_id, i.txt, i.seq NOT IN (SELECT seq FROM bad)
      FROM i
$$;

-- The scope a marker in the value maps to (mode markers), or NULL: [SCOPE: <label>] is a draft
-- when the label says draft, another session when it names someone's session, else hypothetical
-- (what-if, sandbox, estimation, scenario planning, brainstorming); [RESTRICTED: ...] a task no
-- query runs in; a leading [INVALIDATED ...] a draft.
CREATE FUNCTION statebench.marker_scope(value text, OUT scope text, OUT scope_id text)
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN label ~* 'draft' THEN 'draft'
                WHEN label ~* '''s session' THEN 'session'
                WHEN label IS NOT NULL THEN 'hypothetical'
                WHEN value ~* '\[RESTRICTED' THEN 'task'
                WHEN value ~* '^\s*\[INVALIDATED' THEN 'draft' END,
           CASE WHEN label ~* '''s session' THEN label
                WHEN label IS NULL AND value ~* '\[RESTRICTED' THEN 'restricted' END
      FROM (SELECT substring(value FROM '\[SCOPE:\s*([^]]*)\]') AS label) l
$$;

-- Pin cscp's clock to a StateBench timestamp (no zone: UTC).
CREATE FUNCTION statebench.clock(ts text) RETURNS void
LANGUAGE sql AS $$
    SELECT set_config('cscp.clock', CASE WHEN ts ~ '(Z|[+-]\d\d(:?\d\d)?)$' THEN ts ELSE ts || '+00' END, false)
$$;

-- Replay one timeline in mode 'raw' or 'markers' under tenant; results go to the tables above.
CREATE FUNCTION statebench.replay(t jsonb, mode text, tenant text, budget int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    subject text := t ->> 'id';
    session text := t ->> 'id';
    track text := t ->> 'track';
    env jsonb := coalesce(t -> 'initial_state' -> 'environment', '{}');
    ids jsonb := '{}';          -- original id -> the fact id written for it last
    used int := 0;
    f jsonb;
    e jsonb;
    w jsonb;
    n int := 0;
    q int := 0;
    ctx text;
    r jsonb;
    stale int;
    gt jsonb;
    leaked text[];
    missing text[];
    valid_txt text;
    told_invalid int;
BEGIN
    IF t -> 'initial_state' -> 'environment' ? 'now' THEN
        PERFORM statebench.clock(t -> 'initial_state' -> 'environment' ->> 'now');
    END IF;
    IF jsonb_typeof(t -> 'initial_state' -> 'identity_role') = 'object' THEN
        -- The identity's authority (a job title such as "Project Manager") is ranked as guest when
        -- the tenant does not rank it: cscp refuses a fact written under an unranked authority.
        IF t -> 'initial_state' -> 'identity_role' ->> 'authority' IS NOT NULL
           AND cscp.authority_rank(tenant, t -> 'initial_state' -> 'identity_role' ->> 'authority') IS NULL THEN
            PERFORM cscp.authority_set(tenant, t -> 'initial_state' -> 'identity_role' ->> 'authority', 100);
        END IF;
        PERFORM cscp.identity_set(tenant, subject, jsonb_strip_nulls(t -> 'initial_state' -> 'identity_role'));
        PERFORM statebench.observe(jsonb_build_object('layer', 'identity', 'key', x.key, 'value', x.value), mode, subject, NULL)
           FROM jsonb_each(jsonb_strip_nulls(t -> 'initial_state' -> 'identity_role')) x;
    END IF;
    PERFORM cscp.env_set(tenant, session, env);
    PERFORM statebench.observe(jsonb_build_object('layer', 'environment', 'key', x.key, 'value', x.value), mode, subject, NULL)
       FROM jsonb_each(env) x;

    -- Initial facts, then the events' writes: one path.
    FOR f IN
        SELECT x || jsonb_build_object('layer', 'persistent_facts')
          FROM jsonb_array_elements(coalesce(t -> 'initial_state' -> 'persistent_facts', '[]')) x
    LOOP
        ids := statebench.write(f, mode, tenant, subject, session, track, ids, env);
    END LOOP;
    FOR w IN SELECT x FROM jsonb_array_elements(coalesce(t -> 'initial_state' -> 'working_set', '[]')) x
    LOOP
        n := n + 1;
        ids := statebench.write(jsonb_build_object('id', 'ws-' || n, 'layer', 'working_set',
                                                    'key', 'ws-' || n, 'value', w -> 'content',
                                                    'source', '{"type": "conversation", "authority": "peer"}'),
                                 mode, tenant, subject, session, track, ids, env);
    END LOOP;

    FOR e IN SELECT x FROM jsonb_array_elements(coalesce(t -> 'events', '[]')) x
    LOOP
        IF e ? 'ts' THEN
            PERFORM statebench.clock(e ->> 'ts');
        END IF;
        IF e ->> 'type' IN ('state_write', 'supersession') THEN
            FOR w IN SELECT x FROM jsonb_array_elements(coalesce(e -> 'writes', '[]')) x
            LOOP
                IF w ->> 'layer' = 'environment' THEN
                    env := env || jsonb_build_object(w ->> 'key', w -> 'value');
                END IF;
                ids := statebench.write(w, mode, tenant, subject, session, track, ids, env);
            END LOOP;
        ELSIF e ->> 'type' = 'query' THEN
            q := q + 1;
            r := cscp.build_context(tenant, subject, session, e ->> 'prompt', budget);
            ctx := regexp_replace(r ->> 'text', '^## [^\n]*\n?', '', 'gn');
            -- What the store promises: no superseded, hypothetical or draft fact is ever told.
            SELECT count(*) INTO stale FROM cscp.fact x
             WHERE x.tenant_id = tenant AND x.subject_id = subject
               AND x.fact_id IN (SELECT jsonb_array_elements_text(r -> 'fact_ids'))
               AND (NOT x.is_valid OR x.scope IN ('hypothetical', 'draft'));
            gt := e -> 'ground_truth';
            SELECT coalesce(array_agg(p), '{}') INTO leaked
              FROM jsonb_array_elements_text(coalesce(gt -> 'must_not_mention', '[]')) p
             WHERE statebench.mentions(ctx, p);
            SELECT coalesce(array_agg(p), '{}') INTO missing
              FROM jsonb_array_elements_text(coalesce(gt -> 'must_mention', '[]')) p
             WHERE NOT statebench.mentions(ctx, p);
            -- The data's own verdict (see the header): invalid facts told, and whether every leak
            -- is one the data's valid state makes too.
            SELECT coalesce(string_agg(d.txt, E'\n') FILTER (WHERE d.valid), ''),
                   count(*) FILTER (WHERE NOT d.valid
                                      AND d.fact_id IN (SELECT jsonb_array_elements_text(r -> 'fact_ids')))
              INTO valid_txt, told_invalid
              FROM statebench.data_state(mode, subject) d;
            INSERT INTO statebench.result VALUES (mode, subject, track, q, e ->> 'prompt',
                                                  cardinality(leaked) > 0, cardinality(missing) = 0,
                                                  leaked, missing, stale, r ->> 'text', r -> 'fact_ids', told_invalid,
                                                  cardinality(leaked) > 0
                                                  AND NOT EXISTS (SELECT 1 FROM unnest(leaked) p
                                                                   WHERE NOT statebench.explained(ctx, valid_txt, p)));
        END IF;
    END LOOP;
END
$$;

-- One write of any layer; returns the id map, updated.  A refused write is recorded, not raised.
CREATE FUNCTION statebench.write(w jsonb, mode text, tenant text, subject text, session text,
                                 track text, ids jsonb, env jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    layer text := coalesce(w ->> 'layer', 'persistent_facts');
    orig text := coalesce(w ->> 'id', 'write');
    v_id text := orig;
    value text := CASE jsonb_typeof(w -> 'value') WHEN 'string' THEN w ->> 'value' ELSE (w -> 'value')::text END;
    scope text := coalesce(w ->> 'scope', 'global');
    scope_id text;
    marked boolean := false;
    m_scope text;
    m_scope_id text;
    sup text := w ->> 'supersedes';
    deps text[];
    k int := 1;
    state text;
    msg text;
BEGIN
    IF mode = 'markers' THEN
        SELECT m.scope IS NOT NULL, m.scope, m.scope_id INTO marked, m_scope, m_scope_id
          FROM statebench.marker_scope(value) m;
        IF marked THEN
            scope := m_scope;
            scope_id := m_scope_id;
            IF layer = 'working_set' THEN
                layer := 'persistent_facts';
            END IF;
        END IF;
    END IF;

    BEGIN
        IF layer = 'environment' THEN
            PERFORM cscp.env_set(tenant, session, env);
        ELSIF layer = 'working_set' THEN
            PERFORM cscp.ws_put(tenant, session, w ->> 'key', to_jsonb(value), interval '1 day');
        ELSE
            WHILE EXISTS (SELECT 1 FROM cscp.fact x WHERE x.tenant_id = tenant AND x.subject_id = subject
                                                      AND x.fact_id = v_id) LOOP
                k := k + 1;
                v_id := orig || '#' || k;
            END LOOP;
            IF sup IS NOT NULL AND ids ? sup THEN
                sup := ids ->> sup;
            ELSIF sup IS NOT NULL AND marked THEN
                -- The marker moved this fact to another scope: resolve the key here.
                SELECT min(x.fact_id) INTO sup FROM cscp.fact x
                 WHERE x.tenant_id = tenant AND x.subject_id = subject AND x.key = sup AND x.is_valid
                HAVING count(*) = 1;
                sup := coalesce(sup, w ->> 'supersedes');
            END IF;
            SELECT coalesce(array_agg(coalesce(ids ->> d, d)), '{}') INTO deps
              FROM jsonb_array_elements_text(coalesce(w -> 'depends_on', '[]')) d;
            PERFORM cscp.fact_write(tenant, subject, v_id, w ->> 'key', to_jsonb(value),
                                    jsonb_strip_nulls(jsonb_build_object(
                                        'type', coalesce(w -> 'source' ->> 'type', 'conversation'),
                                        'authority', w -> 'source' ->> 'authority')),
                                    sup, scope, scope_id, deps,
                                    coalesce((w ->> 'is_constraint')::boolean, false),
                                    CASE WHEN coalesce((w ->> 'is_constraint')::boolean, false)
                                         THEN w ->> 'constraint_type' END);
            ids := ids || jsonb_build_object(orig, v_id);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
        INSERT INTO statebench.refusal VALUES (mode, subject, track, orig, state, msg);
    END;
    PERFORM statebench.observe(w, mode, subject, CASE WHEN layer = 'persistent_facts' THEN v_id END);
    RETURN ids;
END
$$;

-- Replay every loaded timeline in both modes.
CREATE FUNCTION statebench.replay_all(budget int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    m text;
    n bigint := 0;
BEGIN
    FOREACH m IN ARRAY ARRAY['raw', 'markers'] LOOP
        PERFORM cscp.authority_set('sb-' || m, a.name, a.rank)
           FROM (VALUES ('system', 350), ('executive', 350), ('peer', 200), ('subordinate', 150)) a(name, rank);
        FOR r IN SELECT line::jsonb AS t FROM statebench.raw WHERE btrim(line) <> '' LOOP
            PERFORM statebench.replay(r.t, m, 'sb-' || m, budget);
            n := n + 1;
        END LOOP;
    END LOOP;
    RETURN n;
END
$$;
