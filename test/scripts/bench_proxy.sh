#!/usr/bin/env bash
# make bench-proxy: the message-turn workload (test/bench/message_turn.sql) through the PL/Proxy
# proxy on two shards against one node directly, in the same run, on the clusters the scale-out
# suite starts (test/scripts/scaleout.sh): the proxy and the one node share a cluster (databases
# proxy and single), the shards have one each, all on this machine, fsync off.  As the
# application role app of tenant bench (row-level security on the shards and the one node).
# Alternating runs of pgbench -n -c 4 -j 2 -M prepared -T $BENCH_SECONDS, $BENCH_RUNS each;
# medians, and the ratio proxy / one node.
set -uo pipefail
cd "$(dirname "$0")/../.."
BENCH_SECONDS=${BENCH_SECONDS:-20}
BENCH_RUNS=${BENCH_RUNS:-3}
SCALEOUT_SETUP_ONLY=1
source test/scripts/scaleout.sh || exit 1

so_psql proxy single -c "SELECT cscp.grant_app('app')" >/dev/null || exit 1
for target in single proxy; do
	SO_USER=app PGOPTIONS='-c cscp.tenant_id=bench' so_psql proxy "$target" -c "
		SELECT count(*) FROM generate_series(1, 200) i,
		       LATERAL cscp.conversation_start('bench', 'conv-' || i, 'agent',
		           jsonb_build_object('from', 'agent', 'role', 'agent', 'content', 'hello', 'ts', i))" >/dev/null || exit 1
done

run() {
	local target=$1 out
	out=$(PGOPTIONS='-c cscp.tenant_id=bench' "$PG_BINDIR/pgbench" -n -c 4 -j 2 -M prepared -T "$BENCH_SECONDS" \
		-h "$SO_TMP/proxy" -p 5432 -U app -f test/bench/message_turn.sql "$target" 2>&1)
	local tps lat failed
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
	lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
	if [ -z "$tps" ] || [ "${failed:-0}" != 0 ]; then
		echo "$out" >&2
		return 1
	fi
	echo "$tps $lat"
}

declare -A tps lat
for r in $(seq 1 "$BENCH_RUNS"); do
	for target in single proxy; do
		read -r t l <<<"$(run "$target")" || exit 1
		tps[$target]+="$t "
		lat[$target]+="$l "
		printf '  run %d %-6s %8.1f TPS  %7.2f ms\n' "$r" "$target" "$t" "$l"
	done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ts=$(median <<<"${tps[single]}")
tp=$(median <<<"${tps[proxy]}")
ls=$(median <<<"${lat[single]}")
lp=$(median <<<"${lat[proxy]}")
echo
echo "message turn (9 calls), 4 clients, median of $BENCH_RUNS runs of ${BENCH_SECONDS}s"
printf '%-28s %10s %12s\n' target TPS "latency ms"
printf '%-28s %10.1f %12.2f\n' "one node" "$ts" "$ls"
printf '%-28s %10.1f %12.2f\n' "proxy, two shards" "$tp" "$lp"
awk -v a="$tp" -v b="$ts" -v c="$lp" -v d="$ls" 'BEGIN {printf "%-28s %10.2f %12.2f\n", "ratio proxy / one node", a / b, c / d}'
for i in 0 1; do
	echo "shard$i commands by state: $(so_psql "shard$i" cscp -At -c "SELECT string_agg(state || ' ' || n, ', ') FROM (SELECT state, count(*) n FROM cscp.command GROUP BY 1 ORDER BY 1) s")"
done
