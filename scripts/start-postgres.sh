#!/usr/bin/env bash
# Starts a local PostgreSQL server for the catalog contract tests (Debian's postgresql packages, run as
# root) and prints the SQLAlchemy URL of a test database. Exit status: 0 with the URL printed when the
# server runs; 2 when this machine has no PostgreSQL to start (not installed, or not root); 1 when it
# has one but it could not be started or prepared (a broken install: scripts/test.sh fails on it).
set -u
command -v pg_lsclusters >/dev/null 2>&1 || exit 2
[ "$(id -u)" = "0" ] || exit 2
version=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -n 1)
[ -n "$version" ] || exit 2
fail() { echo "start-postgres: $1" >&2; exit 1; }
if ! pg_lsclusters -h 2>/dev/null | awk '{print $1, $2}' | grep -q "^$version main$"; then
  timeout 60 pg_createcluster "$version" main >/dev/null 2>&1 || fail "pg_createcluster $version main failed"
fi
timeout 60 pg_ctlcluster "$version" main start >/dev/null 2>&1 || true
pg_lsclusters -h 2>/dev/null | grep -q "^$version *main .*online" || fail "cluster $version main is not online"
port=$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $3}')
run_sql() { timeout 30 su postgres -c "psql -p $port -tAc \"$1\"" 2>/dev/null; }
[ "$(run_sql "SELECT 1 FROM pg_roles WHERE rolname='arrayviews'")" = "1" ] || \
  run_sql "CREATE ROLE arrayviews LOGIN PASSWORD 'arrayviews'" >/dev/null || fail "cannot create role arrayviews"
[ "$(run_sql "SELECT 1 FROM pg_database WHERE datname='arrayviews_test'")" = "1" ] || \
  run_sql "CREATE DATABASE arrayviews_test OWNER arrayviews" >/dev/null || fail "cannot create database arrayviews_test"
echo "postgresql+psycopg2://arrayviews:arrayviews@localhost:$port/arrayviews_test"
