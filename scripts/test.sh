#!/usr/bin/env bash
# Runs the lint check and the whole test suite (benchmarks are not part of it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
cd "$root"
.venv/bin/ruff check src tests benchmarks
# The catalog contract also runs against PostgreSQL when this machine can start one.
if [ -z "${ARRAYVIEWS_TEST_POSTGRES_URL:-}" ]; then
  url="$("$root/scripts/start-postgres.sh" || true)"
  [ -n "$url" ] && export ARRAYVIEWS_TEST_POSTGRES_URL="$url"
fi
exec .venv/bin/python -m pytest "$@"
