/*-------------------------------------------------------------------------
 *
 * metrics.c
 *	  The gateway's counters and their Prometheus text at /metrics:
 *	  requests by route, method and status, a latency histogram per route,
 *	  the pool's connections in use, requests in flight, open client
 *	  connections and whether the database answered the last call.
 *
 * Counters are plain integers updated with atomic adds: no lock on the
 * request path.  A scrape reads them one by one, so two counters may be
 * a request apart; Prometheus expects no more.
 *
 *-------------------------------------------------------------------------
 */
#include "gateway.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROUTES 32
#define NMETHODS 6
#define NSTATUSES 17
#define NBUCKETS 14

static const char *const methods[NMETHODS] = {"GET", "POST", "PUT", "DELETE", "HEAD", "OTHER"};
/* The last slot counts every other status. */
static const int statuses[NSTATUSES - 1] = {200, 201, 204, 400, 401, 403, 404, 405, 409, 413, 414,
415, 431, 500, 501, 503};
static const double buckets[NBUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
0.25, 0.5, 1, 2.5, 5, 10};

/* Index MAX_ROUTES holds requests that matched no route. */
static uint64_t requests[MAX_ROUTES + 1][NMETHODS][NSTATUSES];
static uint64_t latency_bucket[MAX_ROUTES + 1][NBUCKETS];
static uint64_t latency_count[MAX_ROUTES + 1];
static uint64_t latency_sum_us[MAX_ROUTES + 1];

/* Count one request of route (or ROUTE_UNMATCHED) answered with status. */
void
gw_metrics_record(int route, const char *method, int status, double seconds)
{
	int			r = (route < 0 || route >= MAX_ROUTES) ? MAX_ROUTES : route;
	int			m = NMETHODS - 1;
	int			s = NSTATUSES - 1;

	for (int i = 0; i < NMETHODS - 1; i++)
		if (strcmp(methods[i], method) == 0)
			m = i;
	for (int i = 0; i < NSTATUSES - 1; i++)
		if (statuses[i] == status)
			s = i;
	__atomic_add_fetch(&requests[r][m][s], 1, __ATOMIC_RELAXED);
	for (int b = 0; b < NBUCKETS; b++)
		if (seconds <= buckets[b])
			__atomic_add_fetch(&latency_bucket[r][b], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&latency_count[r], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&latency_sum_us[r], (uint64_t) (seconds * 1e6), __ATOMIC_RELAXED);
}

typedef struct Buf
{
	char	   *data;
	size_t		len;
	size_t		cap;
} Buf;

/* Append formatted text to b (the text is dropped when memory runs out). */
static void
buf_printf(Buf *b, const char *fmt,...)
{
	va_list		ap;
	int			n;

	if (b->data == NULL)
		return;
	for (;;)
	{
		va_start(ap, fmt);
		n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if ((size_t) n < b->cap - b->len)
		{
			b->len += n;
			return;
		}
		else
		{
			char	   *more = realloc(b->data, b->cap * 2 + n);

			if (more == NULL)
			{
				free(b->data);
				b->data = NULL;
				return;
			}
			b->data = more;
			b->cap = b->cap * 2 + n;
		}
	}
}

/* The route label of index r. */
static const char *
route_label(int r)
{
	return r < gw_nroutes && r < MAX_ROUTES ? gw_routes[r].template : "unmatched";
}

/* The Prometheus text of every counter (malloc'd; NULL when out of memory). */
char *
gw_metrics_render(int connections)
{
	Buf			b = {malloc(8192), 0, 8192};
	int			nroutes = gw_nroutes < MAX_ROUTES ? gw_nroutes : MAX_ROUTES;

	buf_printf(&b, "# HELP cscp_gateway_requests_total Requests answered, by route, method and status.\n"
			   "# TYPE cscp_gateway_requests_total counter\n");
	for (int r = 0; r <= MAX_ROUTES; r++)
	{
		if (r >= nroutes && r != MAX_ROUTES)
			continue;
		for (int m = 0; m < NMETHODS; m++)
			for (int s = 0; s < NSTATUSES; s++)
			{
				uint64_t	n = __atomic_load_n(&requests[r][m][s], __ATOMIC_RELAXED);

				if (n == 0)
					continue;
				if (s == NSTATUSES - 1)
					buf_printf(&b, "cscp_gateway_requests_total{route=\"%s\",method=\"%s\",status=\"other\"} %llu\n",
							   route_label(r), methods[m], (unsigned long long) n);
				else
					buf_printf(&b, "cscp_gateway_requests_total{route=\"%s\",method=\"%s\",status=\"%d\"} %llu\n",
							   route_label(r), methods[m], statuses[s], (unsigned long long) n);
			}
	}

	buf_printf(&b, "# HELP cscp_gateway_request_duration_seconds Time from a request's first byte read to its response queued, by route.\n"
			   "# TYPE cscp_gateway_request_duration_seconds histogram\n");
	for (int r = 0; r <= MAX_ROUTES; r++)
	{
		uint64_t	count;

		if (r >= nroutes && r != MAX_ROUTES)
			continue;
		count = __atomic_load_n(&latency_count[r], __ATOMIC_RELAXED);
		for (int k = 0; k < NBUCKETS; k++)
			buf_printf(&b, "cscp_gateway_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
					   route_label(r), buckets[k],
					   (unsigned long long) __atomic_load_n(&latency_bucket[r][k], __ATOMIC_RELAXED));
		buf_printf(&b, "cscp_gateway_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
				   route_label(r), (unsigned long long) count);
		buf_printf(&b, "cscp_gateway_request_duration_seconds_sum{route=\"%s\"} %.6f\n",
				   route_label(r),
				   __atomic_load_n(&latency_sum_us[r], __ATOMIC_RELAXED) / 1e6);
		buf_printf(&b, "cscp_gateway_request_duration_seconds_count{route=\"%s\"} %llu\n",
				   route_label(r), (unsigned long long) count);
	}

	buf_printf(&b, "# HELP cscp_gateway_pool_size Database connections of the pool.\n"
			   "# TYPE cscp_gateway_pool_size gauge\n"
			   "cscp_gateway_pool_size %d\n", gw_config.pool);
	buf_printf(&b, "# HELP cscp_gateway_pool_in_use Database connections busy with a call.\n"
			   "# TYPE cscp_gateway_pool_in_use gauge\n"
			   "cscp_gateway_pool_in_use %d\n", gw_db_in_use());
	buf_printf(&b, "# HELP cscp_gateway_requests_in_flight Requests begun and not yet answered.\n"
			   "# TYPE cscp_gateway_requests_in_flight gauge\n"
			   "cscp_gateway_requests_in_flight %d\n", gw_in_flight());
	buf_printf(&b, "# HELP cscp_gateway_connections Open client connections.\n"
			   "# TYPE cscp_gateway_connections gauge\n"
			   "cscp_gateway_connections %d\n", connections);
	buf_printf(&b, "# HELP cscp_gateway_database_up Whether the last call reached the database (1), did not (0), or none was made yet (-1).\n"
			   "# TYPE cscp_gateway_database_up gauge\n"
			   "cscp_gateway_database_up %d\n", gw_db_up());
	buf_printf(&b, "# HELP cscp_gateway_draining Whether SIGTERM was received and the gateway is draining.\n"
			   "# TYPE cscp_gateway_draining gauge\n"
			   "cscp_gateway_draining %d\n", gw_draining ? 1 : 0);
	return b.data;
}
