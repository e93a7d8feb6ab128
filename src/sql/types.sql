-- types.sql: the states of cscp's lifecycles.

CREATE TYPE cscp.context_status AS ENUM ('active', 'pending', 'blocked', 'expired', 'closed');
COMMENT ON TYPE cscp.context_status IS
  'Lifecycle of a context: active, pending and blocked are live; expired and closed are terminal';

CREATE TYPE cscp.command_state AS ENUM (
    'received', 'canonicalized', 'confirmation_required', 'confirmed', 'authz_pending',
    'authorized', 'rejected', 'started', 'executed', 'failed', 'canceled', 'compensated');
COMMENT ON TYPE cscp.command_state IS
  'Lifecycle of a command (RFC-WF-0018): rejected, executed, failed, canceled and compensated are terminal';
