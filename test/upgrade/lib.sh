# What the upgrade tests share (test/scripts/upgrade.sh: ALTER EXTENSION cscp UPDATE;
# test/scripts/pg-upgrade.sh: pg_upgrade to a later PostgreSQL); sourced, not run.  The caller
# sets UPG_NAME (its messages' prefix), work (a scratch directory) and PG_BINDIR, and runs a
# cluster (PGHOST etc.).
#   upg_fill DB TREE           fill DB through every concept, with TREE's demo stories and populate.sql
#   upg_snapshot DB WHAT       record DB's tables: row counts and digests (rows.sql)
#   upg_schemas EMPTY FILLED   the schema of both equals a fresh install's (with FILLED's grants)
#   upg_after DB WHAT          the rows recorded unchanged, every tenant readable, no invariant or
#                              evidence problem, the API working on the old rows
#   upg_regress DB PKGLIBDIR   the pg_regress suites pass on DB
say() { echo "$UPG_NAME: $*"; }
fail() {
	echo "$UPG_NAME: FAILED: $*" >&2
	exit 1
}
q() { "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
loose() { "$PG_BINDIR/psql" -X -q "$@"; }

upg_fill() {
	(cd "$2/test/demo" && for f in conversation.sql cancel_order.sql multi_turn.sql facts.sql; do
		loose -d "$1" -f "$f" || return 1
	done) >"$work/fill-$1.log" 2>&1 || return 1
	(cd "$2/test/backup" && loose -d "$1" -f populate.sql) >>"$work/fill-$1.log" 2>&1 || return 1
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

upg_snapshot() {
	q -At -d "$1" -f test/upgrade/rows.sql >"$work/rows.sql"
	q -At -d "$1" -f "$work/rows.sql" >"$work/rows-before.txt"
	local empty checks
	empty=$(awk -F'|' '$2 == 0 { printf "%s ", $1 }' "$work/rows-before.txt")
	case " $empty " in
	*" cscp.command "* | *" cscp.fact "* | *" cscp.conversation "* | *" cscp.api_key "* | *" cscp.tenant_binding "*)
		fail "the fill left tables empty: $empty" ;;
	esac
	checks=$(q -At -d "$1" -c "SELECT pg_catalog.count(*) FROM public.demo_check")
	[ "$checks" -ge 20 ] || { tail -n 40 "$work/fill-$1.log"; fail "the demo's stories stopped early in $2 ($checks checks)"; }
	say "$2 filled: the demo's stories ($checks checks), $(wc -l <"$work/rows-before.txt") tables," \
		"$(awk -F'|' '{ n += $2 } END { print n }' "$work/rows-before.txt") rows${empty:+ (empty: $empty)}"
}

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
upg_schemas() {
	q -d postgres -c "CREATE DATABASE cscp_fresh" -c "CREATE DATABASE cscp_fresh_granted"
	q -d cscp_fresh -c "CREATE EXTENSION cscp"
	q -d cscp_fresh_granted -c "CREATE EXTENSION cscp"
	q -At -d "$2" >"$work/grants.sql" <<-'SQL'
		SELECT pg_catalog.format('SELECT cscp.grant_%s(%L, %L);', b.kind, r.rolname, b.tenants)
		  FROM cscp.tenant_binding b JOIN pg_catalog.pg_roles r ON r.oid = b.role::oid
		 ORDER BY b.granted_at, b.kind;
		SELECT DISTINCT pg_catalog.format('SELECT cscp.grant_gateway(%L);', r.rolname)
		  FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a, pg_catalog.pg_roles r
		 WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname LIKE 'http\_%' AND p.prosecdef
		   AND a.privilege_type = 'EXECUTE' AND r.oid = a.grantee AND a.grantee <> p.proowner;
	SQL
	q -d cscp_fresh_granted -f "$work/grants.sql" >/dev/null
	same_schema "$1" cscp_fresh
	same_schema "$2" cscp_fresh_granted
}

upg_after() {
	q -At -d "$1" -f "$work/rows.sql" >"$work/rows-after.txt" || fail "a table lost a column it had in $2"
	if ! diff -u "$work/rows-before.txt" "$work/rows-after.txt"; then
		fail "rows written by $2 changed in the update (table|count|digest over the columns it had)"
	fi
	say "rows: $(wc -l <"$work/rows-after.txt") tables, $(awk -F'|' '{ n += $2 } END { print n }' "$work/rows-after.txt") rows, the same"
	q -At -d "$1" -f test/upgrade/tenants.sql >"$work/tenants.log" 2>&1 || { cat "$work/tenants.log"; fail "the tenant check could not run"; }
	if grep -q 'TENANT MISMATCH' "$work/tenants.log"; then
		grep 'TENANT MISMATCH' "$work/tenants.log"
		fail "an application role does not read its tenant's rows after the update"
	fi
	say "$(tail -n 1 "$work/tenants.log")"
	q -d "$1" -v other_times=1 -f test/backup/after_restore.sql >"$work/after.log" 2>&1 ||
		{ cat "$work/after.log"; fail "the API does not work on the upgraded rows"; }
	# (After the API's calls, at the real time: the old rows and the new keep the invariants.)
	local problems
	problems=$(q -At -d "$1" -c "SELECT (SELECT pg_catalog.count(*) FROM cscp.check_invariants())
	                                     + (SELECT pg_catalog.count(*) FROM (SELECT DISTINCT e.tenant_id FROM cscp.evidence e) t,
	                                               cscp.evidence_verify(t.tenant_id))")
	[ "$problems" = 0 ] || {
		q -d "$1" -c "SELECT * FROM cscp.check_invariants()"
		fail "$problems invariant or evidence problems after the update"
	}
	say "check_invariants() and evidence_verify() empty; the API works on the rows of $2"
}

upg_regress() {
	local tests
	tests=$(make --no-print-directory -s -f Makefile -f - print-var <<<'print-var: ; @echo $(REGRESS)')
	mkdir -p "$work/regress" && chmod 777 "$work/regress"
	if ! "$2/pgxs/src/test/regress/pg_regress" --inputdir=. --outputdir="$work/regress" \
		--bindir="$PG_BINDIR" --use-existing --dbname="$1" $tests >"$work/regress.log" 2>&1; then
		grep -E 'FAILED|failed' "$work/regress.log" | head -n 20
		head -n 200 "$work/regress/regression.diffs" 2>/dev/null
		fail "the regression suites fail on the upgraded database"
	fi
	say "pg_regress on the upgraded database: $(grep -c '^ok\|^test .* ok\|  ok  ' "$work/regress.log") suites passed"
}
