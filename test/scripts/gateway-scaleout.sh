#!/usr/bin/env bash
# The gateway's endpoints through the PL/Proxy proxy (part of `make test`, after gateway-test.sh):
# two shards and a proxy as test/scripts/scaleout.sh sets them up, the gateway's role granted on
# each, API keys made through the proxy, and cscp-gateway connected to the proxy database.
#   0. a key made (or revoked) through the proxy is stored on (or revoked on) every shard;
#   1. documents of many sessions written over HTTP land on both shards, each on the shard of
#      (the key's tenant, the session), and read back through the proxy;
#   2. a context and a command, routed by conversation and then by the command's id;
#   3. another tenant's key finds nothing; a forged or revoked key is refused (401) wherever it
#      routes.
set -uo pipefail
cd "$(dirname "$0")/../.."
SCALEOUT_SETUP_ONLY=1
source test/scripts/scaleout.sh || exit 1
trap 'kill -TERM $GW 2>/dev/null; wait $GW 2>/dev/null; so_cleanup' EXIT
GW=

status=0
fail() {
	echo "not ok - $*"
	status=1
}
pass() { echo "ok - $*"; }

make -s --no-print-directory -C gateway || exit 1
for i in 0 1; do
	so_psql "shard$i" cscp -c "CREATE ROLE cscp_gateway LOGIN" -c "SELECT cscp.grant_gateway('cscp_gateway')" >/dev/null || exit 1
done
so_psql proxy proxy >/dev/null <<-SQL || exit 1
	CREATE ROLE cscp_gateway LOGIN;
	CREATE USER MAPPING FOR cscp_gateway SERVER cscp OPTIONS (user 'cscp_gateway');
	SELECT cscp_proxy.grant_app('cscp_gateway');
SQL
# Keys made through the proxy: one key, its hash stored on every shard.
key=$(so_psql proxy proxy -At -c "SELECT cscp.api_key_create('shop', 'bot')")
other=$(so_psql proxy proxy -At -c "SELECT cscp.api_key_create('other-shop', 'bot')")
gone=$(so_psql proxy proxy -At -c "SELECT cscp.api_key_create('shop', 'gone')")
so_psql proxy proxy -At -c "SELECT cscp.api_key_revoke('shop', 'gone')" >/dev/null || exit 1
h0=$(so_psql shard0 cscp -At -c "SELECT string_agg(label || ':' || encode(key_hash, 'hex') || ':' || (revoked_at IS NOT NULL), ',' ORDER BY tenant_id, label) FROM cscp.api_key")
h1=$(so_psql shard1 cscp -At -c "SELECT string_agg(label || ':' || encode(key_hash, 'hex') || ':' || (revoked_at IS NOT NULL), ',' ORDER BY tenant_id, label) FROM cscp.api_key")
dup=$(so_psql proxy proxy -At -c "SELECT cscp.api_key_create('shop', 'bot')" 2>&1)
if [ -n "$h0" ] && [ "$h0" = "$h1" ] && [ "$(tr ',' '\n' <<<"$h0" | grep -c ':true$')" = 1 ] && grep -q "already exists" <<<"$dup"; then
	pass "a key made through the proxy is stored on both shards, a revocation reaches both, a live label is refused"
else
	fail "keys through the proxy: shard0 '$h0', shard1 '$h1', again: $dup"
fi

port=$((20000 + $$ % 20000))
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
./gateway/cscp-gateway --insecure-http --listen "127.0.0.1:$port" --pool 2 \
	--database "host=$SO_TMP/proxy port=5432 dbname=proxy user=cscp_gateway" 2>"$SO_TMP/gateway.log" &
GW=$!
for _ in $(seq 1 50); do
	curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break
	sleep 0.1
done
api="http://127.0.0.1:$port"
req() { curl -sS -o "$SO_TMP/body" -w '%{http_code}' "$@"; }

# 1. Documents of 20 sessions, over HTTP through the proxy.
ok=1
for s in $(seq 1 20); do
	code=$(req -X POST "$api/v1/context/sess-$s/profile" -H "Authorization: Bearer $key" \
		-H "Content-Type: application/json" -d "{\"ttlSeconds\": 600, \"payload\": {\"n\": $s}}")
	[ "$code" = 201 ] || { ok=0; echo "POST sess-$s: $code $(cat "$SO_TMP/body")"; }
	code=$(req "$api/v1/context/sess-$s/profile" -H "Authorization: Bearer $key")
	[ "$code" = 200 ] && [ "$(cat "$SO_TMP/body")" = "{\"n\": $s}" ] || { ok=0; echo "GET sess-$s: $code $(cat "$SO_TMP/body")"; }
done
n0=$(so_psql shard0 cscp -At -c "SELECT count(*) FROM cscp.document WHERE tenant_id = 'shop'")
n1=$(so_psql shard1 cscp -At -c "SELECT count(*) FROM cscp.document WHERE tenant_id = 'shop'")
misplaced=0
for i in 0 1; do
	misplaced=$((misplaced + $(so_psql "shard$i" cscp -At -c "SELECT count(*) FROM cscp.shard_misplaced()")))
done
if [ $ok = 1 ] && [ "$n0" -gt 0 ] && [ "$n1" -gt 0 ] && [ $((n0 + n1)) = 20 ] && [ "$misplaced" = 0 ]; then
	pass "20 sessions' documents over HTTP through the proxy: $n0 on shard0, $n1 on shard1, none misplaced"
else
	fail "documents through the proxy: ok=$ok shard0=$n0 shard1=$n1 misplaced=$misplaced"
fi

# 2. A context by conversation, a command by conversation and then by its id.
code=$(req -X POST "$api/v1/conversations/conv-9/actors/ana/context" -H "Authorization: Bearer $key")
c1=$code
code=$(req -X POST "$api/v1/conversations/conv-9/actors/ana/commands" -H "Authorization: Bearer $key" \
	-H "Content-Type: application/json" -d '{"idempotencyKey": "k-1", "commandName": "ship", "messageIds": ["m1"]}')
c2=$code
id=$(sed -E 's/.*"commandId": "([0-9a-f-]+)".*/\1/' "$SO_TMP/body")
code=$(req "$api/v1/commands/$id" -H "Authorization: Bearer $key")
c3=$code
state=$(sed -E 's/.*"state": "([a-z_]+)".*/\1/' "$SO_TMP/body")
if [ "$c1" = 200 ] && [ "$c2" = 201 ] && [ "$c3" = 200 ] && [ "$state" = confirmation_required ]; then
	pass "a context, a command and its status by id through the proxy"
else
	fail "context $c1, submit $c2, status $c3 ($state): $(cat "$SO_TMP/body")"
fi

# 3. Another tenant's key, a forged key, a revoked key, on sessions of both shards.
c1=$(req "$api/v1/context/sess-1/profile" -H "Authorization: Bearer $other")
c2=$(req "$api/v1/context/sess-1/profile" -H "Authorization: Bearer cscp_c2hvcA.not-the-secret")
c3=$(req "$api/v1/commands/$id" -H "Authorization: Bearer $other")
revoked=
for s in $(seq 1 20); do revoked+=$(req "$api/v1/context/sess-$s/profile" -H "Authorization: Bearer $gone"); done
if [ "$c1" = 404 ] && [ "$c2" = 401 ] && [ "$c3" = 404 ] && [ "$revoked" = "$(printf '401%.0s' $(seq 1 20))" ]; then
	pass "another tenant's key finds nothing (404); a forged key and a revoked one are refused (401) on every shard"
else
	fail "other tenant $c1, forged key $c2, other's command $c3, revoked key: $revoked"
fi

[ $status = 0 ] || { echo "gateway log:"; tail -n 20 "$SO_TMP/gateway.log"; }
exit $status
