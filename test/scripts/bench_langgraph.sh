#!/usr/bin/env bash
# make bench-langgraph: a StateGraph turn persisted through CscpSaver (clients/js), through
# LangGraph's PostgresSaver, and through LangGraph's MemorySaver (the bound: no database) on one
# throwaway cluster, alternated, threads at turns 1-50 and 201-250, 1, 4 and 16 concurrent
# threads driven from min(threads, cores) worker threads (clients/js/bench/langgraph.mjs): turns
# per second, p99 latency, WAL bytes and Node CPU per turn.  BENCH_CONCURRENCY (1,4,16),
# BENCH_FILL (200), BENCH_WINDOW (50), BENCH_WORKERS (the cores), BENCH_WARMUP (turns per saver
# before anything is measured: BENCH_FILL + BENCH_WINDOW).
# BENCH_PROFILE=1: instead, one thread per saver after BENCH_FILL turns, per turn: Node CPU, the
# saver's calls, statements, commits and the server's time per statement (pg_stat_statements;
# clients/js/bench/profile.mjs).
# BENCH_WAL=1: instead, one thread per saver, BENCH_FILL (0) turns then BENCH_WINDOW (50): WAL per
# turn and per table, read with pg_waldump (clients/js/bench/wal.mjs).
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
if [ "${BENCH_PROFILE:-0}" = 1 ]; then
	cluster_start shared_preload_libraries=pg_stat_statements pg_stat_statements.track=all \
		pg_stat_statements.track_planning=on
else
	cluster_start
fi
(cd clients/js && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build)
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION cscp"
mkdir -p log/bench
if [ "${BENCH_WAL:-0}" = 1 ]; then
	(cd clients/js && PGDATABASE=postgres PG_BINDIR="$PG_BINDIR" PGWAL="$CSCP_TMP/data/pg_wal" BENCH_FILL="${BENCH_FILL:-0}" \
		node bench/wal.mjs) | tee log/bench/langgraph-wal.txt
elif [ "${BENCH_PROFILE:-0}" = 1 ]; then
	(cd clients/js && PGDATABASE=postgres node bench/profile.mjs) | tee log/bench/langgraph-profile.txt
else
	(cd clients/js && PGDATABASE=postgres BENCH_JSON="$PWD/../../log/bench/langgraph.json" node bench/langgraph.mjs) |
		tee log/bench/langgraph.txt
fi
