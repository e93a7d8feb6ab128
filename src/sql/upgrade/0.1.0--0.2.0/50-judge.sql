-- judge: the head of each command's evidence chain kept in the command's row (src/evidence.c,
-- src/command_fsm.c), so that a transition appends its evidence without reading the chain.
ALTER TABLE cscp.command
    ADD COLUMN evidence_seq int NOT NULL DEFAULT 0,
    ADD COLUMN evidence_hash text;
COMMENT ON COLUMN cscp.command.evidence_seq IS
  'seq of the last row of the command''s evidence chain (0: none yet), kept by the command trigger';
COMMENT ON COLUMN cscp.command.evidence_hash IS
  'hash of the last row of the command''s evidence chain, kept by the command trigger';
-- Existing chains stay as they are; each command's head becomes its chain's last row (an UPDATE
-- of the head alone, which the command trigger checks against the chain).
UPDATE cscp.command c
   SET evidence_seq = h.seq, evidence_hash = h.hash
  FROM (SELECT DISTINCT ON (e.tenant_id, e.command_id) e.tenant_id, e.command_id, e.seq, e.hash
          FROM cscp.evidence e
         WHERE e.command_id IS NOT NULL
         ORDER BY e.tenant_id, e.command_id, e.seq DESC) h
 WHERE c.tenant_id = h.tenant_id AND c.command_id = h.command_id;

-- judge: each backend keeps the API keys it has checked (src/http_api.c) until this trigger's
-- relcache invalidation, sent on every change of cscp.api_key but a key's last use.
CREATE TRIGGER api_key_changed
    AFTER INSERT OR UPDATE OF tenant_id, label, key_hash, scopes, created_at, expires_at, revoked_at
          OR DELETE OR TRUNCATE ON cscp.api_key
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.policy_changed();
