-- judge: the head of each command's evidence chain kept in the command's row (src/evidence.c,
-- src/command_fsm.c), so that a transition appends its evidence without reading the chain.
ALTER TABLE cscp.command
    ADD COLUMN evidence_seq int NOT NULL DEFAULT 0,
    ADD COLUMN evidence_hash text;
COMMENT ON COLUMN cscp.command.evidence_seq IS
  'seq of the evidence row of the command''s last transition (0: none yet), after which its next transition appends; kept by the command trigger';
COMMENT ON COLUMN cscp.command.evidence_hash IS
  'hash of the evidence row of the command''s last transition; kept by the command trigger';
-- Existing chains stay as they are.  A command written before carries the head 0 until its next
-- transition, which finds its chain past that head, reads the chain's last row once and stores it.

-- judge: each backend keeps the API keys it has checked (src/http_api.c) until this trigger's
-- relcache invalidation, sent on every change of cscp.api_key but a key's last use.
CREATE TRIGGER api_key_changed
    AFTER INSERT OR UPDATE OF tenant_id, label, key_hash, scopes, created_at, expires_at, revoked_at
          OR DELETE OR TRUNCATE ON cscp.api_key
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.policy_changed();
