#!/usr/bin/env bash
# bench_aa.sh: an A/A test of make bench's pairs.  W1 through cscp (as in W6's new
# conversations: 4 clients, each on a conversation started just before its run), run twice in a
# row BENCH_PAIRS times (6) on one throwaway cluster with bench.sh's settings, BENCH_SECONDS (12)
# each; prints each pair's TPS ratio second / first and the median.  Both runs of a pair are the
# same workload, so any departure from 1 is what the machine and the order alone do to a pair's
# ratio: the noise a ratio target near 1 (W6's 0.95) has to be read against, and the cost of
# coming second (the tables grow run by run), which is why bench.sh rotates its variants' order
# from one repetition to the next (in_turn).
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
source test/scripts/bench_lib.sh

SECS=${BENCH_SECONDS:-12}
PAIRS=${BENCH_PAIRS:-6}
export BENCH_CLIENTS=${BENCH_CLIENTS:-4} BENCH_THREADS=${BENCH_THREADS:-2}
export BENCH_ROLE=bench_app BENCH_TENANT=bench

bench_cluster_start

echo "cscp bench A/A: $PAIRS pairs of two identical W1 runs (cscp, synchronous_commit=on), ${SECS}s each"
conversations warm cscp
bench_run warmup on 5 -D conv=warm -f test/bench/message_turn_cscp.sql >/dev/null
for i in $(seq 1 "$PAIRS"); do
	for ab in A B; do
		conversations "$ab-$i" cscp
		bench_run "$ab.r$i" on "$SECS" -D conv="$ab-$i" -f test/bench/message_turn_cscp.sql
	done
	awk -v i="$i" 'NR == FNR { a = $1; next } { printf "pair %d: second / first %.3f\n", i, $1 / a }' \
		"$BENCH_OUT/A.r$i.res" "$BENCH_OUT/B.r$i.res"
done
echo "median of the $PAIRS ratios, second / first: $(bench_pair_ratio 1 B 1 A "$PAIRS")"
