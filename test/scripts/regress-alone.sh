#!/usr/bin/env bash
# `make test`'s suite regress-alone (run-tests.sh's cluster, PGHOST etc. set): each pg_regress
# suite of sql/ run alone, as `make installcheck REGRESS=NAME` runs it (a fresh database holding
# only cscp, made by pg_regress with --load-extension), against its expected output; so that no
# suite depends on what another creates (each includes sql/include/helpers.sql) and each can be run
# and debugged by itself.  REGRESS_ALONE_JOBS (2) suites at a time, each on a database of its own
# (cscp_alone_NAME, dropped after).  A failed suite's diff is printed.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${PGHOST:?run from run-tests.sh, with its cluster}"
MAKE=${MAKE:-make}
mkvar() { $MAKE --no-print-directory -s -f Makefile -f - print-var VAR="$1" <<<'print-var: ; @echo $($(VAR))'; }
pg_regress=$("$(mkvar PG_CONFIG)" --pkglibdir)/pgxs/src/test/regress/pg_regress
[ -x "$pg_regress" ] || { echo "regress-alone: no pg_regress at $pg_regress" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/cscp-alone.XXXXXX")
chmod 777 "$work"
trap 'rm -rf "$work"' EXIT
bindir=$(dirname "$(command -v psql)")
[ -z "${PG_BINDIR:-}" ] || bindir=$PG_BINDIR

one() {
	local t=$1 out=$work/$1
	mkdir -p "$out" && chmod 777 "$out"
	if "$pg_regress" --inputdir=. --outputdir="$out" --bindir="$bindir" --load-extension=cscp \
		--dbname="cscp_alone_$t" "$t" >"$out/log" 2>&1; then
		echo "ok $t"
	else
		echo "FAILED $t"
	fi
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS cscp_alone_$t" >/dev/null 2>&1
}
export -f one
export work pg_regress bindir
tests=$(mkvar REGRESS)
start=$EPOCHSECONDS
results=$(printf '%s\n' $tests | xargs -P "${REGRESS_ALONE_JOBS:-2}" -I{} bash -c 'one {}')
failed=$(grep -c '^FAILED' <<<"$results")
for t in $(sed -n 's/^FAILED //p' <<<"$results"); do
	echo "regress-alone: $t fails when run alone:"
	head -n 80 "$work/$t/regression.diffs" 2>/dev/null || tail -n 20 "$work/$t/log"
done
echo "regress-alone: $(wc -w <<<"$tests") suites, each alone on a database of its own, in $((EPOCHSECONDS - start)) s; $failed failed"
[ "$failed" -eq 0 ]
