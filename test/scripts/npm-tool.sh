#!/usr/bin/env bash
# A test tool from npm (ajv, @redocly/cli), installed under test/node on first use and reused
# after, offline too.  On failure prints npm's own error, not only that it failed.
#   test/scripts/npm-tool.sh PACKAGE@VERSION
set -uo pipefail
cd "$(dirname "$0")/../.."
pkg=${1:?usage: npm-tool.sh PACKAGE@VERSION}
echo "cscp: installing $pkg from npm into test/node (once; needs the npm registry)"
out=$(npm install --no-audit --no-fund --loglevel=error --prefix test/node "$pkg" 2>&1) && exit 0
rc=$?
{
	echo "cscp: could not install $pkg from npm into test/node (npm exited $rc); npm said:"
	printf '%s\n' "$out" | tail -n 25 | sed 's/^/    /'
	echo "cscp: the first 'make test' needs the npm registry ($(npm config get registry 2>/dev/null || echo 'registry.npmjs.org'));"
	echo "cscp: once test/node holds the tools, the tests run offline."
} >&2
exit 1
