#!/usr/bin/env bash
# `make check-assert`: cscp built with -DUSE_ASSERT_CHECKING, installed, and the regression suite
# and the isolation specs run against it on a throwaway cluster; then the ordinary build is put
# back.  Output in log/check-assert/.
#
# What is checked depends on the server.  A server built with --enable-cassert (SHOW
# debug_assertions = on) checks its own assertions too.  Debian's server is not: there the checks
# are the Assert()s compiled into cscp.so, cscp's own and those of PostgreSQL's inline functions
# and macros that cscp's code expands (heap_getattr, castNode, list access, ...); the script counts
# them.  A failed Assert() ends the backend with "TRAP: failed Assert(...)" in the server log,
# which fails the run even where no test output changed.
#   CHECK_ASSERT_SUITES="pg_regress"   runs the regression tests only (CI's short form)
set -uo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/steps.sh
MAKE=${MAKE:-make}
suites=${CHECK_ASSERT_SUITES:-pg_regress isolation}
ALOG=log/check-assert

# The module's objects only: the gateway and the test drivers are not rebuilt.
clean_module() { rm -f src/*/*.o src/*/*.bc cscp.so; }
build_assert() {
	clean_module
	$MAKE --no-print-directory deps &&
		$MAKE --no-print-directory all COPT=-DUSE_ASSERT_CHECKING &&
		$MAKE --no-print-directory install COPT=-DUSE_ASSERT_CHECKING || return 1
	local sites
	sites=$(objdump -d cscp.so | grep -c 'call.*<ExceptionalCondition@plt>')
	echo "$sites assertion sites compiled into cscp.so" | tee "$ALOG/sites"
	[ "$sites" -gt 0 ]
}
restore_build() { clean_module; $MAKE --no-print-directory all install; }
regress() {
	$MAKE -k --no-print-directory installcheck ISOLATION= && return 0
	cp regression.diffs "$ALOG/pg_regress.failures" 2>/dev/null && echo "$ALOG/pg_regress.failures" >"$ALOG/pg_regress.detail"
	return 1
}
isolation() {
	$MAKE -k --no-print-directory installcheck REGRESS= && return 0
	cp output_iso/regression.diffs "$ALOG/isolation.failures" 2>/dev/null && echo "$ALOG/isolation.failures" >"$ALOG/isolation.detail"
	return 1
}
# No backend may have died on a failed assertion (or otherwise) during the suites.
no_trap() {
	cp "$CSCP_TMP/postgres.log" "$ALOG/postgres.log"
	if grep -E 'TRAP: |terminated by signal' "$ALOG/postgres.log"; then
		return 1
	fi
	echo "no TRAP and no backend ended by a signal in the server log"
}

steps_init "$ALOG"
echo "cscp check-assert: cscp built with -DUSE_ASSERT_CHECKING; output in $ALOG/"
if step build-with-asserts build_assert; then
	source test/scripts/cluster.sh # (after deps, which may have installed the server)
	cluster_start >"$ALOG/cluster.log" 2>&1 || { cat "$ALOG/cluster.log"; exit 1; }
	server=$(psql -X -At -d postgres -c "SHOW debug_assertions")
	if [ "$server" = on ]; then
		echo "  the server checks its own assertions too (debug_assertions = on)"
	else
		echo "  the server is built without assertions (debug_assertions = off): checked are the"
		echo "  $(cat "$ALOG/sites") (cscp's and those of PostgreSQL's inline code)"
	fi
	for s in $suites; do
		case $s in
		pg_regress) step pg_regress regress ;;
		isolation) step isolation isolation ;;
		esac
	done
	step no-assertion-failure no_trap
	cluster_stop
fi
step restore-ordinary-build restore_build
steps_report steps
