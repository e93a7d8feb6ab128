#!/usr/bin/env bash
# The HTTPS gateway through real HTTP, a step of `make test` (issue 33): a cluster of its own (the
# suite restarts it), gateway/cscp-gateway started with a self-signed certificate against it as a
# role granted only cscp.grant_gateway, then
#   1. the specification's cURL commands, with only the host changed;
#   2. test/scripts/gateway_test.py (Python requests): the specification's Python functions, the
#      multi-bot scenario, expiry, every error status, another tenant's key, a revoked key, an
#      oversized body, slow and idle clients, concurrent POSTs to one document, metrics, a
#      database restart mid-run, and SIGTERM draining a request in flight;
#   3. test/scripts/gateway_limits_test.py: fairness and bounds against gateways of its own with
#      small limits (--tenant-max, --statement-timeout, --lock-timeout, --header-timeout,
#      --per-ip-max, ambiguous framing, the CSCP_GATEWAY_* variables);
#   4. the OpenAPI document: validated by @redocly/cli (npm, installed under test/node when
#      missing), served as committed, and every route the gateway serves is in it and every
#      documented route answers.
# GW_NO_BUILD=1 runs gateway/cscp-gateway as it is (say, built with -fsanitize=address,undefined).
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
PYTHON=${CSCP_PYTHON:-/usr/bin/python3}

[ -n "${GW_NO_BUILD:-}" ] || make -s --no-print-directory -C gateway
cluster_start || exit 1
q() { psql -X -q -v ON_ERROR_STOP=1 -d postgres -At "$@"; }

q -c "CREATE EXTENSION cscp" \
  -c "CREATE ROLE cscp_gateway LOGIN" \
  -c "SELECT cscp.grant_gateway('cscp_gateway')" >/dev/null
export GW_KEY_PROFILE GW_KEY_CART GW_KEY_OTHER GW_KEY_READ GW_KEY_REVOKE
GW_KEY_PROFILE=$(q -c "SELECT cscp.api_key_create('shop', 'profile-bot')")
GW_KEY_CART=$(q -c "SELECT cscp.api_key_create('shop', 'cart-bot')")
GW_KEY_OTHER=$(q -c "SELECT cscp.api_key_create('other-shop', 'bot')")
GW_KEY_READ=$(q -c "SELECT cscp.api_key_create('shop', 'reader', ARRAY['documents:read'])")
GW_KEY_REVOKE=$(q -c "SELECT cscp.api_key_create('shop', 'to-revoke')")
export GW_KEY_A GW_KEY_A2 GW_KEY_B
GW_KEY_A=$(q -c "SELECT cscp.api_key_create('flood-a', 'bot-1')")
GW_KEY_A2=$(q -c "SELECT cscp.api_key_create('flood-a', 'bot-2')")
GW_KEY_B=$(q -c "SELECT cscp.api_key_create('calm-b', 'bot')")

GW_DIR=$CSCP_TMP/gateway
mkdir -p "$GW_DIR"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
	-addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
	-keyout "$GW_DIR/key.pem" -out "$GW_DIR/cert.pem" >/dev/null 2>&1

# A free port: the first one from a per-process start that nothing listens on.
port=$((20000 + $$ % 20000))
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
export GW_URL="https://localhost:$port" GW_CA="$GW_DIR/cert.pem" GW_LOG="$GW_DIR/gateway.log"

CSCP_GATEWAY_DATABASE="host=$PGHOST port=$PGPORT dbname=postgres user=cscp_gateway" \
	./gateway/cscp-gateway --listen "127.0.0.1:$port" --tls-cert "$GW_DIR/cert.pem" \
	--tls-key "$GW_DIR/key.pem" --pool 4 --max-body 65536 --idle-timeout 2 --drain-timeout 10 \
	--tenant-max 16 \
	2>"$GW_LOG" &
export GW_PID=$!
stop_gateway() {
	kill -TERM "$GW_PID" 2>/dev/null && wait "$GW_PID" 2>/dev/null || true
}
trap 'stop_gateway; cluster_stop' EXIT
for _ in $(seq 1 50); do
	curl -s -o /dev/null --cacert "$GW_CA" "$GW_URL/healthz" && break
	sleep 0.1
done

fail() { echo "gateway-test: $*" >&2; echo "---- gateway log (last lines)" >&2; tail -n 20 "$GW_LOG" >&2; exit 1; }

# 1. The specification's cURL commands (section "Code Examples"), the host changed.
echo "gateway-test: the specification's cURL examples"
out=$(curl -sS --cacert "$GW_CA" -w '\n%{http_code}' -X POST "$GW_URL/v1/context/session-xyz-123/user_profile" \
     -H "Authorization: Bearer $GW_KEY_PROFILE" \
     -H "Content-Type: application/json" \
     -d '{
           "ttlSeconds": 3600,
           "payload": {
             "user_name": "Alex",
             "preferred_language": "en-US"
           }
         }')
[ "$(tail -n1 <<<"$out")" = 201 ] || fail "cURL POST: $out"
[ "$(head -n1 <<<"$out")" = '{"success": true, "documentKey": "session-xyz-123:user_profile"}' ] || fail "cURL POST body: $out"
out=$(curl -sS --cacert "$GW_CA" -w '\n%{http_code}' -X GET "$GW_URL/v1/context/session-xyz-123/user_profile" \
     -H "Authorization: Bearer $GW_KEY_PROFILE")
[ "$(tail -n1 <<<"$out")" = 200 ] || fail "cURL GET: $out"
[ "$(head -n1 <<<"$out")" = '{"user_name": "Alex", "preferred_language": "en-US"}' ] || fail "cURL GET body: $out"

# 2. Everything else through Python requests; it stops the gateway last (SIGTERM drain).
export PG_BINDIR CSCP_TMP CSCP_PGOPTS PGHOST PGPORT PGUSER
export -f cluster_as_owner cluster_restart
"$PYTHON" test/scripts/gateway_test.py || fail "gateway_test.py failed"

# 3. Fairness and bounds (tenant-max, timeouts, header deadline, per-IP limit, framing), against
#    gateways of its own with small limits.
export GW_CERT="$GW_DIR/cert.pem" GW_KEYFILE="$GW_DIR/key.pem" GW_BIN=./gateway/cscp-gateway GW_LOGDIR="$GW_DIR"
export GW_DATABASE="host=$PGHOST port=$PGPORT dbname=postgres user=cscp_gateway"
"$PYTHON" test/scripts/gateway_limits_test.py || { tail -n 20 "$GW_DIR"/gateway-*.log >&2; fail "gateway_limits_test.py failed"; }

# 4. The OpenAPI document: an independent validator, and the routes against the gateway's.
echo "gateway-test: OpenAPI document"
if [ ! -x test/node/node_modules/.bin/redocly ]; then
	bash test/scripts/npm-tool.sh @redocly/cli@2.77.0 || fail "no @redocly/cli (npm's error above)"
fi
(cd gateway && REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true ../test/node/node_modules/.bin/redocly lint --format=stylish openapi.json) >"$GW_DIR/lint.out" 2>&1 ||
	{ cat "$GW_DIR/lint.out" >&2; fail "the OpenAPI document does not validate"; }
echo "gateway-test: all passed"
