#!/usr/bin/env bash
# A private copy of this machine's PostgreSQL installation, into which `make install` can put a
# build of cscp without touching the system's: the upgrade test installs release 0.1.0 and then
# this build there, and parallel work trees each test against a copy of their own.
#   test/scripts/pgtree.sh DIR      copies PostgreSQL $PGVERSION (default 15) under DIR, once,
#                                   and prints the PG_CONFIG to use with it
# PostgreSQL finds its share and library folders relative to its binaries, so the copy is a
# complete installation: PG_CONFIG=$(test/scripts/pgtree.sh DIR) make install installcheck.
set -euo pipefail
PGVERSION=${PGVERSION:-15}
dir=${1:?usage: pgtree.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ ! -x "$dir/usr/lib/postgresql/$PGVERSION/bin/pg_config" ]; then
	mkdir -p "$dir/usr/lib/postgresql" "$dir/usr/share/postgresql" "$dir/usr/include"
	cp -a "/usr/lib/postgresql/$PGVERSION" "$dir/usr/lib/postgresql/"
	cp -a "/usr/share/postgresql/$PGVERSION" "$dir/usr/share/postgresql/"
	cp -a /usr/include/postgresql "$dir/usr/include/"
	# Readable by the unprivileged owner of the test clusters (test/scripts/cluster.sh).
	chmod -R a+rX "$dir"
fi
echo "$dir/usr/lib/postgresql/$PGVERSION/bin/pg_config"
