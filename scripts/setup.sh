#!/usr/bin/env bash
# Set up everything QL3 needs on a Debian machine with Python 3.11+ and git.
# As root it installs the system packages the tests use (PostgreSQL server, libfaketime, iproute2,
# iptables); as another user it only checks for them. It bootstraps uv with pip when missing and
# installs the workspace (all packages, dev tools) from uv.lock. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v pg_ctl >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need_apt+=(postgresql postgresql-contrib)
ls /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || need_apt+=(faketime libfaketime)
[ -e /usr/share/zoneinfo/America/New_York ] || need_apt+=(tzdata)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v iptables >/dev/null 2>&1 || need_apt+=(iptables)

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

if ! command -v uv >/dev/null 2>&1; then
  echo "setup: installing uv with pip"
  python3 -m pip install --quiet --disable-pip-version-check uv
fi

uv sync --frozen --all-packages --group dev --quiet
echo "setup: ready"
