-- evidence.sql: the evidence trail of commands (RFC-WF-0018 section IX).
--
-- Append-only and hash chained per command (src/command/evidence.c).  Rows are written by the command
-- trigger, one per transition, and by cscp._evidence_refusal for refused attempts, both with the
-- table owner's rights: application roles may read their tenant's rows and nothing else.

-- A time-ordered id for evidence and inspections, not a counter shared by every tenant (whose
-- gaps would show each tenant how many rows the others write): microseconds since 2020 in the
-- upper 51 bits, the writing backend's slot in the lower 12 (src/command/evidence.c).
CREATE FUNCTION cscp._row_id() RETURNS bigint
    AS 'MODULE_PATHNAME', 'cscp_row_id_sql' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION cscp._row_id() IS
  'Internal: a new id of an evidence or inspection row: microseconds since 2020 and the backend''s slot, increasing per backend';

CREATE TABLE cscp.evidence (
    tenant_id        text        NOT NULL,
    evidence_id      bigint      NOT NULL DEFAULT cscp._row_id(),
    conversation_id  text        NOT NULL,
    command_id       uuid,
    seq              int         NOT NULL,   -- from 1; evidence_verify reports any other start
    stage            text        NOT NULL,
    event_type       text        NOT NULL,
    from_state       text,
    to_state         text,
    message_ids      text[],
    context_ref      jsonb,
    decision         text,
    reason_code      text,
    detail           jsonb,
    created_at       timestamptz NOT NULL,
    prev_hash        text,
    hash             text        NOT NULL,
    PRIMARY KEY (tenant_id, evidence_id)
);
COMMENT ON TABLE cscp.evidence IS
  'Evidence trail: one row per command transition or refused attempt; append-only, hash chained per command';

-- The chain of a command, in order; also refuses a fork (two rows with one seq).
CREATE UNIQUE INDEX evidence_chain_key ON cscp.evidence (tenant_id, command_id, seq);
CREATE INDEX evidence_conversation_idx ON cscp.evidence (tenant_id, conversation_id, evidence_id);
CREATE INDEX evidence_age_idx ON cscp.evidence (created_at);

CREATE FUNCTION cscp.evidence_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_evidence_guard' LANGUAGE C;
COMMENT ON FUNCTION cscp.evidence_guard() IS
  'Trigger: evidence is never updated or truncated, and deleted only past its retention_evidence';
CREATE TRIGGER evidence_guard BEFORE UPDATE OR DELETE ON cscp.evidence
    FOR EACH ROW EXECUTE FUNCTION cscp.evidence_guard();
CREATE TRIGGER evidence_no_truncate BEFORE TRUNCATE ON cscp.evidence
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.evidence_guard();

CREATE FUNCTION cscp.evidence_hash(e cscp.evidence) RETURNS text
    AS 'MODULE_PATHNAME', 'cscp_evidence_hash_sql' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cscp.evidence_hash(cscp.evidence) IS
  'The hash an evidence row must carry, recomputed from its fields and prev_hash';

CREATE FUNCTION cscp._evidence_refusal(tenant_id text, conversation_id text, command_id uuid,
                                       to_state text, reason_code text, message_ids text[],
                                       context_ref jsonb, detail jsonb) RETURNS void
    AS 'MODULE_PATHNAME', 'cscp_evidence_refusal' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp._evidence_refusal(text, text, uuid, text, text, text[], jsonb, jsonb) IS
  'Internal: record a refused attempt (invalid_transition_attempt) on a command the caller can see';

-- Raise 22023 unless command_id (when given) is a command of the tenant the caller can see.
CREATE FUNCTION cscp.check_command(tenant_id text, command_id uuid) RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF command_id IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM cscp.command x WHERE x.tenant_id = $1 AND x.command_id = $2) THEN
        RAISE EXCEPTION 'command % does not exist', command_id
            USING ERRCODE = '22023',
                  HINT = 'Check the id, and that cscp.tenant_id names the command''s tenant.';
    END IF;
END
$$;
COMMENT ON FUNCTION cscp.check_command(text, uuid) IS
  'Raise 22023 unless command_id (when given) is a command of the tenant the caller can see';

-- The broken links of evidence chains: of one tenant (tenant_id given), of every tenant
-- (tenant_id NULL), or of one command (command_id given).  The one chain verifier: both
-- cscp.evidence_verify (for a tenant, with the caller's rights) and cscp.check_invariants (for
-- operators, every tenant) read it.  A row's problem "chain ends in state ..." means the
-- command's state is not the last transition its evidence records; every other problem is a
-- broken chain.
CREATE FUNCTION cscp.evidence_problems(tenant_id text, command_id uuid)
RETURNS TABLE(tenant_id text, command_id uuid, seq int, evidence_id bigint, problem text)
LANGUAGE sql STABLE
AS $$
    WITH chain AS (
        SELECT e.tenant_id, e.command_id, e.seq, e.evidence_id, e.hash, e.prev_hash, e.event_type,
               e.to_state, cscp.evidence_hash(e) AS recomputed,
               lag(e.seq) OVER w AS prev_seq,
               lag(e.hash) OVER w AS prev_row_hash
          FROM (-- One branch per form of the call, so that each reads through its index.
                SELECT * FROM cscp.evidence x WHERE x.tenant_id = $1 AND x.command_id = $2
                UNION ALL
                SELECT * FROM cscp.evidence x WHERE x.tenant_id = $1 AND $2 IS NULL
                UNION ALL
                SELECT * FROM cscp.evidence x WHERE $1 IS NULL AND $2 IS NULL) e
        WINDOW w AS (PARTITION BY e.tenant_id, e.command_id ORDER BY e.seq)
    ), last_transition AS (
        -- The state each chain ends in: its last row that records a transition.
        SELECT DISTINCT ON (c.tenant_id, c.command_id) c.tenant_id, c.command_id, c.to_state
          FROM chain c
         WHERE c.command_id IS NOT NULL AND c.event_type <> 'invalid_transition_attempt'
         ORDER BY c.tenant_id, c.command_id, c.seq DESC
    )
    SELECT c.tenant_id, c.command_id, c.seq, c.evidence_id,
           'row altered: its hash does not match its content'::text AS problem
      FROM chain c WHERE c.hash IS DISTINCT FROM c.recomputed
    UNION ALL
    SELECT c.tenant_id, c.command_id, c.seq, c.evidence_id,
           format('row missing: seq %s follows seq %s', c.seq, coalesce(c.prev_seq, 0))
      FROM chain c
     WHERE c.command_id IS NOT NULL AND c.seq <> coalesce(c.prev_seq, 0) + 1
    UNION ALL
    SELECT c.tenant_id, c.command_id, c.seq, c.evidence_id,
           'broken link: prev_hash is not the hash of the row before'
      FROM chain c
     WHERE c.command_id IS NOT NULL AND c.seq = coalesce(c.prev_seq, 0) + 1
       AND c.prev_hash IS DISTINCT FROM c.prev_row_hash
    UNION ALL
    SELECT c.tenant_id, c.command_id, c.seq, c.evidence_id,
           'broken link: a row without a command must stand alone'
      FROM chain c
     WHERE c.command_id IS NULL AND (c.seq <> 1 OR c.prev_hash IS NOT NULL)
    UNION ALL
    -- The last transition recorded must be the command's state (rows cut off the end).
    SELECT m.tenant_id, m.command_id, NULL::int, NULL::bigint,
           format('chain ends in state %s but the command is %s',
                  coalesce(l.to_state, 'nothing'), m.state)
      FROM cscp.command m
      LEFT JOIN last_transition l ON l.tenant_id = m.tenant_id AND l.command_id = m.command_id
     WHERE ($1 IS NULL OR m.tenant_id = $1)
       AND ($2 IS NULL OR m.command_id = $2)
       AND m.state <> 'received'
       AND l.to_state IS DISTINCT FROM m.state::text
$$;
COMMENT ON FUNCTION cscp.evidence_problems(text, uuid) IS
  'Every broken link of the evidence chains of a tenant (NULL: of every tenant) or of one command, with the rights of the caller';

CREATE FUNCTION cscp.evidence_verify(tenant_id text, command_id uuid DEFAULT NULL)
RETURNS TABLE(command_id uuid, seq int, evidence_id bigint, problem text)
LANGUAGE sql STABLE
AS $$
    SELECT cscp.check_tenant($1);
    SELECT cscp.check_command($1, $2);
    SELECT p.command_id, p.seq, p.evidence_id, p.problem
      FROM cscp.evidence_problems($1, $2) p
     ORDER BY p.command_id, p.seq NULLS LAST, p.problem;
$$;
COMMENT ON FUNCTION cscp.evidence_verify(text, uuid) IS
  'Every broken link of the tenant''s evidence chains (or one command''s): altered, missing or re-linked rows; empty when intact';
