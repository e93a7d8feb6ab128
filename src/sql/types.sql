-- types.sql: the states of cscp's lifecycles.

CREATE TYPE cscp.context_status AS ENUM ('active', 'pending', 'blocked', 'expired', 'closed');
COMMENT ON TYPE cscp.context_status IS
  'Lifecycle of a context: active, pending and blocked are live; expired and closed are terminal';
