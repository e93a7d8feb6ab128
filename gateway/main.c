/*-------------------------------------------------------------------------
 *
 * main.c
 *	  cscp-gateway: settings from flags and CSCP_GATEWAY_* environment
 *	  variables, the libmicrohttpd daemon (HTTPS through GnuTLS, or plain
 *	  HTTP only with --insecure-http), and the shutdown: SIGTERM or SIGINT
 *	  stops accepting connections, waits up to --drain-timeout for the
 *	  requests in flight, then stops.
 *
 * Runs in the foreground and logs to stderr, one line per request.  Flags
 * win over the environment; the environment over the defaults.
 *
 *-------------------------------------------------------------------------
 */
#include "gateway.h"

#include <errno.h>
#include <pthread.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

GatewayConfig gw_config = {
	.listen = "127.0.0.1:8443",
	.database = "",
	.pool = 4,
	.max_body = 1024 * 1024,
	.max_header = 16 * 1024,
	.max_connections = 1000,
	.idle_timeout = 30,
	.drain_timeout = 10,
	.statement_timeout = 5000,
	.lock_timeout = 0,
	.tenant_max = -1,			/* half the pool */
	.header_timeout = 10000,
	.per_ip_max = -1,			/* 64 over HTTPS, none behind a proxy */
};

static void
usage(FILE *out)
{
	fprintf(out,
			"Usage: cscp-gateway [options]\n"
			"HTTPS gateway of cscp: each request is one call of a cscp.http_* function.\n\n"
			"  --listen HOST:PORT        address to listen on (default 127.0.0.1:8443)\n"
			"  --database CONNINFO       libpq connection string of the gateway's role\n"
			"  --tls-cert FILE           PEM certificate (chain) for HTTPS\n"
			"  --tls-key FILE            PEM private key for HTTPS\n"
			"  --insecure-http           plain HTTP instead of the TLS pair (behind a TLS proxy)\n"
			"  --pool N                  database connections (default 4)\n"
			"  --max-body BYTES          largest request body (default 1048576)\n"
			"  --max-header-bytes BYTES  largest request line and headers (default 16384)\n"
			"  --max-connections N       open client connections (a thread each) at most (default 1000)\n"
			"  --idle-timeout SECONDS    close a connection silent this long (default 30)\n"
			"  --drain-timeout SECONDS   on SIGTERM, wait this long for requests (default 10)\n"
			"  --statement-timeout MS    a call's longest run in the database, 0 none (default 5000)\n"
			"  --lock-timeout MS         a call's longest wait for a lock, 0 none (default 0)\n"
			"  --tenant-max N            a tenant's requests in flight at most, beyond: 429\n"
			"                            (default half of --pool, at least 1)\n"
			"  --header-timeout MS       a request's line and headers must be in this soon after\n"
			"                            the connection opens or the previous answer (default 10000)\n"
			"  --per-ip-max N            open connections of one client address, 0 any\n"
			"                            (default 64; 0 with --insecure-http)\n"
			"  --list-routes             print METHOD TEMPLATE per route, and exit\n"
			"  --help                    this text\n\n"
			"Each option can be set in the environment instead: CSCP_GATEWAY_LISTEN,\n"
			"CSCP_GATEWAY_DATABASE, CSCP_GATEWAY_TLS_CERT, CSCP_GATEWAY_TLS_KEY,\n"
			"CSCP_GATEWAY_INSECURE_HTTP=1, CSCP_GATEWAY_POOL, CSCP_GATEWAY_MAX_BODY,\n"
			"CSCP_GATEWAY_MAX_HEADER_BYTES, CSCP_GATEWAY_MAX_CONNECTIONS,\n"
			"CSCP_GATEWAY_IDLE_TIMEOUT, CSCP_GATEWAY_DRAIN_TIMEOUT,\n"
			"CSCP_GATEWAY_STATEMENT_TIMEOUT, CSCP_GATEWAY_LOCK_TIMEOUT, CSCP_GATEWAY_TENANT_MAX,\n"
			"CSCP_GATEWAY_HEADER_TIMEOUT, CSCP_GATEWAY_PER_IP_MAX.\n");
}

/* value as a number within [min, max], or exit with a message naming the setting. */
static long
number(const char *name, const char *value, long min, long max)
{
	char	   *end;
	long		n;

	errno = 0;
	n = strtol(value, &end, 10);
	if (errno != 0 || end == value || *end != '\0' || n < min || n > max)
	{
		fprintf(stderr, "cscp-gateway: %s must be a whole number from %ld to %ld, not \"%s\"\n",
				name, min, max, value);
		exit(2);
	}
	return n;
}

/* Whether an environment flag is set to a true value. */
static bool
truthy(const char *value)
{
	return value != NULL && (strcmp(value, "1") == 0 || strcasecmp(value, "true") == 0 ||
							 strcasecmp(value, "yes") == 0 || strcasecmp(value, "on") == 0);
}

/* Apply one setting by its option name (without "--"). */
static void
set_option(const char *name, const char *value)
{
	if (strcmp(name, "listen") == 0)
		gw_config.listen = value;
	else if (strcmp(name, "database") == 0)
		gw_config.database = value;
	else if (strcmp(name, "tls-cert") == 0)
		gw_config.tls_cert = value;
	else if (strcmp(name, "tls-key") == 0)
		gw_config.tls_key = value;
	else if (strcmp(name, "pool") == 0)
		gw_config.pool = (int) number("--pool", value, 1, 1024);
	else if (strcmp(name, "max-body") == 0)
		gw_config.max_body = (size_t) number("--max-body", value, 1, 1L << 30);
	else if (strcmp(name, "max-header-bytes") == 0)
		gw_config.max_header = (size_t) number("--max-header-bytes", value, 1024, 1L << 24);
	else if (strcmp(name, "max-connections") == 0)
		gw_config.max_connections = (int) number("--max-connections", value, 1, 1000000);
	else if (strcmp(name, "idle-timeout") == 0)
		gw_config.idle_timeout = (int) number("--idle-timeout", value, 1, 86400);
	else if (strcmp(name, "drain-timeout") == 0)
		gw_config.drain_timeout = (int) number("--drain-timeout", value, 0, 86400);
	else if (strcmp(name, "statement-timeout") == 0)
		gw_config.statement_timeout = (int) number("--statement-timeout", value, 0, 86400000);
	else if (strcmp(name, "lock-timeout") == 0)
		gw_config.lock_timeout = (int) number("--lock-timeout", value, 0, 86400000);
	else if (strcmp(name, "tenant-max") == 0)
		gw_config.tenant_max = (int) number("--tenant-max", value, 1, 1000000);
	else if (strcmp(name, "header-timeout") == 0)
		gw_config.header_timeout = (int) number("--header-timeout", value, 100, 86400000);
	else if (strcmp(name, "per-ip-max") == 0)
		gw_config.per_ip_max = (int) number("--per-ip-max", value, 0, 1000000);
}

/* Settings: the environment first, the flags over it. */
static void
configure(int argc, char **argv)
{
	static const char *const names[] = {"listen", "database", "tls-cert", "tls-key", "pool",
		"max-body", "max-header-bytes", "max-connections", "idle-timeout", "drain-timeout",
		"statement-timeout", "lock-timeout", "tenant-max", "header-timeout", "per-ip-max"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
	{
		char		env[64] = "CSCP_GATEWAY_";
		const char *value;

		for (const char *p = names[i]; *p; p++)
		{
			char		ch = *p == '-' ? '_' : (*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);

			env[strlen(env)] = ch;	/* env's unused bytes are zeros */
		}
		value = getenv(env);
		if (value != NULL && value[0] != '\0')
			set_option(names[i], value);
	}
	gw_config.insecure_http = truthy(getenv("CSCP_GATEWAY_INSECURE_HTTP"));

	for (int i = 1; i < argc; i++)
	{
		const char *arg = argv[i];
		bool		known = false;

		if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
		{
			usage(stdout);
			exit(0);
		}
		if (strcmp(arg, "--insecure-http") == 0)
		{
			gw_config.insecure_http = true;
			continue;
		}
		if (strcmp(arg, "--list-routes") == 0)
		{
			for (int r = 0; r < gw_nroutes; r++)
				for (int m = 0; gw_routes[r].methods[m] != NULL; m++)
					printf("%s %s\n", gw_routes[r].methods[m], gw_routes[r].template);
			exit(0);
		}
		for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++)
		{
			size_t		len = strlen(names[n]);

			if (strncmp(arg, "--", 2) != 0 || strncmp(arg + 2, names[n], len) != 0)
				continue;
			if (arg[2 + len] == '=')
				set_option(names[n], arg + 3 + len);
			else if (arg[2 + len] == '\0' && i + 1 < argc)
				set_option(names[n], argv[++i]);
			else
				continue;
			known = true;
			break;
		}
		if (!known)
		{
			fprintf(stderr, "cscp-gateway: unknown or incomplete option \"%s\"\n", arg);
			usage(stderr);
			exit(2);
		}
	}
	if (gw_config.insecure_http && (gw_config.tls_cert != NULL || gw_config.tls_key != NULL))
	{
		fprintf(stderr, "cscp-gateway: --insecure-http and --tls-cert/--tls-key exclude each other\n");
		exit(2);
	}
	if (!gw_config.insecure_http && (gw_config.tls_cert == NULL || gw_config.tls_key == NULL))
	{
		fprintf(stderr, "cscp-gateway: HTTPS needs --tls-cert FILE and --tls-key FILE\n"
				"Pass --insecure-http to serve plain HTTP behind a TLS-terminating proxy.\n");
		exit(2);
	}
	if (gw_config.tenant_max < 0)
		gw_config.tenant_max = gw_config.pool / 2 > 0 ? gw_config.pool / 2 : 1;
	/* Behind a TLS-terminating proxy every client has the proxy's address. */
	if (gw_config.per_ip_max < 0)
		gw_config.per_ip_max = gw_config.insecure_http ? 0 : 64;
}

/* The whole of a file (malloc'd, NUL-terminated), or exit. */
static char *
read_file(const char *path)
{
	FILE	   *f = fopen(path, "rb");
	char	   *data = NULL;
	size_t		len = 0;
	size_t		cap = 0;
	size_t		n;

	if (f == NULL)
	{
		fprintf(stderr, "cscp-gateway: could not open \"%s\": %s\n", path, strerror(errno));
		exit(2);
	}
	do
	{
		if (len + 4096 + 1 > cap)
		{
			cap = (len + 4096 + 1) * 2;
			data = realloc(data, cap);
			if (data == NULL)
			{
				fprintf(stderr, "cscp-gateway: out of memory\n");
				exit(1);
			}
		}
		n = fread(data + len, 1, 4096, f);
		len += n;
	} while (n > 0);
	fclose(f);
	data[len] = '\0';
	return data;
}

/* The address of --listen, or exit. */
static struct addrinfo *
listen_address(void)
{
	char	   *copy = strdup(gw_config.listen);
	char	   *host = copy;
	char	   *port = copy != NULL ? strrchr(copy, ':') : NULL;
	struct addrinfo hints = {0};
	struct addrinfo *ai = NULL;
	int			rc;

	if (port == NULL)
	{
		fprintf(stderr, "cscp-gateway: --listen must be HOST:PORT, not \"%s\"\n", gw_config.listen);
		exit(2);
	}
	*port++ = '\0';
	if (host[0] == '[' && host[strlen(host) - 1] == ']')
	{
		host[strlen(host) - 1] = '\0';
		host++;
	}
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rc = getaddrinfo(host[0] != '\0' ? host : NULL, port, &hints, &ai);
	if (rc != 0)
	{
		fprintf(stderr, "cscp-gateway: cannot listen on \"%s\": %s\n", gw_config.listen, gai_strerror(rc));
		exit(2);
	}
	free(copy);
	return ai;
}

int
main(int argc, char **argv)
{
	struct MHD_Daemon *daemon;
	struct addrinfo *ai;
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
		MHD_USE_AUTO | MHD_USE_ITC | MHD_USE_ERROR_LOG;
	char	   *cert = NULL;
	char	   *key = NULL;
	sigset_t	sigs;
	int			sig;
	struct MHD_OptionItem tls[3] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL},
	{MHD_OPTION_END, 0, NULL}};
	struct timespec deadline;

	configure(argc, argv);
	setvbuf(stderr, NULL, _IOLBF, 0);
	if (!gw_config.insecure_http)
	{
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
		{
			fprintf(stderr, "cscp-gateway: this libmicrohttpd was built without TLS\n");
			return 2;
		}
		cert = read_file(gw_config.tls_cert);
		key = read_file(gw_config.tls_key);
		flags |= MHD_USE_TLS;
		tls[0] = (struct MHD_OptionItem) {MHD_OPTION_HTTPS_MEM_CERT, 0, cert};
		tls[1] = (struct MHD_OptionItem) {MHD_OPTION_HTTPS_MEM_KEY, 0, key};
	}
	ai = listen_address();

	/* Every thread libmicrohttpd starts inherits this mask: the signals come to sigwait. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	gw_limits_start();
	daemon = MHD_start_daemon(flags, 0, NULL, NULL, gw_handle_request, NULL,
							  MHD_OPTION_SOCK_ADDR, ai->ai_addr,
							  MHD_OPTION_CONNECTION_LIMIT, (unsigned int) gw_config.max_connections,
							  MHD_OPTION_THREAD_STACK_SIZE, (size_t) (512 * 1024),
							  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int) gw_config.idle_timeout,
							  MHD_OPTION_CONNECTION_MEMORY_LIMIT, gw_config.max_header,
							  MHD_OPTION_NOTIFY_COMPLETED, gw_request_completed, NULL,
							  MHD_OPTION_NOTIFY_CONNECTION, gw_connection_notify, NULL,
							  MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int) gw_config.per_ip_max,
							  MHD_OPTION_UNESCAPE_CALLBACK, gw_no_unescape, NULL,
							  MHD_OPTION_ARRAY, tls,
							  MHD_OPTION_END);
	if (daemon == NULL)
	{
		fprintf(stderr, "cscp-gateway: could not listen on %s\n", gw_config.listen);
		return 1;
	}
	freeaddrinfo(ai);
	fprintf(stderr, "cscp-gateway: listening on %s (%s), pool %d, tenant-max %d, "
			"statement-timeout %d ms, lock-timeout %d ms, header-timeout %d ms, per-ip-max %d\n",
			gw_config.listen, gw_config.insecure_http ? "plain HTTP" : "HTTPS", gw_config.pool,
			gw_config.tenant_max, gw_config.statement_timeout, gw_config.lock_timeout,
			gw_config.header_timeout, gw_config.per_ip_max);

	while (sigwait(&sigs, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
		;
	gw_draining = 1;
	fprintf(stderr, "cscp-gateway: %s: draining %d request(s) in flight\n",
			sig == SIGTERM ? "SIGTERM" : "SIGINT", gw_in_flight());
	{
		MHD_socket	s = MHD_quiesce_daemon(daemon);

		if (s != MHD_INVALID_SOCKET)
			close(s);
	}
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += gw_config.drain_timeout;
	for (;;)
	{
		struct timespec now;
		struct timespec pause = {0, 10 * 1000 * 1000};

		clock_gettime(CLOCK_MONOTONIC, &now);
		if (gw_in_flight() == 0 || now.tv_sec > deadline.tv_sec ||
			(now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec))
			break;
		nanosleep(&pause, NULL);
	}
	if (gw_in_flight() > 0)
		fprintf(stderr, "cscp-gateway: drain timeout: %d request(s) cut off\n", gw_in_flight());
	MHD_stop_daemon(daemon);
	gw_limits_stop();
	gw_db_close_all();
	free(cert);
	free(key);
	fprintf(stderr, "cscp-gateway: stopped\n");
	return 0;
}
