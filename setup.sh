#!/usr/bin/env bash
# Creates .venv (Python 3.11) and installs the pinned stack. Idempotent; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3.11}"
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "setup.sh: $PY not found. TensorFlow Federated 0.87 needs Python 3.9-3.11; set PYTHON=/path/to/python3.11" >&2
  exit 2
fi
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
  echo "setup.sh: $PY is not Python 3.11 (TFF 0.87 supports at most 3.11)" >&2
  exit 2
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check uv==0.13.8
.venv/bin/uv pip install --quiet --python .venv/bin/python --override jax-override.txt -r requirements.txt
