#!/usr/bin/env bash
# Prepares a fresh clone: Java 17+, a virtual environment in .venv, and the package with its pinned dependencies.
# Sourced by scripts/demo.sh and scripts/test.sh; safe to run again (it only installs what is missing).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    echo "arrayviews: installing Java 17 (openjdk-17-jre-headless) with apt-get" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    echo "arrayviews needs Java 17 or newer for Apache Spark, and cannot install it here." >&2
    echo "Install a Java 17 runtime (for example: sudo apt-get install openjdk-17-jre-headless," >&2
    echo "or brew install openjdk@17) and make sure 'java' is on your PATH, then run this again." >&2
    exit 1
  fi
fi

python_bin="${PYTHON:-python3.11}"
command -v "$python_bin" >/dev/null 2>&1 || python_bin=python3
if ! "$python_bin" -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 11) else 1)'; then
  echo "arrayviews needs Python 3.11 or newer; found $("$python_bin" --version 2>&1). Set PYTHON=/path/to/python3.11." >&2
  exit 1
fi

stamp=".venv/.arrayviews-installed"
if [ ! -x .venv/bin/python ]; then
  "$python_bin" -m venv .venv
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  echo "arrayviews: installing the package and its pinned dependencies into .venv (first run takes a few minutes)" >&2
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -c constraints.txt -e ".[test,demo,bench]"
  touch "$stamp"
fi
# The package's own modules compiled to bytecode (checked against their sources, so this is quick
# once done): where PYTHONDONTWRITEBYTECODE is set, every new Python process (a CLI run, a test's
# subprocess) would otherwise compile every module again (0.3-1 s each; 21% of the CLI tests' time).
PYTHONDONTWRITEBYTECODE= .venv/bin/python -m compileall -q -j 0 src >/dev/null
