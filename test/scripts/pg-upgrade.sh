#!/usr/bin/env bash
# `make test-pg-upgrade`: a PostgreSQL 15 cluster holding cscp and data, upgraded with pg_upgrade to
# 17 and to 18, in the Debian roots `make test PG=…` builds (test/scripts/pgversion.sh); then the
# checks of the upgrade suite (test/upgrade/lib.sh): the schema equals a fresh install's on the new
# server, every row is there and readable by its tenant, no invariant or evidence problem, the API
# works on the old rows, and the pg_regress suites pass on the upgraded database.
#   test/scripts/pg-upgrade.sh [VERSION...]      (default: 17 18; needs root)
#
# pg_upgrade needs the old server's binaries beside the new ones.  Debian 13 and later carry no
# PostgreSQL 15, so this machine's (Debian 12's) is copied into each root, under /opt/cscp-pg15
# (test/scripts/pgtree.sh), with this build of cscp installed into it; the shared libraries it
# links that the root lacks (ICU 72, LDAP, ...; never the C library) are copied beside it, in
# /opt/cscp-pg15/lib, which the root's ld.so.conf names.  The rest runs in the root:
# test/scripts/pg-upgrade-root.sh, through `make pg-upgrade-in-root`.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] || { echo "pg-upgrade: needs root (the Debian roots: chroot, mount)" >&2; exit 1; }
versions=${*:-17 18}
rootdir=${CSCP_PGROOT_DIR:-$PWD/.pgroot}
old=/opt/cscp-pg15
status=0
for v in $versions; do
	root=$rootdir/pg$v
	echo "pg-upgrade: PostgreSQL 15 -> $v, in $root"
	# The root, built on first use.
	bash test/scripts/pgversion.sh "$v" deps
	# PostgreSQL 15 and this build of cscp for it, in the root.
	pgconfig=$(bash test/scripts/pgtree.sh "$root$old")
	rm -f "$("$pgconfig" --sharedir)"/extension/cscp[-.]* "$("$pgconfig" --sharedir)"/extension/cscp_proxy[-.]*
	make -s --no-print-directory all >/dev/null
	make -s --no-print-directory PG_CONFIG="$pgconfig" install >/dev/null
	# The libraries it needs that the root does not have.
	rm -f "$root/etc/ld.so.conf.d/cscp-pg15.conf"
	rm -rf "$root$old/lib"
	mkdir -p "$root$old/lib"
	chroot "$root" /sbin/ldconfig
	have=$(chroot "$root" /sbin/ldconfig -p)
	find "$root$old/usr/lib/postgresql/15" -type f \( -name '*.so' -o -perm -u+x \) ! -name 'llvmjit*' -print0 |
		{ xargs -0 ldd 2>/dev/null || true; } | sed -n 's/^[[:space:]]*\([^[:space:]]*\) => \(\/[^[:space:]]*\) .*/\1 \2/p' | sort -u |
		while read -r soname path; do
			case $soname in libc.so.* | libm.so.* | ld-linux* | libpthread.so.* | libdl.so.* | librt.so.*) continue ;; esac
			if ! grep -q "^[[:space:]]*$soname " <<<"$have"; then
				cp -L "$path" "$root$old/lib/$soname"
			fi
		done
	echo "$old/lib" >"$root/etc/ld.so.conf.d/cscp-pg15.conf"
	chroot "$root" /sbin/ldconfig
	echo "pg-upgrade: PostgreSQL 15 in the root ($old), with $(ls "$root$old/lib" | wc -l) libraries of its own"
	mkdir -p log
	if bash test/scripts/pgversion.sh "$v" pg-upgrade-in-root >"log/pg-upgrade-$v.log" 2>&1; then
		grep '^pg_upgrade ' "log/pg-upgrade-$v.log"
		echo "pg-upgrade: PostgreSQL 15 -> $v: ok"
	else
		tail -n 60 "log/pg-upgrade-$v.log"
		echo "pg-upgrade: PostgreSQL 15 -> $v: FAILED (log/pg-upgrade-$v.log; $root/build/cscp/log/pg-upgrade/)"
		status=1
	fi
done
exit $status
