/*-------------------------------------------------------------------------
 *
 * db.c
 *	  The gateway's database connections: a fixed pool of --pool libpq
 *	  connections, each with one prepared statement per cscp.http_*
 *	  function, prepared when the connection is made.
 *
 * A request's thread takes a free connection for its call only (waiting
 * up to five seconds for one, else 503), so every connection serves every
 * client: libmicrohttpd runs a thread per client connection, and a client
 * holds a database connection only while its call runs, never while it
 * sends or reads.  A connection that is found broken (a database
 * restart, a network cut) is made again on the next call; while that
 * fails the call answers DB_UNAVAILABLE (503) and the next request tries
 * again, so the gateway recovers by itself as soon as the database is
 * back.  Each connection runs with --statement-timeout and --lock-timeout,
 * so that no call holds a connection for longer.  A call whose connection
 * broke under it is sent once more on a new connection: every endpoint is
 * idempotent (a merge of the same payload, a delete, a slot set to a
 * value, an answer bound to its message id, a context opened when none is
 * live).
 *
 *-------------------------------------------------------------------------
 */
#include "gateway.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

typedef struct DbConn
{
	PGconn	   *conn;
	bool		busy;
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
	{"http_conversation_start", 4},
	{"http_conversation_resolve", 4},
	{"http_conversation_get", 2},
	{"http_fact_write", 4},
	{"http_fact_current", 3},
	{"http_build_context", 4},
};

static DbConn *pool = NULL;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_free = PTHREAD_COND_INITIALIZER;
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

		/*
		 * The headers as jsonb's text (header_lines reads it): turning them
		 * into lines in SQL (jsonb_each_text, string_agg) cost a third of
		 * the statement.  Every name qualified, whatever the gateway role's
		 * search_path (a domain named text in a schema before pg_catalog
		 * would otherwise run its check as that role).
		 */
		len = snprintf(sql, sizeof(sql),
					   "SELECT r.status, r.headers::pg_catalog.text, r.body::pg_catalog.text FROM cscp.%s(",
					   statements[i].function);
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

	/*
	 * The session's limits (--statement-timeout, --lock-timeout): a call that
	 * runs or waits too long is cancelled and its connection serves the next.
	 */
	{
		char		statement[16];
		char		lock[16];
		const char *values2[] = {statement, lock};
		PGresult   *res;

		snprintf(statement, sizeof(statement), "%d", gw_config.statement_timeout);
		snprintf(lock, sizeof(lock), "%d", gw_config.lock_timeout);
		res = PQexecParams(c->conn,
						   "SELECT pg_catalog.set_config('statement_timeout', $1, false), "
						   "pg_catalog.set_config('lock_timeout', $2, false)",
						   2, NULL, values2, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
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

/*
 * The contents of the JSON string at *p (just past its opening quote)
 * appended to out at *o; *p moves past the closing quote.  False when it
 * does not end, or holds a control character or an escape of one (a
 * header value must not start another line).
 */
static bool
json_string(const char **p, char *out, size_t *o)
{
	const char *s = *p;
	bool		ok = true;

	for (;; s++)
	{
		unsigned int cp = 0;

		if (*s == '\0')
			return false;
		if (*s == '"')
			break;
		if ((unsigned char) *s < 0x20)
			ok = false;
		if (*s != '\\')
		{
			out[(*o)++] = *s;
			continue;
		}
		s++;
		if (*s == '"' || *s == '\\' || *s == '/')
		{
			out[(*o)++] = *s;
			continue;
		}
		if (*s != 'u')
		{
			/* \b \f \n \r \t, or not JSON */
			if (*s == '\0')
				return false;
			ok = false;
			continue;
		}
		for (int i = 1; i <= 4; i++)
		{
			int			v = s[i] >= '0' && s[i] <= '9' ? s[i] - '0' :
				s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10 :
				s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 10 : -1;

			if (v < 0)
				return false;
			cp = cp << 4 | v;
		}
		s += 4;
		if (cp < 0x20 || cp == 0x7f || (cp >= 0xd800 && cp <= 0xdfff))
			ok = false;
		else if (cp < 0x80)
			out[(*o)++] = (char) cp;
		else if (cp < 0x800)
		{
			out[(*o)++] = (char) (0xc0 | cp >> 6);
			out[(*o)++] = (char) (0x80 | (cp & 0x3f));
		}
		else
		{
			out[(*o)++] = (char) (0xe0 | cp >> 12);
			out[(*o)++] = (char) (0x80 | (cp >> 6 & 0x3f));
			out[(*o)++] = (char) (0x80 | (cp & 0x3f));
		}
	}
	*p = s + 1;
	return ok;
}

/*
 * The "Name: value" lines (malloc'd) of the headers a cscp.http_* function
 * returned: a JSON object of strings, as jsonb writes it.  NULL when it has
 * none.  A header whose name or value holds a control character is
 * dropped; what is not an object of strings ends the reading there (the
 * functions return none such).  Request bodies are never read here: they
 * go to the database as they came.
 */
static char *
header_lines(const char *json)
{
	const char *p = json;
	char	   *out = malloc(strlen(json) + 1);
	size_t		o = 0;

	if (out == NULL)
		return NULL;
#define SKIP_SPACE() while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++
	SKIP_SPACE();
	if (*p++ != '{')
		p = "";
	for (;;)
	{
		size_t		start = o;
		bool		ok;

		SKIP_SPACE();
		if (*p != '"')
			break;
		p++;
		ok = json_string(&p, out, &o) && o > start && memchr(out + start, ':', o - start) == NULL;
		SKIP_SPACE();
		if (*p != ':')
		{
			o = start;
			break;
		}
		p++;
		SKIP_SPACE();
		out[o++] = ':';
		out[o++] = ' ';
		if (*p != '"')
		{
			o = start;
			break;
		}
		p++;
		ok = json_string(&p, out, &o) && ok;
		if (ok)
			out[o++] = '\n';
		else
			o = start;
		SKIP_SPACE();
		if (*p != ',')
			break;
		p++;
	}
#undef SKIP_SPACE
	if (o == 0)
	{
		free(out);
		return NULL;
	}
	out[o - 1] = '\0';			/* the last newline */
	return out;
}

/* A free connection of the pool, marked busy; NULL after five seconds without one. */
static DbConn *
checkout(void)
{
	DbConn	   *c = NULL;
	struct timespec deadline;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 5;
	pthread_mutex_lock(&pool_lock);
	if (pool == NULL)
		pool = calloc(gw_config.pool, sizeof(DbConn));
	while (pool != NULL && c == NULL)
	{
		for (int i = 0; i < gw_config.pool && c == NULL; i++)
			if (!pool[i].busy)
				c = &pool[i];
		if (c == NULL && pthread_cond_timedwait(&pool_free, &pool_lock, &deadline) != 0)
			break;
	}
	if (c != NULL)
	{
		c->busy = true;
		in_use++;
	}
	pthread_mutex_unlock(&pool_lock);
	return c;
}

/* Give a connection back to the pool. */
static void
checkin(DbConn *c)
{
	pthread_mutex_lock(&pool_lock);
	c->busy = false;
	in_use--;
	pthread_cond_signal(&pool_free);
	pthread_mutex_unlock(&pool_lock);
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
	DbConn	   *c;
	DbOutcome	outcome = DB_ERROR;

	memset(out, 0, sizeof(*out));
	if (statement_params(function) != nparams)
		return db_fail(out, DB_ERROR, "42883", "no such endpoint function");
	c = checkout();
	if (c == NULL)
	{
		snprintf(out->sqlstate, sizeof(out->sqlstate), "53300");
		out->message = strdup("no database connection of the pool came free within 5 seconds");
		return DB_UNAVAILABLE;
	}

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
			out->headers = PQgetisnull(res, 0, 1) ? NULL : header_lines(PQgetvalue(res, 0, 1));
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
	checkin(c);
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
	pthread_mutex_lock(&pool_lock);
	for (int i = 0; pool != NULL && i < gw_config.pool; i++)
		if (pool[i].conn != NULL)
		{
			PQfinish(pool[i].conn);
			pool[i].conn = NULL;
		}
	pthread_mutex_unlock(&pool_lock);
}

/* Connections busy with a call now. */
int
gw_db_in_use(void)
{
	int			n;

	pthread_mutex_lock(&pool_lock);
	n = in_use;
	pthread_mutex_unlock(&pool_lock);
	return n;
}

/* Whether the last call reached the database: 1, 0, or -1 before any call. */
int
gw_db_up(void)
{
	return __atomic_load_n(&db_up, __ATOMIC_RELAXED);
}
