#!/usr/bin/env bash
# Install what cscp's build, demo and tests need from Debian's packages, when it is missing.
# Idempotent: does nothing (and needs no root) when everything is already there.
set -euo pipefail

PGVERSION=${PGVERSION:-15}
packages=(
	make gcc libc6-dev
	"postgresql-$PGVERSION"               # server: initdb, pg_ctl, postgres, contrib modules
	"postgresql-server-dev-$PGVERSION"    # PGXS, headers, pg_regress, pg_isolation_regress
	libpq-dev procps                      # crash and fuzz drivers (C, libpq); ps for the crash test
	"postgresql-$PGVERSION-pgtap"         # pgTAP
	"postgresql-$PGVERSION-plproxy"       # PL/Proxy: the scale-out suite's proxy
	libtap-parser-sourcehandler-pgtap-perl  # pg_prove
	libmicrohttpd-dev                     # the HTTPS gateway (gateway/; GnuTLS comes with it)
	openssl curl python3-requests         # the gateway's tests: a self-signed certificate, the specification's examples
	wrk                                   # make bench-http
	valgrind bzip2                        # make valgrind (and PostgreSQL's suppressions, unpacked)
	python3-psycopg python3-pytest        # clients/python and its tests (suite clients-python)
	${CSCP_EXTRA_PACKAGES:-}
)
# npm installs the tests' JSON validators (ajv, @redocly/cli) under test/node; Debian's npm
# brings Node.js with it, unless a Node.js with its own npm is there already.
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
	[ -n "$p" ] || continue
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

echo "cscp: installing ${#missing[@]} missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO=sudo
	else
		echo "cscp: run as root, or install them yourself: apt-get install ${missing[*]}" >&2
		exit 1
	fi
else
	SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
# One line per slow step, with its time: the first run on a fresh machine takes minutes.
t0=$SECONDS
elapsed() { echo "$((SECONDS - t0)) s"; }
apt_log=$(mktemp "${TMPDIR:-/tmp}/cscp-apt.XXXXXX")
trap 'rm -f "$apt_log"' EXIT
apt() {
	$SUDO apt-get "$@" >"$apt_log" 2>&1 || {
		tail -n 25 "$apt_log" >&2
		echo "cscp: apt-get $1 failed (Debian's archive must be reachable)" >&2
		exit 1
	}
}
echo "cscp: apt-get update (Debian's package lists) ..."
apt update -qq
total=$($SUDO apt-get install -s --no-install-recommends "${missing[@]}" 2>/dev/null | grep -c '^Inst ' || true)
echo "cscp: package lists read ($(elapsed)); $total packages to install, dependencies included"
echo "cscp: downloading $total packages from Debian's archive ..."
apt install -y -qq --no-install-recommends --download-only "${missing[@]}"
echo "cscp: downloaded ($(elapsed)); unpacking and configuring them ..."
apt install -y -qq --no-install-recommends "${missing[@]}"
echo "cscp: $total packages installed in $(elapsed)"
