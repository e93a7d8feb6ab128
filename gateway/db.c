/*-------------------------------------------------------------------------
 *
 * db.c
 *	  The gateway's database connections: a fixed pool of one libpq
 *	  connection per serving thread (libmicrohttpd's thread pool has
 *	  --pool threads), each with one prepared statement per cscp.http_*
 *	  function, prepared when the connection is made.
 *
 * A thread owns its connection, so no lock is taken on the request path.
 * A connection that is found broken (a database restart, a network cut)
 * is made again on the next call; while that fails the call answers
 * DB_UNAVAILABLE (503) and the next request tries again, so the gateway
 * recovers by itself as soon as the database is back.  A call whose
 * connection broke under it is sent once more on a new connection: every
 * endpoint is idempotent (a merge of the same payload, a delete, a slot
 * set to a value, an answer bound to its message id, a context opened
 * when none is live).
 *
 *-------------------------------------------------------------------------
 */
#include "gateway.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

typedef struct DbConn
{
	PGconn	   *conn;
	struct DbConn *next;		/* every connection made, for gw_db_close_all */
} DbConn;

/* The statement of each endpoint function: "SELECT status, headers, body". */
static const struct
{
	const char *function;
	int			nparams;
}			statements[] =
{
	{"http_doc_put", 5},
	{"http_doc_get", 3},
	{"http_doc_delete", 3},
	{"http_doc_list", 2},
	{"http_context_open", 5},
	{"http_context_get", 3},
	{"http_slot_put", 6},
	{"http_slot_delete", 4},
	{"http_confirm", 5},
	{"http_approve", 4},
	{"http_command_submit", 5},
	{"http_command_status", 2},
	{"http_command_transition", 4},
};

static __thread DbConn *my_conn = NULL;
static DbConn *all_conns = NULL;
static pthread_mutex_t all_conns_lock = PTHREAD_MUTEX_INITIALIZER;
static int	in_use = 0;
static int	db_up = -1;

/* The number of parameters of an endpoint function, or -1 when unknown. */
static int
statement_params(const char *function)
{
	for (size_t i = 0; i < sizeof(statements) / sizeof(statements[0]); i++)
		if (strcmp(statements[i].function, function) == 0)
			return statements[i].nparams;
	return -1;
}

/* Connect and prepare every statement; false (conn closed) on failure. */
static bool
db_connect(DbConn *c, char **message)
{
	const char *keywords[] = {"dbname", "fallback_application_name", NULL};
	const char *values[] = {gw_config.database, "cscp-gateway", NULL};

	if (c->conn != NULL)
		PQfinish(c->conn);
	c->conn = PQconnectdbParams(keywords, values, 1);
	if (PQstatus(c->conn) != CONNECTION_OK)
	{
		*message = strdup(PQerrorMessage(c->conn));
		PQfinish(c->conn);
		c->conn = NULL;
		return false;
	}
	for (size_t i = 0; i < sizeof(statements) / sizeof(statements[0]); i++)
	{
		char		sql[512];
		int			len;
		PGresult   *res;

		len = snprintf(sql, sizeof(sql),
					   "SELECT r.status, (SELECT pg_catalog.string_agg(h.key || ': ' || h.value, E'\\n')"
					   " FROM pg_catalog.jsonb_each_text(r.headers) h), r.body::text"
					   " FROM cscp.%s(", statements[i].function);
		for (int p = 1; p <= statements[i].nparams; p++)
			len += snprintf(sql + len, sizeof(sql) - len, "%s$%d", p > 1 ? ", " : "", p);
		snprintf(sql + len, sizeof(sql) - len, ") r");
		res = PQprepare(c->conn, statements[i].function, sql, statements[i].nparams, NULL);
		if (PQresultStatus(res) != PGRES_COMMAND_OK &&
			strcmp(PQresultErrorField(res, PG_DIAG_SQLSTATE) ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : "", "42883") == 0)
		{
			/*
			 * An older cscp without this endpoint's function: its route answers
			 * 501, the others work.
			 */
			fprintf(stderr, "cscp-gateway: the database has no cscp.%s: its route answers 501\n",
					statements[i].function);
			PQclear(res);
			continue;
		}
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			*message = strdup(PQresultErrorMessage(res));
			PQclear(res);
			PQfinish(c->conn);
			c->conn = NULL;
			return false;
		}
		PQclear(res);
	}
	return true;
}

/* This thread's connection slot, registered on first use. */
static DbConn *
my_slot(void)
{
	if (my_conn == NULL)
	{
		my_conn = calloc(1, sizeof(DbConn));
		if (my_conn == NULL)
			return NULL;
		pthread_mutex_lock(&all_conns_lock);
		my_conn->next = all_conns;
		all_conns = my_conn;
		pthread_mutex_unlock(&all_conns_lock);
	}
	return my_conn;
}

/* Whether an error means the database, not the call, is the trouble. */
static bool
unavailable_state(const char *sqlstate)
{
	return strncmp(sqlstate, "08", 2) == 0 ||	/* connection exception */
		strncmp(sqlstate, "57P", 3) == 0 ||	/* shutdown, cannot connect now */
		strcmp(sqlstate, "53300") == 0; /* too many connections */
}

/* Fill out's failure fields. */
static DbOutcome
db_fail(DbResponse *out, DbOutcome outcome, const char *sqlstate, const char *message)
{
	snprintf(out->sqlstate, sizeof(out->sqlstate), "%s", sqlstate);
	out->message = strdup(message != NULL ? message : "");
	if (out->message != NULL)
	{
		size_t		n = strlen(out->message);

		while (n > 0 && (out->message[n - 1] == '\n' || out->message[n - 1] == ' '))
			out->message[--n] = '\0';
	}
	__atomic_store_n(&db_up, outcome == DB_UNAVAILABLE ? 0 : 1, __ATOMIC_RELAXED);
	return outcome;
}

/*
 * Call cscp.<function>(params...) on this thread's connection and return
 * its response in out (free it with gw_db_response_free).
 */
DbOutcome
gw_db_call(const char *function, int nparams, const char *const *params, DbResponse *out)
{
	DbConn	   *c = my_slot();
	DbOutcome	outcome = DB_ERROR;

	memset(out, 0, sizeof(*out));
	if (c == NULL)
		return db_fail(out, DB_ERROR, "53200", "out of memory");
	if (statement_params(function) != nparams)
		return db_fail(out, DB_ERROR, "42883", "no such endpoint function");

	__atomic_add_fetch(&in_use, 1, __ATOMIC_RELAXED);
	for (int attempt = 0; attempt < 2; attempt++)
	{
		PGresult   *res;
		const char *sqlstate;

		if (c->conn == NULL || PQstatus(c->conn) != CONNECTION_OK)
		{
			char	   *message = NULL;

			if (!db_connect(c, &message))
			{
				outcome = db_fail(out, DB_UNAVAILABLE, "08006", message);
				free(message);
				break;
			}
		}
		res = PQexecPrepared(c->conn, function, nparams, params, NULL, NULL, 0);
		if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && PQnfields(res) == 3)
		{
			out->status = atoi(PQgetvalue(res, 0, 0));
			out->headers = PQgetisnull(res, 0, 1) ? NULL : strdup(PQgetvalue(res, 0, 1));
			out->body = PQgetisnull(res, 0, 2) ? NULL : strdup(PQgetvalue(res, 0, 2));
			PQclear(res);
			__atomic_store_n(&db_up, 1, __ATOMIC_RELAXED);
			outcome = DB_OK;
			break;
		}
		sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		if (PQstatus(c->conn) == CONNECTION_BAD)
		{
			/* The connection broke under the call: once more on a new one. */
			PQclear(res);
			PQfinish(c->conn);
			c->conn = NULL;
			outcome = db_fail(out, DB_UNAVAILABLE, "08006", "the connection to the database was lost");
			continue;
		}
		if (sqlstate == NULL)
			sqlstate = "XX000";
		if (strcmp(sqlstate, "26000") == 0)
		{
			/* Not prepared: the function is missing (see db_connect). */
			outcome = db_fail(out, DB_MISSING, sqlstate, PQresultErrorMessage(res));
			PQclear(res);
			break;
		}
		outcome = db_fail(out, unavailable_state(sqlstate) ? DB_UNAVAILABLE : DB_ERROR, sqlstate,
						  PQresultErrorMessage(res));
		PQclear(res);
		break;
	}
	__atomic_sub_fetch(&in_use, 1, __ATOMIC_RELAXED);
	return outcome;
}

/* Free what gw_db_call allocated in r. */
void
gw_db_response_free(DbResponse *r)
{
	free(r->headers);
	free(r->body);
	free(r->message);
	memset(r, 0, sizeof(*r));
}

/* Close every connection (at exit, once the serving threads have stopped). */
void
gw_db_close_all(void)
{
	pthread_mutex_lock(&all_conns_lock);
	for (DbConn *c = all_conns; c != NULL; c = c->next)
		if (c->conn != NULL)
		{
			PQfinish(c->conn);
			c->conn = NULL;
		}
	pthread_mutex_unlock(&all_conns_lock);
}

/* Connections busy with a call now. */
int
gw_db_in_use(void)
{
	return __atomic_load_n(&in_use, __ATOMIC_RELAXED);
}

/* Whether the last call reached the database: 1, 0, or -1 before any call. */
int
gw_db_up(void)
{
	return __atomic_load_n(&db_up, __ATOMIC_RELAXED);
}
