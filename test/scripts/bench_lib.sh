#!/usr/bin/env bash
# What `make bench` (test/scripts/bench.sh) does to every pgbench run; sourced, not run, after
# test/scripts/cluster.sh has started the cluster.  The caller sets:
#   BENCH_OUT      a directory for the runs' output
#   BENCH_ROLE     the role pgbench connects as;  BENCH_TENANT its cscp.tenant_id
#   BENCH_CLIENTS, BENCH_THREADS
#
#   bench_run NAME SYNC SECONDS PGBENCH_ARGS...   one run; writes $BENCH_OUT/NAME.res
#   bench_latency LOG [SCRIPT] [FROM TO]          p50, p99, count and mean of a run's log
#   bench_median                                  the median of the numbers on stdin
#   bench_field FIELD FILES...                    the median of one field over .res files
#   bench_pair_ratio FA A FB B RUNS [SUFFIX]      the median over runs i of A.r<i>'s field FA
#                                                 over B.r<i>'s field FB
#   bench_expired_contexts TENANT N               N contexts of TENANT, expired (for W5)
#   bench_cluster_start                           the cluster, BENCH_OUT, cscp and BENCH_ROLE
#   as_app PSQL_ARGS...                           psql as BENCH_ROLE for BENCH_TENANT
#   conversations PREFIX IMPL                     one new conversation per pgbench client
#
# A .res file holds one line: tps p50_ms p99_ms transactions mean_ms wal_bytes_per_tx
# fpi_bytes_per_tx wal_bytes_per_tx_without_fpi.  TPS is pgbench's (without the initial connection time); the latencies are
# exact, from pgbench's per-transaction log (-l: one line per transaction, its latency in
# microseconds in the 3rd field, the script number in the 4th, its end time in the 5th and 6th);
# WAL bytes are pg_current_wal_insert_lsn() after the run minus before it, and of those the bytes
# of full-page images, from pg_waldump --stats=record over the same range (kept, by record type,
# in $BENCH_OUT/NAME.walstats), both divided by the
# transactions.  Every run starts after a VACUUM and a CHECKPOINT, so each pays for its own
# full-page images and none for another's dead rows.

# The median of the numbers on stdin.
bench_median() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# bench_field FIELD FILES...: the median of field FIELD (1-based) over the .res files given.
bench_field() {
	local f=$1
	shift
	cat "$@" | awk -v f="$f" '{ print $f }' | bench_median
}

# bench_pair_ratio FA A FB B RUNS [SUFFIX]: the median over i = 1..RUNS of field FA of
# $BENCH_OUT/A.r<i>SUFFIX.res divided by field FB of $BENCH_OUT/B.r<i>SUFFIX.res: each ratio is of
# two runs made one after the other, so a change in the machine's load between repetitions
# cancels out.  "-" when no pair exists.
bench_pair_ratio() {
	local fa=$1 a=$2 fb=$3 b=$4 runs=$5 suf=${6:-} i x y
	for i in $(seq 1 "$runs"); do
		[ -f "$BENCH_OUT/$a.r$i$suf.res" ] && [ -f "$BENCH_OUT/$b.r$i$suf.res" ] || continue
		x=$(awk -v f="$fa" '{ print $f }' "$BENCH_OUT/$a.r$i$suf.res")
		y=$(awk -v f="$fb" '{ print $f }' "$BENCH_OUT/$b.r$i$suf.res")
		awk -v x="$x" -v y="$y" 'BEGIN { if (x != "nan" && y != "nan" && y != 0) print x / y }'
	done | bench_median | awk '{ if ($1 == "nan") print "-"; else printf "%.3f\n", $1 }'
}

# bench_bracket_ratio FA A FB B RUNS: the median over i = 1..RUNS of field FA of run i of A over
# the mean of field FB of runs i and i + 1 of B (B ran before and after each run of A).
bench_bracket_ratio() {
	local fa=$1 a=$2 fb=$3 b=$4 runs=$5 i x y z
	for i in $(seq 1 "$runs"); do
		[ -f "$BENCH_OUT/$a.r$i.res" ] && [ -f "$BENCH_OUT/$b.r$i.res" ] && [ -f "$BENCH_OUT/$b.r$((i + 1)).res" ] || continue
		x=$(awk -v f="$fa" '{ print $f }' "$BENCH_OUT/$a.r$i.res")
		y=$(awk -v f="$fb" '{ print $f }' "$BENCH_OUT/$b.r$i.res")
		z=$(awk -v f="$fb" '{ print $f }' "$BENCH_OUT/$b.r$((i + 1)).res")
		awk -v x="$x" -v y="$y" -v z="$z" 'BEGIN { if (x != "nan" && y != "nan" && z != "nan" && y + z != 0) print x / ((y + z) / 2) }'
	done | bench_median | awk '{ if ($1 == "nan") print "-"; else printf "%.3f\n", $1 }'
}

# bench_walstats NAME [N]: the N (8) record types that wrote the most WAL in run NAME, records and
# full-page images together, with their count and bytes per transaction of the run.
bench_walstats() {
	local name=$1 top=${2:-8} n
	n=$(awk '{ print $4 }' "$BENCH_OUT/$name.res")
	[ -s "$BENCH_OUT/$name.walstats" ] || return 0
	awk -v n="$n" '/^[A-Za-z0-9_]+\/[A-Za-z0-9_+]+ / {
		gsub(/[()\[\]%]/, " ")
		split($0, f, " +")
		printf "%12.0f  %-28s %9d records  %7.0f B/tx (FPI %6.0f)\n", f[8], f[1], f[2], f[8] / n, f[6] / n
	}' "$BENCH_OUT/$name.walstats" | sort -rn | awk -v t="$top" 'NR <= t' | cut -c15-
}

# bench_latency LOG [SCRIPT] [FROM TO]: "p50_ms p99_ms count mean_ms" of the transactions in a
# pgbench log, those of script number SCRIPT only (empty or "-": all), ending between the epoch
# times FROM and TO only (when given).
bench_latency() {
	local log=$1 script=${2:--} from=${3:-0} to=${4:-1e18}
	awk -v s="$script" -v a="$from" -v b="$to" '
		(s == "-" || $4 == s) { t = $5 + $6 / 1e6; if (t >= a && t <= b) print $3 }' "$log" |
		sort -n | awk '
		{ v[NR] = $1; sum += $1 }
		END {
			if (NR == 0) { print "nan nan 0 nan"; exit }
			i50 = int(NR * 0.50 + 0.5); if (i50 < 1) i50 = 1
			i99 = int(NR * 0.99 + 0.5); if (i99 < 1) i99 = 1
			printf "%.3f %.3f %d %.3f\n", v[i50] / 1000, v[i99] / 1000, NR, sum / NR / 1000 }'
}

# bench_run NAME SYNC SECONDS PGBENCH_ARGS...: one pgbench run as $BENCH_ROLE with the given
# synchronous_commit, for SECONDS; output in $BENCH_OUT/NAME.txt, the per-transaction log in
# $BENCH_OUT/NAME.log, the numbers in $BENCH_OUT/NAME.res, and for a run of several scripts
# (-f a@w -f b@w) each script's in NAME.s0.res, NAME.s1.res, ... (WAL fields "-").  Fails when
# pgbench fails or any transaction failed.
bench_run() {
	local name=$1 sync=$2 secs=$3
	shift 3
	local out="$BENCH_OUT/$name" lsn0 lsn1 tps n wal fpi
	# What the runs before left to vacuum and analyze is done now, not by autovacuum inside this run
	# (bench.sh turns it off but for W5, which sets BENCH_VACUUM=off): pgbench itself vacuums
	# before each run unless told -n.
	[ "${BENCH_VACUUM:-on}" = off ] || psql -X -q -c "VACUUM (ANALYZE)"
	psql -X -q -c CHECKPOINT
	lsn0=$(psql -X -At -c 'SELECT pg_current_wal_insert_lsn()')
	PGOPTIONS="-c cscp.tenant_id=$BENCH_TENANT -c synchronous_commit=$sync" \
		pgbench -n -U "$BENCH_ROLE" -c "$BENCH_CLIENTS" -j "$BENCH_THREADS" -M prepared -T "$secs" -r \
		-l --log-prefix="$out" "$@" >"$out.txt" 2>&1 ||
		{ cat "$out.txt" >&2; echo "cscp bench: pgbench failed ($name)" >&2; return 1; }
	lsn1=$(psql -X -At -c 'SELECT pg_current_wal_insert_lsn()')
	if ! grep -q '^number of failed transactions: 0 ' "$out.txt"; then
		cat "$out.txt" >&2
		echo "cscp bench: failed transactions in $name" >&2
		return 1
	fi
	cat "$out".[0-9]* >"$out.log"
	rm -f "$out".[0-9]*
	# pg_waldump reads the run's WAL from the files once it is flushed (a CHECKPOINT here could
	# recycle the segment the run began in)
	until [ "$(psql -X -At -c "SELECT pg_current_wal_flush_lsn() >= '$lsn1'")" = t ]; do sleep 0.1; done
	wal=$(psql -X -At -c "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')")
	[ "$wal" = 0 ] && fpi=0 || fpi=$("$PG_BINDIR/pg_waldump" --stats=record -p "$CSCP_TMP/data/pg_wal" -s "$lsn0" -e "$lsn1" 2>"$out.waldump" |
		tee "$out.walstats" | awk '/^Total/ { print $5 }') || { echo "cscp bench: pg_waldump: $(head -1 "$out.waldump")" >&2; fpi=nan; }
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$out.txt")
	read -r p50 p99 n mean <<<"$(bench_latency "$out.log")"
	awk -v tps="$tps" -v p50="$p50" -v p99="$p99" -v n="$n" -v mean="$mean" -v wal="$wal" -v fpi="${fpi:-nan}" \
		'BEGIN { printf "%s %s %s %s %s %.0f %s %s\n", tps, p50, p99, n, mean, wal / n,
		         fpi == "nan" ? "nan" : sprintf("%.0f", fpi / n), fpi == "nan" ? "nan" : sprintf("%.0f", (wal - fpi) / n) }' >"$out.res"
	printf '  %-26s tps %8.1f  p50 %7.2f ms  p99 %7.2f ms  WAL %6.0f B/tx (FPI %5.0f)  (%d tx)\n' \
		"$name" "$tps" "$p50" "$p99" "$(awk '{print $6}' "$out.res")" "$(awk '{print $7}' "$out.res")" "$n"
	# per-script numbers of a mixed run: pgbench's per-script tps, the latencies from the log
	local k=0 stps
	while read -r stps; do
		read -r p50 p99 n mean <<<"$(bench_latency "$out.log" "$k")"
		echo "$stps $p50 $p99 $n $mean nan nan nan" >"$out.s$k.res"
		k=$((k + 1))
	done < <(sed -n 's/^ - [0-9]* transactions (.* of total, tps = \([0-9.]*\))$/\1/p' "$out.txt")
}

# bench_expired_contexts TENANT N: N contexts of TENANT that were valid when written, under a
# clock pinned two days back, and expired since; 1,000 per transaction (forgotten_guard's
# advisory locks, one per conversation and actor); then VACUUM (ANALYZE) of the whole database, so
# that W5's runs start with nothing for autovacuum to clean up but what they themselves leave: not
# these inserts, nor what an earlier part of W5 left (the worker's part comes after the session's
# million expiries; their pruning and index page deletions, written after the run's checkpoint,
# are tens of megabytes of full-page images that used to land in the worker's runs, alone or
# beside it, wherever autovacuum happened to be).
bench_expired_contexts() {
	psql -X -q -v ON_ERROR_STOP=1 <<SQL
SET synchronous_commit = off;
SET cscp.clock = '$(psql -X -At -c "SELECT now() - interval '2 days'")';
DO \$\$
BEGIN
    FOR b IN 0..($2 - 1) / 1000 LOOP
        INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
        SELECT '$1', 'sw-' || i, 'customer', cscp.now() + interval '30 minutes', interval '30 minutes'
          FROM generate_series(b * 1000 + 1, least((b + 1) * 1000, $2)) i;
        COMMIT;
    END LOOP;
END
\$\$;
VACUUM (ANALYZE);
SQL
}

# bench_cluster_start: the throwaway cluster as every benchmark here runs it, BENCH_OUT (a new
# directory, removed with the cluster on exit), cscp installed and BENCH_ROLE an application
# role of it.
# Checkpoints come before each run (bench_run), not on a timer in the middle of one; wal_keep_size:
# a checkpoint (max_wal_size) during a run must not recycle the WAL pg_waldump reads after it.
# Likewise VACUUM, for the workloads that compare variants run by run (W1-W4, W6): autovacuum,
# which visits the database once a minute and then works through every variant's tables for
# half a minute, would land in whichever runs happen to be going then, with its CPU, its writes
# and its WAL (counted in the run's WAL per transaction).  bench_run vacuums before each run
# instead (and analyzes), as pgbench vacuums unless told -n.  W5 turns autovacuum on again: it
# measures W1 beside the sweep as an application would run it.
bench_cluster_start() {
	cluster_start fsync=on synchronous_commit=on max_wal_size=4GB wal_keep_size=4GB checkpoint_timeout=1h \
		log_lock_waits=on deadlock_timeout=10ms
	psql -X -q -c "ALTER SYSTEM SET autovacuum = off" -c "SELECT pg_reload_conf()" >/dev/null
	BENCH_OUT=$(mktemp -d "${TMPDIR:-/tmp}/cscp-bench.XXXXXX")
	export BENCH_OUT
	trap 'cluster_stop; rm -rf "$BENCH_OUT"' EXIT
	psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION cscp;
-- W1's command reads only (undeclared commands are mutating by default).
SELECT cscp.command_declare('bench', 'track_order', false);
CREATE ROLE $BENCH_ROLE LOGIN;
SELECT cscp.grant_app('$BENCH_ROLE');
SQL
}

# as_app PSQL_ARGS...: psql as the application role, for the benchmark's tenant.
as_app() { PGOPTIONS="-c cscp.tenant_id=$BENCH_TENANT -c synchronous_commit=off" psql -X -q -v ON_ERROR_STOP=1 -U "$BENCH_ROLE" "$@"; }

# conversations PREFIX IMPL: conversations PREFIX-0 .. PREFIX-<clients-1>, one per pgbench
# client, started with an agent's first turn (through cscp, or as the same rows on the plain
# tables of schema bench_IMPL).
conversations() {
	local prefix=$1 impl=$2 c
	for c in $(seq 0 $((BENCH_CLIENTS - 1))); do
		if [ "$impl" = cscp ]; then
			echo "SELECT FROM cscp.conversation_start('$BENCH_TENANT', '$prefix-$c', 'agent',
			      '{\"from\": \"agent\", \"role\": \"agent\", \"content\": {\"text\": \"How can I help?\"}, \"ts\": 0}');"
		else
			echo "INSERT INTO bench_$impl.conversation (tenant_id, conversation_id, agent_id, next_turn_index, next_event_seq)
			      VALUES ('$BENCH_TENANT', '$prefix-$c', 'agent', 1, 1);
			      INSERT INTO bench_$impl.turn VALUES ('$BENCH_TENANT', '$prefix-$c', 0, '$prefix-$c:0:agent', 'agent', 'agent',
			          '{\"text\": \"How can I help?\"}', md5('{\"text\":\"How can I help?\"}'), 26, 0, '$prefix-$c:e0');
			      INSERT INTO bench_$impl.event (tenant_id, conversation_id, event_id, seq, type, turn_index, created_at)
			      VALUES ('$BENCH_TENANT', '$prefix-$c', '$prefix-$c:e0', 0, 'conversation.opened', 0, now());"
		fi
	done | as_app >/dev/null
}
