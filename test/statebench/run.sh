#!/usr/bin/env bash
# `make statebench STATEBENCH=path/to/file.jsonl`: replay StateBench timelines through cscp on a
# throwaway cluster and report, per track, resurrections and queries with every must_mention
# phrase (test/statebench/replay.sql says how).  STATEBENCH_BUDGET: build_context's token budget
# (default 4000).  Needs only PostgreSQL with cscp installed, psql and bash.
set -euo pipefail
cd "$(dirname "$0")/../.."
file=${1:-${STATEBENCH:-}}
if [ -z "$file" ] || [ ! -r "$file" ]; then
	echo "usage: make statebench STATEBENCH=path/to/timelines.jsonl" >&2
	exit 2
fi
budget=${STATEBENCH_BUDGET:-4000}
source test/scripts/cluster.sh
cluster_start
echo "StateBench replay of $file (token budget $budget) on a throwaway cluster in $CSCP_TMP"
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE EXTENSION cscp" -f test/statebench/replay.sql
# Each line is one JSON document: CSV with quote and delimiter characters that never occur.
psql -X -q -v ON_ERROR_STOP=1 -d postgres \
	-c "\\copy statebench.raw (line) FROM pstdin WITH (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02')" <"$file"
psql -X -v ON_ERROR_STOP=1 -d postgres -v budget="$budget" -f test/statebench/report.sql
