#!/usr/bin/env bash
# `make bench-instructions`: CPU instructions per transaction of W1 (message turn), W2
# (confirmation cycle) and C (the confirmation path: W2's seven calls as a role bound to its one
# tenant) through cscp and through the floor (plain SQL on plain tables), counted by
# valgrind's callgrind in the one backend that runs them.  Unlike `make bench`'s timings, the
# counts do not move with the machine's load, so a change's cost on the hot paths can be read
# from two runs even on a busy, shared machine.
#
# How: a throwaway cluster is set up as `make bench` sets it up (application role under
# row-level security, the floor's schema, one conversation per workload), then restarted under
# callgrind (every process; autovacuum off, so the only busy process is the client's backend).
# pgbench runs each script with one client for T1 and then T2 transactions, each run in a new
# backend, after a VACUUM (ANALYZE), as `make bench` starts each run; a backend's count includes
# its start and its exit, which the difference of the two runs takes out: instructions per
# transaction = (count(T2) - count(T1)) / (T2 - T1).
#
# Settings: BENCH_INSTR_T1 (20), BENCH_INSTR_T2 (80), BENCH_ONLY (W1,W2,C), BENCH_INSTR_PROFILE
# (a folder: each run of T2 transactions leaves its callgrind file there, NAME.callgrind, and
# NAME.inclusive.txt, its functions by inclusive cost from callgrind_annotate).
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
export BENCH_ROLE=bench_app BENCH_TENANT=bench BENCH_CLIENTS=1 BENCH_THREADS=1
source test/scripts/bench_lib.sh

T1=${BENCH_INSTR_T1:-20}
T2=${BENCH_INSTR_T2:-80}
ONLY=${BENCH_ONLY:-W1,W2,C}
PROFILE=${BENCH_INSTR_PROFILE:-}
[ -z "$PROFILE" ] || { mkdir -p "$PROFILE" && PROFILE=$(cd "$PROFILE" && pwd); }
command -v valgrind >/dev/null || CSCP_EXTRA_PACKAGES=valgrind bash test/scripts/deps.sh

cluster_start autovacuum=off
CG=$(mktemp -d "${TMPDIR:-/tmp}/cscp-callgrind.XXXXXX")
chmod 777 "$CG"
trap 'cluster_stop_cg; rm -rf "$CG"' EXIT
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION cscp;
-- W1's command reads only, as make bench declares it (an undeclared command is mutating, and
-- W1's read-only steps would all be refused: a count of refusals, not of the turn).
SELECT cscp.command_declare('$BENCH_TENANT', 'track_order', false);
CREATE ROLE $BENCH_ROLE LOGIN;
SELECT cscp.grant_app('$BENCH_ROLE');
-- C: an application role bound to the one tenant it serves (cscp.tenant_binding)
CREATE ROLE ${BENCH_ROLE}_bound LOGIN;
SELECT cscp.grant_app('${BENCH_ROLE}_bound', ARRAY['$BENCH_TENANT']);
SQL
psql -X -q -v ON_ERROR_STOP=1 -v schema=bench_floor -v role=$BENCH_ROLE -f test/bench/floor_schema.sql
psql -X -q -v ON_ERROR_STOP=1 -c "GRANT USAGE ON SCHEMA bench_floor TO ${BENCH_ROLE}_bound" \
	-c "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA bench_floor TO ${BENCH_ROLE}_bound"
for impl in floor cscp; do
	conversations "w1-$impl" $impl
done

# The same cluster, every process under callgrind.
cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CSCP_TMP/data" -m fast -w stop >/dev/null
cluster_stop_cg() {
	[ -n "${CSCP_TMP:-}" ] && [ -f "$CSCP_TMP/data/postmaster.pid" ] &&
		kill -INT "$(head -n 1 "$CSCP_TMP/data/postmaster.pid")" 2>/dev/null
	sleep 2
	cluster_stop
}
# (CSCP_PGOPTS is written for pg_ctl -o, that is, for a shell: eval reads its quotes)
eval "cluster_as_owner valgrind --quiet --tool=callgrind --trace-children=yes \
	--callgrind-out-file='$CG/cg.%p' '$PG_BINDIR/postgres' -D '$CSCP_TMP/data' $CSCP_PGOPTS" \
	>"$CSCP_TMP/postgres.log" 2>&1 &
for _ in $(seq 1 300); do
	psql -X -q -c 'SELECT 1' >/dev/null 2>&1 && break
	sleep 1
done
psql -X -q -c 'SELECT 1' >/dev/null || { tail -n 20 "$CSCP_TMP/postgres.log" >&2; exit 1; }

# count T SCRIPT PGBENCH_ARGS...: the instructions of the backend that ran T transactions
# (as $ROLE; with $KEEP set, its callgrind file is kept as $KEEP).
ROLE=$BENCH_ROLE
KEEP=
count() {
	local t=$1 script=$2 before after file top
	shift 2
	# as make bench starts each run: the planner sees the tables as they are (autovacuum is off)
	psql -X -q -c "VACUUM (ANALYZE)" >/dev/null
	sleep 2
	before=$(ls "$CG")
	PGOPTIONS="-c cscp.tenant_id=$BENCH_TENANT -c synchronous_commit=off" \
		pgbench -n -U "$ROLE" -c 1 -j 1 -M prepared -t "$t" "$@" -f "$script" >"$CG/pgbench.out" 2>&1 ||
		{ cat "$CG/pgbench.out" >&2; return 1; }
	# pgbench's backends (its setup connection's, then its client's) write their files as they
	# exit, just after pgbench disconnects; the client's counted the most
	for _ in $(seq 1 150); do
		after=$(comm -13 <(echo "$before") <(ls "$CG") | grep '^cg\.' || true)
		[ "$(echo "$after" | grep -c .)" -ge 2 ] && break
		sleep 0.2
	done
	# and no other backend still writing its file (a late one would be counted in the next run)
	sleep 2
	after=$(comm -13 <(echo "$before") <(ls "$CG") | grep '^cg\.' || true)
	[ -n "$after" ] || { echo "cscp bench-instructions: no callgrind output for $script" >&2; return 1; }
	top=$(for file in $after; do
		echo "$(awk '/^totals:/ { print $2; exit }' "$CG/$file") $file"
	done | sort -n | tail -n 1)
	echo "${top%% *}"
	[ -z "$KEEP" ] || cp "$CG/${top#* }" "$KEEP"
	for file in $after; do rm -f "$CG/$file"; done
}

# per_tx NAME SCRIPT PGBENCH_ARGS...
per_tx() {
	local name=$1 a b
	shift
	count "$T1" "$@" >/dev/null || return 1 # warm: what this script's first run leaves behind
	a=$(count "$T1" "$@") || return 1
	[ -z "$PROFILE" ] || KEEP=$PROFILE/$name.callgrind
	b=$(count "$T2" "$@") || return 1
	KEEP=
	[ -z "$PROFILE" ] || callgrind_annotate --inclusive=yes "$PROFILE/$name.callgrind" >"$PROFILE/$name.inclusive.txt" 2>&1 || true
	echo "$name: $a instructions for $T1 transactions, $b for $T2" >&2
	echo $(((b - a) / (T2 - T1)))
}

want() { [[ ",$ONLY," == *",$1,"* ]]; }

printf '%-28s %14s %14s %7s\n' workload "cscp Ir/tx" "floor Ir/tx" ratio
if want W1; then
	c=$(per_tx W1.cscp test/bench/message_turn_cscp.sql -D conv=w1-cscp) || exit 1
	f=$(per_tx W1.floor test/bench/message_turn_floor.sql -D conv=w1-floor) || exit 1
	printf '%-28s %14d %14d %7.3f\n' "W1 message turn" "$c" "$f" "$(awk -v c="$c" -v f="$f" 'BEGIN { print c / f }')"
fi
if want W2; then
	c=$(per_tx W2.cscp test/bench/command_cycle_cscp.sql) || exit 1
	f=$(per_tx W2.floor test/bench/command_cycle_floor.sql) || exit 1
	printf '%-28s %14d %14d %7.3f\n' "W2 confirmation cycle" "$c" "$f" "$(awk -v c="$c" -v f="$f" 'BEGIN { print c / f }')"
fi
if want C; then
	# the confirmation path as the issue measures it: W2's calls as a role bound to one tenant;
	# its floor is W2's, on the same plain tables, as the same role
	ROLE=${BENCH_ROLE}_bound
	c=$(per_tx C.cscp test/bench/command_cycle_cscp.sql) || exit 1
	f=$(per_tx C.floor test/bench/command_cycle_floor.sql) || exit 1
	ROLE=$BENCH_ROLE
	printf '%-28s %14d %14d %7.3f\n' "C confirmation path, bound" "$c" "$f" "$(awk -v c="$c" -v f="$f" 'BEGIN { print c / f }')"
fi

# Every command counted ran to executed, in cscp and in the floor: a count of refused steps
# would measure another path.
read -r nc ec nf ef <<<"$(psql -X -At -F ' ' -c "
	SELECT (SELECT count(*) FROM cscp.command), (SELECT count(*) FILTER (WHERE state = 'executed') FROM cscp.command),
	       (SELECT count(*) FROM bench_floor.command), (SELECT count(*) FILTER (WHERE state = 'executed') FROM bench_floor.command)")"
echo "check: commands executed / formed: cscp $ec/$nc, floor $ef/$nf"
if [ "$nc" != "$ec" ] || [ "$nf" != "$ef" ]; then
	echo "cscp bench-instructions: a command did not run to executed" >&2
	exit 1
fi
