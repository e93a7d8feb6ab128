#!/usr/bin/env bash
# What ending contexts costs (not part of `make test`): on a throwaway cluster, 2 x N contexts
# (BENCH_CONTEXTS, 3000), each with one read-only command driven to executed (BENCH_FINISHED=0
# leaves it canonicalized, one that could still step forward); then N of them closed by
# cscp.context_transition in one statement, and the other N expired by one cscp.sweep() with the
# clock past their expires_at.  Prints the two times (psql's \timing); each end writes the
# context's commands that could still step forward (context_fsm.c, commands_follow).
# Run: bash test/scripts/bench_context_end.sh (PG_CONFIG / PG_BINDIR as for make).
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
N=${BENCH_CONTEXTS:-3000}
FINISHED=${BENCH_FINISHED:-1}

cluster_start
trap cluster_stop EXIT
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION cscp;
SELECT cscp.command_declare('ce', 'lookup', false);
SET cscp.clock = '2026-07-01 10:00:00+00';
SELECT count(*) FROM (SELECT cscp.context_open('ce', 'conv-' || i, 'a') FROM generate_series(1, 2 * $N) i) x;
SELECT count(*) FROM (SELECT cscp.command_submit('ce', 'conv-' || i, 'a', 'k-' || i, 'lookup', false,
                                                 ARRAY['m-' || i]) FROM generate_series(1, 2 * $N) i) x;
SELECT count(*) FROM (SELECT cscp.command_transition(c.command_id, s::cscp.command_state)
                        FROM cscp.command c,
                             unnest(ARRAY['authz_pending', 'authorized', 'started', 'executed']) WITH ORDINALITY AS u(s, o)
                       WHERE c.tenant_id = 'ce' AND $FINISHED = 1
                       ORDER BY c.command_id, u.o) x;
SQL
echo "cscp context ends: $N closes, then $N expiries by one sweep (commands finished: $FINISHED)"
psql -X -q -v ON_ERROR_STOP=1 <<SQL
SET cscp.clock = '2026-07-01 10:00:00+00';
\timing on
SELECT count(*) AS closed
  FROM (SELECT cscp.context_transition(x.context_id, 'closed', 'done') FROM cscp.context x
         WHERE x.tenant_id = 'ce' AND x.conversation_id IN (SELECT 'conv-' || i FROM generate_series(1, $N) i)) c;
SET cscp.clock = '2026-07-03 10:00:00+00';
SELECT cscp.sweep($N) ->> 'contexts_expired' AS expired;
SQL
