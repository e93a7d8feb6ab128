#!/usr/bin/env bash
# The part of `make test-pg-upgrade` that runs in a Debian root carrying PostgreSQL $PGVERSION
# (17, 18), with PostgreSQL 15 and cscp for it in /opt/cscp-pg15 (test/scripts/pg-upgrade.sh puts
# it there); run by `make pg-upgrade-in-root PGVERSION=…`, after cscp is installed for $PGVERSION.
#   1. A cluster of PostgreSQL 15: cscp_upg filled through every concept (the demo's stories,
#      test/backup/populate.sql, the upgrade suite's extras), cscp_upg_empty holding cscp alone.
#   2. pg_upgrade to a new cluster of $PGVERSION (initdb with the same settings); the new cluster
#      started in the old one's place.
#   3. The upgrade suite's checks (test/upgrade/lib.sh): schemas, rows, tenants, invariants,
#      evidence, the API, the pg_regress suites.
set -euo pipefail
cd "$(dirname "$0")/../.."
UPG_NAME="pg_upgrade 15->${PGVERSION:?}"
source test/upgrade/lib.sh
old_bindir=/opt/cscp-pg15/usr/lib/postgresql/15/bin
new_bindir=/usr/lib/postgresql/$PGVERSION/bin
[ -x "$old_bindir/pg_ctl" ] || fail "no PostgreSQL 15 in $old_bindir (test/scripts/pg-upgrade.sh puts it there)"
"$old_bindir/postgres" --version >/dev/null || fail "PostgreSQL 15's server does not run in this root"

work=$(mktemp -d "${TMPDIR:-/tmp}/cscp-pgupgrade.XXXXXX")
chmod 755 "$work"
mkdir -p log/pg-upgrade
export PG_BINDIR=$old_bindir
source test/scripts/cluster.sh
cleanup() {
	cp "$work"/*.log "$work"/*.diff log/pg-upgrade/ 2>/dev/null || true
	cp "$CSCP_TMP/postgres.log" log/pg-upgrade/ 2>/dev/null || true
	cluster_stop 2>/dev/null || true
	rm -rf "$work"
}
cluster_start "log_error_verbosity=verbose" || fail "PostgreSQL 15 does not start"
trap cleanup EXIT

# 1. PostgreSQL 15, filled.
q -d postgres -c "CREATE DATABASE cscp_upg" -c "CREATE DATABASE cscp_upg_empty"
q -d cscp_upg_empty -c "CREATE EXTENSION cscp"
upg_fill cscp_upg "$PWD" || { tail -n 40 "$work/fill-cscp_upg.log"; fail "PostgreSQL 15 could not be filled"; }
upg_snapshot cscp_upg "PostgreSQL 15"
version=$(q -At -d cscp_upg -c "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'cscp'")

# 2. pg_upgrade.
# PostgreSQL 15.20 (Debian 15.20-0+deb12u1, a security release) stamps every column of every table
# and view with an attribute option pg_attver=N, any table alike, cscp's or not; its own pg_dump
# knows the option and leaves it out.  A target server released before it does not: PostgreSQL
# 18.6 (Debian forky and sid, 18.6-3) has a pg_dump that copies the option as it is into
# pg_upgrade's schema dump, and a server that refuses it ('unrecognized parameter "pg_attver"'
# at the first table), so pg_upgrade stops at "Restoring database schemas" whatever the
# database holds.  Until the target has the release that knows the option (its pg_dump then
# names it, as 17.12's in trixie does), the stamps of the user's columns are removed from the
# old catalogs first (a superuser's UPDATE of pg_attribute; ALTER TABLE ... RESET ignores it):
# the target never stores them anyway.  Not cscp's doing: cscp sets no column option.
attver_note=
if ! grep -qa 'pg_attver' "$new_bindir/pg_dump"; then
	n=0
	for db in $(q -At -d postgres -c "SELECT datname FROM pg_catalog.pg_database WHERE datallowconn ORDER BY 1"); do
		m=$(q -At -d "$db" -c "WITH s AS (UPDATE pg_catalog.pg_attribute a
		                                     SET attoptions = (SELECT pg_catalog.array_agg(o) FROM pg_catalog.unnest(a.attoptions) o
		                                                        WHERE o NOT LIKE 'pg_attver=%')
		                                   WHERE a.attrelid >= 16384 AND a.attoptions::text LIKE '%pg_attver=%' RETURNING 1)
		                       SELECT pg_catalog.count(*) FROM s")
		n=$((n + m))
	done
	attver_note=" (the pg_attver stamps of $n columns removed first: PostgreSQL $PGVERSION's pg_dump does not know them)"
fi
cluster_as_owner "$old_bindir/pg_ctl" -D "$CSCP_TMP/data" -m fast -w stop >/dev/null
# (As the old cluster: PostgreSQL 18's initdb turns data checksums on by default, 15's did not.)
checksums=()
[ "$PGVERSION" -lt 18 ] || checksums=(--no-data-checksums)
cluster_as_owner "$new_bindir/initdb" -D "$CSCP_TMP/new" -U postgres --auth=trust \
	--encoding=UTF8 --locale=C.UTF-8 --no-sync "${checksums[@]}" >"$work/initdb.log" 2>&1 ||
	{ cat "$work/initdb.log"; fail "initdb of PostgreSQL $PGVERSION fails"; }
if ! (cd "$CSCP_TMP" && cluster_as_owner "$new_bindir/pg_upgrade" -b "$old_bindir" -B "$new_bindir" \
	-d "$CSCP_TMP/data" -D "$CSCP_TMP/new" -U postgres --socketdir="$CSCP_TMP/sock") >"$work/pg_upgrade.log" 2>&1; then
	cat "$work/pg_upgrade.log"
	grep -rh -B3 -A3 'error' "$CSCP_TMP/new/pg_upgrade_output.d" 2>/dev/null | head -n 60 || true
	fail "pg_upgrade from 15 to $PGVERSION fails"
fi
say "pg_upgrade: $(grep -c '^Checking\|^Performing\|^Restoring\|^Copying\|^Setting' "$work/pg_upgrade.log") steps, no error$attver_note"
mv "$CSCP_TMP/data" "$CSCP_TMP/data-15"
mv "$CSCP_TMP/new" "$CSCP_TMP/data"
PG_BINDIR=$new_bindir
cluster_restart || fail "the upgraded cluster does not start on PostgreSQL $PGVERSION"
server=$(q -At -d postgres -c "SHOW server_version_num")
[ "${server:0:2}" = "$PGVERSION" ] || fail "the server is $server, not PostgreSQL $PGVERSION"
v=$(q -At -d cscp_upg -c "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'cscp'")
[ "$v" = "$version" ] || fail "cscp_upg holds cscp $v after pg_upgrade, not $version"

# 3. The checks.
upg_schemas cscp_upg_empty cscp_upg
upg_after cscp_upg "PostgreSQL 15"
upg_regress cscp_upg_empty "$("$new_bindir/pg_config" --pkglibdir 2>/dev/null || echo "/usr/lib/postgresql/$PGVERSION/lib")"
say "all passed"
