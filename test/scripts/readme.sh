#!/usr/bin/env bash
# README's examples, a suite of `make test` (run-tests.sh's cluster, PGHOST etc. set): the fenced
# ```sql and ```sh blocks of README.md are extracted, so that they cannot drift from cscp.
#   sql  every block, in README's order, in one fresh database (the first block creates the
#        extension), as a superuser with psql.  A statement followed by a comment
#        "-- ERROR:  message" must fail with that message; any other error fails the suite.
#   sh   every block must parse (bash -n), and every `make TARGET` it names must be a target of
#        the Makefile.  Then the blocks run, in README's order, each with `bash -e -o pipefail`,
#        as the reader would run them on "a fresh Debian 12 machine, as root", but against a
#        throwaway PostgreSQL: a private copy of the installation (pgtree.sh) with a cluster of
#        its own ("15 main" to the blocks: unix socket in the work folder, TCP on localhost at a
#        free port, both named by PGHOST and PGPORT).  Three commands are redirected there, by
#        shell functions the blocks see in place of the real ones: `make` (run in this tree with
#        PG_CONFIG naming the copy, so `make install` never touches the system's PostgreSQL),
#        `pg_ctlcluster` (the throwaway cluster's pg_ctl) and, unless run as root with an OS user
#        postgres, `runuser -u postgres --` (the command itself).  The blocks run in a scratch
#        folder (their certificates and dumps land there; gateway/ links to this tree's), and a
#        process a block starts in the background is stopped when it ends.  A full-line comment
#        "# {...}" in a block is the JSON the command before it prints: the block's output must
#        contain it (a trailing "(...)" is left out).
# A block preceded by the line "<!-- readme-test: skip REASON -->" is left out; one preceded by
# "<!-- readme-test: parse-only REASON -->" is checked but not run (README shows neither line).
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
                ext = m.group(1)
                if ext == 'sh' and prev.startswith('<!-- readme-test: parse-only'):
                    ext = 'shp'
                open('%s/%03d-%s-%d.%s' % (work, n, tag, start + 1, ext), 'w').write('\n'.join(body) + '\n')
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
	*.sh | *.shp)
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

# The shell blocks, run against a throwaway PostgreSQL of their own.
nrun=0
if ls "$work"/*.sh >/dev/null 2>&1; then
	pg_config=$(make --no-print-directory -s -f Makefile -f - print-var <<<'print-var: ; @echo $(PG_CONFIG)')
	major=$("$pg_config" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')
	tree=$(dirname "$(PGVERSION=$major bash test/scripts/pgtree.sh "$work/pg")")
	sh_dir=$work/run
	mkdir -p "$sh_dir/sock"
	ln -s "$PWD/gateway" "$sh_dir/gateway"
	owner=()
	if [ "$(id -u)" -eq 0 ]; then
		chown -R nobody "$sh_dir" && chmod 755 "$work" "$sh_dir"
		owner=(runuser -u nobody --)
	fi
	"${owner[@]}" "$tree/initdb" -D "$sh_dir/data" -U postgres --auth=trust --encoding=UTF8 \
		--locale=C.UTF-8 --no-sync >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log"; exit 1; }
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	stop_sh_cluster() {
		"${owner[@]}" "$tree/pg_ctl" -D "$sh_dir/data" -m immediate -w stop >/dev/null 2>&1 || true
		rm -rf "$work"
	}
	trap stop_sh_cluster EXIT
	# What every block sees first: its PostgreSQL, and the three redirected commands.
	real_runuser=0
	[ "$(id -u)" -ne 0 ] || ! id postgres >/dev/null 2>&1 || real_runuser=1
	cat >"$work/prelude" <<-EOF
		export PGHOST='$sh_dir/sock' PGPORT=$port PGUSER=postgres PGDATABASE=postgres
		make() { command make --no-print-directory -C '$PWD' PG_CONFIG='$tree/pg_config' "\$@"; }
		pg_ctlcluster() {
			case \$3 in
			start) ${owner[*]} '$tree/pg_ctl' -D '$sh_dir/data' -l '$sh_dir/postgres.log' -w -o \\
				"-c listen_addresses=localhost -c port=$port -c unix_socket_directories='$sh_dir/sock' -c fsync=off" start ;;
			*) ${owner[*]} '$tree/pg_ctl' -D '$sh_dir/data' "\$3" ;;
			esac
		}
		if [ $real_runuser -eq 0 ]; then
			runuser() { while [ "\$1" != -- ]; do shift; done; shift; "\$@"; }
		fi
		trap 'kill \$(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT
	EOF
	for f in "$work"/*.sh; do
		where=$(basename "$f" | sed 's/^[0-9]*-\(.*\)-\([0-9]*\)\..*/\1:\2/; s/~/\//g')
		nrun=$((nrun + 1))
		cat "$work/prelude" "$f" >"$work/block"
		if ! (cd "$sh_dir" && timeout 600 bash -e -o pipefail "$work/block" </dev/null) >"$work/out" 2>&1; then
			echo "readme: the shell block at $where fails; it printed:"
			tail -n 30 "$work/out" | sed 's/^/    /'
			failed=$((failed + 1))
			continue
		fi
		while IFS= read -r want; do
			want=$(sed 's/^# *//; s/[[:space:]]*([^)]*)[[:space:]]*$//' <<<"$want")
			grep -qF -- "$want" "$work/out" || {
				echo "readme: the shell block at $where does not print $want; it printed:"
				tail -n 30 "$work/out" | sed 's/^/    /'
				failed=$((failed + 1))
			}
		done < <(grep '^# *{.*}' "$f" || true)
	done
fi
echo "readme: $nsql SQL blocks run, $nsh shell blocks checked, $nrun run, $failed failed"
[ "$failed" -eq 0 ]
