#!/usr/bin/env bash
# Runs the lint check and the whole test suite (benchmarks are not part of it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
cd "$root"
.venv/bin/ruff check src tests benchmarks
exec .venv/bin/python -m pytest "$@"
