#!/usr/bin/env bash
# Set up everything QL3 needs on a Debian machine with Python 3.11+ and git.
# As root it installs the system packages the tests use (PostgreSQL server, libfaketime, iproute2,
# iptables, etcd, chromium, pg_cron for the benchmarks) and Patroni in its own venv (/opt/ql3-patroni, built from the system Python so
# the postgres user can run it); as another user it only checks for them. It bootstraps uv with pip when missing and
# installs the workspace (all packages, dev tools) from uv.lock. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v pg_ctl >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need_apt+=(postgresql postgresql-contrib)
ls /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || need_apt+=(faketime libfaketime)
[ -e /usr/share/zoneinfo/America/New_York ] || need_apt+=(tzdata)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v iptables >/dev/null 2>&1 || need_apt+=(iptables)
# The Patroni tests and chaos scenarios: etcd is the DCS; Patroni's venv needs the system venv module.
[ -x /usr/bin/etcd ] || need_apt+=(etcd-server etcd-client)
/usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need_apt+=(python3-venv)
# The pg_cron side-by-side benchmark (`python -m bench pg-cron`): Debian's pg_cron for server 15.
[ -e /usr/lib/postgresql/15/lib/pg_cron.so ] || need_apt+=(postgresql-15-cron)
# The web console's browser tests (nox -s web): Debian's chromium, driven by Playwright.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)

if ((${#need_apt[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${need_apt[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "setup: missing system packages: ${need_apt[*]}; install them (e.g. sudo apt-get install ${need_apt[*]})" >&2
    exit 1
  fi
fi

# Patroni from PyPI, pinned, in a venv of its own: never a dependency of the workspace.
PATRONI_VENV=${QL3_PATRONI_VENV:-/opt/ql3-patroni}
PATRONI_VERSION=4.1.5
if [ "$("$PATRONI_VENV/bin/patroni" --version 2>/dev/null)" != "patroni $PATRONI_VERSION" ]; then
  if [ "$(id -u)" = 0 ] || [ -w "$(dirname "$PATRONI_VENV")" ]; then
    echo "setup: installing Patroni $PATRONI_VERSION into $PATRONI_VENV"
    /usr/bin/python3 -m venv "$PATRONI_VENV"
    "$PATRONI_VENV/bin/pip" install --quiet --disable-pip-version-check \
      "patroni[etcd3]==$PATRONI_VERSION" "psycopg[binary]>=3.2,<4"
    chmod -R a+rX "$PATRONI_VENV"
  else
    echo "setup: Patroni $PATRONI_VERSION missing in $PATRONI_VENV; run scripts/setup.sh as root (or set QL3_PATRONI_VENV to a writable folder)" >&2
    exit 1
  fi
fi

if ! command -v uv >/dev/null 2>&1; then
  echo "setup: installing uv with pip"
  python3 -m pip install --quiet --disable-pip-version-check uv
fi

uv sync --frozen --all-packages --extra web --group dev --group web --quiet
echo "setup: ready"
