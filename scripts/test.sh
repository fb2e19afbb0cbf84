#!/usr/bin/env bash
# Run every test session of QL3 (lint, audit, each wheel against real PostgreSQL, chaos).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec uv run --frozen nox "$@"
