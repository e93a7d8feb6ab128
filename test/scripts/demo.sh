#!/usr/bin/env bash
# `make demo`: a throwaway cluster and the walk-throughs in test/demo/: conversation.sql (contexts,
# slots, expiry, tenancy, the sweep), then cancel_order.sql (a command confirmed, refused when late,
# authorized, executed, replayed, and its evidence trail), then multi_turn.sql (a multi-turn
# conversation under a schema: a rejection, a replayed delivery, a close, a timeout), then
# facts.sql (a user who moves house, a policy an intern cannot override, a what-if that never
# leaks into the context), in the same database.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
cluster_start
echo "cscp demo: a throwaway PostgreSQL cluster in $CSCP_TMP (unix socket only)"
psql -X -d postgres -f test/demo/conversation.sql
psql -X -d postgres -f test/demo/cancel_order.sql
psql -X -d postgres -f test/demo/multi_turn.sql
psql -X -d postgres -f test/demo/facts.sql
echo
echo "cscp demo: done; the cluster is stopped and removed."
