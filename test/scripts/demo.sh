#!/usr/bin/env bash
# `make demo`: builds cscp and the gateway quietly (output in log/demo/build.log, shown only on
# failure), starts a throwaway cluster and walks through five stories, each statement shown with
# its outcome and every outcome checked (test/demo/checks.sql):
#   1. conversation.sql   a bank's WhatsApp assistant: contexts, slots, expiry, tenancy, the sweep
#   2. cancel_order.sql   "Cancel order 123?": a late yes refused, a yes confirmed, replays, evidence
#   3. multi_turn.sql     a multi-turn conversation under a schema: rejection, replay, close, timeout
#   4. facts.sql          a user who moves house, a policy an intern cannot override, a what-if
#   5. gateway-demo.sh    the profile bot and the cart bot in one session, through curl over HTTPS
# and closes with a summary of what was shown and checked.  Exits non-zero when a step fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/steps.sh
MAKE=${MAKE:-make}

bold() { printf '\n\033[1m%s\033[0m\n' "$*"; }
part() { bold "==== Part $1: $2"; }
# A part's SQL through psql: statements echoed, command tags off, errors in line with the output.
walk() { (cd test/demo && stdbuf -oL psql -X -q -d postgres <"$1" 2>&1); }
checks() { psql -X -At -d postgres -c "SELECT count(*) FROM demo_check"; }

steps_init log/demo
echo "cscp demo: building cscp and its HTTPS gateway (output in log/demo/build.log)"
# Debian's packages first, outside the quiet step: the first run shows what apt does.
$MAKE --no-print-directory -s deps || exit 1
step build $MAKE --no-print-directory build gateway || { steps_report steps; exit 1; }
# (After the build, whose deps may have installed the server cluster.sh looks for.)
source test/scripts/cluster.sh
cluster_start >log/demo/cluster.log 2>&1 || { cat log/demo/cluster.log; exit 1; }
echo "cscp demo: a throwaway PostgreSQL cluster in $CSCP_TMP (unix socket only), removed at the end"

titles=("A bank's WhatsApp assistant: contexts, slots, expiry, tenancy, the sweep"
	'"Cancel order 123?": a late yes refused, a yes confirmed, replays, the evidence trail'
	"A multi-turn conversation under a schema: a rejection, a replay, a close, a timeout"
	"Facts: a user who moves house, a policy an intern cannot override, a what-if that never leaks")
files=(conversation.sql cancel_order.sql multi_turn.sql facts.sql)
counts=()
for i in 0 1 2 3; do
	part $((i + 1)) "${titles[i]}"
	before=$( ((i == 0)) && echo 0 || checks)
	if ! walk "${files[i]}"; then
		bold "The server log's last lines:"
		tail -n 12 "$CSCP_TMP/postgres.log"
		bold "cscp demo: FAILED in test/demo/${files[i]}: $(grep -h 'ERROR:' "$CSCP_TMP/postgres.log" | tail -n 1 | sed 's/.*ERROR: *//')"
		exit 1
	fi
	counts+=($(($(checks) - before)))
done

part 5 "Bots over HTTPS: the profile bot and the cart bot share a session, each in its namespace"
http=skipped
if grep -q -- '--cluster-running' test/scripts/gateway-demo.sh; then
	bash test/scripts/gateway-demo.sh --cluster-running && http=ok || http=FAILED
else
	# (An older gateway-demo.sh starts a cluster of its own.)
	bash test/scripts/gateway-demo.sh && http=ok || http=FAILED
fi

bold "==== Summary"
for i in 0 1 2 3; do
	chapters=$(grep -c "^\\\\echo '== [0-9]*\\." "test/demo/${files[i]}")
	printf '  Part %d  %2d chapters, %2d outcomes checked   %s\n' $((i + 1)) "$chapters" "${counts[i]}" "${titles[i]}"
done
printf '  Part 5  the profile bot and the cart bot in one session, through curl over HTTPS: %s\n' "$http"
echo
echo "  Checked (each stops the demo when it does not hold):"
psql -X -At -d postgres -c "SELECT '    - ' || what FROM demo_check ORDER BY n"
echo
if [ "$http" != ok ]; then
	echo "cscp demo: the HTTPS part FAILED (above)"
	exit 1
fi
echo "cscp demo: all $(checks) checks held; the cluster is stopped and removed."
