#!/usr/bin/env bash
# `make demo-http`: the specification's multi-bot scenario through curl against cscp-gateway over
# HTTPS, on a throwaway cluster.  A profile bot and a shopping bot share one session, each in its
# namespace, each with its own API key; then what a bot sees when it gets something wrong.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
make -s --no-print-directory -C gateway
cluster_start >/dev/null || exit 1
q() { psql -X -q -v ON_ERROR_STOP=1 -d postgres -At "$@"; }
W=$CSCP_TMP/demo-http
mkdir -p "$W"

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
show() {
	{ printf '$'; printf ' %q' "$@"; echo; } | sed -e "s/$PROFILE_KEY/\$PROFILE_KEY/g" -e "s/$CART_KEY/\$CART_KEY/g"
	"$@"
	echo
}

say "The gateway's role can call the HTTP functions and nothing else; each bot gets a key of tenant 'shop'."
q -c "CREATE EXTENSION cscp" -c "CREATE ROLE cscp_gateway LOGIN" -c "SELECT cscp.grant_gateway('cscp_gateway')" >/dev/null
PROFILE_KEY=$(q -c "SELECT cscp.api_key_create('shop', 'profile-bot')")
CART_KEY=$(q -c "SELECT cscp.api_key_create('shop', 'cart-bot')")
echo "SELECT cscp.api_key_create('shop', 'profile-bot');  -- returns the key once: cscp_c2hvcA.…"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext subjectAltName=DNS:localhost \
	-keyout "$W/key.pem" -out "$W/cert.pem" >/dev/null 2>&1
port=$((20000 + $$ % 20000))
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
./gateway/cscp-gateway --listen "127.0.0.1:$port" --tls-cert "$W/cert.pem" --tls-key "$W/key.pem" \
	--database "host=$PGHOST port=$PGPORT dbname=postgres user=cscp_gateway" 2>"$W/gateway.log" &
GW=$!
trap 'kill -TERM $GW 2>/dev/null; wait $GW 2>/dev/null; cluster_stop' EXIT
for _ in $(seq 1 50); do
	curl -s -o /dev/null --cacert "$W/cert.pem" "https://localhost:$port/healthz" && break
	sleep 0.1
done
API="https://localhost:$port"
C=(curl -sS --cacert "$W/cert.pem" -w '\n')

say "Turn 1: \"Hi, my name is Jane.\"  The profile bot saves it."
show "${C[@]}" -X POST "$API/v1/context/session-abc-456/profile" -H "Authorization: Bearer $PROFILE_KEY" \
	-H "Content-Type: application/json" -d '{"payload": {"name": "Jane"}, "ttlSeconds": 1800}'

say "Turn 2: \"Add a blue shirt to my cart.\"  The shopping bot writes its own namespace."
show "${C[@]}" -X POST "$API/v1/context/session-abc-456/cart" -H "Authorization: Bearer $CART_KEY" \
	-H "Content-Type: application/json" -d '{"payload": {"items": ["blue shirt"], "last_updated": "2026-05-01T12:00:00Z"}, "ttlSeconds": 1800}'

say "Turn 3: \"Can you greet me by my name?\"  The profile bot reads its namespace, untouched by the cart."
show "${C[@]}" "$API/v1/context/session-abc-456/profile" -H "Authorization: Bearer $PROFILE_KEY"

say "The session's namespaces."
show "${C[@]}" "$API/v1/context/session-abc-456" -H "Authorization: Bearer $PROFILE_KEY"

say "Mistakes answer JSON errors with a stable code and the SQLSTATE behind them."
show "${C[@]}" -i -X POST "$API/v1/context/session-abc-456/cart" -H "Authorization: Bearer $CART_KEY" \
	-H "Content-Type: application/json" -d '{"payload": {"items": []}}'
show "${C[@]}" -i "$API/v1/context/session-abc-456/profile"
show "${C[@]}" -i "$API/v1/context/session-abc-456/wishlist" -H "Authorization: Bearer $CART_KEY"

say "One log line per request (the gateway's stderr):"
cat "$W/gateway.log"
