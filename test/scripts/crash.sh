#!/usr/bin/env bash
# `make crashtest` (and a short form inside `make test`): acknowledged writes survive crashes.
#
# A throwaway cluster with fsync=on and synchronous_commit=on. CRASH_CLIENTS clients
# (test/crash/crash_client.c) run the message-turn and confirmation workloads as an application
# role, each in its own conversation, and log every call the server acknowledged as committed.
# CRASH_KILLS times, once the clients have made progress since the last restart, the postmaster
# is killed with SIGKILL mid-load and the cluster restarted (crash recovery replays the WAL):
# odd-numbered crashes kill the postmaster alone (its backends notice and exit), even-numbered
# ones kill the postmaster and all its processes at once (no backend finishes what it was
# doing). The clients reconnect and go on. Afterwards every acknowledged turn, context, slot
# value and command state must be in the database (a command at least in its acknowledged
# state: that transition's evidence row present, its current state reachable from it), every
# acknowledged command's evidence must verify, and cscp.check_invariants() must return nothing.
# Settings: CRASH_CLIENTS (4), CRASH_KILLS (3), CRASH_SEED (random; printed, so a run can be
# repeated with the same pauses between crashes).
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/cluster.sh

CLIENTS=${CRASH_CLIENTS:-4}
KILLS=${CRASH_KILLS:-3}
SEED=${CRASH_SEED:-$((RANDOM * 32768 + RANDOM))}
RANDOM=$SEED
ROLE=crash_app

make --no-print-directory -s test/crash/crash_client

cluster_start fsync=on synchronous_commit=on full_page_writes=on
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cscp-crash.XXXXXX")
client_pids=()
finish() {
	local p
	touch "$WORK/stop" 2>/dev/null || true
	for p in "${client_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	cluster_stop
	rm -rf "$WORK"
}
trap finish EXIT
echo "cscp crash test: $CLIENTS clients, $KILLS crashes, seed $SEED (fsync=on, synchronous_commit=on)"

psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION cscp;
SELECT cscp.command_declare('crash', 'lookup_order', false);
CREATE ROLE $ROLE LOGIN;
SELECT cscp.grant_app('$ROLE');
SQL

# acked: acknowledged calls logged so far, over all clients
acked() { cat "$WORK"/ack.* 2>/dev/null | wc -l; }

# alive: is any client still running? (fails the test when one exited with an error)
check_clients() {
	local p
	for p in "${client_pids[@]}"; do
		if ! kill -0 "$p" 2>/dev/null; then
			wait "$p" || { echo "cscp crash test: a client failed (see above)" >&2; exit 1; }
			echo "cscp crash test: a client stopped early" >&2
			exit 1
		fi
	done
}

# wait_progress N: wait until the clients have acknowledged N more calls (at most 60 s)
wait_progress() {
	local want=$(($(acked) + $1)) deadline=$((SECONDS + 60))
	while [ "$(acked)" -lt "$want" ]; do
		check_clients
		[ $SECONDS -lt $deadline ] || { echo "cscp crash test: no progress in 60 s" >&2; exit 1; }
		sleep 0.1
	done
}

# crash N: SIGKILL the postmaster (and, for even N, every process of the cluster at once), wait
# until every process of the old cluster has gone, and restart it.
crash() {
	local n=$1 pm kids p deadline
	pm=$(head -n 1 "$CSCP_TMP/data/postmaster.pid")
	kids=$(ps -o pid= --ppid "$pm" | tr -s ' \n' ' ')
	if [ $((n % 2)) -eq 0 ] && [ "$(ps -o pgid= -p "$pm" | tr -d ' ')" = "$pm" ]; then
		kill -KILL -- "-$pm"
		echo "  crash $n: SIGKILL to the postmaster and all its processes (process group $pm) at $(acked) acknowledged calls"
	else
		kill -KILL "$pm"
		echo "  crash $n: SIGKILL to the postmaster ($pm) at $(acked) acknowledged calls"
	fi
	deadline=$((SECONDS + 60))
	for p in $pm $kids; do
		# a zombie is dead; its parent (init here) reaps it
		while ps -o stat= -p "$p" 2>/dev/null | grep -qv '^Z'; do
			[ $SECONDS -lt $deadline ] || kill -KILL "$p" 2>/dev/null || true
			sleep 0.05
		done
	done
	# The new postmaster refuses to start while the PID in postmaster.pid exists, zombie or
	# not; a zombie left unreaped for 10 s is dead all the same, so its lock file goes.
	deadline=$((SECONDS + 10))
	while ps -p "$pm" >/dev/null 2>&1; do
		if [ $SECONDS -ge $deadline ]; then
			echo "  (postmaster $pm is an unreaped zombie: removing its postmaster.pid)"
			cluster_as_owner rm -f "$CSCP_TMP/data/postmaster.pid"
			break
		fi
		sleep 0.05
	done
	cluster_restart
}

: >"$WORK/clients.out"
for i in $(seq 1 "$CLIENTS"); do
	PGUSER=$ROLE PGOPTIONS="-c cscp.tenant_id=crash" \
		test/crash/crash_client "$i" "$WORK/ack.$i" "$WORK/stop" >>"$WORK/clients.out" &
	client_pids+=($!)
done

for n in $(seq 1 "$KILLS"); do
	wait_progress $((CLIENTS * 8))
	sleep "0.$((RANDOM % 10))"
	check_clients
	crash "$n"
done
wait_progress $((CLIENTS * 8))
touch "$WORK/stop"
status=0
for p in "${client_pids[@]}"; do wait "$p" || status=1; done
client_pids=()
cat "$WORK/clients.out"
[ $status -eq 0 ] || { echo "cscp crash test: a client failed" >&2; exit 1; }

recoveries=$(grep -c "automatic recovery in progress" "$CSCP_TMP/postgres.log" || true)
cat "$WORK"/ack.* >"$WORK/acks.tsv"

# Every acknowledged write, checked; each query prints the problems it finds.
{
	echo "CREATE TEMP TABLE ack(client int, kind text, a text, b text, c text);"
	echo "\\copy ack FROM '$WORK/acks.tsv'"
	cat <<'SQL'
SELECT 'counts', kind, count(*) FROM ack GROUP BY kind ORDER BY kind;
SELECT 'problem', 'acknowledged turn missing', a, b, c FROM ack k
 WHERE kind = 'turn'
   AND NOT EXISTS (SELECT 1 FROM cscp.turn t
                    WHERE t.tenant_id = 'crash' AND t.conversation_id = k.a
                      AND t.turn_index = k.b::int AND t.message_id = k.c);
SELECT 'problem', 'acknowledged context missing', a FROM ack k
 WHERE kind = 'ctx'
   AND NOT EXISTS (SELECT 1 FROM cscp.context c WHERE c.tenant_id = 'crash' AND c.context_id = k.a::uuid);
SELECT 'problem', 'acknowledged slot value lost', k.a, max(k.b::bigint), c.slots->>'x_seq' FROM ack k
  LEFT JOIN cscp.context c ON c.tenant_id = 'crash' AND c.context_id = k.a::uuid
 WHERE kind = 'slot'
 GROUP BY k.a, c.slots
HAVING coalesce((c.slots->>'x_seq')::bigint, -1) < max(k.b::bigint);
-- A command must be at least in its acknowledged state: the evidence of that transition is
-- there, and its state now is that state or one reachable from it.
WITH RECURSIVE edge AS (
    SELECT f AS from_state, t AS to_state
      FROM unnest(enum_range(NULL::cscp.command_state)) f, unnest(enum_range(NULL::cscp.command_state)) t
     WHERE cscp.command_transition_allowed(f, t)
), reach(from_state, to_state) AS (
    SELECT s, s FROM unnest(enum_range(NULL::cscp.command_state)) s
    UNION
    SELECT r.from_state, e.to_state FROM reach r JOIN edge e ON e.from_state = r.to_state
)
SELECT 'problem', 'acknowledged command state lost', k.a, k.b, coalesce(c.state::text, 'no command'),
       CASE WHEN NOT EXISTS (SELECT 1 FROM cscp.evidence e
                              WHERE e.tenant_id = 'crash' AND e.command_id = k.a::uuid
                                AND e.to_state = k.b AND e.event_type <> 'invalid_transition_attempt')
            THEN 'no evidence of the transition' ELSE 'evidence present' END
  FROM ack k
  LEFT JOIN cscp.command c ON c.tenant_id = 'crash' AND c.command_id = k.a::uuid
 WHERE k.kind = 'cmd'
   AND (c.command_id IS NULL
        OR NOT EXISTS (SELECT 1 FROM reach r WHERE r.from_state = k.b::cscp.command_state AND r.to_state = c.state)
        OR NOT EXISTS (SELECT 1 FROM cscp.evidence e
                        WHERE e.tenant_id = 'crash' AND e.command_id = k.a::uuid
                          AND e.to_state = k.b AND e.event_type <> 'invalid_transition_attempt'));
SELECT 'problem', 'evidence does not verify', v.command_id, v.seq, v.problem
  FROM (SELECT DISTINCT a::uuid AS command_id FROM ack WHERE kind = 'cmd'
        INTERSECT SELECT command_id FROM cscp.command WHERE tenant_id = 'crash') k,
       LATERAL cscp.evidence_verify('crash', k.command_id) v;
SELECT 'problem', 'invariant', i.kind, i.tenant_id, i.object_id, i.detail FROM cscp.check_invariants() i;
SELECT 'checked', count(*) FROM ack;
SELECT 'commands', count(DISTINCT a) FROM ack WHERE kind = 'cmd';
SQL
} | psql -X -q -v ON_ERROR_STOP=1 -At -F ' | ' >"$WORK/check.txt"

checked=$(sed -n 's/^checked | //p' "$WORK/check.txt")
commands=$(sed -n 's/^commands | //p' "$WORK/check.txt")
sed -n 's/^counts | /  acknowledged /p' "$WORK/check.txt"
if grep -q '^problem' "$WORK/check.txt"; then
	grep '^problem' "$WORK/check.txt" | head -n 50
	echo "cscp crash test: FAILED ($(grep -c '^problem' "$WORK/check.txt") problems)" >&2
	exit 1
fi
echo "cscp crash test: $KILLS crashes survived ($recoveries crash recoveries in the server log);" \
     "$checked acknowledged writes checked ($commands commands), all present;" \
     "evidence verifies; check_invariants() empty"
