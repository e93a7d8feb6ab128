#!/usr/bin/env bash
# `make bench-http` (issue 33): the document endpoints through cscp-gateway over HTTPS with
# keep-alive (wrk), beside the same calls through libpq (pgbench on cscp.doc_get / cscp.doc_put)
# and beside the gateway's /healthz (the HTTP floor, no database), at 4 and 16 connections, in one
# run on a throwaway cluster.  Prints requests per second, p50 and p99 per line and the ratio of
# each HTTP line to pgbench's at the same concurrency.
# Every line runs BENCH_ROUNDS (default 3) times, the lines in turn, and the median of each
# figure is printed, so that load from elsewhere on the machine falls on all lines alike.
#   BENCH_SECONDS (default 4) a run, BENCH_CONNECTIONS (default "4 16"), BENCH_POOL the
#   gateway's --pool (default the largest of BENCH_CONNECTIONS: pgbench has a backend per
#   connection, and so has the gateway then; with fewer, requests queue for a connection).
#   The one bench tenant may have every connection in flight (--tenant-max).
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh
SECONDS_PER=${BENCH_SECONDS:-4}
ROUNDS=${BENCH_ROUNDS:-3}
CONNS=${BENCH_CONNECTIONS:-"4 16"}
MAXCONNS=$(tr ' ' '\n' <<<"$CONNS" | sort -n | tail -n1)
POOL=${BENCH_POOL:-$MAXCONNS}

command -v wrk >/dev/null || { echo "bench-http: wrk is not installed (Debian: wrk)" >&2; exit 1; }
make -s --no-print-directory -C gateway
cluster_start "max_connections=100" || exit 1
q() { psql -X -q -v ON_ERROR_STOP=1 -d postgres -At "$@"; }
q -c "CREATE EXTENSION cscp" -c "CREATE ROLE cscp_gateway LOGIN" \
  -c "SELECT cscp.grant_gateway('cscp_gateway')" \
  -c "SELECT cscp.doc_put('bench', 'session-1', 'profile', '{\"user_name\": \"Alex\", \"preferred_language\": \"en-US\"}', 86400)" >/dev/null
KEY=$(q -c "SELECT cscp.api_key_create('bench', 'bench-bot')")

W=$CSCP_TMP/bench-http
mkdir -p "$W"
chmod 777 "$W"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
	-keyout "$W/key.pem" -out "$W/cert.pem" >/dev/null 2>&1
port=$((20000 + $$ % 20000))
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
./gateway/cscp-gateway --listen "127.0.0.1:$port" --database "host=$PGHOST port=$PGPORT dbname=postgres user=cscp_gateway" \
	--tls-cert "$W/cert.pem" --tls-key "$W/key.pem" --pool "$POOL" --tenant-max "$MAXCONNS" 2>"$W/gateway.log" &
GW=$!
trap 'kill -TERM $GW 2>/dev/null; wait $GW 2>/dev/null; cluster_stop' EXIT
for _ in $(seq 1 50); do
	curl -sk -o /dev/null "https://127.0.0.1:$port/healthz" && break
	sleep 0.1
done
BASE="https://127.0.0.1:$port"

cat >"$W/post.lua" <<EOF
wrk.method = "POST"
wrk.body = '{"ttlSeconds": 86400, "payload": {"step": 2, "preferred_language": "nl-NL"}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $KEY"
EOF
cat >"$W/get.lua" <<EOF
wrk.headers["Authorization"] = "Bearer $KEY"
EOF
# The same calls through libpq, the tenant named as an application would.
echo "SELECT cscp.doc_get('bench', 'session-1', 'profile');" >"$W/get.sql"
echo "SELECT cscp.doc_put('bench', 'session-1', 'profile', '{\"step\": 2, \"preferred_language\": \"nl-NL\"}', 86400);" >"$W/put.sql"
# The gateway's own statement through libpq: what the SQL wrapper (key check, tenant binding,
# error capture) costs beside doc_get, apart from HTTP and TLS.
echo "SELECT r.status, (SELECT pg_catalog.string_agg(h.key || ': ' || h.value, E'\\n') FROM pg_catalog.jsonb_each_text(r.headers) h), r.body::text FROM cscp.http_doc_get('Bearer $KEY', 'session-1', 'profile') r;" >"$W/http_get.sql"

# "rps p50_ms p99_ms" of a wrk run with --latency.
wrk_run() {
	local conns=$1 script=$2 path=$3 out
	out=$(wrk -t2 -c"$conns" -d"${SECONDS_PER}s" --latency -s "$script" "$BASE$path")
	if grep -q "Non-2xx" <<<"$out"; then
		echo "bench-http: wrk saw non-2xx answers on $path:" >&2
		echo "$out" >&2
		exit 1
	fi
	awk '
		function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
		$1 == "50%" { p50 = ms($2) } $1 == "99%" { p99 = ms($2) }
		$1 == "Requests/sec:" { rps = $2 }
		END { printf "%.0f %.3f %.3f\n", rps, p50, p99 }' <<<"$out"
}

# The durations the gateway measured itself (its log line per request, from the request's
# headers to its answer sent) of the GETs of a document in its log from line $1 on; and their
# "p50_ms p99_ms".  What wrk's figures add to these is the client's side and the machine's
# scheduling of wrk.
gateway_durations() {
	tail -n +"$1" "$W/gateway.log" | grep ' "GET /v1/context/' |
		awk '{ for (i = NF; i > 0; i--) if ($i ~ /^[0-9.]+ms$/) { sub("ms", "", $i); print $i + 0; break } }'
}
percentiles() {
	sort -g "$1" | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "0 0"; exit }
		p50 = v[int(NR * 0.50) > 0 ? int(NR * 0.50) : 1]; p99 = v[int(NR * 0.99) > 0 ? int(NR * 0.99) : 1]
		printf "%.3f %.3f\n", p50, p99 }'
}

# "tps p50_ms p99_ms" of a pgbench run, percentiles from its per-transaction log.
pgbench_run() {
	local conns=$1 file=$2 tps
	rm -f "$W"/pgbench_log.*
	tps=$(cd "$W" && cluster_as_owner "$PG_BINDIR/pgbench" -h "$PGHOST" -p "$PGPORT" -U postgres -n \
		-c "$conns" -j 2 -T "$SECONDS_PER" -f "$file" -l postgres 2>/dev/null |
		awk '/^tps = / { print $3 }')
	cat "$W"/pgbench_log.* | awk '{ print $3 / 1000 }' | sort -n |
		awk -v tps="$tps" '{ v[NR] = $1 } END {
			p50 = v[int(NR * 0.50) > 0 ? int(NR * 0.50) : 1]; p99 = v[int(NR * 0.99) > 0 ? int(NR * 0.99) : 1]
			printf "%.0f %.3f %.3f\n", tps, p50, p99 }'
}

# Append a measurement's "rps p50 p99" to its file; print the medians of each figure over rounds.
measure() { local name=$1; shift; "$@" >>"$W/m-$c-$name"; }
median() {
	local col out=""
	for col in 1 2 3; do
		out+="$(cut -d' ' -f"$col" "$W/m-$c-$1" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }') "
	done
	echo "$out"
}

printf "\n%-34s %5s %10s %9s %9s %8s\n" "workload" "conns" "req/s" "p50 ms" "p99 ms" "ratio"
for c in $CONNS; do
	# Rounds of every line in turn, so that the machine's other load falls on all of them alike.
	for _ in $(seq 1 "$ROUNDS"); do
		measure pg_get pgbench_run "$c" get.sql
		from=$(($(wc -l <"$W/gateway.log") + 1))
		measure get wrk_run "$c" "$W/get.lua" /v1/context/session-1/profile
		gateway_durations "$from" >>"$W/gw-$c"
		measure pg_hget pgbench_run "$c" http_get.sql
		measure hz wrk_run "$c" "$W/get.lua" /healthz
		measure pg_put pgbench_run "$c" put.sql
		measure put wrk_run "$c" "$W/post.lua" /v1/context/session-1/profile
	done
	read -r pg_get_rps pg_get_p50 pg_get_p99 < <(median pg_get)
	read -r pg_put_rps pg_put_p50 pg_put_p99 < <(median pg_put)
	read -r pg_hget_rps pg_hget_p50 pg_hget_p99 < <(median pg_hget)
	read -r get_rps get_p50 get_p99 < <(median get)
	read -r put_rps put_p50 put_p99 < <(median put)
	read -r hz_rps hz_p50 hz_p99 < <(median hz)
	read -r gws_p50 gws_p99 < <(percentiles "$W/gw-$c")
	ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
	printf "%-34s %5d %10s %9s %9s %8s\n" "pgbench doc_get (libpq)" "$c" "$pg_get_rps" "$pg_get_p50" "$pg_get_p99" "1.00"
	printf "%-34s %5d %10s %9s %9s %8s\n" "pgbench http_doc_get (libpq)" "$c" "$pg_hget_rps" "$pg_hget_p50" "$pg_hget_p99" "$(ratio "$pg_hget_rps" "$pg_get_rps")"
	printf "%-34s %5d %10s %9s %9s %8s\n" "HTTPS GET document" "$c" "$get_rps" "$get_p50" "$get_p99" "$(ratio "$get_rps" "$pg_get_rps")"
	printf "%-34s %5d %10s %9s %9s %8s\n" "  the same, measured by the gateway" "$c" "" "$gws_p50" "$gws_p99" ""
	printf "%-34s %5d %10s %9s %9s %8s\n" "pgbench doc_put (libpq)" "$c" "$pg_put_rps" "$pg_put_p50" "$pg_put_p99" "1.00"
	printf "%-34s %5d %10s %9s %9s %8s\n" "HTTPS POST document" "$c" "$put_rps" "$put_p50" "$put_p99" "$(ratio "$put_rps" "$pg_put_rps")"
	printf "%-34s %5d %10s %9s %9s %8s\n" "HTTPS GET /healthz (floor)" "$c" "$hz_rps" "$hz_p50" "$hz_p99" "$(ratio "$hz_rps" "$pg_get_rps")"
done
echo
echo "ratio: requests per second against pgbench's at the same concurrency (GET, http_doc_get and /healthz against doc_get)."
echo "gateway --pool $POOL, wrk -t2 with keep-alive over HTTPS, pgbench -j2; medians of $ROUNDS rounds of ${SECONDS_PER}s a line; $(nproc) CPUs."
echo "p50/p99 of wrk are the client's; the gateway's own (headers in to answer sent) are on the line below GET."
