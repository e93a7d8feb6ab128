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

RELEASE=0.1.0
RELEASE_COMMIT=3cd3c9c
PGVERSION=${PGVERSION:-15}
EXTVERSION=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" cscp.control)

if ! git rev-parse -q --verify "$RELEASE_COMMIT^{commit}" >/dev/null 2>&1; then
	echo "upgrade: commit $RELEASE_COMMIT (release $RELEASE) is not in this repository's history;" \
		"the upgrade test builds the release from it (a shallow clone lacks it: git fetch --unshallow)" >&2
	exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/cscp-upgrade.XXXXXX")
chmod 755 "$work"
cleanup() {
	cluster_stop 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
say() { echo "upgrade: $*"; }
fail() {
	echo "upgrade: FAILED: $*" >&2
	exit 1
}

# 1. The release, built from git history into a private copy of PostgreSQL.
pgconfig=$(bash test/scripts/pgtree.sh "$work/pg")
sharedir=$("$pgconfig" --sharedir)
pkglibdir=$("$pgconfig" --pkglibdir)
# (The copy is of the system's installation, which may hold a build of cscp: none is wanted.)
rm -f "$sharedir"/extension/cscp[-.]* "$sharedir"/extension/cscp_proxy[-.]* "$pkglibdir/cscp.so"
rm -rf "$pkglibdir/bitcode/cscp" "$pkglibdir/bitcode/cscp.index.bc"
mkdir "$work/release"
git archive "$RELEASE_COMMIT" | tar -x -C "$work/release"
say "building release $RELEASE from commit $RELEASE_COMMIT"
make -C "$work/release" -s -j2 PG_CONFIG="$pgconfig" all install >"$work/release-build.log" 2>&1 ||
	{ tail -n 40 "$work/release-build.log"; fail "release $RELEASE does not build"; }
export PG_BINDIR
PG_BINDIR=$("$pgconfig" --bindir)
source test/scripts/cluster.sh
# Verbose errors: the log then carries each error's SQLSTATE (an internal error is XX000).
cluster_start "log_error_verbosity=verbose" || fail "the cluster does not start"
trap cleanup EXIT
q() { "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
loose() { "$PG_BINDIR/psql" -X -q "$@"; }

# 2. Databases made and filled by the release.
fill() {
	(cd "$work/release/test/demo" && for f in conversation.sql cancel_order.sql multi_turn.sql facts.sql; do
		loose -d "$1" -f "$f" || return 1
	done) >"$work/fill-$1.log" 2>&1 || return 1
	(cd "$work/release/test/backup" && loose -d "$1" -f populate.sql) >>"$work/fill-$1.log" 2>&1 || return 1
	q -d "$1" <<-'SQL' >>"$work/fill-$1.log" 2>&1
		DO $$ BEGIN CREATE ROLE cscp_upg_gateway LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
		SELECT cscp.grant_gateway('cscp_upg_gateway');
		-- commands at every state the API reaches: waiting for an approval, failed, compensated
		SELECT cscp.command_declare('bk', 'wire', true, true, 'high') IS NOT NULL;
		SELECT state FROM cscp.command_submit('bk', 'u-1', 'ana', 'wire-1', 'wire', true, '{u-1:m1}', '{"amount": 5}', 'acct:2');
		SELECT outcome FROM cscp.confirm('bk', 'u-1', 'ana', 'u-1:m2', true, 'acct:2');
		SELECT state FROM cscp.command_submit('bk', 'u-2', 'ana', 'ping-u2', 'ping', true, '{u-2:m1}');
		SELECT pg_catalog.string_agg(t.state::text, ' ')
		  FROM pg_catalog.unnest('{authz_pending,authorized,started,failed}'::cscp.command_state[]) WITH ORDINALITY u(s, n),
		       LATERAL cscp.command_transition((SELECT c.command_id FROM cscp.command c WHERE c.idempotency_key = 'ping-u2'), s) t;
		SELECT state FROM cscp.command_submit('bk', 'u-3', 'ana', 'ping-u3', 'ping', true, '{u-3:m1}');
		SELECT pg_catalog.string_agg(t.state::text, ' ')
		  FROM pg_catalog.unnest('{authz_pending,authorized,started,executed,compensated}'::cscp.command_state[]) WITH ORDINALITY u(s, n),
		       LATERAL cscp.command_transition((SELECT c.command_id FROM cscp.command c WHERE c.idempotency_key = 'ping-u3'), s) t;
	SQL
}
q -d postgres -c "CREATE DATABASE cscp_upg" -c "CREATE DATABASE cscp_upg_empty" -c "CREATE DATABASE cscp_between"
q -d cscp_upg_empty -c "CREATE EXTENSION cscp VERSION '$RELEASE'"
fill cscp_upg || { tail -n 40 "$work/fill-cscp_upg.log"; fail "release $RELEASE could not be filled"; }
for db in cscp_upg cscp_upg_empty; do
	v=$(q -At -d $db -c "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'cscp'")
	[ "$v" = "$RELEASE" ] || fail "$db holds cscp $v, not release $RELEASE"
done
q -At -d cscp_upg -f test/upgrade/rows.sql >"$work/rows.sql"
q -At -d cscp_upg -f "$work/rows.sql" >"$work/rows-before.txt"
empty=$(awk -F'|' '$2 == 0 { printf "%s ", $1 }' "$work/rows-before.txt")
case " $empty " in
*" cscp.command "* | *" cscp.fact "* | *" cscp.conversation "* | *" cscp.api_key "* | *" cscp.tenant_binding "*)
	fail "the fill left tables empty: $empty" ;;
esac
checks=$(q -At -d cscp_upg -c "SELECT pg_catalog.count(*) FROM public.demo_check")
[ "$checks" -ge 20 ] || { tail -n 40 "$work/fill-cscp_upg.log"; fail "the demo's stories stopped early in release $RELEASE ($checks checks)"; }
say "release $RELEASE filled: the demo's stories ($checks checks), $(wc -l <"$work/rows-before.txt") tables," \
	"$(awk -F'|' '{ n += $2 } END { print n }' "$work/rows-before.txt") rows${empty:+ (empty: $empty)}"

# 3. This build installed over the release; the new library serves the old SQL.
q -d cscp_between -c "CREATE EXTENSION cscp VERSION '$RELEASE'"
fill cscp_between || true
make -s PG_CONFIG="$pgconfig" install >"$work/install.log" 2>&1 ||
	{ tail -n 40 "$work/install.log"; fail "this build does not install (make all first)"; }
cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CSCP_TMP/data" -m fast -w stop >/dev/null
cluster_restart || fail "the cluster does not restart with this build"
started=$(q -At -d postgres -c "SELECT pg_catalog.pg_postmaster_start_time()")
logfrom=$(wc -l <"$CSCP_TMP/postgres.log")
fill cscp_between || true
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

# The schema: every object of the extension as pg_upgrade would dump it, without OIDs, transaction
# ids and the restrict key; a run of GRANTs on one object sorted (their order follows the order
# in which the roles were granted); the extension's configuration tables listed by name.
schema() {
	"$PG_BINDIR/pg_dump" --schema-only --binary-upgrade -N public -d "$1" 2>/dev/null |
		grep -v -e binary_upgrade -e '^\\restrict' -e '^\\unrestrict' -e '^--' -e '^$' \
			-e '^UPDATE pg_catalog.pg_class$' -e '^SET relfrozenxid' -e "^WHERE oid = '[0-9]*';$" |
		perl -ne 'if (/^(GRANT|REVOKE) /) { push @r, $_; next } print sort @r; @r = (); print; END { print sort @r }'
	q -At -d "$1" -c "SELECT 'config table ' || c::regclass || ' ' || COALESCE(w, '')
	                    FROM pg_catalog.pg_extension e, ROWS FROM (pg_catalog.unnest(e.extconfig), pg_catalog.unnest(e.extcondition)) u(c, w)
	                   WHERE e.extname = 'cscp' ORDER BY 1"
}
same_schema() {
	schema "$1" >"$work/$1.schema"
	schema "$2" >"$work/$2.schema"
	if ! diff -u "$work/$2.schema" "$work/$1.schema" >"$work/$1.diff"; then
		head -n 200 "$work/$1.diff"
		fail "the schema of $1 (upgraded, +) differs from $2's (fresh install, -): $(grep -c '^[-+][^-+]' "$work/$1.diff") lines"
	fi
	say "schema of $1 = fresh install's ($(wc -l <"$work/$1.schema") lines compared)"
}
q -d postgres -c "CREATE DATABASE cscp_fresh" -c "CREATE DATABASE cscp_fresh_granted"
q -d cscp_fresh -c "CREATE EXTENSION cscp"
q -d cscp_fresh_granted -c "CREATE EXTENSION cscp"
q -At -d cscp_upg >"$work/grants.sql" <<-'SQL'
	SELECT pg_catalog.format('SELECT cscp.grant_%s(%L, %L);', b.kind, r.rolname, b.tenants)
	  FROM cscp.tenant_binding b JOIN pg_catalog.pg_roles r ON r.oid = b.role::oid
	 ORDER BY b.granted_at, b.kind;
	SELECT DISTINCT pg_catalog.format('SELECT cscp.grant_gateway(%L);', r.rolname)
	  FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a, pg_catalog.pg_roles r
	 WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname LIKE 'http\_%' AND p.prosecdef
	   AND a.privilege_type = 'EXECUTE' AND r.oid = a.grantee AND a.grantee <> p.proowner;
SQL
q -d cscp_fresh_granted -f "$work/grants.sql" >/dev/null
same_schema cscp_upg_empty cscp_fresh
same_schema cscp_upg cscp_fresh_granted

# The rows, the tenants, the invariants and the evidence, the API.
q -At -d cscp_upg -f "$work/rows.sql" >"$work/rows-after.txt" || fail "a table lost a column it had in $RELEASE"
if ! diff -u "$work/rows-before.txt" "$work/rows-after.txt"; then
	fail "rows written by $RELEASE changed in the update (table|count|digest over the columns it had)"
fi
say "rows: $(wc -l <"$work/rows-after.txt") tables, $(awk -F'|' '{ n += $2 } END { print n }' "$work/rows-after.txt") rows, the same"
q -At -d cscp_upg -f test/upgrade/tenants.sql >"$work/tenants.log" 2>&1 || { cat "$work/tenants.log"; fail "the tenant check could not run"; }
if grep -q 'TENANT MISMATCH' "$work/tenants.log"; then
	grep 'TENANT MISMATCH' "$work/tenants.log"
	fail "an application role does not read its tenant's rows after the update"
fi
say "$(tail -n 1 "$work/tenants.log")"
q -d cscp_upg -v other_times=1 -f test/backup/after_restore.sql >"$work/after.log" 2>&1 ||
	{ cat "$work/after.log"; fail "the API does not work on the upgraded rows"; }
# (After the API's calls, at the real time: the old rows and the new keep the invariants.)
problems=$(q -At -d cscp_upg -c "SELECT (SELECT pg_catalog.count(*) FROM cscp.check_invariants())
                                     + (SELECT pg_catalog.count(*) FROM (SELECT DISTINCT e.tenant_id FROM cscp.evidence e) t,
                                               cscp.evidence_verify(t.tenant_id))")
[ "$problems" = 0 ] || {
	q -d cscp_upg -c "SELECT * FROM cscp.check_invariants()"
	fail "$problems invariant or evidence problems after the update"
}
say "check_invariants() and evidence_verify() empty; the API works on the rows of $RELEASE"

# The regression suites on the upgraded (empty) database, in their usual order.
tests=$(make --no-print-directory -s -f Makefile -f - print-var <<<'print-var: ; @echo $(REGRESS)')
mkdir -p "$work/regress" && chmod 777 "$work/regress"
if ! "$pkglibdir/pgxs/src/test/regress/pg_regress" --inputdir=. --outputdir="$work/regress" \
	--bindir="$PG_BINDIR" --use-existing --dbname=cscp_upg_empty $tests >"$work/regress.log" 2>&1; then
	grep -E 'FAILED|failed' "$work/regress.log" | head -n 20
	head -n 200 "$work/regress/regression.diffs" 2>/dev/null
	fail "the regression suites fail on the upgraded database"
fi
say "pg_regress on the upgraded database: $(grep -c '^ok\|^test .* ok\|  ok  ' "$work/regress.log") suites passed"
