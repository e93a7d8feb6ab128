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
# A line "-- @from-cscp FUNCTION(ARGS)" of local.sql stands for that function of cscp as
# installed, with its comment, so that the proxy computes what the shards compute.
from_cscp() {
	psql -X -q -At -v ON_ERROR_STOP=1 -v f="$1" <<'SQL'
SELECT pg_catalog.pg_get_functiondef(:'f'::regprocedure) || E';\n'
       || pg_catalog.format('COMMENT ON FUNCTION %s IS %L;', :'f'::regprocedure,
                            pg_catalog.obj_description(:'f'::regprocedure, 'pg_proc'));
SQL
}
{
	while IFS= read -r line; do
		case "$line" in
		"-- @from-cscp "*) from_cscp "${line#-- @from-cscp }" ;;
		*) printf '%s\n' "$line" ;;
		esac
	done <proxy/local.sql
	psql -X -q -At -v ON_ERROR_STOP=1 -f proxy/generate.sql
	cat proxy/build_context.sql
} >"$tmp"
cat "$tmp" >"$out"
