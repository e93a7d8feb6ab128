#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the demo, the tests and the benchmarks; sourced, not run.
#
#   cluster_start [extra postgres -c settings...]   sets PGHOST, PGPORT, PGUSER, CSCP_TMP
#   cluster_stop                                    stops it and removes its directory
#   cluster_restart                                 starts it again with the same settings (after a crash)
#
# The cluster lives in a temporary directory, listens only on a unix socket in that directory,
# and is owned by an unprivileged OS user: the caller itself, or `nobody` when run as root.
# cluster_start installs an EXIT trap, so the cluster is stopped on failure too.

PGVERSION=${PGVERSION:-15}
PG_BINDIR=${PG_BINDIR:-$(${PG_CONFIG:-/usr/lib/postgresql/$PGVERSION/bin/pg_config} --bindir 2>/dev/null || pg_config --bindir)}

cluster_as_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u nobody -- "$@"
	else
		"$@"
	fi
}

cluster_start() {
	CSCP_TMP=$(mktemp -d "${TMPDIR:-/tmp}/cscp.XXXXXX")
	chmod 755 "$CSCP_TMP"
	mkdir -p "$CSCP_TMP/sock"
	if [ "$(id -u)" -eq 0 ]; then
		chown -R nobody "$CSCP_TMP"
	fi
	trap cluster_stop EXIT
	cluster_as_owner "$PG_BINDIR/initdb" -D "$CSCP_TMP/data" -U postgres --auth=trust \
		--encoding=UTF8 --locale=C.UTF-8 --no-sync >"$CSCP_TMP/initdb.log" 2>&1 ||
		{ cat "$CSCP_TMP/initdb.log" >&2; return 1; }
	local opts="-c listen_addresses='' -c unix_socket_directories='$CSCP_TMP/sock' -p 5432"
	opts+=" -c fsync=off -c max_connections=60 -c max_prepared_transactions=10"
	local s
	for s in "$@"; do opts+=" -c $s"; done
	CSCP_PGOPTS=$opts
	cluster_restart || return 1
	export PGHOST="$CSCP_TMP/sock" PGPORT=5432 PGUSER=postgres PGDATABASE=postgres
}

cluster_restart() {
	cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CSCP_TMP/data" -o "$CSCP_PGOPTS" \
		-l "$CSCP_TMP/postgres.log" -w -t 60 start >"$CSCP_TMP/pg_ctl.out" 2>&1 ||
		{ cat "$CSCP_TMP/pg_ctl.out" "$CSCP_TMP/postgres.log" >&2; return 1; }
}

cluster_stop() {
	[ -n "${CSCP_TMP:-}" ] && [ -d "$CSCP_TMP" ] || return 0
	cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CSCP_TMP/data" -m fast -w stop >/dev/null 2>&1 || true
	rm -rf "$CSCP_TMP"
	CSCP_TMP=
}
