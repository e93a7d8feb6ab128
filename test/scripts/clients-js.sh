#!/usr/bin/env bash
# The suite clients-js: @cscp/client (clients/js) on a throwaway cluster.  npm ci installs the
# locked dependencies from the registry (its own error is shown when it fails), npm run build
# must produce what package.json's exports name, then vitest runs LangGraph's checkpointer
# validation (validate() and the delta channel history tests) against CscpSaver, the store's,
# the session's and the typed API's tests; the suite fails unless every test ran and passed
# (none skipped, none left as todo), and src/api.ts must be what scripts/gen-api.mjs generates
# from this build's catalog.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh

major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 20 ]; then
	echo "clients-js: Node.js 20 or later is needed, found $(node --version 2>/dev/null || echo none)" >&2
	exit 1
fi

cluster_start
dir=clients/js
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || { echo "clients-js: npm ci failed (its error is above)" >&2; exit 1; }
(cd "$dir" && npm run --silent build)
node -e '
const pkg = require("./'$dir'/package.json"); const fs = require("fs"); const path = require("path");
const paths = [pkg.main, pkg.types, ...Object.values(pkg.exports).flatMap((e) => Object.values(e))];
const missing = paths.filter((p) => !fs.existsSync(path.join("'$dir'", p)));
if (missing.length) { console.error("clients-js: the build did not produce " + missing.join(", ")); process.exit(1); }'

report="$CSCP_TMP/vitest.json"
status=0
(cd "$dir" && PGDATABASE=postgres npx vitest run --reporter=default --reporter=json --outputFile.json="$report") || status=$?
node -e '
const r = require(process.argv[1]);
const skipped = r.numPendingTests + r.numTodoTests;
console.log(`clients-js: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${skipped} skipped of ${r.numTotalTests}`);
if (r.numTotalTests === 0 || r.numFailedTests > 0 || skipped > 0 || !r.success) process.exit(1);' "$report" || exit 1
[ "$status" -eq 0 ] || exit $status
# src/api.ts is generated from the catalog (scripts/gen-api.mjs): it must match this build's API.
(cd "$dir" && PGDATABASE=postgres CSCP_API_OUT="$CSCP_TMP/api.ts" node scripts/gen-api.mjs >/dev/null)
cmp -s "$CSCP_TMP/api.ts" "$dir/src/api.ts" || {
	diff -u "$dir/src/api.ts" "$CSCP_TMP/api.ts" | head -40 >&2 || true
	echo "clients-js: src/api.ts is stale: run 'PGHOST=... node scripts/gen-api.mjs' in clients/js against this build" >&2
	exit 1
}
