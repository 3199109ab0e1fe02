#!/usr/bin/env bash
# Starts a local PostgreSQL server for the catalog contract tests when the machine has one (Debian's
# postgresql packages) and this runs as root; prints the SQLAlchemy URL of a test database, or nothing.
set -u
command -v pg_lsclusters >/dev/null 2>&1 || exit 0
[ "$(id -u)" = "0" ] || exit 0
version=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -n 1)
[ -n "$version" ] || exit 0
if ! pg_lsclusters -h 2>/dev/null | awk '{print $1, $2}' | grep -q "^$version main$"; then
  timeout 60 pg_createcluster "$version" main >/dev/null 2>&1 || exit 0
fi
timeout 60 pg_ctlcluster "$version" main start >/dev/null 2>&1 || true
pg_lsclusters -h 2>/dev/null | grep -q "^$version *main .*online" || exit 0
port=$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $3}')
run_sql() { timeout 30 su postgres -c "psql -p $port -tAc \"$1\"" 2>/dev/null; }
[ "$(run_sql "SELECT 1 FROM pg_roles WHERE rolname='arrayviews'")" = "1" ] || \
  run_sql "CREATE ROLE arrayviews LOGIN PASSWORD 'arrayviews'" >/dev/null || exit 0
[ "$(run_sql "SELECT 1 FROM pg_database WHERE datname='arrayviews_test'")" = "1" ] || \
  run_sql "CREATE DATABASE arrayviews_test OWNER arrayviews" >/dev/null || exit 0
echo "postgresql+psycopg2://arrayviews:arrayviews@localhost:$port/arrayviews_test"
