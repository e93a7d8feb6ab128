#!/usr/bin/env bash
# Backup and restore, a step of `make test` (run-tests.sh calls it with its cluster running, PGHOST
# etc. set): a database using cscp, holding every kind of row (test/backup/populate.sql), is
# dumped with pg_dump and restored into a fresh database with pg_restore; every table of cscp must
# hold the same rows (count and digest, test/backup/tables.sql), the evidence must verify, no
# invariant may be broken, and cscp's API must work on the restored data
# (test/backup/after_restore.sql).
#
# The restore runs with session_replication_role = replica, as README's "Backup and restore" says:
# cscp's triggers would otherwise treat restored rows as new writes (and refuse or re-record them).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${PGHOST:?run from run-tests.sh, with its cluster}"

PG_BINDIR=${PG_BINDIR:-$(${PG_CONFIG:-pg_config} --bindir)}
work=$(mktemp -d "${TMPDIR:-/tmp}/cscp-backup.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 777 "$work"
q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS cscp_backup_src" -c "DROP DATABASE IF EXISTS cscp_backup_dst" \
	-c "CREATE DATABASE cscp_backup_src" -c "CREATE DATABASE cscp_backup_dst"
q -d cscp_backup_src -c "CREATE EXTENSION cscp"
q -d cscp_backup_src -f test/backup/populate.sql >/dev/null

# (pg_dump warns that cscp.fact references itself; a full dump restores it whole.)
"$PG_BINDIR/pg_dump" -Fc -d cscp_backup_src -f "$work/cscp.dump" 2> >(grep -v '^pg_dump: \(warning: there are circular\|detail: fact$\|hint: \)' >&2)
PGOPTIONS='-c session_replication_role=replica' \
	"$PG_BINDIR/pg_restore" --exit-on-error -d cscp_backup_dst "$work/cscp.dump"

q -d cscp_backup_src -f test/backup/tables.sql >"$work/src.txt"
q -d cscp_backup_dst -f test/backup/tables.sql >"$work/dst.txt"
if ! diff -u "$work/src.txt" "$work/dst.txt"; then
	echo "backup-restore: the restored tables differ from the dumped ones" >&2
	exit 1
fi
tables=$(wc -l <"$work/src.txt")
rows=$(awk -F'|' '{ n += $2 } END { print n }' "$work/src.txt")
empty=$(awk -F'|' '$2 == 0 { printf "%s ", $1 }' "$work/src.txt")
if [ -n "$empty" ]; then
	echo "backup-restore: populate.sql left tables empty: $empty" >&2
	exit 1
fi
q -d cscp_backup_dst -f test/backup/after_restore.sql
q -d postgres -c "DROP DATABASE cscp_backup_src" -c "DROP DATABASE cscp_backup_dst"
echo "backup-restore: $tables table digests, $rows rows, restored identically; evidence, invariants and the API fine after restore"
