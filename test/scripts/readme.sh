#!/usr/bin/env bash
# README's examples, a suite of `make test` (run-tests.sh's cluster, PGHOST etc. set): the fenced
# ```sql and ```sh blocks of README.md are extracted, so that they cannot drift from cscp.
#   sql  every block, in README's order, in one fresh database (the first block creates the
#        extension), as a superuser with psql.  A statement followed by a comment
#        "-- ERROR:  message" must fail with that message; any other error fails the suite.
#   sh   every block must parse (bash -n), and every `make TARGET` it names must be a target of
#        the Makefile.  Running them needs a machine of their own (apt, Debian's cluster as the
#        postgres OS user, a gateway on a port): they are checked, not run.
# A block preceded by the line "<!-- readme-test: skip -->" (and a reason) is left out.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${PGHOST:?run from run-tests.sh, with its cluster}"

work=$(mktemp -d "${TMPDIR:-/tmp}/cscp-readme.XXXXXX")
trap 'rm -rf "$work"' EXIT
db=cscp_readme

# Each block into $work/NNN-FILE-LINE.LANG, LINE its fence's line in FILE (README.md, then
# doc/reference.md, which README's reference section points to).
python3 - "$work" README.md doc/reference.md <<'PY'
import re, sys
work, n = sys.argv[1], 0
for path in sys.argv[2:]:
    tag = path.replace('/', '~')
    lines = open(path, encoding='utf-8').read().split('\n')
    i, prev = 0, ''
    while i < len(lines):
        m = re.match(r'^```(\w+)\s*$', lines[i])
        if m and m.group(1) in ('sql', 'sh'):
            start, i = i, i + 1
            body = []
            while not lines[i].startswith('```'):
                body.append(lines[i])
                i += 1
            if not prev.startswith('<!-- readme-test: skip'):
                n += 1
                open('%s/%03d-%s-%d.%s' % (work, n, tag, start + 1, m.group(1)), 'w').write('\n'.join(body) + '\n')
        elif lines[i].startswith('```'):
            i += 1
            while not lines[i].startswith('```'):
                i += 1
        if lines[i].strip():
            prev = lines[i]
        i += 1
PY

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
roles_before=$(psql -X -At -d postgres -c "SELECT rolname FROM pg_catalog.pg_roles ORDER BY 1")
targets=$(make -qp -f Makefile 2>/dev/null | sed -n 's/^\([a-zA-Z][a-zA-Z0-9_.-]*\):.*/\1/p' | sort -u)
failed=0 nsql=0 nsh=0
for f in "$work"/*; do
	[ -f "$f" ] || continue
	where=$(basename "$f" | sed 's/^[0-9]*-\(.*\)-\([0-9]*\)\..*/\1:\2/; s/~/\//g')
	case "$f" in
	*.sql)
		nsql=$((nsql + 1))
		want=$(grep -c '^-- ERROR:' "$f" || true)
		out=$(psql -X -q -v ON_ERROR_STOP=$((want == 0)) -d $db -f "$f" 2>&1 >/dev/null) || true
		got=$(grep -c 'ERROR:' <<<"$out" || true)
		bad=
		if [ "$got" -ne "$want" ]; then
			bad="$got errors, the block shows $want"
		else
			while IFS= read -r e; do
				msg=$(sed 's/^-- ERROR: *//; s/ *([0-9A-Z]\{5\}) *$//' <<<"$e")
				grep -qF -- "$msg" <<<"$out" || bad="no error \"$msg\""
			done < <(grep '^-- ERROR:' "$f" || true)
		fi
		if [ -n "$bad" ]; then
			echo "readme: the SQL block at $where: $bad; psql said:"
			sed 's/^/    /' <<<"$out"
			failed=$((failed + 1))
		fi
		;;
	*.sh)
		nsh=$((nsh + 1))
		if ! bash -n "$f" 2>"$work/err"; then
			echo "readme: the shell block at $where does not parse: $(cat "$work/err")"
			failed=$((failed + 1))
		fi
		for t in $(sed 's/#.*//' "$f" | grep -o '\bmake\( [a-z][a-z0-9-]*\)\+' | sed 's/^make //' | tr ' ' '\n' | sort -u); do
			if ! grep -qx -- "$t" <<<"$targets"; then
				echo "readme: the shell block at $where runs make $t, which the Makefile has no target for"
				failed=$((failed + 1))
			fi
		done
		;;
	esac
done
psql -X -q -d postgres -c "DROP DATABASE $db"
# The roles the examples created belong to the cluster: dropped too, so that the suite can run again.
for r in $(comm -13 <(echo "$roles_before") <(psql -X -At -d postgres -c "SELECT rolname FROM pg_catalog.pg_roles ORDER BY 1")); do
	psql -X -q -d postgres -c "DROP ROLE \"$r\""
done
echo "readme: $nsql SQL blocks run, $nsh shell blocks checked, $failed failed"
[ "$failed" -eq 0 ]
