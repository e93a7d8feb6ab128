#!/usr/bin/env bash
# proxy/generate.sh [output]: cscp_proxy's install script, from cscp as built and installed here
# (its functions, types and views, read on a throwaway cluster) and proxy/api.tsv (how each
# function is routed).  Writes to output, or to stdout.  Fails when a cscp API function is not
# classified in proxy/api.tsv.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/dev/stdout}
source test/scripts/cluster.sh
cluster_start >/dev/null
tmp=$(mktemp)
trap 'rm -f "$tmp"; cluster_stop' EXIT
psql -X -q -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION cscp' >/dev/null
{
	cat proxy/local.sql
	psql -X -q -At -v ON_ERROR_STOP=1 -f proxy/generate.sql
	cat proxy/build_context.sql
} >"$tmp"
cat "$tmp" >"$out"
