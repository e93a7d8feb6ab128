#!/usr/bin/env bash
# `make bench`: issue 6's workloads, each through cscp and against its baselines, on one
# throwaway cluster (fsync on), with pgbench -c 4 -j 2 -M prepared as an application role under
# row-level security:
#
#   W1  message turn: the user's turn, open the context, two slots, a read-only command submitted
#       and driven to executed (9 round trips); and the same through the single-call path
#       cscp.message_turn (5 round trips) when it exists
#   W2  confirmation: a mutating command submitted, confirmed, authorized, started, executed
#       (7 round trips)
#   W3  documents: 80% doc_get, 20% doc_put over 100,000 sessions
#   W4  context assembly: build_context for a subject with 1,000 valid and 100,000 superseded
#       facts against one with the 1,000 valid facts alone; fact_current on a chain of 101
#   W5  sweep under load: cscp.sweep through 1,000,000 expired contexts while W1 runs, called
#       by one session that waits 6 s after a call that left a backlog (the worker's default
#       cscp.sweep_backlog_delay; cscp.sweep() itself never waits);
#       the same back to back, without the pause (no target);
#       then another 1,000,000 through the background worker (cluster restarted with cscp
#       preloaded), which paces a backlog the same way; W1's p99 beside each against the mean of
#       two W1 runs alone, before and after
#   W6  long conversations: W1 on conversations that already hold 10,000 turns against new ones
#
# Baselines (W1-W3): the floor, the same row reads and writes as plain SQL on plain tables
# (test/bench/floor_schema.sql) in the same number of round trips; and naive, the same statements
# with the rules hand-written as PL/pgSQL triggers and functions (test/bench/baseline_plpgsql.sql).
# The variants alternate, BENCH_RUNS times each, for synchronous_commit on and off, each
# repetition in another order (floor naive cscp, then naive cscp floor, then cscp floor naive:
# see in_turn); the table shows medians over the runs of TPS, of each run's p50/p99 latency (per
# transaction = per whole turn or cycle, from pgbench's per-transaction logs), and of WAL bytes
# per transaction (test/scripts/bench_lib.sh says how each is measured).
#
# Settings: BENCH_SECONDS (12) per run, BENCH_RUNS (3), BENCH_ONLY (W1,W2,W3,W4,W5,W6: a
# comma-separated subset), BENCH_SYNC ("on off"), BENCH_CLIENTS (4), BENCH_THREADS (2),
# BENCH_W5_CONTEXTS (1000000), BENCH_W5_SECONDS (30), BENCH_W5_PARTS ("session unpaced worker":
# which of W5's three parts run), BENCH_W5_WORKER_SETTINGS (none: extra settings for the worker's part,
# e.g. "cscp.sweep_batch=1000 cscp.sweep_backlog_delay=300ms"), BENCH_W6_TURNS (10000),
# BENCH_EXPLAINS (6).
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
source test/scripts/bench_lib.sh

SECS=${BENCH_SECONDS:-12}
RUNS=${BENCH_RUNS:-3}
ONLY=${BENCH_ONLY:-W1,W2,W3,W4,W5,W6}
SYNCS=${BENCH_SYNC:-on off}
W5_CONTEXTS=${BENCH_W5_CONTEXTS:-1000000}
W5_SECONDS=${BENCH_W5_SECONDS:-30}
W5_PARTS=${BENCH_W5_PARTS:-session unpaced worker}
W5_WORKER_SETTINGS=${BENCH_W5_WORKER_SETTINGS:-}
W6_TURNS=${BENCH_W6_TURNS:-10000}
EXPLAINS=${BENCH_EXPLAINS:-6}
export BENCH_CLIENTS=${BENCH_CLIENTS:-4} BENCH_THREADS=${BENCH_THREADS:-2}
export BENCH_ROLE=bench_app BENCH_TENANT=bench

for w in ${ONLY//,/ }; do
	case $w in
		W1 | W2 | W3 | W4 | W5 | W6) ;;
		*) echo "cscp bench: unknown workload \"$w\" in BENCH_ONLY (W1 to W6)" >&2; exit 2 ;;
	esac
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }
# in_turn I V1 V2 ...: the variants in the order of repetition I, rotated by I - 1, so that each
# runs first, second and third alike.  Runs later in a sequence are slower for reasons of their
# own (the tables grow run by run; an A/A test, test/scripts/bench_aa.sh, gave the second of two
# identical runs 0.95 of the first's TPS as the median of six pairs): a fixed order charges that
# to whichever variant always comes last.  W1-W3 have three variants, so three repetitions put
# each in each place once.  W4 and W6 compare two, which three repetitions cannot balance that
# way; there each run of the variant measured comes between two runs of its reference (W4's
# valid-only subject, W6's new conversations: RUNS + 1 runs of it), and its ratio is to the mean
# of those two (bench_bracket_ratio), which takes out a drift that is steady over the three.
in_turn() { local i=$1 n k; shift; n=$#; local v=("$@"); for k in $(seq 0 $((n - 1))); do echo "${v[$(((k + i - 1) % n))]}"; done; }

bench_cluster_start
started=$(date +%s)
echo "cscp bench: $ONLY; throwaway cluster in $CSCP_TMP (fsync=on); $BENCH_CLIENTS clients, $BENCH_THREADS threads," \
     "-M prepared, ${SECS}s per run, $RUNS runs per variant and setting"
for s in bench_floor bench_naive; do
	psql -X -q -v ON_ERROR_STOP=1 -v schema=$s -v role=$BENCH_ROLE -f test/bench/floor_schema.sql
done
psql -X -q -v ON_ERROR_STOP=1 -v role=$BENCH_ROLE -f test/bench/baseline_plpgsql.sql
psql -X -q -v ON_ERROR_STOP=1 -v role=$BENCH_ROLE -f test/bench/message_turn_single_floor_fn.sql

# Does the cluster's cscp have the single-call path?
has_message_turn=$(psql -X -At -c "SELECT to_regprocedure('cscp.message_turn(text, text, text, jsonb, jsonb, jsonb)') IS NOT NULL")

# ---------------------------------------------------------------------------------------------
if want W1; then
	echo "== W1 message turn (9 round trips: exchange, open, 2 x slot_set, submit, 4 transitions)"
	for impl in floor naive cscp; do
		conversations "w1-warm-$impl" $impl
		bench_run "warmup.W1.$impl" on 5 -D conv="w1-warm-$impl" -f "test/bench/message_turn_$impl.sql" >/dev/null
	done
	for sync in $SYNCS; do
		for i in $(seq 1 "$RUNS"); do
			for impl in $(in_turn "$i" floor naive cscp); do
				conversations "w1-$sync-$impl-$i" $impl
				bench_run "W1.$sync.$impl.r$i" "$sync" "$SECS" -D conv="w1-$sync-$impl-$i" -f "test/bench/message_turn_$impl.sql"
			done
		done
	done
	if [ "$has_message_turn" = t ]; then
		echo "== W1 through the single call (5 round trips: message_turn, 4 transitions)"
		for sync in $SYNCS; do
			for i in $(seq 1 "$RUNS"); do
				for impl in $(in_turn "$i" floor cscp); do
					conversations "w1s-$sync-$impl-$i" $impl
					bench_run "W1s.$sync.$impl.r$i" "$sync" "$SECS" -D conv="w1s-$sync-$impl-$i" \
						-f "test/bench/message_turn_single_$impl.sql"
				done
			done
		done
	else
		echo "== W1 through the single call: skipped, this cscp has no cscp.message_turn(text, text, text, jsonb, jsonb, jsonb)"
	fi
fi

# ---------------------------------------------------------------------------------------------
if want W2; then
	echo "== W2 confirmation (7 round trips: open, submit mutating, confirm, 4 transitions)"
	for impl in floor naive cscp; do
		bench_run "warmup.W2.$impl" on 5 -f "test/bench/command_cycle_$impl.sql" >/dev/null
	done
	for sync in $SYNCS; do
		for i in $(seq 1 "$RUNS"); do
			for impl in $(in_turn "$i" floor naive cscp); do
				bench_run "W2.$sync.$impl.r$i" "$sync" "$SECS" -f "test/bench/command_cycle_$impl.sql"
			done
		done
	done
fi

# Every command of W1 and W2 ran to executed, in every variant, and cscp's evidence verifies
# (a sample of 50 chains, one command at a time).
if want W1 || want W2; then
	psql -X -q -v ON_ERROR_STOP=1 -At -F ' ' >"$BENCH_OUT/check.txt" <<SQL
SELECT count(*), count(*) FILTER (WHERE state = 'executed') FROM cscp.command;
SELECT count(*), count(*) FILTER (WHERE state = 'executed') FROM bench_floor.command;
SELECT count(*), count(*) FILTER (WHERE state = 'executed') FROM bench_naive.command;
SELECT (SELECT count(*) FROM bench_naive.evidence), (SELECT count(*) FROM bench_floor.evidence),
       (SELECT count(*) FROM cscp.evidence);
SELECT count(*) FROM (SELECT command_id FROM cscp.command ORDER BY random() LIMIT 50) s,
       LATERAL cscp.evidence_verify('$BENCH_TENANT', s.command_id) v;
SQL
	{ read -r nc ec; read -r nf ef; read -r nn en; read -r evn evf evc; read -r problems; } <"$BENCH_OUT/check.txt"
	echo "check: commands executed / formed: cscp $ec/$nc, floor $ef/$nf, naive $en/$nn;" \
	     "evidence rows: cscp $evc, floor $evf, naive $evn; evidence_verify problems in 50 sampled chains: $problems"
	if [ "$nc" != "$ec" ] || [ "$nf" != "$ef" ] || [ "$nn" != "$en" ] || [ "$problems" != 0 ]; then
		echo "cscp bench: a turn or cycle did not complete, or the evidence does not verify" >&2
		exit 1
	fi
fi

# ---------------------------------------------------------------------------------------------
if want W3; then
	echo "== W3 documents (80% doc_get, 20% doc_put, 100,000 sessions)"
	# 1,000 rows per transaction: cscp's forgotten_guard takes one advisory lock per session in
	# the transaction, and 100,000 of them do not fit in the lock table (max_locks_per_transaction).
	for s in bench_floor bench_naive cscp; do
		psql -X -q -v ON_ERROR_STOP=1 -c "
			DO \$\$
			BEGIN
			    FOR b IN 0..99 LOOP
			        INSERT INTO $s.document (tenant_id, session_id, namespace, payload, expires_at)
			        SELECT '$BENCH_TENANT', 's-' || i, 'profile', jsonb_build_object('name', 'user ' || i, 'k1', i),
			               now() + interval '1 day'
			          FROM generate_series(b * 1000 + 1, (b + 1) * 1000) i;
			        COMMIT;
			    END LOOP;
			END
			\$\$" -c "VACUUM (ANALYZE) $s.document"
	done
	for impl in floor naive cscp; do
		bench_run "warmup.W3.$impl" on 5 -f "test/bench/doc_get_$impl.sql@8" -f "test/bench/doc_put_$impl.sql@2" >/dev/null
	done
	for sync in $SYNCS; do
		for i in $(seq 1 "$RUNS"); do
			for impl in $(in_turn "$i" floor naive cscp); do
				bench_run "W3.$sync.$impl.r$i" "$sync" "$SECS" \
					-f "test/bench/doc_get_$impl.sql@8" -f "test/bench/doc_put_$impl.sql@2"
			done
		done
	done
	same=$(psql -X -At -c "
		SELECT count(*) FROM cscp.document c JOIN bench_floor.document f USING (tenant_id, session_id, namespace)
		 WHERE c.payload ?| ARRAY['k2', 'k3'] AND f.payload ?| ARRAY['k2', 'k3']")
	echo "check: documents that doc_put merged keys into, in both cscp and the floor: $same"
	[ "$same" -gt 0 ] || { echo "cscp bench: W3 merged nothing" >&2; exit 1; }
fi

# ---------------------------------------------------------------------------------------------
if want W6; then
	echo "== W6 long conversations ($BENCH_CLIENTS conversations of $W6_TURNS turns against new ones; W1 through cscp, synchronous_commit=on)"
	t0=$(date +%s.%N)
	conversations long cscp
	for c in $(seq 0 $((BENCH_CLIENTS - 1))); do
		cat <<SQL
DO \$\$
BEGIN
    FOR i IN 1..$W6_TURNS - 1 LOOP
        PERFORM cscp.conversation_exchange('$BENCH_TENANT', 'long-$c',
            jsonb_build_object('from', CASE WHEN i % 2 = 0 THEN 'agent' ELSE 'customer' END,
                               'role', CASE WHEN i % 2 = 0 THEN 'agent' ELSE 'user' END,
                               'content', jsonb_build_object('text', 'turn ' || i), 'ts', i));
        COMMIT;
    END LOOP;
END
\$\$;
SQL
	done | as_app
	psql -X -q -c "VACUUM (ANALYZE) cscp.conversation, cscp.turn, cscp.event"
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "setup: %.1f s\n", b - a }'
	# new, long, new, ..., new: each long run between two runs on new conversations (bracketed)
	for i in $(seq 1 $((RUNS + 1))); do
		conversations "w6-new-$i" cscp
		bench_run "W6.on.new.r$i" on "$SECS" -D conv="w6-new-$i" -f test/bench/message_turn_cscp.sql
		[ "$i" -gt "$RUNS" ] ||
			bench_run "W6.on.long.r$i" on "$SECS" -D conv=long -f test/bench/message_turn_cscp.sql
	done
	read -r lmin lmax <<<"$(psql -X -At -F ' ' -c "SELECT min(next_turn_index), max(next_turn_index) FROM cscp.conversation WHERE conversation_id LIKE 'long-%'")"
	echo "check: the long conversations now hold $lmin to $lmax turns"
	[ "$lmin" -ge "$W6_TURNS" ] || { echo "cscp bench: W6 long conversations are short" >&2; exit 1; }
fi

# ---------------------------------------------------------------------------------------------
if want W4; then
	echo "== W4 context assembly (build_context, 1,000 valid facts with and without 100,000 superseded ones)"
	t0=$(date +%s.%N)
	as_app -f test/bench/facts_setup.sql >"$BENCH_OUT/facts_setup.txt" 2>&1 ||
		{ cat "$BENCH_OUT/facts_setup.txt" >&2; echo "cscp bench: W4 setup failed" >&2; exit 1; }
	psql -X -q -v ON_ERROR_STOP=1 -c 'VACUUM (ANALYZE) cscp.fact'
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "setup (test/bench/facts_setup.sql through cscp.fact_write): %.1f s\n", b - a }'
	for subj in valid superseded; do
		bench_run "warmup.W4.$subj" on 5 -f "test/bench/build_context_$subj.sql" >/dev/null
	done
	# valid, superseded, valid, ..., valid: each superseded run between two valid ones (bracketed)
	for i in $(seq 1 "$RUNS"); do
		bench_run "W4.on.valid.r$i" on "$SECS" -f test/bench/build_context_valid.sql
		bench_run "W4.on.superseded.r$i" on "$SECS" -f test/bench/build_context_superseded.sql
	done
	bench_run "W4.on.valid.r$((RUNS + 1))" on "$SECS" -f test/bench/build_context_valid.sql
	same=$(as_app -At -c "
		SELECT (cscp.build_context('bench', 'valid-only', 's1', 'value topic 7', 2000) - 'now')
		     = (cscp.build_context('bench', 'superseded', 's1', 'value topic 7', 2000) - 'now')")
	echo "check: the two subjects' contexts for 'value topic 7' are the same: $same"
	[ "$same" = t ] || { echo "cscp bench: W4 contexts differ" >&2; exit 1; }
	# fact_current and fact_history from the oldest fact of a chain of 101, EXPLAIN ANALYZE
	# EXPLAINS times each in one new session (the first call pays for the session's plans).
	{
		for i in $(seq 1 "$EXPLAINS"); do
			echo "EXPLAIN (ANALYZE, BUFFERS) SELECT cscp.fact_current('bench', 'superseded', 'f-500-v0');"
		done
		for i in $(seq 1 "$EXPLAINS"); do
			echo "EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM cscp.fact_history('bench', 'superseded', 'f-500-v0');"
		done
		echo "SELECT 'head', (cscp.fact_current('bench', 'superseded', 'f-500-v0')).fact_id,"
		echo "       (SELECT count(*) FROM cscp.fact_history('bench', 'superseded', 'f-500-v0'));"
	} | as_app -At >"$BENCH_OUT/explain.txt"
	read -r _ head chainlen <<<"$(grep '^head|' "$BENCH_OUT/explain.txt" | tr '|' ' ')"
	echo "check: head of f-500-v0 is $head, chain length $chainlen"
	[ "$head" = f-500 ] && [ "$chainlen" = 101 ] || { echo "cscp bench: W4 wrong chain" >&2; exit 1; }
	sed -n 's/^Execution Time: \([0-9.]*\) ms$/\1/p' "$BENCH_OUT/explain.txt" >"$BENCH_OUT/exec.txt"
	fc_first=$(sed -n 1p "$BENCH_OUT/exec.txt")
	fc_warm=$(sed -n "2,${EXPLAINS}p" "$BENCH_OUT/exec.txt" | bench_median)
	fh_warm=$(sed -n "$((EXPLAINS + 2)),$((2 * EXPLAINS))p" "$BENCH_OUT/exec.txt" | bench_median)
fi

# ---------------------------------------------------------------------------------------------
if want W5; then
	echo "== W5 sweep under load ($W5_CONTEXTS expired contexts; W1 through cscp, synchronous_commit=on, ${W5_SECONDS}s)"
	w5_part() { [[ " $W5_PARTS " == *" $1 "* ]]; }
	# w5_alone_again KEY CONV: W1 alone once more (KEY.r2) once the sweep is done, after a VACUUM
	# as the first run alone came after one (bench_expired_contexts); each part compares the p99
	# beside the sweep with the mean of its two runs alone, as W4 and W6 compare theirs (one 30 s
	# run's p99 moves by half from one run to the next).  Prints "p50 p99 turns" of the run.
	w5_alone_again() {
		psql -X -q -c "VACUUM (ANALYZE)" >&2
		conversations "$2" cscp >&2
		bench_run "$1.r2" on "$W5_SECONDS" -D conv="$2" -f test/bench/message_turn_cscp.sql >&2
		bench_latency "$BENCH_OUT/$1.r2.log"
	}
	mean2() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (a + b) / 2 }'; }
	# w5_waits_on LOG PID: how many lock waits in server log LOG passed 10 ms (log_lock_waits,
	# deadlock_timeout = 10ms: "still waiting", the holders in the DETAIL line) on a lock PID held.
	w5_waits_on() {
		grep -A1 'still waiting for' "$1" | grep -Ec "Process(es)? holding the lock: ([0-9]+, )*$2[.,]" || true
	}
	# w5_walstats KEY WHAT: the record types that wrote the most WAL beside the sweep (KEY.on.sweep.r1)
	# and the five of W1 alone (KEY.on.alone.r1).
	w5_walstats() {
		echo "WAL while W1 ran beside $2, the record types that wrote the most (then W1 alone's five):"
		bench_walstats "$1.on.sweep.r1" | sed 's/^/  /'
		bench_walstats "$1.on.alone.r1" 5 | sed 's/^/  alone: /'
	}
	w5_during_p99= w5_ref_p99= waits_on_sweep=
	w5u_during_p99= w5u_ref_p99= w5u_waits=
	w5w_during_p99= w5w_ref_p99= ww_waits_on_sweep=
	# W5 runs with autovacuum, and no VACUUM of bench_run's beside the sweep.
	psql -X -q -c "ALTER SYSTEM SET autovacuum = on" -c "SELECT pg_reload_conf()" >/dev/null
	export BENCH_VACUUM=off
fi
# w5_session KEY TENANT PAUSE: W5 with the sweep called by one session, over a backlog of
# $W5_CONTEXTS expired contexts of TENANT, the session waiting PAUSE seconds after a call that
# reached the batch;
# runs KEY.on.alone.r1, KEY.on.sweep.r1 and KEY.on.alone.r2 and sets W5S_DURING (W1's p99 while
# the sweep ran), W5S_REF (the mean of the p99s of the two runs alone) and W5S_WAITS (lock waits
# over 10 ms on a lock the sweep held).
w5_session() {
	local key=$1 tenant=$2 pause=$3 conv t0 loglines sweep_job sweep_pid sw_start sw_end sw_calls sw_expired sw_maxms sw_avgms
	local alone_p50 alone_p99 alone_n during_p50 during_p99 during_n after_p50 after_p99 after_n waits longest_wait left
	conv=$(echo "$key" | tr '[:upper:]' '[:lower:]')
	t0=$(date +%s.%N)
	bench_expired_contexts "$tenant" "$W5_CONTEXTS"
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "setup: %.1f s\n", b - a }'
	conversations "$conv-alone" cscp
	bench_run "$key.on.alone.r1" on "$W5_SECONDS" -D conv="$conv-alone" -f test/bench/message_turn_cscp.sql
	loglines=$(wc -l <"$CSCP_TMP/postgres.log")
	conversations "$conv-sweep" cscp
	# The sweep, in one session, batch by batch (its default batch), each call its own
	# transaction, until nothing is left to expire, pausing between calls as its caller's
	# schedule says; it reports its start, its end, the number of calls and the longest call.
	{ echo "SET bench.sweep_pause = '$pause';"; cat <<'SQL'; } | PGAPPNAME=cscp_bench_sweep psql -X -At -v ON_ERROR_STOP=1 >"$BENCH_OUT/$key.sweep.txt" 2>&1 &
SELECT 'start', extract(epoch FROM clock_timestamp());
CREATE TEMP TABLE sweep_calls (n bigint, ms double precision);
DO $$
DECLARE
    r jsonb;
    t timestamptz;
BEGIN
    LOOP
        t := clock_timestamp();
        r := cscp.sweep();
        INSERT INTO sweep_calls VALUES ((r ->> 'contexts_expired')::bigint,
                                        extract(epoch FROM clock_timestamp() - t) * 1000);
        COMMIT;
        EXIT WHEN (r ->> 'contexts_expired')::bigint = 0;
        IF (r ->> 'contexts_expired')::bigint >= 10000 THEN
            PERFORM pg_sleep(current_setting('bench.sweep_pause')::float8);
        END IF;
    END LOOP;
END
$$;
SELECT 'end', extract(epoch FROM clock_timestamp());
SELECT 'calls', count(*), sum(n), round(max(ms)::numeric, 1), round(avg(ms)::numeric, 1) FROM sweep_calls;
SQL
	sweep_job=$!
	sweep_pid=
	for _ in $(seq 1 50); do
		sweep_pid=$(psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'cscp_bench_sweep'")
		[ -n "$sweep_pid" ] && break
		sleep 0.1
	done
	bench_run "$key.on.sweep.r1" on "$W5_SECONDS" -D conv="$conv-sweep" -f test/bench/message_turn_cscp.sql
	wait "$sweep_job" || { cat "$BENCH_OUT/$key.sweep.txt" >&2; echo "cscp bench: the sweep failed" >&2; exit 1; }
	sw_start=$(sed -n 's/^start|//p' "$BENCH_OUT/$key.sweep.txt")
	sw_end=$(sed -n 's/^end|//p' "$BENCH_OUT/$key.sweep.txt")
	IFS='|' read -r _ sw_calls sw_expired sw_maxms sw_avgms <<<"$(grep '^calls|' "$BENCH_OUT/$key.sweep.txt")"
	read -r alone_p50 alone_p99 alone_n _ <<<"$(bench_latency "$BENCH_OUT/$key.on.alone.r1.log")"
	read -r during_p50 during_p99 during_n _ <<<"$(bench_latency "$BENCH_OUT/$key.on.sweep.r1.log" - "$sw_start" "$sw_end")"
	tail -n +"$((loglines + 1))" "$CSCP_TMP/postgres.log" >"$BENCH_OUT/$key.server.log"
	waits=$(grep -c 'still waiting for' "$BENCH_OUT/$key.server.log" || true)
	W5S_WAITS=$(w5_waits_on "$BENCH_OUT/$key.server.log" "$sweep_pid")
	longest_wait=$(sed -n 's/.* after \([0-9.]*\) ms.*/\1/p' "$BENCH_OUT/$key.server.log" | sort -g | tail -1)
	awk -v a="$sw_start" -v b="$sw_end" -v n="$sw_expired" -v c="$sw_calls" -v m="$sw_maxms" -v v="$sw_avgms" \
		'BEGIN { printf "sweep: %d contexts expired in %.1f s (%.0f per s), %d calls, longest call %.1f ms, mean %.1f ms\n",
		         n, b - a, n / (b - a), c, m, v }'
	echo "W1 alone: p50 $alone_p50 ms, p99 $alone_p99 ms ($alone_n turns);" \
	     "during the sweep: p50 $during_p50 ms, p99 $during_p99 ms ($during_n turns that ended while it ran)"
	echo "lock waits over 10 ms while the sweep ran: $waits in all, $W5S_WAITS on a lock the sweep (pid $sweep_pid) held;" \
	     "longest wait logged: ${longest_wait:-none} ms"
	w5_walstats "$key" "the sweep"
	left=$(psql -X -At -c "SELECT count(*) FROM cscp.context WHERE tenant_id = '$tenant' AND status <> 'expired'")
	echo "check: contexts of tenant $tenant not expired after the sweep: $left"
	[ "$left" = 0 ] || { echo "cscp bench: the sweep left contexts" >&2; exit 1; }
	read -r after_p50 after_p99 after_n _ <<<"$(w5_alone_again "$key.on.alone" "$conv-after")"
	W5S_DURING=$during_p99
	W5S_REF=$(mean2 "$alone_p99" "$after_p99")
	echo "W1 alone after the sweep: p50 $after_p50 ms, p99 $after_p99 ms ($after_n turns); reference p99 (the mean of the two runs alone) $W5S_REF ms"
}
if want W5 && w5_part session; then
	echo "== W5, one session calling cscp.sweep(), 6 s after a call that left a backlog"
	w5_session W5 sweep 6
	w5_during_p99=$W5S_DURING w5_ref_p99=$W5S_REF waits_on_sweep=$W5S_WAITS
fi
if want W5 && w5_part unpaced; then
	# The same without a pause between the calls: a catch-up at full speed (no target; the lock
	# rule holds all the same).
	echo "== W5, one session calling cscp.sweep() back to back (no pause)"
	w5_session W5u sweepu 0
	w5u_during_p99=$W5S_DURING w5u_ref_p99=$W5S_REF w5u_waits=$W5S_WAITS
fi
if want W5 && w5_part worker; then
	# The same backlog through the background worker, the way the sweep is meant to run: the
	# cluster restarted with cscp preloaded (the worker idle, cscp.sweep_interval = 0), another
	# $W5_CONTEXTS expired contexts (tenant sweep2), W1 alone, then the worker woken (interval an
	# hour, cscp.sweep_backlog_delay at its default) and W1 again while it works through them.
	echo "== W5 through the background worker (${W5_WORKER_SETTINGS:-cscp.sweep_batch and cscp.sweep_backlog_delay at their defaults})"
	# (LOAD: the setting exists in this session only once cscp is loaded)
	psql -X -q -c "LOAD 'cscp'" -c "ALTER SYSTEM SET cscp.sweep_interval = 0" >/dev/null
	for kv in $W5_WORKER_SETTINGS; do
		psql -X -q -c "LOAD 'cscp'" -c "ALTER SYSTEM SET ${kv%%=*} = '${kv#*=}'" >/dev/null
	done
	cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CSCP_TMP/data" -m fast -w stop >/dev/null
	CSCP_PGOPTS+=" -c shared_preload_libraries=cscp -c cscp.sweep_database=postgres"
	cluster_restart
	bench_expired_contexts sweep2 "$W5_CONTEXTS"
	conversations w5w-alone cscp
	bench_run W5w.on.alone.r1 on "$W5_SECONDS" -D conv=w5w-alone -f test/bench/message_turn_cscp.sql
	conversations w5w-sweep cscp
	loglines=$(wc -l <"$CSCP_TMP/postgres.log")
	psql -X -q -c "ALTER SYSTEM SET cscp.sweep_interval = '1h'" -c "SELECT pg_reload_conf()" >/dev/null
	ww_start=$(date +%s.%N)
	ww_pid=$(psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cscp sweep'")
	# The backlog's end, watched beside the W1 run (which may outlast it) from one session, through
	# cscp.context_live's key (a few index pages a look), committing between looks so as to hold
	# back no one's snapshot horizon.  (It used to start psql every 0.2 s to look for a context
	# still active in cscp.context, a scan over the contexts expired so far: a load of its own
	# beside W1, larger than the worker's.)
	psql -X -q -At -v ON_ERROR_STOP=1 >"$BENCH_OUT/worker_end.txt" <<'SQL' &
DO $$
BEGIN
    LOOP
        EXIT WHEN NOT EXISTS (SELECT FROM cscp.context_live WHERE tenant_id = 'sweep2');
        COMMIT;
        PERFORM pg_sleep(0.2);
    END LOOP;
END
$$;
SELECT extract(epoch FROM clock_timestamp());
SQL
	ww_watch=$!
	bench_run W5w.on.sweep.r1 on "$W5_SECONDS" -D conv=w5w-sweep -f test/bench/message_turn_cscp.sql
	wait "$ww_watch"
	ww_end=$(cat "$BENCH_OUT/worker_end.txt")
	psql -X -q -c "ALTER SYSTEM SET cscp.sweep_interval = 0" -c "SELECT pg_reload_conf()" >/dev/null
	read -r w5w_after_p50 w5w_after_p99 w5w_after_n _ <<<"$(w5_alone_again W5w.on.alone w5w-after)"
	read -r w5w_alone_p50 w5w_alone_p99 w5w_alone_n _ <<<"$(bench_latency "$BENCH_OUT/W5w.on.alone.r1.log")"
	read -r w5w_during_p50 w5w_during_p99 w5w_during_n _ <<<"$(bench_latency "$BENCH_OUT/W5w.on.sweep.r1.log" - "$ww_start" "$ww_end")"
	tail -n +"$((loglines + 1))" "$CSCP_TMP/postgres.log" >"$BENCH_OUT/w5w_server.log"
	ww_waits_on_sweep=$(w5_waits_on "$BENCH_OUT/w5w_server.log" "$ww_pid")
	awk -v a="$ww_start" -v b="$ww_end" -v n="$W5_CONTEXTS" \
		'BEGIN { printf "worker: %d contexts expired in %.1f s (%.0f per s)\n", n, b - a, n / (b - a) }'
	echo "W1 alone: p50 $w5w_alone_p50 ms, p99 $w5w_alone_p99 ms ($w5w_alone_n turns);" \
	     "while the worker works through the backlog: p50 $w5w_during_p50 ms, p99 $w5w_during_p99 ms ($w5w_during_n turns)"
	w5w_ref_p99=$(mean2 "$w5w_alone_p99" "$w5w_after_p99")
	echo "W1 alone after the backlog: p50 $w5w_after_p50 ms, p99 $w5w_after_p99 ms ($w5w_after_n turns); reference p99 (the mean of the two runs alone) $w5w_ref_p99 ms"
	echo "lock waits over 10 ms on a lock the worker (pid $ww_pid) held: $ww_waits_on_sweep"
	w5_walstats W5w "the worker"
fi

# ---------------------------------------------------------------------------------------------
# The table: medians over the runs.
files() { local i; for i in $(seq 1 "$RUNS"); do [ ! -f "$BENCH_OUT/$1.r$i${2:-}.res" ] || echo "$BENCH_OUT/$1.r$i${2:-}.res"; done; }
num() { awk -v v="$1" -v f="$2" 'BEGIN { if (v == "nan" || v == "-" || v == "") print "-"; else printf f, v }'; }
med() { bench_field "$1" $(files "$2" "${3:-}"); }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0 || a == "nan" || b == "nan") print "-"; else printf "%.2f", a / b }'; }

# row LABEL KEY [SUFFIX]: one line of the table for $BENCH_OUT/KEY.r<i>SUFFIX.res; for cscp, the
# ratios to floor and naive of the same workload and setting (TPS; for one operation of W3's mix,
# the baseline's mean latency over cscp's)
row() {
	local label=$1 key=$2 suf=${3:-} tps p50 p99 wal fpi rf=- rn=- base impl
	[ -f "$BENCH_OUT/$key.r1$suf.res" ] || return 0
	tps=$(med 1 "$key" "$suf"); p50=$(med 2 "$key" "$suf"); p99=$(med 3 "$key" "$suf")
	wal=$(med 6 "$key" "$suf"); fpi=$(med 7 "$key" "$suf")
	impl=${key##*.}
	base=${key%.*}
	if [ "$impl" = cscp ]; then
		for b in floor naive; do
			if [ -n "$suf" ]; then
				r=$(bench_pair_ratio 5 "$base.$b" 5 "$key" "$RUNS" "$suf")
			else
				r=$(bench_pair_ratio 1 "$key" 1 "$base.$b" "$RUNS")
			fi
			r=$(num "$r" %.2f)
			if [ $b = floor ]; then rf=$r; else rn=$r; fi
		done
	fi
	printf '| %-38s | %-4s | %-10s | %8.1f | %7.2f | %7.2f | %8s | %8s | %6s | %6s |\n' \
		"$label" "$(echo "$key" | cut -d. -f2)" "$impl" "$tps" "$p50" "$p99" "$(num "$wal" %.0f)" "$(num "$fpi" %.0f)" "$rf" "$rn"
}

echo
echo "Medians of $RUNS runs of ${SECS}s, $BENCH_CLIENTS clients, $BENCH_THREADS threads, -M prepared; latency per transaction (a whole turn or cycle)."
echo "×floor, ×naive: cscp's TPS over the baseline's (for W3's get and put rows: the baseline's mean latency over cscp's),"
echo "the median over the repetitions of the ratio of the two runs of one repetition (not the ratio of the medians shown)."
echo
echo "| workload                               | sync | impl       |      TPS |  p50 ms |  p99 ms | WAL B/tx | FPI B/tx | ×floor | ×naive |"
echo "| -------------------------------------- | ---- | ---------- | -------: | ------: | ------: | -------: | -------: | -----: | -----: |"
for sync in $SYNCS; do
	for impl in floor naive cscp; do row "W1 message turn (9 round trips)" "W1.$sync.$impl"; done
	for impl in floor cscp; do row "W1 single call (5 round trips)" "W1s.$sync.$impl"; done
	for impl in floor naive cscp; do row "W2 confirmation (7 round trips)" "W2.$sync.$impl"; done
	for impl in floor naive cscp; do row "W3 documents, mix 80/20" "W3.$sync.$impl"; done
	for impl in floor naive cscp; do row "W3 doc_get (in the mix)" "W3.$sync.$impl" .s0; done
	for impl in floor naive cscp; do row "W3 doc_put (in the mix)" "W3.$sync.$impl" .s1; done
done
row "W4 build_context, 1,000 valid" W4.on.valid
row "W4 build_context, +100,000 superseded" W4.on.superseded
row "W6 W1 on new conversations" W6.on.new
row "W6 W1 on $W6_TURNS-turn conversations" W6.on.long
if want W5; then
	row "W5 W1 alone (before, after)" W5.on.alone
	row "W5 W1 while the sweep runs (1 run)" W5.on.sweep
	row "W5 W1 alone, for the unpaced part" W5u.on.alone
	row "W5 W1 while the sweep runs unpaced" W5u.on.sweep
	row "W5 W1 alone, preloaded (before, after)" W5w.on.alone
	row "W5 W1 while the worker sweeps (1 run)" W5w.on.sweep
fi

# The targets (issue 6's; the TPS ratios to the floor issue 41's), each with its measured value.
target() { # DESCRIPTION VALUE OP LIMIT
	[ "$2" = - ] || [ -z "$2" ] && { printf '  %-58s %8s   (target %s %s): not measured\n' "$1" - "$3" "$4"; return; }
	awk -v d="$1" -v v="$2" -v op="$3" -v l="$4" 'BEGIN {
		ok = (op == ">=") ? (v >= l) : (v <= l)
		printf "  %-58s %8.3f   (target %s %s): %s\n", d, v, op, l, ok ? "met" : (l == 0 ? "MISSED" : sprintf("MISSED by %.1f%%", (op == ">=") ? (1 - v / l) * 100 : (v / l - 1) * 100)) }'
}
have() { [ -f "$BENCH_OUT/$1.r1${2:-}.res" ]; }
echo
echo "Targets (each ratio the median over the repetitions of: W1-W3, the ratio of the two runs of one repetition;"
echo "W4, W6, a run over the mean of the two runs of its reference just before and after it; W5, the p99 beside the sweep"
echo "over the mean of the p99s of the two runs alone before and after it):"
pair() { bench_pair_ratio "$1" "$2" "$3" "$4" "$RUNS" "${5:-}"; }
bracket() { bench_bracket_ratio "$1" "$2" "$3" "$4" "$RUNS"; }
for sync in $SYNCS; do
	lim=0.80; [ "$sync" = off ] && lim=0.50
	for w in W1 W2; do
		have "$w.$sync.cscp" || continue
		target "$w cscp/floor TPS, synchronous_commit=$sync" "$(pair 1 "$w.$sync.cscp" 1 "$w.$sync.floor")" ">=" $lim
		target "$w cscp/naive TPS, synchronous_commit=$sync" "$(pair 1 "$w.$sync.cscp" 1 "$w.$sync.naive")" ">=" 1.1
	done
	if have "W1s.$sync.cscp"; then
		target "W1 single call cscp/floor TPS, synchronous_commit=$sync" "$(pair 1 "W1s.$sync.cscp" 1 "W1s.$sync.floor")" ">=" $lim
	fi
	if have "W3.$sync.cscp"; then
		target "W3 doc_get speed / plain PK select, sync=$sync" "$(pair 5 "W3.$sync.floor" 5 "W3.$sync.cscp" .s0)" ">=" 0.9
		target "W3 doc_put speed / plain upsert, sync=$sync" "$(pair 5 "W3.$sync.floor" 5 "W3.$sync.cscp" .s1)" ">=" 0.85
	fi
	if have "W1.$sync.cscp"; then
		target "storage: W1 WAL bytes per turn cscp/floor, sync=$sync" "$(pair 6 "W1.$sync.cscp" 6 "W1.$sync.floor")" "<=" 1.3
		target "  the same without full-page images" "$(pair 8 "W1.$sync.cscp" 8 "W1.$sync.floor")" "<=" 1.3
	fi
done
if have W4.on.valid; then
	target "W4 p50 latency superseded/valid" "$(bracket 2 W4.on.superseded 2 W4.on.valid)" "<=" 1.5
	target "W4 p99 latency superseded/valid" "$(bracket 3 W4.on.superseded 3 W4.on.valid)" "<=" 1.5
	target "W4 fact_current, chain of 101, warm, ms" "$fc_warm" "<=" 1
	target "W4 fact_current, first call in a session, ms" "$fc_first" "<=" 1
	echo "  (fact_history of the same chain, warm: $fh_warm ms)"
fi
if want W5; then
	target "W5 W1 p99 during the sweep / alone (before, after)" "$(ratio "$w5_during_p99" "$w5_ref_p99")" "<=" 2
	target "W5 lock waits over 10 ms on a lock the sweep held" "$waits_on_sweep" "<=" 0
	if [ -n "$w5u_during_p99" ]; then
		printf '  %-58s %8.3f   (no target: no pause)\n' \
			"W5 unpaced: W1 p99 during the sweep / alone" "$(ratio "$w5u_during_p99" "$w5u_ref_p99")"
		target "W5 unpaced: lock waits over 10 ms on the sweep's locks" "$w5u_waits" "<=" 0
	fi
	target "W5 via the worker: p99 during its backlog / alone" "$(ratio "$w5w_during_p99" "$w5w_ref_p99")" "<=" 2
	target "W5 via the worker: lock waits over 10 ms on its locks" "$ww_waits_on_sweep" "<=" 0
fi
if have W6.on.new; then
	target "W6 TPS $W6_TURNS-turn / new conversations" "$(bracket 1 W6.on.long 1 W6.on.new)" ">=" 0.95
fi
awk -v a="$started" -v b="$(date +%s)" 'BEGIN { printf "\nmake bench took %d min %d s\n", (b - a) / 60, (b - a) % 60 }'
