#!/usr/bin/env bash
# W5 research (doc/performance-history.md, "W5 through the worker"): W1's p99 alone and beside a synthetic WAL stream
# of R bytes a second (transactional logical messages committed every 10 ms with
# synchronous_commit = on): how much WAL beside it does W1 stand?
# Usage: RATES="0 1000000 4000000 16000000 0" SECS=30 bash test/scripts/bench_wal_stream.sh (bytes a second; 0: alone)
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
source test/scripts/bench_lib.sh
export BENCH_CLIENTS=4 BENCH_THREADS=2 BENCH_ROLE=bench_app BENCH_TENANT=bench
cluster_start fsync=on synchronous_commit=on max_wal_size=4GB wal_keep_size=4GB checkpoint_timeout=1h
BENCH_OUT=$(mktemp -d "${TMPDIR:-/tmp}/cscp-walstream.XXXXXX"); export BENCH_OUT
echo "runs in $BENCH_OUT"
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION cscp;
CREATE ROLE $BENCH_ROLE LOGIN;
SELECT cscp.grant_app('$BENCH_ROLE');
SQL
SECS=${SECS:-30}
conversations warm cscp; bench_run warm on 10 -D conv=warm -f test/bench/message_turn_cscp.sql >/dev/null
for rate in ${RATES:-0 1000000 4000000 16000000 0}; do
	c="w-$rate-$RANDOM"
	conversations "$c" cscp
	if [ "$rate" != 0 ]; then
		psql -X -q >/dev/null 2>&1 <<SQL &
DO \$\$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
  WHILE clock_timestamp() < t0 + interval '$((SECS + 5)) seconds' LOOP
    PERFORM pg_logical_emit_message(true, 'p', repeat('x', $rate / 100));
    COMMIT;
    PERFORM pg_sleep(0.01);
  END LOOP;
END \$\$;
SQL
		gen=$!
	fi
	bench_run "r$rate.$RANDOM" on "$SECS" -D conv="$c" -f test/bench/message_turn_cscp.sql
	[ "$rate" != 0 ] && wait $gen || true
done
cluster_stop
