/*-------------------------------------------------------------------------
 *
 * http.c
 *	  The gateway's routes and its libmicrohttpd request handler: a path is
 *	  matched against the route table, its {captures} percent-decoded, and
 *	  the request becomes one call of the route's cscp.http_* function
 *	  with (Authorization header, captures..., [Content-Type, body]); the
 *	  function's status, headers and body are sent back as they came.
 *
 * The gateway parses no request JSON: the body is passed to the database
 * as it arrived, and validated there (the one JSON it reads is the object
 * of response headers a function returns, db.c).  What the gateway answers itself is what
 * never reaches a function: an unknown route (404), a method the route
 * does not serve (405), a body over --max-body (413), a path that does
 * not decode (400), a request framed two ways (400, and the connection
 * closed), a tenant with --tenant-max requests in flight (429), the
 * database unreachable (503), a call past --statement-timeout (504), an
 * error the function raised (500), a function the database's cscp does
 * not have (501), and its own endpoints /healthz, /metrics and
 * /v1/openapi.json.
 *
 * Each client connection has a thread of its own
 * (libmicrohttpd's thread per connection), which takes a database
 * connection only for the call, once the whole request is in: a slow
 * client holds its own thread, never a database connection or another
 * client's thread; --idle-timeout closes a silent one, --header-timeout
 * one whose request line and headers take too long (limits.c), and
 * --max-connections and --per-ip-max bound them.
 *
 *-------------------------------------------------------------------------
 */
#include "gateway.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

const Route gw_routes[] = {
	{"/v1/context/{session_id}/{namespace}", {"POST", "GET", "DELETE", NULL},
	{"http_doc_put", "http_doc_get", "http_doc_delete", NULL}},
	{"/v1/context/{session_id}", {"GET", NULL}, {"http_doc_list", NULL}},
	{"/v1/conversations/{conversation_id}/actors/{actor_id}/context", {"POST", "GET", NULL},
	{"http_context_open", "http_context_get", NULL}},
	{"/v1/conversations/{conversation_id}/actors/{actor_id}/context/slots/{slot}", {"PUT", "DELETE", NULL},
	{"http_slot_put", "http_slot_delete", NULL}},
	{"/v1/conversations/{conversation_id}/actors/{actor_id}/confirmations", {"POST", NULL},
	{"http_confirm", NULL}},
	{"/v1/conversations/{conversation_id}/approvals", {"POST", NULL}, {"http_approve", NULL}},
	{"/v1/conversations/{conversation_id}/actors/{actor_id}/commands", {"POST", NULL},
	{"http_command_submit", NULL}},
	{"/v1/commands/{command_id}", {"GET", NULL}, {"http_command_status", NULL}},
	{"/v1/commands/{command_id}/transitions", {"POST", NULL}, {"http_command_transition", NULL}},
	{"/v1/conversations/{conversation_id}", {"POST", "GET", NULL},
	{"http_conversation_start", "http_conversation_get", NULL}},
	{"/v1/conversations/{conversation_id}/turns", {"POST", NULL}, {"http_conversation_resolve", NULL}},
	{"/v1/subjects/{subject_id}/facts", {"POST", NULL}, {"http_fact_write", NULL}},
	{"/v1/subjects/{subject_id}/facts/{fact_id}", {"GET", NULL}, {"http_fact_current", NULL}},
	{"/v1/subjects/{subject_id}/context", {"POST", NULL}, {"http_build_context", NULL}},
	{"/v1/openapi.json", {"GET", NULL}, {NULL}},
	{"/healthz", {"GET", NULL}, {NULL}},
	{"/metrics", {"GET", NULL}, {NULL}},
};
const int	gw_nroutes = sizeof(gw_routes) / sizeof(gw_routes[0]);

volatile int gw_draining = 0;
static int	in_flight = 0;

#define MAX_CAPTURES 4

/* One request, from its headers to its completion. */
typedef struct Request
{
	struct timespec start;
	char		method[16];
	char	   *path;			/* as it came, for the log */
	int			route;			/* index in gw_routes, or ROUTE_UNMATCHED */
	const char *function;		/* its cscp.http_* function, or NULL */
	char	   *captures[MAX_CAPTURES];
	int			ncaptures;
	char	   *body;
	size_t		len;
	size_t		cap;
	bool		too_large;
	size_t		dropped;		/* bytes of a too large body read and dropped */
	bool		answered;
	int			status;
	size_t		bytes;			/* of the response body */
	char		sqlstate[6];
} Request;

/* libmicrohttpd's unescaper, disabled: paths are split first, decoded after. */
size_t
gw_no_unescape(void *cls, struct MHD_Connection *connection, char *s)
{
	(void) cls;
	(void) connection;
	return strlen(s);
}

/* Requests begun and not yet completed. */
int
gw_in_flight(void)
{
	return __atomic_load_n(&in_flight, __ATOMIC_RELAXED);
}

/* The value of a hex digit, or -1. */
static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A path segment of len bytes percent-decoded (malloc'd), or NULL when it does not decode or holds a NUL. */
static char *
decode_segment(const char *s, size_t len)
{
	char	   *out = malloc(len + 1);
	size_t		o = 0;

	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++)
	{
		int			hi;
		int			lo;

		if (s[i] != '%')
		{
			out[o++] = s[i];
			continue;
		}
		hi = i + 2 < len ? hexval(s[i + 1]) : -1;
		lo = i + 2 < len ? hexval(s[i + 2]) : -1;
		if (hi < 0 || lo < 0 || (hi << 4 | lo) == 0)
		{
			free(out);
			return NULL;
		}
		out[o++] = (char) (hi << 4 | lo);
		i += 2;
	}
	out[o] = '\0';
	return out;
}

/*
 * Match path against the route table: the route's index, its captures
 * decoded into rq.  Returns ROUTE_UNMATCHED when no route matches, -2 when
 * one matches but a capture does not decode.
 */
static int
match_route(const char *path, Request *rq)
{
	for (int r = 0; r < gw_nroutes; r++)
	{
		const char *t = gw_routes[r].template;
		const char *p = path;
		int			n = 0;
		bool		ok = true;
		const char *seg[MAX_CAPTURES];
		size_t		seglen[MAX_CAPTURES];

		while (*t != '\0' && ok)
		{
			if (*t == '{')
			{
				const char *end = strchr(p, '/');
				size_t		len = end != NULL ? (size_t) (end - p) : strlen(p);

				if (len == 0 || n >= MAX_CAPTURES)
				{
					ok = false;
					break;
				}
				seg[n] = p;
				seglen[n++] = len;
				p += len;
				t = strchr(t, '}') + 1;
			}
			else if (*t == *p)
			{
				t++;
				p++;
			}
			else
				ok = false;
		}
		if (!ok || *p != '\0')
			continue;
		rq->route = r;
		for (int i = 0; i < n; i++)
		{
			rq->captures[i] = decode_segment(seg[i], seglen[i]);
			if (rq->captures[i] == NULL)
				return -2;
			rq->ncaptures = i + 1;
		}
		return r;
	}
	return ROUTE_UNMATCHED;
}

/* s as the contents of a JSON string (malloc'd). */
static char *
json_escape(const char *s)
{
	size_t		len = strlen(s);
	char	   *out = malloc(len * 6 + 1);
	size_t		o = 0;

	if (out == NULL)
		return NULL;
	for (const unsigned char *c = (const unsigned char *) s; *c; c++)
	{
		if (*c == '"' || *c == '\\')
		{
			out[o++] = '\\';
			out[o++] = *c;
		}
		else if (*c < 0x20)
			o += sprintf(out + o, "\\u%04x", *c);
		else
			out[o++] = *c;
	}
	out[o] = '\0';
	return out;
}

/*
 * Queue a response: status, "Name: value" header lines (or NULL), a body
 * (or NULL) of content_type.
 */
static enum MHD_Result
respond(struct MHD_Connection *c, Request *rq, int status, const char *headers,
		const char *body, const char *content_type)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	size_t		len = body != NULL ? strlen(body) : 0;

	resp = MHD_create_response_from_buffer(len, (void *) (body != NULL ? body : ""),
										   MHD_RESPMEM_MUST_COPY);
	if (resp == NULL)
		return MHD_NO;
	if (body != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	if (headers != NULL)
	{
		char	   *copy = strdup(headers);
		char	   *save = NULL;

		for (char *line = copy != NULL ? strtok_r(copy, "\n", &save) : NULL; line != NULL;
			 line = strtok_r(NULL, "\n", &save))
		{
			char	   *colon = strstr(line, ": ");

			if (colon == NULL || strchr(line, '\r') != NULL)
				continue;
			*colon = '\0';
			MHD_add_response_header(resp, line, colon + 2);
		}
		free(copy);
	}
	if (gw_draining)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	rq->answered = true;
	rq->status = status;
	rq->bytes = len;
	return ret;
}

/* Queue the gateway's own JSON error. */
static enum MHD_Result
respond_error(struct MHD_Connection *c, Request *rq, int status, const char *headers,
			  const char *code, const char *message, const char *sqlstate)
{
	char	   *msg = json_escape(message);
	char	   *body;
	enum MHD_Result ret;

	if (msg == NULL)
		return MHD_NO;
	body = malloc(strlen(msg) + strlen(code) + 128);
	if (body == NULL)
	{
		free(msg);
		return MHD_NO;
	}
	sprintf(body, "{\"error\": {\"code\": \"%s\", \"message\": \"%s\", \"sqlstate\": \"%s\"}}",
			code, msg, sqlstate);
	snprintf(rq->sqlstate, sizeof(rq->sqlstate), "%s", sqlstate);
	ret = respond(c, rq, status, headers, body, "application/json");
	free(msg);
	free(body);
	return ret;
}

/* The gateway's own endpoints. */
static enum MHD_Result
respond_builtin(struct MHD_Connection *c, Request *rq)
{
	const char *t = gw_routes[rq->route].template;

	if (strcmp(t, "/healthz") == 0)
	{
		char		body[160];
		int			up = gw_db_up();

		snprintf(body, sizeof(body), "{\"status\": \"%s\", \"database\": \"%s\"}",
				 gw_draining ? "draining" : "ok",
				 up == 1 ? "up" : up == 0 ? "down" : "unknown");
		return respond(c, rq, gw_draining ? 503 : 200, "Cache-Control: no-store", body,
					   "application/json");
	}
	if (strcmp(t, "/metrics") == 0)
	{
		const union MHD_DaemonInfo *info =
			MHD_get_daemon_info(MHD_get_connection_info(c, MHD_CONNECTION_INFO_DAEMON)->daemon,
								MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
		char	   *text = gw_metrics_render(info != NULL ? (int) info->num_connections : -1);
		enum MHD_Result ret;

		if (text == NULL)
			return respond_error(c, rq, 500, NULL, "internal_error", "out of memory", "53200");
		ret = respond(c, rq, 200, "Cache-Control: no-store", text,
					  "text/plain; version=0.0.4; charset=utf-8");
		free(text);
		return ret;
	}
	return respond(c, rq, 200, NULL, gw_openapi_json, "application/json");
}

/* What the framing headers of a request say (RFC 9112, section 6). */
typedef struct Framing
{
	int			lengths;		/* Content-Length fields */
	const char *length;			/* the first one's value */
	bool		bad_length;		/* not a number, or two that differ */
	int			encodings;		/* Transfer-Encoding fields */
	bool		not_chunked;	/* one that is not exactly "chunked" */
} Framing;

static enum MHD_Result
framing_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	Framing    *f = cls;

	(void) kind;
	if (value == NULL)
		value = "";
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
	{
		if (value[0] == '\0' || strspn(value, "0123456789") != strlen(value))
			f->bad_length = true;
		else if (f->lengths > 0 && strcmp(f->length, value) != 0)
			f->bad_length = true;
		if (f->lengths++ == 0)
			f->length = value;
	}
	else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0)
	{
		f->encodings++;
		if (strcasecmp(value, "chunked") != 0)
			f->not_chunked = true;
	}
	return MHD_YES;
}

/*
 * NULL when the request's body is framed one way only; else why not.  A
 * request with both Content-Length and Transfer-Encoding, Content-Lengths
 * that differ or are not numbers, or a Transfer-Encoding other than one
 * "chunked", could be read two ways (one of them smuggling a second request
 * in the body): it is answered 400 and the connection closed (RFC 9112,
 * sections 6.1 and 6.3).
 */
static const char *
ambiguous_framing(struct MHD_Connection *c)
{
	Framing		f = {0};

	MHD_get_connection_values(c, MHD_HEADER_KIND, framing_field, &f);
	if (f.encodings > 0 && f.lengths > 0)
		return "the request has both Content-Length and Transfer-Encoding";
	if (f.bad_length)
		return "the request's Content-Length is not one number";
	if (f.encodings > 1 || f.not_chunked)
		return "the request's Transfer-Encoding is not chunked alone";
	return NULL;
}

/* Run the request's function and send back its answer. */
static enum MHD_Result
respond_call(struct MHD_Connection *c, Request *rq)
{
	const char *params[MAX_CAPTURES + 3];
	int			n = 0;
	DbResponse	r;
	DbOutcome	outcome;
	enum MHD_Result ret;
	GwTicket	ticket;

	params[n++] = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	for (int i = 0; i < rq->ncaptures; i++)
		params[n++] = rq->captures[i];
	if (strcmp(rq->method, "POST") == 0 || strcmp(rq->method, "PUT") == 0)
	{
		params[n++] = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
		if (rq->body != NULL && memchr(rq->body, '\0', rq->len) != NULL)
			return respond_error(c, rq, 400, NULL, "bad_json",
								 "the request body contains a NUL byte", "22021");
		params[n++] = rq->body != NULL ? rq->body : "";
	}
	/* A tenant with --tenant-max requests in flight is refused at once (limits.c). */
	if (!gw_tenant_enter(params[0], &ticket))
		return respond_error(c, rq, 429, "Retry-After: 1", "too_many_requests",
							 "this tenant has as many requests in flight as the gateway allows",
							 "53400");
	outcome = gw_db_call(rq->function, n, params, &r);
	gw_tenant_leave(&ticket);
	if (outcome == DB_OK)
	{
		gw_key_learn(params[0], r.status);
		ret = respond(c, rq, r.status, r.headers, r.body, "application/json");
	}
	else if (outcome == DB_UNAVAILABLE)
	{
		fprintf(stderr, "cscp-gateway: database unavailable: %s\n", r.message ? r.message : "");
		ret = respond_error(c, rq, 503, "Retry-After: 1", "unavailable",
							"the database is unavailable", r.sqlstate);
	}
	else if (outcome == DB_MISSING)
	{
		ret = respond_error(c, rq, 501, NULL, "not_implemented",
							"the database's cscp has no function for this route", "42883");
	}
	else if (strcmp(r.sqlstate, "57014") == 0)
	{
		/* --statement-timeout cancelled the call; the connection serves the next one. */
		ret = respond_error(c, rq, 504, NULL, "timeout",
							"the request ran longer than the gateway's statement timeout", r.sqlstate);
	}
	else if (strcmp(r.sqlstate, "55P03") == 0)
	{
		/* --lock-timeout: a lock another request holds; as the endpoints answer it. */
		ret = respond_error(c, rq, 503, "Retry-After: 1", "try_again",
							"the request waited too long for a lock", r.sqlstate);
	}
	else if (strncmp(r.sqlstate, "22", 2) == 0)
	{
		/* The arguments themselves were refused (say, a path that is not UTF-8). */
		ret = respond_error(c, rq, 400, NULL, "invalid_parameter",
							r.message ? r.message : "invalid request", r.sqlstate);
	}
	else
	{
		fprintf(stderr, "cscp-gateway: %s failed: %s %s\n", rq->function, r.sqlstate,
				r.message ? r.message : "");
		ret = respond_error(c, rq, 500, NULL, "internal_error",
							"the request failed in the database", r.sqlstate);
	}
	gw_db_response_free(&r);
	return ret;
}

/* libmicrohttpd's access handler: called for the headers, each piece of body, and the end. */
enum MHD_Result
gw_handle_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	Request    *rq = *con_cls;

	(void) cls;
	(void) version;
	if (rq == NULL)
	{
		const char *length;
		int			route;

		rq = calloc(1, sizeof(Request));
		if (rq == NULL)
			return MHD_NO;
		*con_cls = rq;
		__atomic_add_fetch(&in_flight, 1, __ATOMIC_RELAXED);
		clock_gettime(CLOCK_MONOTONIC, &rq->start);
		snprintf(rq->method, sizeof(rq->method), "%s", method);
		rq->path = strdup(url);
		rq->route = ROUTE_UNMATCHED;
		gw_headers_in(c);
		{
			const char *why = ambiguous_framing(c);

			if (why != NULL)
				return respond_error(c, rq, 400, "Connection: close", "bad_framing", why, "08P01");
		}
		route = match_route(url, rq);
		if (route == ROUTE_UNMATCHED)
			return respond_error(c, rq, 404, NULL, "route_not_found", "no such route", "42883");
		if (route == -2)
			return respond_error(c, rq, 400, NULL, "bad_path",
								 "a path segment is not valid percent-encoding", "22025");
		for (int i = 0; gw_routes[route].methods[i] != NULL; i++)
			if (strcmp(gw_routes[route].methods[i], method) == 0)
			{
				rq->function = gw_routes[route].functions[i];
				break;
			}
		if (rq->function == NULL && !(gw_routes[route].functions[0] == NULL &&
									  strcmp(method, "GET") == 0))
		{
			char		allow[64] = "Allow: ";

			for (int i = 0; gw_routes[route].methods[i] != NULL; i++)
			{
				if (i > 0)
					strcat(allow, ", ");
				strcat(allow, gw_routes[route].methods[i]);
			}
			return respond_error(c, rq, 405, allow, "method_not_allowed",
								 "the route does not serve this method", "0A000");
		}
		/*
		 * A body over --max-body is read and dropped, and answered 413 once
		 * it is in: a client that sends its whole body before it reads would
		 * otherwise see the connection reset under it instead of the answer.
		 * One more than four times over is answered at once, and the
		 * connection closed.
		 */
		length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (length != NULL && strtoull(length, NULL, 10) > gw_config.max_body)
		{
			rq->too_large = true;
			if (strtoull(length, NULL, 10) / 4 > gw_config.max_body)
				return respond_error(c, rq, 413, NULL, "payload_too_large",
									 "the request body is larger than the gateway accepts", "54000");
		}
		return MHD_YES;
	}
	if (*upload_data_size > 0)
	{
		if (rq->too_large)
		{
			/* Dropped; a client that keeps sending past four times the limit is cut off. */
			rq->dropped += *upload_data_size;
			if (rq->dropped / 4 > gw_config.max_body)
				return MHD_NO;
		}
		else if (!rq->answered)
		{
			if (rq->len + *upload_data_size > gw_config.max_body)
			{
				rq->too_large = true;
				free(rq->body);
				rq->body = NULL;
			}
			else
			{
				if (rq->len + *upload_data_size + 1 > rq->cap)
				{
					size_t		cap = (rq->len + *upload_data_size + 1) * 2;
					char	   *more = realloc(rq->body, cap > gw_config.max_body + 1 ? gw_config.max_body + 1 : cap);

					if (more == NULL)
						return MHD_NO;
					rq->body = more;
					rq->cap = cap > gw_config.max_body + 1 ? gw_config.max_body + 1 : cap;
				}
				memcpy(rq->body + rq->len, upload_data, *upload_data_size);
				rq->len += *upload_data_size;
				rq->body[rq->len] = '\0';
			}
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (rq->answered)
		return MHD_YES;
	if (rq->too_large)
		return respond_error(c, rq, 413, NULL, "payload_too_large",
							 "the request body is larger than the gateway accepts", "54000");
	if (rq->function == NULL)
		return respond_builtin(c, rq);
	return respond_call(c, rq);
}

/* libmicrohttpd's completion callback: one log line, the counters, and the request freed. */
void
gw_request_completed(void *cls, struct MHD_Connection *c, void **con_cls,
					 enum MHD_RequestTerminationCode toe)
{
	Request    *rq = *con_cls;
	struct timespec now;
	struct timespec wall;
	struct tm	tm;
	double		seconds;
	char		when[32];
	char		addr[INET6_ADDRSTRLEN] = "-";
	const union MHD_ConnectionInfo *info;

	(void) cls;
	gw_headers_wait(c);
	if (rq == NULL)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	seconds = (now.tv_sec - rq->start.tv_sec) + (now.tv_nsec - rq->start.tv_nsec) / 1e9;
	clock_gettime(CLOCK_REALTIME, &wall);
	gmtime_r(&wall.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (info != NULL && info->client_addr != NULL)
	{
		const struct sockaddr *sa = info->client_addr;

		if (sa->sa_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *) sa)->sin_addr, addr, sizeof(addr));
		else if (sa->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *) sa)->sin6_addr, addr, sizeof(addr));
	}
	if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && rq->status == 0)
		rq->status = 499;		/* the client left before the answer */
	fprintf(stderr, "%s.%03ldZ %s \"%s %s\" %d %zu %.3fms%s%s%s\n",
			when, wall.tv_nsec / 1000000, addr, rq->method, rq->path ? rq->path : "-",
			rq->status, rq->bytes, seconds * 1e3,
			rq->sqlstate[0] ? " sqlstate=" : "", rq->sqlstate,
			toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
	gw_metrics_record(rq->route, rq->method, rq->status, seconds);
	for (int i = 0; i < rq->ncaptures; i++)
		free(rq->captures[i]);
	free(rq->path);
	free(rq->body);
	free(rq);
	*con_cls = NULL;
	__atomic_sub_fetch(&in_flight, 1, __ATOMIC_RELAXED);
}
