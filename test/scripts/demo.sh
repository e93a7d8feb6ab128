#!/usr/bin/env bash
# `make demo`: a throwaway cluster and the walk-through in test/demo/conversation.sql.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
cluster_start
echo "cscp demo: a throwaway PostgreSQL cluster in $CSCP_TMP (unix socket only)"
psql -X -d postgres -f test/demo/conversation.sql
echo
echo "cscp demo: done; the cluster is stopped and removed."
