#!/usr/bin/env bash
# `make bench-facts`: issue 5's speed targets for facts.
#
#   1. cscp.build_context for a subject with 1,000 valid and 100,000 superseded facts costs at
#      most 1.5x the same call for a subject with the 1,000 valid facts alone;
#   2. cscp.fact_current on a chain of length 100 stays under 1 ms of server time.
#
# A throwaway cluster (fsync on); test/bench/facts_setup.sql writes both subjects through
# cscp.fact_write as the application role (about 80 s on the shared 2-core machine), then the
# table is vacuumed and analyzed. pgbench connects as that role (row-level security applies) and
# runs test/bench/build_context_valid.sql and test/bench/build_context_superseded.sql
# alternately, BENCH_RUNS times each after a 5 s warm-up; the table shows the median over runs of
# TPS and of each run's p50/p99 latency from pgbench's per-transaction logs, and the ratio
# superseded / valid. Then EXPLAIN (ANALYZE, BUFFERS) of fact_current (and fact_history) from the
# oldest fact of one chain of 101, BENCH_EXPLAINS times in one session.
# Settings: BENCH_SECONDS (10), BENCH_RUNS (3), BENCH_CLIENTS (4), BENCH_THREADS (2),
# BENCH_EXPLAINS (6).
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh

SECONDS_PER_RUN=${BENCH_SECONDS:-10}
RUNS=${BENCH_RUNS:-3}
CLIENTS=${BENCH_CLIENTS:-4}
THREADS=${BENCH_THREADS:-2}
EXPLAINS=${BENCH_EXPLAINS:-6}
ROLE=bench
TENANT=bench
CHAIN_START=f-500-v0   # the oldest fact of chain 500 of subject 'superseded'; its head is f-500

cluster_start fsync=on
OUT=$(mktemp -d "${TMPDIR:-/tmp}/cscp-bench-facts.XXXXXX")
trap 'cluster_stop; rm -rf "$OUT"' EXIT
echo "cscp bench-facts: throwaway cluster in $CSCP_TMP (fsync=on); $CLIENTS clients, $THREADS threads," \
     "-M prepared, ${SECONDS_PER_RUN}s per run, $RUNS runs per script"

psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION cscp;
CREATE ROLE $ROLE LOGIN;
SELECT cscp.grant_app('$ROLE');
SQL

export PGOPTIONS="-c cscp.tenant_id=$TENANT"
echo "setup: test/bench/facts_setup.sql as role $ROLE"
start=$(date +%s.%N)
psql -X -q -v ON_ERROR_STOP=1 -U "$ROLE" -f test/bench/facts_setup.sql >"$OUT/setup.txt" 2>&1 ||
	{ cat "$OUT/setup.txt" >&2; echo "cscp bench-facts: setup failed" >&2; exit 1; }
end=$(date +%s.%N)
sed 's/^/  /' "$OUT/setup.txt"
awk -v a="$start" -v b="$end" 'BEGIN { printf "setup took %.1f s\n", b - a }'
psql -X -q -v ON_ERROR_STOP=1 -U postgres -c 'VACUUM (ANALYZE) cscp.fact' -c CHECKPOINT

# run NAME SCRIPT SECONDS: one pgbench run; its per-transaction logs land in $OUT/NAME.*
run() {
	local name=$1 script=$2 secs=$3
	psql -X -q -c CHECKPOINT
	pgbench -n -U "$ROLE" -c "$CLIENTS" -j "$THREADS" -M prepared -T "$secs" -r \
		-l --log-prefix="$OUT/$name" -f "$script" >"$OUT/$name.txt" 2>&1 ||
		{ cat "$OUT/$name.txt" >&2; echo "cscp bench-facts: pgbench failed ($name)" >&2; return 1; }
	if ! grep -q '^number of failed transactions: 0 ' "$OUT/$name.txt"; then
		cat "$OUT/$name.txt" >&2
		echo "cscp bench-facts: failed transactions in $name" >&2
		return 1
	fi
	# tps, then p50 and p99 of the latency (3rd field of the log, microseconds) in ms
	local tps
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$OUT/$name.txt")
	cat "$OUT/$name".[0-9]* | awk '{print $3}' | sort -n | awk -v tps="$tps" '
		{ v[NR] = $1 }
		END { i50 = int(NR * 0.50); if (i50 < 1) i50 = 1; i99 = int(NR * 0.99); if (i99 < 1) i99 = 1
		      printf "%s %.3f %.3f %d\n", tps, v[i50] / 1000, v[i99] / 1000, NR }' >"$OUT/$name.res"
	rm -f "$OUT/$name".[0-9]*
	read -r tps p50 p99 n <"$OUT/$name.res"
	printf '  %-16s tps %8.1f   p50 %7.2f ms   p99 %7.2f ms   (%d calls)\n' "$name" "$tps" "$p50" "$p99" "$n"
}

# median of the numbers on stdin
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "warm-up (5 s each, not counted)"
run warmup_valid test/bench/build_context_valid.sql 5
run warmup_superseded test/bench/build_context_superseded.sql 5

echo "runs"
for i in $(seq 1 "$RUNS"); do
	run "valid_$i" test/bench/build_context_valid.sql "$SECONDS_PER_RUN"
	run "superseded_$i" test/bench/build_context_superseded.sql "$SECONDS_PER_RUN"
done

# Both subjects must give the same context: the superseded facts are never told.
same=$(psql -X -At -v ON_ERROR_STOP=1 -U "$ROLE" -c "
	SELECT (cscp.build_context('bench', 'valid-only', 's1', 'value topic 7', 2000) - 'now')
	     = (cscp.build_context('bench', 'superseded', 's1', 'value topic 7', 2000) - 'now')")
echo "check: the two subjects' contexts for 'value topic 7' are the same: $same"
[ "$same" = t ] || { echo "cscp bench-facts: the contexts differ" >&2; exit 1; }

echo
echo "build_context(..., 'value topic <1..50>', 2000), $CLIENTS clients; median of $RUNS runs of ${SECONDS_PER_RUN}s"
printf '%-28s %10s %10s %10s\n' subject 'TPS' 'p50 ms' 'p99 ms'
for subj in valid superseded; do
	tps=$(for i in $(seq 1 "$RUNS"); do awk '{print $1}' "$OUT/${subj}_$i.res"; done | median)
	p50=$(for i in $(seq 1 "$RUNS"); do awk '{print $2}' "$OUT/${subj}_$i.res"; done | median)
	p99=$(for i in $(seq 1 "$RUNS"); do awk '{print $3}' "$OUT/${subj}_$i.res"; done | median)
	case $subj in
		valid) label='valid-only (1,000 valid)' ;;
		superseded) label='superseded (+100,000)' ;;
	esac
	printf '%-28s %10.1f %10.2f %10.2f\n' "$label" "$tps" "$p50" "$p99"
	eval "${subj}_tps=$tps ${subj}_p50=$p50 ${subj}_p99=$p99"
done
awk -v a="$superseded_tps" -v b="$valid_tps" -v c="$superseded_p50" -v d="$valid_p50" \
	-v e="$superseded_p99" -v f="$valid_p99" \
	'BEGIN { printf "%-28s %10.2f %10.2f %10.2f\n", "ratio superseded / valid", a / b, c / d, e / f
	         printf "(target: latency ratio at most 1.5; p50 ratio %.2f: %s)\n", c / d, (c / d <= 1.5 ? "met" : "NOT met") }'

echo
echo "fact_current / fact_history from $CHAIN_START (chain of 101), EXPLAIN (ANALYZE, BUFFERS) as role $ROLE," \
     "$EXPLAINS times each in one new session"
{
	for i in $(seq 1 "$EXPLAINS"); do
		echo "EXPLAIN (ANALYZE, BUFFERS) SELECT cscp.fact_current('bench', 'superseded', '$CHAIN_START');"
	done
	for i in $(seq 1 "$EXPLAINS"); do
		echo "EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM cscp.fact_history('bench', 'superseded', '$CHAIN_START');"
	done
	echo "SELECT 'head', (cscp.fact_current('bench', 'superseded', '$CHAIN_START')).fact_id,"
	echo "       (SELECT count(*) FROM cscp.fact_history('bench', 'superseded', '$CHAIN_START'));"
} | psql -X -At -v ON_ERROR_STOP=1 -U "$ROLE" >"$OUT/explain.txt"
read -r _ head chainlen <<<"$(grep '^head|' "$OUT/explain.txt" | tr '|' ' ')"
echo "check: head $head, chain length $chainlen"
[ "$head" = f-500 ] && [ "$chainlen" = 101 ] || { echo "cscp bench-facts: wrong chain" >&2; exit 1; }
echo "last fact_current plan:"
awk '/^Result/ { blk = "" } { blk = blk "  " $0 "\n" } /^Execution Time/ && ++n == '"$EXPLAINS"' { printf "%s", blk }' \
	"$OUT/explain.txt"
sed -n 's/^Execution Time: \([0-9.]*\) ms$/\1/p' "$OUT/explain.txt" >"$OUT/exec.txt"
for f in fact_current fact_history; do
	case $f in fact_current) from=1 ;; fact_history) from=$((EXPLAINS + 1)) ;; esac
	to=$((from + EXPLAINS - 1))
	first=$(sed -n "${from}p" "$OUT/exec.txt")
	warm=$(sed -n "$((from + 1)),${to}p" "$OUT/exec.txt" | median)
	all=$(sed -n "${from},${to}p" "$OUT/exec.txt" | tr '\n' ' ')
	printf '%-13s execution time: first call in the session %.3f ms, median of the next %d %.3f ms  (all: %s)\n' \
		"$f" "$first" "$((EXPLAINS - 1))" "$warm" "$all"
	if [ $f = fact_current ]; then
		awk -v a="$first" -v b="$warm" 'BEGIN { printf "(target: under 1 ms; %s warm, %s on the first call)\n",
			(b < 1 ? "met" : "NOT met"), (a < 1 ? "met" : "NOT met") }'
	fi
done
