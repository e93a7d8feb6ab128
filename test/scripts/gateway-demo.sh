#!/usr/bin/env bash
# `make demo-http`, and the last part of `make demo`: the specification's multi-bot scenario
# through curl against cscp-gateway over HTTPS.  A profile bot and a shopping bot share one
# session, each in its namespace, each with its own API key; a support bot holds a conversation
# (OpenWOP RFC 0005); then what a bot sees when it gets something wrong.  Each answer is checked:
# the script exits non-zero when one is not what the scenario says.
#
#   test/scripts/gateway-demo.sh                     on a throwaway cluster of its own
#   test/scripts/gateway-demo.sh --cluster-running   on the cluster the caller runs (the PG*
#       environment test/scripts/cluster.sh's cluster_start exports; CSCP_CLUSTER_RUNNING=1 says
#       the same): creates cscp if missing, the gateway's role and the bots' keys in database
#       $PGDATABASE (default postgres), and leaves the cluster running.
set -euo pipefail
cd "$(dirname "$0")/../.."
running=${CSCP_CLUSTER_RUNNING:-}
for arg in "$@"; do
	case $arg in
		--cluster-running) running=1 ;;
		*) echo "usage: $0 [--cluster-running]" >&2; exit 2 ;;
	esac
done
source test/scripts/cluster.sh
make -s --no-print-directory -C gateway
DB=${PGDATABASE:-postgres}
if [ -n "$running" ]; then
	[ -n "${PGHOST:-}" ] || { echo "gateway-demo: --cluster-running needs PGHOST (and PGPORT, PGUSER) of the cluster" >&2; exit 2; }
	W=$(mktemp -d "${TMPDIR:-/tmp}/cscp-demo-http.XXXXXX")
	cleanup_dir() { rm -rf "$W"; }
else
	cluster_start >/dev/null || exit 1
	W=$CSCP_TMP/demo-http
	mkdir -p "$W"
	cleanup_dir() { cluster_stop; }
fi
q() { PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -At "$@"; }

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
# Show a command as typed (keys by name), run it, and keep its output for check.
show() {
	{ printf '$'; printf ' %q' "$@"; echo; } |
		sed -e "s/$PROFILE_KEY/\$PROFILE_KEY/g" -e "s/$CART_KEY/\$CART_KEY/g" -e "s/$SUPPORT_KEY/\$SUPPORT_KEY/g"
	"$@" | tee "$W/last"
	echo
}
# The last answer holds text (a fixed string), or the demo stops.
failed=0
check() {
	if grep -qF -- "$1" "$W/last"; then
		printf '  \033[32mchecked:\033[0m %s\n' "$2"
	else
		printf '  \033[31mNOT AS EXPECTED:\033[0m %s (no "%s" in the answer)\n' "$2" "$1"
		failed=1
	fi
}

say "The gateway's role can call the HTTP functions and nothing else; each bot gets a key of tenant 'shop'."
q -c "CREATE EXTENSION IF NOT EXISTS cscp" \
  -c "DO \$\$ BEGIN CREATE ROLE cscp_gateway LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$" \
  -c "SELECT cscp.grant_gateway('cscp_gateway')" >/dev/null
# On a running cluster, a key of an earlier run under the same label is revoked first (a label is
# taken over once its key is revoked), and the scenario's session and conversation start empty.
q -c "SELECT cscp.api_key_revoke(k.tenant_id, k.label) FROM cscp.api_key k
       WHERE k.tenant_id = 'shop' AND k.label IN ('profile-bot', 'cart-bot', 'support-bot') AND k.revoked_at IS NULL" \
  -c "SELECT cscp.doc_delete('shop', 'session-abc-456', n) FROM unnest(ARRAY['profile', 'cart']) n" >/dev/null
PROFILE_KEY=$(q -c "SELECT cscp.api_key_create('shop', 'profile-bot')")
CART_KEY=$(q -c "SELECT cscp.api_key_create('shop', 'cart-bot')")
SUPPORT_KEY=$(q -c "SELECT cscp.api_key_create('shop', 'support-bot', ARRAY['conversations:read', 'conversations:write'])")
# The conversation's id: support-jane, or support-jane-N when an earlier run left it.
CONV=support-jane
n=$(q -c "SELECT count(*) FROM cscp.conversation WHERE tenant_id = 'shop' AND conversation_id LIKE 'support-jane%'")
[ "$n" -eq 0 ] || CONV=support-jane-$((n + 1))
echo "SELECT cscp.api_key_create('shop', 'profile-bot');  -- returns the key once: cscp_c2hvcA.…"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext subjectAltName=DNS:localhost \
	-keyout "$W/key.pem" -out "$W/cert.pem" >/dev/null 2>&1
port=$((20000 + $$ % 20000))
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
./gateway/cscp-gateway --listen "127.0.0.1:$port" --tls-cert "$W/cert.pem" --tls-key "$W/key.pem" \
	--database "host=$PGHOST port=${PGPORT:-5432} dbname=$DB user=cscp_gateway" 2>"$W/gateway.log" &
GW=$!
trap 'kill -TERM $GW 2>/dev/null; wait $GW 2>/dev/null; cleanup_dir' EXIT
for _ in $(seq 1 50); do
	curl -s -o /dev/null --cacert "$W/cert.pem" "https://localhost:$port/healthz" && break
	sleep 0.1
done
API="https://localhost:$port"
C=(curl -sS --cacert "$W/cert.pem" -w '\n')

say "Turn 1: \"Hi, my name is Jane.\"  The profile bot saves it."
show "${C[@]}" -X POST "$API/v1/context/session-abc-456/profile" -H "Authorization: Bearer $PROFILE_KEY" \
	-H "Content-Type: application/json" -d '{"payload": {"name": "Jane"}, "ttlSeconds": 1800}'
check '"documentKey": "session-abc-456:profile"' "201 Created with the document's key"

say "Turn 2: \"Add a blue shirt to my cart.\"  The shopping bot writes its own namespace."
show "${C[@]}" -X POST "$API/v1/context/session-abc-456/cart" -H "Authorization: Bearer $CART_KEY" \
	-H "Content-Type: application/json" -d '{"payload": {"items": ["blue shirt"], "last_updated": "2026-05-01T12:00:00Z"}, "ttlSeconds": 1800}'
check '"documentKey": "session-abc-456:cart"' "the cart saved beside the profile"

say "Turn 3: \"Can you greet me by my name?\"  The profile bot reads its namespace, untouched by the cart."
show "${C[@]}" "$API/v1/context/session-abc-456/profile" -H "Authorization: Bearer $PROFILE_KEY"
check '{"name": "Jane"}' "the profile as the profile bot saved it, no cart in it"

say "The session's namespaces."
show "${C[@]}" "$API/v1/context/session-abc-456" -H "Authorization: Bearer $PROFILE_KEY"
check '"namespace": "cart"' "the cart namespace listed"
check '"namespace": "profile"' "the profile namespace listed"

say "A support bot holds a conversation (OpenWOP RFC 0005): start, then ConversationResolve bodies."
show "${C[@]}" -X POST "$API/v1/conversations/$CONV" -H "Authorization: Bearer $SUPPORT_KEY" \
	-H "Content-Type: application/json" \
	-d '{"agentId": "support-bot", "initialTurn": {"from": "support-bot", "role": "agent", "content": {"text": "How can I help?"}, "ts": 1000}}'
check '"turnIndex": 0' "started: the first turn is turn 0"
show "${C[@]}" -X POST "$API/v1/conversations/$CONV/turns" -H "Authorization: Bearer $SUPPORT_KEY" \
	-H "Content-Type: application/json" \
	-d '{"operation": "exchange", "turn": {"messageId": "wa-17", "from": "jane", "role": "user", "content": {"text": "Where is my blue shirt?"}, "ts": 2000}}'
check '"result": "exchanged"' "the user's turn recorded as turn 1"
say "The messaging channel delivers the same message twice: a replay, nothing recorded twice."
show "${C[@]}" -X POST "$API/v1/conversations/$CONV/turns" -H "Authorization: Bearer $SUPPORT_KEY" \
	-H "Content-Type: application/json" \
	-d '{"operation": "exchange", "turn": {"messageId": "wa-17", "from": "jane", "role": "user", "content": {"text": "Where is my blue shirt?"}, "ts": 2000}}'
check '"result": "replayed"' "the re-delivery replayed"
show "${C[@]}" -X POST "$API/v1/conversations/$CONV/turns" -H "Authorization: Bearer $SUPPORT_KEY" \
	-H "Content-Type: application/json" \
	-d '{"operation": "close", "turn": {"from": "support-bot", "role": "agent", "content": {"text": "It ships today."}, "ts": 3000}, "outcome": {"resolved": true}}'
check '"result": "closed"' "closed with its final turn and outcome"
show "${C[@]}" -i -X POST "$API/v1/conversations/$CONV/turns" -H "Authorization: Bearer $SUPPORT_KEY" \
	-H "Content-Type: application/json" \
	-d '{"operation": "exchange", "turn": {"from": "jane", "role": "user", "content": {"text": "Thanks!"}, "ts": 4000}}'
check '"code": "validation_error"' "a turn after close: 400 validation_error, nothing written"

say "Mistakes answer JSON errors with a stable code and the SQLSTATE behind them."
show "${C[@]}" -i -X POST "$API/v1/context/session-abc-456/cart" -H "Authorization: Bearer $CART_KEY" \
	-H "Content-Type: application/json" -d '{"payload": {"items": []}}'
check '"code": "missing_field"' "400: ttlSeconds is required"
show "${C[@]}" -i "$API/v1/context/session-abc-456/profile"
check '"code": "unauthorized"' "401: no key"
show "${C[@]}" -i "$API/v1/context/session-abc-456/wishlist" -H "Authorization: Bearer $CART_KEY"
check '"code": "not_found"' "404: no such document"

say "One log line per request (the gateway's stderr):"
cat "$W/gateway.log"
if [ "$failed" -ne 0 ]; then
	echo "gateway-demo: an answer was not as expected (above)" >&2
	exit 1
fi
