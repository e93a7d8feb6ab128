#!/usr/bin/env bash
# W5 research (doc/performance-history.md, "W5 through the worker"): the WAL one cscp.sweep(B) writes right after a
# checkpoint, over N bulk-loaded expired contexts, by record type (pg_waldump --stats=record).
# Usage: N=100000 B=10000 bash test/scripts/expiry_wal.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
source test/scripts/bench_lib.sh
cluster_start fsync=on max_wal_size=4GB checkpoint_timeout=1h
N=${N:-100000}
psql -X -q -v ON_ERROR_STOP=1 >/dev/null -c "CREATE EXTENSION cscp"
bench_expired_contexts sweep "$N"
psql -X -q -c CHECKPOINT
l0=$(psql -X -At -c 'SELECT pg_current_wal_insert_lsn()')
psql -X -At -c "SELECT cscp.sweep(${B:-10000})"
l1=$(psql -X -At -c 'SELECT pg_current_wal_insert_lsn()')
psql -X -At -c "SELECT pg_wal_lsn_diff('$l1','$l0')"
$PG_BINDIR/pg_waldump --stats=record -p $CSCP_TMP/data/pg_wal -s $l0 -e $l1 | head -40
psql -X -At -c "select avg(pg_column_size(c.*)) from cscp.context c"
