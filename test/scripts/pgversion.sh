#!/usr/bin/env bash
# `make GOAL PG=17` / `PG=18`: run make's goals against another PostgreSQL major version, in a
# Debian root that carries it (debootstrap; built on first use, reused after).
#
#   test/scripts/pgversion.sh VERSION [GOAL...]
#
#   17  Debian 13 (trixie)      18  the next Debian (forky)      15 is this machine's own (Debian 12)
#
# The root lives in .pgroot/pgVERSION (CSCP_PGROOT_DIR moves it); CSCP_PG_SUITE picks another
# Debian suite (sid, say) and CSCP_DEBIAN_MIRROR another mirror (default: the one this machine's
# apt uses).  The first run installs deps.sh's packages for VERSION in the root (the server,
# headers, pgTAP, PL/Proxy and the rest; log in .pgroot/pgVERSION.packages.log).  Each run copies
# the working tree (tracked and untracked files, not ignored ones) to /build/cscp inside the root,
# mounts /proc and /dev/shm there, runs `make GOAL PGVERSION=VERSION` as root with a clean
# environment, and unmounts on the way out; the goals' logs stay in the copy
# (.pgroot/pgVERSION/build/cscp/log/).  Needs root.  `rm -rf .pgroot/pgVERSION` (while no run is
# going on) makes the next run build the root afresh.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

version=${1:?usage: pgversion.sh VERSION [GOAL...]}
shift
case "$version" in
17) suite=${CSCP_PG_SUITE:-trixie} ;;
18) suite=${CSCP_PG_SUITE:-forky} ;;
*)
	[ -n "${CSCP_PG_SUITE:-}" ] || {
		echo "cscp: PostgreSQL $version: no Debian suite known; set CSCP_PG_SUITE" >&2
		exit 1
	}
	suite=$CSCP_PG_SUITE
	;;
esac
[ "$(id -u)" -eq 0 ] || { echo "cscp: PG=$version needs root (debootstrap, chroot, mount)" >&2; exit 1; }

rootdir=${CSCP_PGROOT_DIR:-$repo/.pgroot}
root=$rootdir/pg$version
mkdir -p "$rootdir"
in_root=(chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive CI="${CI:-}"
	NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt)
# The targets' own knobs (make test PG=18 TEST_ONLY=pgtap, BENCH_ONLY=W1, ...) go in too.
for v in $(compgen -e); do
	case $v in
	TEST_* | BENCH_* | CRASH_* | FUZZ_* | STRESS_* | CHECK_ASSERT_* | VALGRIND_* | STATEBENCH*)
		in_root+=("$v=${!v}") ;;
	esac
done

# One run per root at a time.
exec 9>"$rootdir/pg$version.lock"
flock 9

# The mirror this machine's apt uses for Debian itself, if one is configured.
host_mirror() {
	{
		sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | tr ' ' '\n'
		sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' \
			/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
	} | grep -m1 '/debian/\?$' || true
}

# The working tree, as it is now, over the previous copy (unchanged files keep their
# timestamps, so make rebuilds only what changed).
copy_tree() {
	mkdir -p "$root/build/cscp"
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files -co --exclude-standard -z | grep -zv '^\.pgroot/' | tar --null -T - -cf -
	else
		tar --exclude=./.pgroot -cf - .
	fi | tar -xf - -C "$root/build/cscp"
	# The copy has no git history: the upgrade suite's release comes as an archive.
	bash test/scripts/upgrade.sh --archive "$root/build/cscp" 2>/dev/null || true
}

# The root reaches the network as this machine does: it trusts the certificate authorities
# this machine added to Debian's (npm fetches the tests' JSON validator over TLS).
copy_local_cas() {
	local ca=/usr/local/share/ca-certificates
	[ -d "$ca" ] && [ -n "$(ls -A "$ca")" ] || return 0
	if ! diff -rq "$ca" "$root$ca" >/dev/null 2>&1; then
		mkdir -p "$root$ca"
		cp -a "$ca/." "$root$ca/"
		"${in_root[@]}" sh -c 'command -v update-ca-certificates >/dev/null || exit 0; update-ca-certificates >/dev/null 2>&1'
	fi
}

mounted=()
cleanup() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" || true
	done
	mounted=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP    # through the EXIT trap: nothing stays mounted

mount_in_root() {
	local type=$1 target=$root$2
	mountpoint -q "$target" && return 0
	mount -t "$type" "$type" "$target"
	mounted+=("$target")
}

if [ ! -e "$root/.cscp-root" ]; then
	started=$SECONDS
	echo "cscp: setting up Debian $suite with PostgreSQL $version in $root (once)"
	if ! command -v debootstrap >/dev/null 2>&1; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 || {
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
		}
	fi
	script=/usr/share/debootstrap/scripts/$suite
	[ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid    # a suite newer than debootstrap
	mirror=${CSCP_DEBIAN_MIRROR:-$(host_mirror)}
	# A root left half-built, with nothing mounted in it any more, is built again.
	awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r | xargs -r -n1 umount -l
	rm -rf "$root"
	debootstrap --variant=minbase "$suite" "$root" $mirror "$script" >"$rootdir/pg$version.debootstrap.log" 2>&1 || {
		tail -n 20 "$rootdir/pg$version.debootstrap.log" >&2
		exit 1
	}
	# No service starts inside the root, and installing the server creates no cluster: the
	# tests make their own.
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 755 "$root/usr/sbin/policy-rc.d"
	mkdir -p "$root/etc/postgresql-common"
	echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.conf"
	# No /dev/pts in the root; and a testing suite's Release file expires within days, which a
	# mirror that serves a fixed snapshot of it must not turn into a failed install.
	printf 'Dpkg::Use-Pty "0";\nAcquire::Check-Valid-Until "false";\n' >"$root/etc/apt/apt.conf.d/90cscp"
	mount_in_root proc /proc
	cp -L /etc/resolv.conf "$root/etc/resolv.conf"
	mkdir -p "$root/usr/local/share/ca-certificates"
	cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
	# PostgreSQL, its headers, pgTAP and the rest of the tests' packages (the list is deps.sh's).
	copy_tree
	"${in_root[@]}" PGVERSION="$version" bash /build/cscp/test/scripts/deps.sh \
		>"$rootdir/pg$version.packages.log" 2>&1 || {
		tail -n 20 "$rootdir/pg$version.packages.log" >&2
		exit 1
	}
	echo "$suite $version" >"$root/.cscp-root"
	echo "cscp: root ready in $((SECONDS - started)) s"
fi

mount_in_root proc /proc
mount_in_root tmpfs /dev/shm
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
copy_local_cas
copy_tree

echo "cscp: PostgreSQL $version (Debian $suite root): make ${*:-all}"
"${in_root[@]}" make --no-print-directory -C /build/cscp PGVERSION="$version" "$@"
