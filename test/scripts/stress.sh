#!/usr/bin/env bash
# `make stress` (not part of `make test`): 16 pgbench clients for 60 s, each transaction one cscp
# API call drawn from all of them (test/stress/harness.sql) over four conversations, two actors
# and two subjects, with short TTLs and windows so that expiry, the sweep and timeouts race the
# writers. Fails on any failed pgbench transaction (a deadlock or serialization failure reaching
# the caller), any other unexpected error, or cscp.check_invariants() returning a row; prints
# how each call ended.
# Settings: STRESS_SECONDS (60), STRESS_CLIENTS (16).
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh

SECS=${STRESS_SECONDS:-60}
CLIENTS=${STRESS_CLIENTS:-16}
ROLE=stress_app

cluster_start
OUT=$(mktemp -d "${TMPDIR:-/tmp}/cscp-stress.XXXXXX")
trap 'cluster_stop; rm -rf "$OUT"' EXIT
echo "cscp stress: $CLIENTS clients, ${SECS}s, one random API call per transaction"
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION cscp;
CREATE ROLE $ROLE LOGIN;
SELECT cscp.grant_app('$ROLE');
SELECT cscp.policy_set('stress', '{"confirmation_ttl": "3 seconds", "approval_ttl": "3 seconds",
                                   "supersede_same_key": true}');
SQL
psql -X -q -v ON_ERROR_STOP=1 -f test/stress/harness.sql >/dev/null

status=0
PGOPTIONS="-c cscp.tenant_id=stress" pgbench -n -U "$ROLE" -c "$CLIENTS" -j 2 -T "$SECS" \
	--max-tries=1 --failures-detailed -f test/stress/step.sql >"$OUT/pgbench.txt" 2>&1 || status=1
grep -E '^(number of|latency average|tps|  number of)' "$OUT/pgbench.txt" || true
if [ $status -ne 0 ] || ! grep -q '^number of failed transactions: 0 ' "$OUT/pgbench.txt"; then
	grep -v '^pgbench: client .* executing\|^$' "$OUT/pgbench.txt" | head -n 40
	echo "cscp stress: FAILED (pgbench: failed transactions or aborted clients)" >&2
	status=1
fi
if grep -E -B 3 -A 3 'deadlock detected|could not serialize|terminated by signal|PANIC|TRAP' "$CSCP_TMP/postgres.log" | head -n 60; then
	status=1
fi
[ $status -eq 0 ] || psql -X -q -c 'SELECT 1' >/dev/null 2>&1 || { echo "cscp stress: FAILED (server down)" >&2; exit 1; }

psql -X -q -v ON_ERROR_STOP=1 -At -F ' ' >"$OUT/check.txt" <<'SQL'
SELECT 'outcome', op, string_agg(sqlstate || ' ' || n, ', ' ORDER BY n DESC)
  FROM (SELECT op, sqlstate, count(*) n FROM stress.outcome GROUP BY 1, 2) s GROUP BY op ORDER BY op;
SELECT 'calls', count(*) FROM stress.outcome;
SELECT 'rows', (SELECT count(*) FROM cscp.command), (SELECT count(*) FROM cscp.turn),
       (SELECT count(*) FROM cscp.evidence), (SELECT count(*) FROM cscp.fact);
SELECT 'problem', i.kind, i.object_id, i.detail FROM cscp.check_invariants() i;
SQL
sed -n 's/^outcome /  /p' "$OUT/check.txt"
read -r _ calls < <(grep '^calls ' "$OUT/check.txt")
read -r _ commands turns evidence facts < <(grep '^rows ' "$OUT/check.txt")
if grep -q '^problem' "$OUT/check.txt"; then
	grep '^problem' "$OUT/check.txt" | head -n 40
	echo "cscp stress: FAILED (check_invariants)" >&2
	status=1
fi
echo "cscp stress: $calls calls; $commands commands, $turns turns, $evidence evidence rows, $facts facts;" \
     "$( [ $status -eq 0 ] && echo 'no deadlock, no serialization failure, check_invariants() empty' || echo FAILED)"
exit $status
