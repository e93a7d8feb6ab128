/*-------------------------------------------------------------------------
 *
 * gateway.h
 *	  Declarations shared by the files of cscp-gateway, the HTTPS gateway
 *	  of cscp (issue 33): configuration (main.c), routes and requests
 *	  (http.c), the pool of database connections (db.c), the limits that
 *	  keep one client or tenant from taking it from the others (limits.c)
 *	  and the counters behind /metrics (metrics.c).
 *
 * The gateway holds no state of its own beyond counters and the keys the
 * database has accepted (to count a request against its tenant before it
 * takes a connection): every request is one call of a cscp.http_*
 * function, whose answer (status, headers, body) is sent back as it came.
 * Gateways are therefore interchangeable, and any number of them can
 * stand behind a load balancer.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CSCP_GATEWAY_H
#define CSCP_GATEWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

/* Settings, from flags and CSCP_GATEWAY_* environment variables. */
typedef struct GatewayConfig
{
	const char *listen;			/* HOST:PORT */
	const char *database;		/* libpq connection string */
	const char *tls_cert;
	const char *tls_key;
	bool		insecure_http;
	int			pool;			/* database connections */
	size_t		max_body;		/* bytes of a request body */
	size_t		max_header;		/* bytes of a request's line and headers */
	int			max_connections;
	int			idle_timeout;	/* seconds a connection may stay silent */
	int			drain_timeout;	/* seconds SIGTERM waits for requests in flight */
	int			statement_timeout;	/* ms a call may run in the database, 0 none */
	int			lock_timeout;	/* ms a call may wait for a lock, 0 none */
	int			tenant_max;		/* a tenant's requests in flight at most */
	int			header_timeout; /* ms for a request's line and headers */
	int			per_ip_max;		/* open connections of one address, 0 any */
} GatewayConfig;

extern GatewayConfig gw_config;

/* http.c: the routes, the request handler and its completion callback. */
typedef struct Route
{
	const char *template;		/* "/v1/context/{session_id}/{namespace}" */
	const char *methods[4];		/* HTTP methods, NULL-terminated */
	const char *functions[4];	/* the cscp.http_* function of each method, or
								 * NULL for the gateway's own endpoints */
} Route;

#define ROUTE_UNMATCHED (-1)

extern const Route gw_routes[];
extern const int gw_nroutes;
extern volatile int gw_draining;

extern enum MHD_Result gw_handle_request(void *cls, struct MHD_Connection *connection,
										 const char *url, const char *method,
										 const char *version, const char *upload_data,
										 size_t *upload_data_size, void **con_cls);
extern void gw_request_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
								 enum MHD_RequestTerminationCode toe);
extern size_t gw_no_unescape(void *cls, struct MHD_Connection *connection, char *s);
extern int	gw_in_flight(void);

/* db.c: a fixed pool of libpq connections, statements prepared once per connection. */
typedef enum DbOutcome
{
	DB_OK,						/* a response from the function */
	DB_UNAVAILABLE,				/* the database cannot be reached: 503 */
	DB_ERROR,					/* the call raised an error: 500 */
	DB_MISSING					/* the database has no such function: 501 */
} DbOutcome;

typedef struct DbResponse
{
	int			status;
	char	   *headers;		/* "Name: value" lines, or NULL */
	char	   *body;			/* JSON text, or NULL */
	char		sqlstate[6];	/* when not DB_OK */
	char	   *message;		/* when not DB_OK */
} DbResponse;

extern DbOutcome gw_db_call(const char *function, int nparams, const char *const *params,
							DbResponse *out);
extern void gw_db_response_free(DbResponse *r);
extern void gw_db_close_all(void);
extern int	gw_db_in_use(void);
extern int	gw_db_up(void);		/* 1 up, 0 down, -1 not known yet */

/*
 * limits.c: the header deadline of each client connection, the most requests
 * in flight per tenant, and the keys the database has accepted.
 */
extern void gw_connection_notify(void *cls, struct MHD_Connection *connection,
								 void **socket_context, enum MHD_ConnectionNotificationCode code);
extern void gw_headers_in(struct MHD_Connection *connection);
extern void gw_headers_wait(struct MHD_Connection *connection);
extern void gw_limits_start(void);
extern void gw_limits_stop(void);
typedef struct GwTicket
{
	char	   *tenant;			/* the tenant a key names (base64url), or NULL */
	bool		unverified;		/* counted in the shared unverified bucket too */
} GwTicket;

extern bool gw_tenant_enter(const char *authorization, GwTicket *ticket);
extern void gw_tenant_leave(GwTicket *ticket);
extern void gw_key_learn(const char *authorization, int status);

/* metrics.c */
extern void gw_metrics_record(int route, const char *method, int status, double seconds);
extern char *gw_metrics_render(int connections);

/* openapi.c (generated from openapi.json) */
extern const char gw_openapi_json[];

#endif							/* CSCP_GATEWAY_H */
