#!/usr/bin/env bash
# `make test`: every suite against a throwaway cluster.
#   1. pg_regress (sql/, expected/): exact output
#   2. isolation specs (test/isolation/): concurrent behaviour
#   3. pgTAP through pg_prove (test/pgtap/): assertions, roles and tenancy; then the exported
#      turns and events against OpenWOP's JSON Schemas with ajv (test/scripts/openwop-schemas.sh)
#   4. backup and restore (test/scripts/backup-restore.sh): pg_dump, pg_restore, same rows, working API
#   5. the background sweep worker, on a cluster of its own (test/scripts/worker-test.sh)
#   6. scale-out (test/scripts/scaleout.sh): two shards behind a PL/Proxy proxy, own clusters
#   7. the crash test, short form (test/scripts/crash.sh, its own cluster with fsync=on)
#   8. the fuzz, short form (test/scripts/fuzz.sh, its own cluster): 3,000 hostile calls
#   9. the HTTPS gateway through real HTTP (test/scripts/gateway-test.sh, its own cluster), and
#      through the PL/Proxy proxy (test/scripts/gateway-scaleout.sh, its own clusters)
# Exits non-zero when any suite fails, after printing what differed.
set -uo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
cluster_start || exit 1

status=0
failed=()

echo "== pg_regress and isolation specs"
rm -f regression.diffs output_iso/regression.diffs
if ! make -k --no-print-directory installcheck; then
	status=1
	failed+=("pg_regress/isolation")
	for f in regression.diffs output_iso/regression.diffs; do
		if [ -s "$f" ]; then
			echo "---- $f"
			cat "$f"
		fi
	done
fi

echo "== pgTAP"
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS cscp_tap" -c "CREATE DATABASE cscp_tap" &&
	psql -X -q -v ON_ERROR_STOP=1 -d cscp_tap -c "CREATE EXTENSION pgtap" -c "CREATE EXTENSION cscp" \
		-c "SELECT cscp.command_declare('*', n, false) FROM unnest(ARRAY['lookup', 'report', 'track_order', 'balance']) n" ||
	{ status=1; failed+=("pgTAP setup"); }
if ! pg_prove --failures -d cscp_tap test/pgtap/*.sql; then
	status=1
	failed+=("pgTAP")
fi

echo "== OpenWOP schemas (exported turns and events through ajv)"
if ! bash test/scripts/openwop-schemas.sh; then
	status=1
	failed+=("openwop-schemas")
fi

echo "== backup and restore"
if ! bash test/scripts/backup-restore.sh; then
	status=1
	failed+=("backup-restore")
fi

echo "== background sweep worker (a second cluster, cscp preloaded)"
if ! bash test/scripts/worker-test.sh; then
	status=1
	failed+=("worker")
fi

echo "== scale-out"
if ! bash test/scripts/scaleout.sh; then
	status=1
	failed+=("scale-out")
fi

echo "== crash test (short form of make crashtest)"
if ! CRASH_KILLS=3 CRASH_CLIENTS=4 bash test/scripts/crash.sh; then
	status=1
	failed+=("crash test")
fi

echo "== fuzz (short form of make fuzz)"
if ! FUZZ_CALLS=3000 bash test/scripts/fuzz.sh; then
	status=1
	failed+=("fuzz")
fi

echo "== HTTPS gateway"
if ! bash test/scripts/gateway-test.sh; then
	status=1
	failed+=("gateway")
fi
echo "== HTTPS gateway through the PL/Proxy proxy"
if ! bash test/scripts/gateway-scaleout.sh; then
	status=1
	failed+=("gateway scale-out")
fi

if [ $status -ne 0 ]; then
	echo "FAILED: ${failed[*]}"
	echo "server log: last lines"
	tail -n 30 "$CSCP_TMP/postgres.log"
else
	echo "All suites passed."
fi
exit $status
