#!/usr/bin/env bash
# make bench-langgraph: a StateGraph turn persisted through CscpSaver (clients/js) and through
# LangGraph's PostgresSaver on one throwaway cluster, alternated, threads at turns 1-50 and
# 201-250, 1, 4 and 16 concurrent threads (clients/js/bench/langgraph.mjs): turns per second,
# p99 latency, WAL bytes per turn.  BENCH_CONCURRENCY (1,4,16), BENCH_FILL (200), BENCH_WINDOW (50).
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
cluster_start
(cd clients/js && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build)
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION cscp"
mkdir -p log/bench
(cd clients/js && PGDATABASE=postgres BENCH_JSON="$PWD/../../log/bench/langgraph.json" node bench/langgraph.mjs) |
	tee log/bench/langgraph.txt
