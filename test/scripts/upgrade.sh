#!/usr/bin/env bash
# The upgrade test, a suite of `make test` (own cluster, own copy of PostgreSQL): a database made
# and filled by release 0.1.0 must become, through ALTER EXTENSION cscp UPDATE, what a fresh
# install of this build makes, with every row kept.
#   1. Release 0.1.0 is built from git history (commit RELEASE_COMMIT) and installed into a
#      private copy of PostgreSQL (pgtree.sh); a cluster of that copy is started.
#   2. Databases are made with 0.1.0: cscp_upg, filled through every concept (the demo's four
#      stories, test/backup/populate.sql of the release: contexts in every status, commands at
#      every state, conversations, facts, documents, API keys, policies, bindings, an operator,
#      a gateway role); cscp_upg_empty, holding nothing; cscp_between, filled the same way.
#   3. This build is installed into the same copy and the server restarted: the new library now
#      serves the old SQL.  In cscp_between, the stories run again and every function of the old
#      SQL is called with NULL arguments: each works or raises an error; none crashes the server
#      (its start time must not move) or raises an internal error (XX*).
#   4. ALTER EXTENSION cscp UPDATE in every database; then
#      - a normalized `pg_dump --schema-only --binary-upgrade` (every object of the extension,
#        grants, policies and comments included) of cscp_upg_empty equals a fresh install's, and
#        that of cscp_upg equals a fresh install's given the same grant_app, grant_operator and
#        grant_gateway calls: the upgrade step re-grants the roles the release granted;
#      - every table holds the rows it held, unchanged in the columns it had (count and digest);
#      - every bound application role reads every row of its tenants (test/upgrade/tenants.sql);
#      - check_invariants() and evidence_verify() find nothing, and the API works on the old
#        rows (test/backup/after_restore.sql);
#      - the pg_regress suites pass on cscp_upg_empty (pg_regress --use-existing).
# Run alone: make build && bash test/scripts/upgrade.sh (as root or a user who may write /tmp).
set -euo pipefail
cd "$(dirname "$0")/../.."
UPG_NAME=upgrade
source test/upgrade/lib.sh

RELEASE=0.1.0
RELEASE_COMMIT=3cd3c9c
PGVERSION=${PGVERSION:-15}
EXTVERSION=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" cscp.control)

# The release's source: from git history, or, in a copy of the tree without it (the Debian roots of
# `make test PG=…`, test/scripts/pgversion.sh), from the archive pgversion.sh wrote beside it with
# `upgrade.sh --archive DIR` (DIR/.release-VERSION.tar).
release_archive() {
	if git rev-parse -q --verify "$RELEASE_COMMIT^{commit}" >/dev/null 2>&1; then
		git archive "$RELEASE_COMMIT"
	elif [ -f ".release-$RELEASE.tar" ]; then
		cat ".release-$RELEASE.tar"
	else
		echo "upgrade: commit $RELEASE_COMMIT (release $RELEASE) is not in this repository's history;" \
			"the upgrade test builds the release from it (a shallow clone lacks it: git fetch --unshallow)" >&2
		return 1
	fi
}
if [ "${1:-}" = --archive ]; then
	release_archive >"${2:?usage: upgrade.sh --archive DIR}/.release-$RELEASE.tar"
	exit
fi
release_archive >/dev/null

work=$(mktemp -d "${TMPDIR:-/tmp}/cscp-upgrade.XXXXXX")
chmod 755 "$work"
cleanup() {
	cluster_stop 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# 1. The release, built from git history into a private copy of PostgreSQL.
pgconfig=$(bash test/scripts/pgtree.sh "$work/pg")
sharedir=$("$pgconfig" --sharedir)
pkglibdir=$("$pgconfig" --pkglibdir)
# (The copy is of the system's installation, which may hold a build of cscp: none is wanted.)
rm -f "$sharedir"/extension/cscp[-.]* "$sharedir"/extension/cscp_proxy[-.]* "$pkglibdir/cscp.so"
rm -rf "$pkglibdir/bitcode/cscp" "$pkglibdir/bitcode/cscp.index.bc"
mkdir "$work/release"
release_archive | tar -x -C "$work/release"
say "building release $RELEASE from commit $RELEASE_COMMIT"
make -C "$work/release" -s -j2 PG_CONFIG="$pgconfig" all install >"$work/release-build.log" 2>&1 ||
	{ tail -n 40 "$work/release-build.log"; fail "release $RELEASE does not build"; }
export PG_BINDIR
PG_BINDIR=$("$pgconfig" --bindir)
source test/scripts/cluster.sh
# Verbose errors: the log then carries each error's SQLSTATE (an internal error is XX000).
cluster_start "log_error_verbosity=verbose" || fail "the cluster does not start"
trap cleanup EXIT

# 2. Databases made and filled by the release.
q -d postgres -c "CREATE DATABASE cscp_upg" -c "CREATE DATABASE cscp_upg_empty" -c "CREATE DATABASE cscp_between"
q -d cscp_upg_empty -c "CREATE EXTENSION cscp VERSION '$RELEASE'"
upg_fill cscp_upg "$work/release" || { tail -n 40 "$work/fill-cscp_upg.log"; fail "release $RELEASE could not be filled"; }
for db in cscp_upg cscp_upg_empty; do
	v=$(q -At -d $db -c "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'cscp'")
	[ "$v" = "$RELEASE" ] || fail "$db holds cscp $v, not release $RELEASE"
done
upg_snapshot cscp_upg "release $RELEASE"

# 3. This build installed over the release; the new library serves the old SQL.
q -d cscp_between -c "CREATE EXTENSION cscp VERSION '$RELEASE'"
upg_fill cscp_between "$work/release" || true
make -s PG_CONFIG="$pgconfig" install >"$work/install.log" 2>&1 ||
	{ tail -n 40 "$work/install.log"; fail "this build does not install (make all first)"; }
cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CSCP_TMP/data" -m fast -w stop >/dev/null
cluster_restart || fail "the cluster does not restart with this build"
started=$(q -At -d postgres -c "SELECT pg_catalog.pg_postmaster_start_time()")
logfrom=$(wc -l <"$CSCP_TMP/postgres.log")
upg_fill cscp_between "$work/release" || true
cp "$work/fill-cscp_between.log" "$work/between-stories.log"
q -At -d cscp_between >"$work/null-calls.sql" <<-'SQL'
	SELECT pg_catalog.format('SELECT %s(%s);', p.oid::regproc::text,
	       COALESCE(pg_catalog.string_agg('NULL::' || pg_catalog.format_type(t.oid, NULL), ', ' ORDER BY a.n), ''))
	  FROM pg_catalog.pg_proc p
	  LEFT JOIN LATERAL pg_catalog.unnest(p.proargtypes::oid[]) WITH ORDINALITY a(typ, n) ON true
	  LEFT JOIN pg_catalog.pg_type t ON t.oid = a.typ
	 WHERE p.pronamespace = 'cscp'::regnamespace AND p.prorettype <> 'pg_catalog.trigger'::regtype
	   AND p.prokind = 'f'
	 GROUP BY p.oid
	 ORDER BY p.oid::regprocedure::text;
SQL
PGOPTIONS="-c statement_timeout=10s" loose -d cscp_between -f "$work/null-calls.sql" >"$work/null-calls.log" 2>&1 || true
now=$(q -At -d postgres -c "SELECT pg_catalog.pg_postmaster_start_time()") ||
	fail "the server is gone after the old functions were called with the new library"
tail -n +"$((logfrom + 1))" "$CSCP_TMP/postgres.log" >"$work/between.log"
if [ "$now" != "$started" ] || grep -q 'terminated by signal\|server process .* was terminated' "$work/between.log"; then
	grep -B2 -A8 'terminated by signal' "$work/between.log" | head -n 60
	fail "a call of the old SQL crashed the server with the new library"
fi
if grep -q 'ERROR:  XX' "$work/between.log"; then
	grep -A3 'ERROR:  XX' "$work/between.log" | head -n 60
	fail "a call of the old SQL with the new library raised an internal error"
fi
say "between the steps: $(grep -c '^SELECT' "$work/null-calls.sql") functions of $RELEASE called with NULLs," \
	"the stories run again; $(grep -c 'ERROR:' "$work/between.log") clear errors, no crash"

# 4. The update.
for db in cscp_upg cscp_upg_empty cscp_between; do
	q -d $db -c "ALTER EXTENSION cscp UPDATE" || fail "ALTER EXTENSION cscp UPDATE fails in $db"
	v=$(q -At -d $db -c "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'cscp'")
	[ "$v" = "$EXTVERSION" ] || fail "$db holds cscp $v after the update, not $EXTVERSION"
done
say "ALTER EXTENSION cscp UPDATE: $RELEASE -> $EXTVERSION"

upg_schemas cscp_upg_empty cscp_upg

upg_after cscp_upg "$RELEASE"

upg_regress cscp_upg_empty "$pkglibdir"
