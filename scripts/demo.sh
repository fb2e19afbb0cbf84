#!/usr/bin/env bash
# Set up QL3 and run the demo on an embedded PostgreSQL (Coordinator replicas, one killed; a worker).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec uv run --frozen ql3 demo "$@"
