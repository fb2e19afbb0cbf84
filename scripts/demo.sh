#!/usr/bin/env bash
# Set up QL3 and run the demo on an embedded PostgreSQL (several Coordinator replicas, one killed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec uv run --frozen ql3 demo "$@"
