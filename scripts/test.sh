#!/usr/bin/env bash
# Runs the lint checks (ruff, and the layer contracts with import-linter) and the whole test suite
# (benchmarks are not part of it).
#
# The catalog contract also runs against PostgreSQL: ARRAYVIEWS_TEST_POSTGRES_URL names a database,
# or this script starts a local server (scripts/start-postgres.sh). It fails instead of skipping when
# PostgreSQL is asked for (ARRAYVIEWS_TEST_POSTGRES=required) or installed here, and cannot be started;
# ARRAYVIEWS_TEST_POSTGRES=off skips it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
cd "$root"
.venv/bin/ruff check src tests benchmarks
.venv/bin/lint-imports --no-cache
postgres="${ARRAYVIEWS_TEST_POSTGRES:-auto}"
if [ -z "${ARRAYVIEWS_TEST_POSTGRES_URL:-}" ] && [ "$postgres" != "off" ]; then
  status=0
  url="$("$root/scripts/start-postgres.sh")" || status=$?
  if [ "$status" = "0" ] && [ -n "$url" ]; then
    export ARRAYVIEWS_TEST_POSTGRES_URL="$url"
  elif [ "$status" = "1" ] || [ "$postgres" = "required" ]; then
    echo "PostgreSQL was asked for or is installed here, but could not be started (status $status);" \
      "set ARRAYVIEWS_TEST_POSTGRES=off to test without it" >&2
    exit 1
  fi
fi
export ARRAYVIEWS_TEST_POSTGRES="$postgres"
exec .venv/bin/python -m pytest "$@"
