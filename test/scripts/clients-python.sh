#!/usr/bin/env bash
# The suite clients-python: the package cscp (clients/python) on psycopg 3 from Debian, its
# pytest tests on a throwaway cluster, run by Debian's python3 (the one python3-psycopg is
# installed for).  pytest's exit status 5 (no tests collected) fails the suite like any other;
# cscp/api.py must be what scripts/gen_api.py generates from this build's catalog.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
PYTHON=${CSCP_PYTHON:-/usr/bin/python3}
"$PYTHON" -c 'import psycopg, pytest' || {
	echo "clients-python: $PYTHON lacks psycopg or pytest: apt-get install python3-psycopg python3-pytest (make deps)" >&2
	exit 1
}
cluster_start
cd clients/python
PGDATABASE=postgres PYTHONPATH=. PYTHONDONTWRITEBYTECODE=1 "$PYTHON" -m pytest -q -p no:cacheprovider tests
# cscp/api.py is generated from the catalog (scripts/gen_api.py): it must match this build's API.
PGDATABASE=postgres CSCP_API_OUT="$CSCP_TMP/api.py" "$PYTHON" scripts/gen_api.py >/dev/null
cmp -s "$CSCP_TMP/api.py" cscp/api.py || {
	diff -u cscp/api.py "$CSCP_TMP/api.py" | head -40 >&2 || true
	echo "clients-python: cscp/api.py is stale: run 'PGHOST=... /usr/bin/python3 scripts/gen_api.py' in clients/python against this build" >&2
	exit 1
}
