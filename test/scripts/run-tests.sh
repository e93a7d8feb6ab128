#!/usr/bin/env bash
# `make test`: every suite against a throwaway cluster, one line per suite (name, ok or FAILED,
# seconds); each suite's output goes to log/test/SUITE.log, and a failed suite's diff (or the end
# of its log) is printed last, followed by "suites: N passed, N failed".  Exits non-zero on a failure.
#   spi-qualified   no unqualified name in a SQL text of src/ (spi-qualified.py; always run)
#   pg_regress      sql/, expected/: exact output (setup first, drop last)
#   regress-alone   each suite of sql/ alone, on a fresh database of its own (regress-alone.sh)
#   isolation       test/isolation/: concurrent behaviour
#   pgtap           test/pgtap/ through pg_prove: assertions, roles and tenancy
#   openwop         exported turns and events against OpenWOP's JSON Schemas (openwop-schemas.sh)
#   backup-restore  pg_dump, pg_restore, same rows, working API (backup-restore.sh)
#   readme          README's SQL and shell examples run, on throwaway clusters (readme.sh)
#   worker          the background sweep worker, on a cluster of its own (worker-test.sh)
#   scale-out       two shards behind a PL/Proxy proxy, own clusters (scaleout.sh)
#   crash           the crash test, short form (crash.sh, own cluster with fsync=on)
#   fuzz            the fuzz, short form (fuzz.sh, own cluster): 2,000 hostile calls
#   gateway         the HTTPS gateway through real HTTP (gateway-test.sh, own cluster)
#   gateway-proxy   the gateway through the PL/Proxy proxy (gateway-scaleout.sh, own clusters)
#   upgrade         release 0.1.0 from git history, filled, then ALTER EXTENSION cscp UPDATE to
#                   this build: schema, rows, tenants, suites (upgrade.sh, own cluster and tree)
#   clients-js      @cscp/client under vitest, LangGraph's checkpointer validation included
#                   (clients-js.sh, own cluster; npm ci from the registry)
#   clients-python  the Python package cscp under pytest (clients-python.sh, own cluster)
#
# TEST_ORDER=shuffle runs the suites, the regression tests between setup and drop, the isolation
# specs and the pgTAP files in a random order; the seed is printed, and TEST_SEED=N repeats it.
# TEST_ONLY="pg_regress pgtap" runs those suites alone; TEST_JOBS=N runs N of the suites with
# clusters of their own at a time (2; 1 runs every suite after the other).
set -uo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/steps.sh
MAKE=${MAKE:-make}

# ORDERED: the words given, in a random order drawn from RANDOM (seeded below) when shuffling.
# (A variable, not output: a command substitution's subshell would reseed RANDOM.)
ordered() {
	local a=("$@") i j t
	if [ "${TEST_ORDER:-}" = shuffle ]; then
		for ((i = ${#a[@]} - 1; i > 0; i--)); do
			j=$((RANDOM % (i + 1)))
			t=${a[i]} a[i]=${a[j]} a[j]=$t
		done
	fi
	ORDERED="${a[*]}"
}
mkvar() { $MAKE --no-print-directory -s -f Makefile -f - print-var VAR="$1" <<<'print-var: ; @echo $($(VAR))'; }

suite_pg_regress() {
	local tests
	tests=$(mkvar REGRESS | tr ' ' '\n' | grep -vx 'setup\|drop' | tr '\n' ' ')
	ordered $tests
	tests="setup $ORDERED drop"
	echo "order: $tests"
	rm -f regression.diffs
	$MAKE -k --no-print-directory installcheck REGRESS="$tests" ISOLATION= && return 0
	regress_failures "$STEPS_DIR/pg_regress" regression.diffs
}

# PREFIX.failures: the tests that failed, then their diff; named as the step's detail.
regress_failures() {
	{
		grep -E '^(not ok|test |     ).* (FAILED|failed)' "$1.log" || true
		echo
		cat "$2"
	} >"$1.failures"
	echo "$1.failures" >"$1.detail"
	return 1
}

suite_isolation() {
	local specs
	ordered $(mkvar ISOLATION)
	specs=$ORDERED
	echo "order: $specs"
	rm -f output_iso/regression.diffs
	$MAKE -k --no-print-directory installcheck REGRESS= ISOLATION="$specs" && return 0
	regress_failures "$STEPS_DIR/isolation" output_iso/regression.diffs
}

suite_regress_alone() { bash test/scripts/regress-alone.sh; }

suite_pgtap() {
	psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS cscp_tap" -c "CREATE DATABASE cscp_tap" &&
		psql -X -q -v ON_ERROR_STOP=1 -d cscp_tap -c "CREATE EXTENSION pgtap" -c "CREATE EXTENSION cscp" \
			-c "SELECT cscp.command_declare('*', n, false) FROM unnest(ARRAY['lookup', 'report', 'track_order', 'balance']) n" ||
		return 1
	ordered test/pgtap/*.sql
	echo "order: $ORDERED"
	pg_prove --failures -d cscp_tap $ORDERED
}

suite_openwop() { bash test/scripts/openwop-schemas.sh; }
suite_backup_restore() { bash test/scripts/backup-restore.sh; }
suite_readme() { bash test/scripts/readme.sh; }
suite_worker() { bash test/scripts/worker-test.sh; }
suite_scale_out() { bash test/scripts/scaleout.sh; }
suite_crash() { CRASH_KILLS=3 CRASH_CLIENTS=4 bash test/scripts/crash.sh; }
suite_fuzz() { FUZZ_CALLS=2000 bash test/scripts/fuzz.sh; }
suite_gateway() { bash test/scripts/gateway-test.sh; }
suite_gateway_proxy() { bash test/scripts/gateway-scaleout.sh; }
suite_upgrade() { bash test/scripts/upgrade.sh; }
suite_clients_js() { bash test/scripts/clients-js.sh; }
suite_clients_python() { bash test/scripts/clients-python.sh; }

# The suites on the shared cluster, one after the other; then those with clusters of their own,
# TEST_JOBS (2) at a time: they mostly wait (for a worker, a crash, a TTL), not compute.
shared="pg_regress regress-alone isolation pgtap openwop backup-restore readme"
own="worker scale-out crash fuzz gateway gateway-proxy upgrade clients-js clients-python"
if [ -n "${TEST_ONLY:-}" ]; then
	shared=$(for s in $shared; do [[ " $TEST_ONLY " == *" $s "* ]] && echo "$s"; done)
	own=$(for s in $own; do [[ " $TEST_ONLY " == *" $s "* ]] && echo "$s"; done)
fi
if [ "${TEST_ORDER:-}" = shuffle ]; then
	TEST_SEED=${TEST_SEED:-$((EPOCHSECONDS % 100000))}
	RANDOM=$TEST_SEED
	echo "cscp tests in a random order, seed $TEST_SEED (make test TEST_ORDER=shuffle TEST_SEED=$TEST_SEED repeats it)"
	ordered $shared
	shared=$ORDERED
	ordered $own
	own=$ORDERED
fi

steps_init log/test
echo "cscp tests: one line per suite; output in log/test/"
# Debian's packages first, outside the quiet step: the first run shows what apt does.
$MAKE --no-print-directory -s deps || exit 1
step build $MAKE --no-print-directory build || { steps_report suites; exit 1; }
# Every SQL text of the C code names its operators, functions and types in pg_catalog or cscp.
step spi-qualified python3 test/scripts/spi-qualified.py || { steps_report suites; exit 1; }
# (After the build, whose deps may have installed the server cluster.sh looks for.)
source test/scripts/cluster.sh
cluster_start >log/test/cluster.log 2>&1 || { cat log/test/cluster.log; exit 1; }
for s in $shared; do
	step "$s" "suite_${s//-/_}"
done
specs=()
for s in $own; do
	specs+=("$s:suite_${s//-/_}")
done
[ ${#specs[@]} -eq 0 ] || steps_parallel "${TEST_JOBS:-2}" "${specs[@]}"
cp "$CSCP_TMP/postgres.log" log/test/postgres.log 2>/dev/null
steps_report suites
