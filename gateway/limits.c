/*-------------------------------------------------------------------------
 *
 * limits.c
 *	  What keeps one client or one tenant from taking the gateway from the
 *	  others: a deadline for each request's line and headers, and the most
 *	  requests in flight per tenant.
 *
 * The header deadline.  libmicrohttpd's --idle-timeout restarts with every
 * byte, so a client sending a header byte every few seconds (slowloris)
 * would hold its connection, and its thread, for ever.  Each connection
 * therefore gets a deadline when it opens (the TLS handshake included) and
 * again when an answer on it is complete: its next request's line and
 * headers must be in by then, else a watchdog thread shuts the socket
 * down and libmicrohttpd closes the connection.  The watchdog touches a
 * socket only under the lock that the connection's CLOSED notification
 * takes before libmicrohttpd closes it, so it never shuts down a reused
 * descriptor.
 *
 * The tenant limit.  A request's tenant must be known before it takes a
 * database connection, and the database is what checks keys.  Keys are
 * cscp_<tenant>.<secret> (cscp.api_key_create, the tenant in base64url),
 * so every request with a key counts against the tenant its key names,
 * whichever of the tenant's keys it uses: no tenant has more than
 * --tenant-max requests in flight.  A key the database has not accepted
 * yet (no answer other than 401 remembered here), a forged one, or none
 * at all counts against one shared bucket, "unverified", limited alike:
 * clients forging keys, or naming tenants that do not exist, take at most
 * --tenant-max connections together, and a forged key that names a real
 * tenant holds one of its places only while its check fails, a lookup of
 * its hash.  A key the database answers 401 is forgotten.
 *
 *-------------------------------------------------------------------------
 */
#include "gateway.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

/* One client connection while it waits for a request's line and headers. */
typedef struct Watched
{
	int			fd;
	int64_t		deadline;		/* monotonic ms, or 0 while a request is in */
	char		addr[INET6_ADDRSTRLEN];
	struct Watched *prev;
	struct Watched *next;
} Watched;

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static Watched *watched = NULL;
static pthread_t watchdog;
static volatile int watchdog_stop = 0;
static bool watchdog_running = false;

/* Requests in flight per bucket: a tenant's base64url name, or "" for unverified. */
typedef struct Bucket
{
	char	   *name;
	int			count;
} Bucket;

static pthread_mutex_t bucket_lock = PTHREAD_MUTEX_INITIALIZER;
static Bucket *buckets = NULL;
static int	nbuckets = 0;
static int	buckets_cap = 0;

/* Keys the database accepted: a direct-mapped table, by a hash seeded at start. */
#define KEY_SLOTS 16384
static pthread_mutex_t key_lock = PTHREAD_MUTEX_INITIALIZER;
static char *keys[KEY_SLOTS];
static uint64_t key_seed = 0;

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The watched entry of a connection, or NULL. */
static Watched *
watched_of(struct MHD_Connection *connection)
{
	const union MHD_ConnectionInfo *info =
		MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return info != NULL ? (Watched *) info->socket_context : NULL;
}

/* libmicrohttpd's connection callback: watch a connection from its start to its close. */
void
gw_connection_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
					 enum MHD_ConnectionNotificationCode code)
{
	Watched    *w;

	(void) cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED)
	{
		/*
		 * Each answer is read before the next call: libmicrohttpd 1.x answers
		 * every kind of information in one union of the connection, which the
		 * next call overwrites (the client address over the descriptor).
		 */
		const union MHD_ConnectionInfo *fd =
			MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
		const union MHD_ConnectionInfo *addr;
		MHD_socket	sock;

		*socket_context = NULL;
		if (fd == NULL)
			return;
		sock = fd->connect_fd;
		if ((w = calloc(1, sizeof(Watched))) == NULL)
			return;
		w->fd = sock;
		snprintf(w->addr, sizeof(w->addr), "-");
		addr = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (addr != NULL && addr->client_addr != NULL)
		{
			const struct sockaddr *sa = addr->client_addr;

			if (sa->sa_family == AF_INET)
				inet_ntop(AF_INET, &((const struct sockaddr_in *) sa)->sin_addr, w->addr, sizeof(w->addr));
			else if (sa->sa_family == AF_INET6)
				inet_ntop(AF_INET6, &((const struct sockaddr_in6 *) sa)->sin6_addr, w->addr, sizeof(w->addr));
		}
		w->deadline = now_ms() + gw_config.header_timeout;
		pthread_mutex_lock(&watch_lock);
		w->next = watched;
		if (watched != NULL)
			watched->prev = w;
		watched = w;
		pthread_mutex_unlock(&watch_lock);
		*socket_context = w;
		return;
	}
	/* MHD_CONNECTION_NOTIFY_CLOSED: before libmicrohttpd closes the socket. */
	w = *socket_context;
	if (w == NULL)
		return;
	pthread_mutex_lock(&watch_lock);
	if (w->prev != NULL)
		w->prev->next = w->next;
	else
		watched = w->next;
	if (w->next != NULL)
		w->next->prev = w->prev;
	pthread_mutex_unlock(&watch_lock);
	free(w);
	*socket_context = NULL;
}

/* A request's line and headers are in: no deadline until its answer is complete. */
void
gw_headers_in(struct MHD_Connection *connection)
{
	Watched    *w = watched_of(connection);

	if (w == NULL)
		return;
	pthread_mutex_lock(&watch_lock);
	w->deadline = 0;
	pthread_mutex_unlock(&watch_lock);
}

/* An answer is complete: the next request's line and headers have --header-timeout. */
void
gw_headers_wait(struct MHD_Connection *connection)
{
	Watched    *w = watched_of(connection);

	if (w == NULL)
		return;
	pthread_mutex_lock(&watch_lock);
	w->deadline = now_ms() + gw_config.header_timeout;
	pthread_mutex_unlock(&watch_lock);
}

/* The watchdog: every 50 ms, shut down the connections past their deadline. */
static void *
watchdog_main(void *arg)
{
	(void) arg;
	while (!__atomic_load_n(&watchdog_stop, __ATOMIC_RELAXED))
	{
		struct timespec pause = {0, 50 * 1000 * 1000};
		int64_t		now = now_ms();
		int			cut = 0;
		char		last[INET6_ADDRSTRLEN] = "";

		nanosleep(&pause, NULL);
		pthread_mutex_lock(&watch_lock);
		for (Watched *w = watched; w != NULL; w = w->next)
			if (w->deadline != 0 && w->deadline <= now)
			{
				shutdown(w->fd, SHUT_RDWR);
				w->deadline = 0;
				snprintf(last, sizeof(last), "%s", w->addr);
				cut++;
			}
		pthread_mutex_unlock(&watch_lock);
		if (cut > 0)
			fprintf(stderr, "cscp-gateway: closed %d connection(s) (the last from %s) without a "
					"complete request line and headers within %d ms\n",
					cut, last, gw_config.header_timeout);
	}
	return NULL;
}

void
gw_limits_start(void)
{
	if (getrandom(&key_seed, sizeof(key_seed), 0) != sizeof(key_seed))
		key_seed = (uint64_t) now_ms() * 0x9e3779b97f4a7c15ULL;
	if (pthread_create(&watchdog, NULL, watchdog_main, NULL) != 0)
	{
		fprintf(stderr, "cscp-gateway: could not start the header watchdog: %s\n", strerror(errno));
		exit(1);
	}
	watchdog_running = true;
}

void
gw_limits_stop(void)
{
	if (!watchdog_running)
		return;
	__atomic_store_n(&watchdog_stop, 1, __ATOMIC_RELAXED);
	pthread_join(watchdog, NULL);
	watchdog_running = false;
}

/*
 * The bearer token of an Authorization header, as start and length, and
 * the tenant part of a cscp_<tenant>.<secret> key in it; false when the
 * header holds no such key.
 */
static bool
key_parts(const char *auth, const char **token, size_t *token_len, size_t *tenant_len)
{
	const char *p = auth;
	const char *t;
	const char *dot;
	const char *end;

#define B64URL(ch) (((ch) >= 'A' && (ch) <= 'Z') || ((ch) >= 'a' && (ch) <= 'z') || \
					((ch) >= '0' && (ch) <= '9') || (ch) == '-' || (ch) == '_')
	if (auth == NULL)
		return false;
	while (*p == ' ' || *p == '\t')
		p++;
	if (strncasecmp(p, "bearer ", 7) != 0)
		return false;
	p += 7;
	while (*p == ' ')
		p++;
	if (strncmp(p, "cscp_", 5) != 0)
		return false;
	t = p + 5;
	for (dot = t; B64URL(*dot); dot++)
		;
	if (dot == t || *dot != '.')
		return false;
	for (end = dot + 1; B64URL(*end); end++)
		;
	if (end == dot + 1)
		return false;
	for (const char *s = end; *s != '\0'; s++)
		if (*s != ' ' && *s != '\t')
			return false;
#undef B64URL
	*token = p;
	*token_len = (size_t) (end - p);
	*tenant_len = (size_t) (dot - t);
	return true;
}

/* The slot of a token in the table of accepted keys. */
static size_t
key_slot(const char *token, size_t len)
{
	uint64_t	h = 0xcbf29ce484222325ULL ^ key_seed;

	for (size_t i = 0; i < len; i++)
	{
		h ^= (unsigned char) token[i];
		h *= 0x100000001b3ULL;
	}
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 32;
	return (size_t) (h % KEY_SLOTS);
}

/* Remember a key the database accepted, forget one it refused (401). */
void
gw_key_learn(const char *authorization, int status)
{
	const char *token;
	size_t		len;
	size_t		tenant_len;
	size_t		slot;

	if (!key_parts(authorization, &token, &len, &tenant_len))
		return;
	slot = key_slot(token, len);
	pthread_mutex_lock(&key_lock);
	if (status == 401)
	{
		if (keys[slot] != NULL && strlen(keys[slot]) == len && memcmp(keys[slot], token, len) == 0)
		{
			free(keys[slot]);
			keys[slot] = NULL;
		}
	}
	else if (keys[slot] == NULL || strlen(keys[slot]) != len || memcmp(keys[slot], token, len) != 0)
	{
		char	   *copy = strndup(token, len);

		if (copy != NULL)
		{
			free(keys[slot]);
			keys[slot] = copy;
		}
	}
	pthread_mutex_unlock(&key_lock);
}

/*
 * Add one to a bucket's count when it is below --tenant-max; false when
 * it is not, or memory ran out.  Under bucket_lock.
 */
static bool
bucket_has_room(const char *name, bool take)
{
	int			i;

	for (i = 0; i < nbuckets; i++)
		if (strcmp(buckets[i].name, name) == 0)
			break;
	if (i < nbuckets)
	{
		if (buckets[i].count >= gw_config.tenant_max)
			return false;
		if (take)
			buckets[i].count++;
		return true;
	}
	if (!take)
		return true;
	if (nbuckets == buckets_cap)
	{
		int			cap = buckets_cap == 0 ? 16 : buckets_cap * 2;
		Bucket	   *more = realloc(buckets, cap * sizeof(Bucket));

		if (more == NULL)
			return false;
		buckets = more;
		buckets_cap = cap;
	}
	buckets[nbuckets].name = strdup(name);
	if (buckets[nbuckets].name == NULL)
		return false;
	buckets[nbuckets].count = 1;
	nbuckets++;
	return true;
}

/* Take one off a bucket's count; a bucket left empty is dropped.  Under bucket_lock. */
static void
bucket_release(const char *name)
{
	for (int i = 0; i < nbuckets; i++)
		if (strcmp(buckets[i].name, name) == 0)
		{
			if (--buckets[i].count == 0)
			{
				free(buckets[i].name);
				buckets[i] = buckets[--nbuckets];
			}
			return;
		}
}

/*
 * Count a request against the tenant its key names and, unless the
 * database has accepted that key before, against the shared unverified
 * bucket as well.  False, counting nothing, when either has --tenant-max
 * requests in flight already: the caller answers 429.  The ticket is
 * what gw_tenant_leave takes back.  Whatever memory runs out of, the
 * request is refused rather than served uncounted.
 */
bool
gw_tenant_enter(const char *authorization, GwTicket *ticket)
{
	const char *token;
	size_t		len;
	size_t		tenant_len;
	bool		admitted = false;

	ticket->tenant = NULL;
	ticket->unverified = true;
	if (key_parts(authorization, &token, &len, &tenant_len))
	{
		size_t		slot = key_slot(token, len);

		ticket->tenant = strndup(token + 5, tenant_len);
		if (ticket->tenant == NULL)
			return false;
		pthread_mutex_lock(&key_lock);
		if (keys[slot] != NULL && strlen(keys[slot]) == len && memcmp(keys[slot], token, len) == 0)
			ticket->unverified = false;
		pthread_mutex_unlock(&key_lock);
	}

	pthread_mutex_lock(&bucket_lock);
	if ((!ticket->unverified || bucket_has_room("", false)) &&
		(ticket->tenant == NULL || bucket_has_room(ticket->tenant, true)))
	{
		admitted = !ticket->unverified || bucket_has_room("", true);
		if (!admitted && ticket->tenant != NULL)
			bucket_release(ticket->tenant);
	}
	pthread_mutex_unlock(&bucket_lock);
	if (!admitted)
	{
		free(ticket->tenant);
		ticket->tenant = NULL;
		ticket->unverified = false;
	}
	return admitted;
}

/* A request counted by gw_tenant_enter is done. */
void
gw_tenant_leave(GwTicket *ticket)
{
	pthread_mutex_lock(&bucket_lock);
	if (ticket->tenant != NULL)
		bucket_release(ticket->tenant);
	if (ticket->unverified)
		bucket_release("");
	pthread_mutex_unlock(&bucket_lock);
	free(ticket->tenant);
	ticket->tenant = NULL;
	ticket->unverified = false;
}
