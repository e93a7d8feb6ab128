#!/usr/bin/env bash
# The suite clients-python: the package cscp (clients/python) on psycopg 3 from Debian, its
# pytest tests on a throwaway cluster, run by Debian's python3 (the one python3-psycopg is
# installed for).  pytest's exit status 5 (no tests collected) fails the suite like any other.
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
