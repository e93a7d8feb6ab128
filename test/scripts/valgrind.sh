#!/usr/bin/env bash
# `make valgrind`: the regression suite (sql/, expected/) with the server under valgrind's memcheck,
# using PostgreSQL's own suppressions (src/tools/valgrind.supp of the server's source package,
# fetched once with `apt-get source` into log/valgrind-supp/, or named by VALGRIND_SUPP).
# Fails when a test's output differs or when memcheck reports an error with a frame in cscp.so;
# errors with no frame in cscp are counted and left in the logs.  Output in log/valgrind/.
#
# Debian's server is built without USE_VALGRIND, so memcheck does not see palloc's chunks inside
# a memory context's blocks: it finds reads of memory never written (conditional jumps, system
# call arguments, values returned) and accesses outside malloc'd blocks, not an overrun of one
# palloc'd chunk into the next.
#   VALGRIND_TESTS="setup slots documents"   a subset of the regression tests (CI's short form)
set -uo pipefail
cd "$(dirname "$0")/../.."
source test/scripts/steps.sh
MAKE=${MAKE:-make}
VLOG=log/valgrind
SUPP_DIR=log/valgrind-supp

# PostgreSQL's suppressions for the installed server's version, from Debian's source package.
fetch_supp() {
	if [ -n "${VALGRIND_SUPP:-}" ]; then
		cp "$VALGRIND_SUPP" "$SUPP_DIR/valgrind.supp"
		return
	fi
	[ -s "$SUPP_DIR/valgrind.supp" ] && { echo "cached: $SUPP_DIR/valgrind.supp"; return 0; }
	local a=$PWD/$SUPP_DIR/apt pkg="postgresql-${PGVERSION:-15}"
	mkdir -p "$a/sources.list.d" "$a/lists/partial" "$a/cache/archives/partial" "$a/src"
	# Debian's own package sources, as deb-src, in a private apt state (the system's is untouched):
	# deb822 (Debian 12's images) or one-line (debootstrap's, as in make valgrind PG=18).
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$a/sources.list.d/src.sources"
	else
		sed -n 's/^deb[[:space:]]/deb-src /p' /etc/apt/sources.list >"$a/sources.list.d/src.list"
	fi
	local opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$a/sources.list.d"
		-o "Dir::State::Lists=$a/lists" -o "Dir::Cache=$a/cache" -o "APT::Sandbox::User=root")
	apt-get "${opts[@]}" update || return 1
	# The newest version whose source a mirror serves (a security update's may be missing).
	local v got=
	for v in $(apt-cache "${opts[@]}" showsrc "$pkg" | sed -n 's/^Version: //p' | sort -rV); do
		(cd "$a/src" && apt-get "${opts[@]}" source --download-only "$pkg=$v") && got=$v && break
	done
	[ -n "$got" ] || return 1
	tar -xf "$a"/src/*.orig.tar.* -C "$a/src" --wildcards '*/src/tools/valgrind.supp' &&
		cp "$a"/src/*/src/tools/valgrind.supp "$SUPP_DIR/valgrind.supp" &&
		rm -rf "$a" &&
		echo "fetched: $SUPP_DIR/valgrind.supp from Debian's source of $pkg $got (PostgreSQL License)"
}

# The cluster's postmaster, and so every backend it forks, under memcheck (cluster.sh's
# cluster_restart, once cluster.sh is sourced).
vg_cluster_restart() {
	mkdir -p "$CSCP_TMP/vg"
	chmod 777 "$CSCP_TMP/vg"
	cp "$SUPP_DIR/valgrind.supp" "$CSCP_TMP/vg/valgrind.supp"
	chmod 644 "$CSCP_TMP/vg/valgrind.supp"
	cluster_as_owner bash -c "exec valgrind --quiet --trace-children=yes --num-callers=30 --fullpath-after= \
		--leak-check=no --error-markers=VALGRINDERROR-BEGIN,VALGRINDERROR-END \
		--suppressions=$CSCP_TMP/vg/valgrind.supp --log-file=$CSCP_TMP/vg/%p.log \
		$PG_BINDIR/postgres -D $CSCP_TMP/data $CSCP_PGOPTS" >"$CSCP_TMP/postgres.log" 2>&1 &
	local i
	for i in $(seq 1 240); do
		"$PG_BINDIR/pg_isready" -q -h "$CSCP_TMP/sock" -p 5432 && return 0
		sleep 0.5
	done
	cat "$CSCP_TMP/postgres.log" >&2
	return 1
}

regress() {
	local tests=${VALGRIND_TESTS:-}
	$MAKE -k --no-print-directory installcheck ISOLATION= ${tests:+REGRESS="$tests"} && return 0
	cp regression.diffs "$VLOG/pg_regress.failures" 2>/dev/null && echo "$VLOG/pg_regress.failures" >"$VLOG/pg_regress.detail"
	return 1
}

# Every error memcheck reported, and those with a frame in cscp.so (a function of src/), which
# fail the run.
memcheck() {
	cluster_stop_keep
	local f all=0 ours=0
	for f in "$VLOG"/vg/*.log; do
		[ -s "$f" ] || continue
		all=$((all + $(grep -c VALGRINDERROR-BEGIN "$f")))
		awk -v src="$PWD/src/" '/VALGRINDERROR-BEGIN/ {b = ""; on = 1} on {b = b $0 "\n"}
			/VALGRINDERROR-END/ {on = 0; if (b ~ /cscp\.so/ || index(b, src)) printf "%s", b}' "$f" >>"$VLOG/cscp-errors.txt"
	done
	ours=$(grep -c VALGRINDERROR-BEGIN "$VLOG/cscp-errors.txt" 2>/dev/null || true)
	echo "memcheck: ${all} errors reported, ${ours:-0} of them with a frame in cscp.so (logs in $VLOG/vg/)"
	if [ "${ours:-0}" -gt 0 ]; then
		echo "$VLOG/cscp-errors.txt" >"$VLOG/memcheck.detail"
		return 1
	fi
}

# Stop the server (fast) and keep valgrind's logs.
cluster_stop_keep() {
	cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CSCP_TMP/data" -m fast -w -t 120 stop >/dev/null 2>&1 || true
	rm -rf "$VLOG/vg"
	cp -r "$CSCP_TMP/vg" "$VLOG/vg"
	cp "$CSCP_TMP/postgres.log" "$VLOG/postgres.log"
	: >"$VLOG/cscp-errors.txt"
}

steps_init "$VLOG"
mkdir -p "$SUPP_DIR"
echo "cscp valgrind: the regression suite with the server under memcheck; output in $VLOG/"
step build $MAKE --no-print-directory build || { steps_report steps; exit 1; }
source test/scripts/cluster.sh # (after deps, which may have installed the server)
cluster_restart() { vg_cluster_restart; }
step suppressions fetch_supp || { steps_report steps; exit 1; }
step start-server-under-valgrind cluster_start || { steps_report steps; exit 1; }
step pg_regress regress
step memcheck memcheck
cluster_stop
steps_report steps
