#!/usr/bin/env bash
# W5 research (README "W5 through the worker"): the WAL one cscp.sweep(B) writes right after a
# checkpoint, over N bulk-loaded expired contexts, by record type (pg_waldump --stats=record).
# Usage: N=100000 B=10000 bash test/scripts/expiry_wal.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
cluster_start fsync=on max_wal_size=4GB checkpoint_timeout=1h
N=${N:-100000}
psql -X -q -v ON_ERROR_STOP=1 >/dev/null -c "CREATE EXTENSION cscp"
psql -X -q -v ON_ERROR_STOP=1 <<SQL
SET synchronous_commit = off;
SET cscp.clock = '$(psql -X -At -c "SELECT now() - interval '2 days'")';
DO \$\$
BEGIN
    FOR b IN 0..($N - 1) / 1000 LOOP
        INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
        SELECT 'sweep', 'sw-' || i, 'customer', cscp.now() + interval '30 minutes', interval '30 minutes'
          FROM generate_series(b * 1000 + 1, least((b + 1) * 1000, $N)) i;
        COMMIT;
    END LOOP;
END
\$\$;
VACUUM (ANALYZE) cscp.context;
CHECKPOINT;
SQL
l0=$(psql -X -At -c 'SELECT pg_current_wal_insert_lsn()')
psql -X -At -c "SELECT cscp.sweep(${B:-10000})"
l1=$(psql -X -At -c 'SELECT pg_current_wal_insert_lsn()')
psql -X -At -c "SELECT pg_wal_lsn_diff('$l1','$l0')"
$PG_BINDIR/pg_waldump --stats=record -p $CSCP_TMP/data/pg_wal -s $l0 -e $l1 | head -40
psql -X -At -c "select avg(pg_column_size(c.*)) from cscp.context c"
