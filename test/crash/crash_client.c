/*-------------------------------------------------------------------------
 *
 * crash_client.c
 *	  One client of the crash test (test/scripts/crash.sh): runs cscp's
 *	  message-turn and confirmation workloads in a loop while the server is
 *	  killed and restarted under it, and logs every call the server
 *	  acknowledged as committed.
 *
 * Usage: crash_client CLIENT_NO ACK_LOG STOP_FILE
 *	  Connection settings come from the environment (PGHOST, PGPORT, PGUSER,
 *	  PGDATABASE, PGOPTIONS); the session must name tenant "crash".
 *
 * Every call is its own transaction (autocommit), so a result received
 * means a commit acknowledged; the server runs with fsync=on and
 * synchronous_commit=on, so an acknowledged commit must survive a crash.
 * Only then is a line appended to ACK_LOG (tab separated):
 *	  turn	conversation_id	turn_index	message_id
 *	  ctx	context_id
 *	  slot	context_id	value			(x_seq slot, increasing per client)
 *	  cmd	command_id	state			(state the call left it in)
 * A call whose connection broke has an unknown outcome and is not logged;
 * the client then reconnects (waiting for the server to come back) and
 * starts a new iteration with new ids.  Any other error, a transition
 * refused or an unexpected outcome is a failure: the client says what and
 * exits 1.  The loop ends when STOP_FILE exists; the client then prints
 * "client N: I iterations, A acknowledged calls, R reconnects".
 *
 * The message-turn workload: conversation_exchange a user turn,
 * context_open, slot_set, command_submit a read-only command,
 * command_transition authz_pending, authorized, started, executed.
 * The confirmation workload: command_submit a mutating command (it waits
 * for confirmation), confirm yes, then the same four transitions.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

#define TENANT "crash"
#define RECONNECT_SECONDS 120

static int	client_no;
static FILE *ack_log;
static const char *stop_file;
static PGconn *conn;
static long acked;
static long reconnects;
static char conversation_id[64];
static char actor_id[64];

/* Outcome of one call: done, or the connection broke (outcome unknown). */
typedef enum
{
	CALL_OK,
	CALL_LOST
} CallResult;

static void
fail(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "crash_client %d: ", client_no);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* Append one acknowledged write to the log, at once (the client outlives the server). */
static void
ack(const char *kind, const char *a, const char *b, const char *c)
{
	fprintf(ack_log, "%d\t%s\t%s\t%s\t%s\n", client_no, kind, a, b ? b : "", c ? c : "");
	if (fflush(ack_log) != 0)
		fail("cannot write the acknowledgement log: %s", strerror(errno));
	acked++;
}

static int
stop_requested(void)
{
	return access(stop_file, F_OK) == 0;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Server notices (the FATAL of a dying backend among them) are expected here: keep quiet. */
static void
ignore_notice(void *arg, const char *message)
{
	(void) arg;
	(void) message;
}

/* (Re)connect, retrying while the server is down or recovering. */
static void
connect_db(void)
{
	time_t		deadline = time(NULL) + RECONNECT_SECONDS;

	if (conn)
	{
		PQfinish(conn);
		conn = NULL;
		reconnects++;
	}
	for (;;)
	{
		conn = PQconnectdb("");
		if (PQstatus(conn) == CONNECTION_OK)
		{
			PQsetNoticeProcessor(conn, ignore_notice, NULL);
			return;
		}
		if (time(NULL) > deadline)
			fail("server did not come back within %d s: %s", RECONNECT_SECONDS,
				 PQerrorMessage(conn));
		PQfinish(conn);
		conn = NULL;
		sleep_ms(100);
	}
}

/*
 * Run one statement with text parameters.  CALL_LOST when the connection
 * broke (or the server was shutting down: its outcome is unknown); any
 * other error fails the client.  *res is the result on CALL_OK.
 */
static CallResult
call(PGresult **res, const char *sql, int nparams, const char *const *params)
{
	PGresult   *r = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(r);

	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
	{
		*res = r;
		return CALL_OK;
	}
	if (PQstatus(conn) != CONNECTION_OK)
	{
		PQclear(r);
		return CALL_LOST;
	}
	{
		const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);

		/* 57P01..57P03: the server is going down or starting up */
		if (state && strncmp(state, "57P0", 4) == 0)
		{
			PQclear(r);
			return CALL_LOST;
		}
		fail("%s failed: %s (SQLSTATE %s)", sql, PQresultErrorMessage(r), state ? state : "?");
	}
	return CALL_LOST;			/* not reached */
}

/* The one value of a one-row result, checked. */
static const char *
value(PGresult *r, int col, const char *what)
{
	if (PQntuples(r) != 1 || PQgetisnull(r, 0, col))
		fail("%s: expected one row with a value, got %d rows", what, PQntuples(r));
	return PQgetvalue(r, 0, col);
}

/* Move a command to each of the states, logging each accepted step. */
static CallResult
drive(const char *command_id, const char *const *states, int n)
{
	for (int i = 0; i < n; i++)
	{
		const char *params[2] = {command_id, states[i]};
		PGresult   *r;

		if (call(&r, "SELECT accepted, state FROM cscp.command_transition($1::uuid, $2::cscp.command_state)",
				 2, params) != CALL_OK)
			return CALL_LOST;
		if (strcmp(value(r, 0, "command_transition"), "t") != 0)
			fail("command %s: transition to %s refused (state %s)", command_id, states[i],
				 PQgetvalue(r, 0, 1));
		ack("cmd", command_id, PQgetvalue(r, 0, 1), NULL);
		PQclear(r);
	}
	return CALL_OK;
}

static const char *const to_executed[] = {"authz_pending", "authorized", "started", "executed"};

/* context_open, then slot_set x_seq = seq; *context_id receives the context. */
static CallResult
open_context(long seq, char *context_id, size_t size)
{
	const char *open_params[3] = {TENANT, conversation_id, actor_id};
	char		seqtext[32];
	const char *slot_params[2];
	PGresult   *r;

	if (call(&r, "SELECT context_id, status FROM cscp.context_open($1, $2, $3)", 3, open_params) != CALL_OK)
		return CALL_LOST;
	snprintf(context_id, size, "%s", value(r, 0, "context_open"));
	ack("ctx", context_id, PQgetvalue(r, 0, 1), NULL);
	PQclear(r);

	snprintf(seqtext, sizeof(seqtext), "%ld", seq);
	slot_params[0] = context_id;
	slot_params[1] = seqtext;
	if (call(&r, "SELECT (cscp.slot_set($1::uuid, 'x_seq', to_jsonb($2::bigint))).slots->>'x_seq'",
			 2, slot_params) != CALL_OK)
		return CALL_LOST;
	if (strcmp(value(r, 0, "slot_set"), seqtext) != 0)
		fail("slot_set returned x_seq %s, expected %s", PQgetvalue(r, 0, 0), seqtext);
	ack("slot", context_id, seqtext, NULL);
	PQclear(r);
	return CALL_OK;
}

/* The message-turn workload (see the header). */
static CallResult
turn_workload(long seq)
{
	char		message_id[96],
				turn[512],
				key[96],
				context_id[64],
				command_id[64];
	const char *params[5];
	PGresult   *r;

	snprintf(message_id, sizeof(message_id), "c%d-%ld-u", client_no, seq);
	snprintf(turn, sizeof(turn),
			 "{\"messageId\": \"%s\", \"from\": \"%s\", \"role\": \"user\", \"ts\": %lld, "
			 "\"content\": {\"text\": \"where is my order %ld\"}}", message_id, actor_id,
			 (long long) time(NULL) * 1000, seq);
	params[0] = TENANT;
	params[1] = conversation_id;
	params[2] = turn;
	if (call(&r, "SELECT turn_index, message_id, outcome FROM cscp.conversation_exchange($1, $2, $3::jsonb)",
			 3, params) != CALL_OK)
		return CALL_LOST;
	if (strcmp(value(r, 2, "conversation_exchange"), "exchanged") != 0)
		fail("conversation_exchange %s: outcome %s", message_id, PQgetvalue(r, 0, 2));
	if (strcmp(PQgetvalue(r, 0, 1), message_id) != 0)
		fail("conversation_exchange returned message id %s, sent %s", PQgetvalue(r, 0, 1), message_id);
	ack("turn", conversation_id, PQgetvalue(r, 0, 0), message_id);
	PQclear(r);

	if (open_context(seq, context_id, sizeof(context_id)) != CALL_OK)
		return CALL_LOST;

	snprintf(key, sizeof(key), "c%d-%ld-read", client_no, seq);
	params[0] = TENANT;
	params[1] = conversation_id;
	params[2] = actor_id;
	params[3] = key;
	params[4] = message_id;
	if (call(&r, "SELECT command_id, state, replayed FROM cscp.command_submit($1, $2, $3, $4, "
			 "'lookup_order', false, ARRAY[$5])", 5, params) != CALL_OK)
		return CALL_LOST;
	snprintf(command_id, sizeof(command_id), "%s", value(r, 0, "command_submit"));
	if (strcmp(PQgetvalue(r, 0, 1), "canonicalized") != 0 || strcmp(PQgetvalue(r, 0, 2), "f") != 0)
		fail("read-only submit %s: state %s, replayed %s", key, PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2));
	ack("cmd", command_id, PQgetvalue(r, 0, 1), NULL);
	PQclear(r);

	return drive(command_id, to_executed, 4);
}

/* The confirmation workload (see the header). */
static CallResult
confirm_workload(long seq)
{
	char		key[96],
				ask[96],
				yes[96],
				target[96],
				context_id[64],
				command_id[64];
	const char *params[6];
	PGresult   *r;

	if (open_context(seq, context_id, sizeof(context_id)) != CALL_OK)
		return CALL_LOST;

	snprintf(key, sizeof(key), "c%d-%ld-cancel", client_no, seq);
	snprintf(ask, sizeof(ask), "c%d-%ld-ask", client_no, seq);
	snprintf(target, sizeof(target), "order:%d-%ld", client_no, seq);
	params[0] = TENANT;
	params[1] = conversation_id;
	params[2] = actor_id;
	params[3] = key;
	params[4] = ask;
	params[5] = target;
	if (call(&r, "SELECT command_id, state, replayed FROM cscp.command_submit($1, $2, $3, $4, "
			 "'cancel_order', true, ARRAY[$5], '{\"order_id\": 123}', $6)", 6, params) != CALL_OK)
		return CALL_LOST;
	snprintf(command_id, sizeof(command_id), "%s", value(r, 0, "command_submit"));
	if (strcmp(PQgetvalue(r, 0, 1), "confirmation_required") != 0 || strcmp(PQgetvalue(r, 0, 2), "f") != 0)
		fail("mutating submit %s: state %s, replayed %s", key, PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2));
	ack("cmd", command_id, PQgetvalue(r, 0, 1), NULL);
	PQclear(r);

	snprintf(yes, sizeof(yes), "c%d-%ld-yes", client_no, seq);
	params[3] = yes;
	params[4] = target;
	if (call(&r, "SELECT outcome, command_id FROM cscp.confirm($1, $2, $3, $4, true, $5)", 5, params) != CALL_OK)
		return CALL_LOST;
	if (strcmp(value(r, 0, "confirm"), "confirmed") != 0 || strcmp(PQgetvalue(r, 0, 1), command_id) != 0)
		fail("confirm %s: outcome %s for command %s, expected confirmed for %s", yes,
			 PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), command_id);
	ack("cmd", command_id, "confirmed", NULL);
	PQclear(r);

	return drive(command_id, to_executed, 4);
}

/* Open (or replay the opening of) this client's conversation. */
static CallResult
start_conversation(void)
{
	char		turn[256],
				message_id[96];
	const char *params[3];
	PGresult   *r;

	snprintf(message_id, sizeof(message_id), "%s:start", conversation_id);
	snprintf(turn, sizeof(turn),
			 "{\"messageId\": \"%s\", \"from\": \"agent\", \"role\": \"agent\", \"ts\": 1700000000000, "
			 "\"content\": {\"text\": \"How can I help?\"}}", message_id);
	params[0] = TENANT;
	params[1] = conversation_id;
	params[2] = turn;
	if (call(&r, "SELECT turn_index, message_id FROM cscp.conversation_start($1, $2, 'agent', $3::jsonb)",
			 3, params) != CALL_OK)
		return CALL_LOST;
	ack("turn", conversation_id, value(r, 0, "conversation_start"), PQgetvalue(r, 0, 1));
	PQclear(r);
	return CALL_OK;
}

int
main(int argc, char **argv)
{
	long		seq = 0;
	int			started = 0;

	if (argc != 4)
	{
		fprintf(stderr, "usage: crash_client CLIENT_NO ACK_LOG STOP_FILE\n");
		return 2;
	}
	client_no = atoi(argv[1]);
	stop_file = argv[3];
	ack_log = fopen(argv[2], "a");
	if (!ack_log)
		fail("cannot open %s: %s", argv[2], strerror(errno));
	snprintf(conversation_id, sizeof(conversation_id), "crash-%d", client_no);
	snprintf(actor_id, sizeof(actor_id), "user-%d", client_no);

	connect_db();
	while (!stop_requested())
	{
		CallResult	res;

		if (!started)
			res = start_conversation();
		else
		{
			seq++;
			res = (seq % 2) ? turn_workload(seq) : confirm_workload(seq);
		}
		if (res == CALL_LOST)
			connect_db();
		else
			started = 1;
	}
	printf("client %d: %ld iterations, %ld acknowledged calls, %ld reconnects\n",
		   client_no, seq, acked, reconnects);
	PQfinish(conn);
	fclose(ack_log);
	return 0;
}
