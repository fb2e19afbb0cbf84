#!/usr/bin/env bash
# Run every test session of QL3 (lint, audit, each wheel and the test kit against real PostgreSQL,
# chaos, mutants).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec uv run --frozen nox "$@"
