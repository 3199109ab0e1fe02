#!/usr/bin/env bash
# Runs the main job (`arrayviews demo`) on the embedded default: Spark local mode, SQLite catalog in ./warehouse.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
cd "$root"
exec .venv/bin/arrayviews demo "$@"
