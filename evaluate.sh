#!/usr/bin/env bash
# Run an evaluation: bash evaluate.sh [config.yaml] [extra `evalkit run` arguments]
set -euo pipefail
config="${1:-config.yaml}"
[ "$#" -gt 0 ] && shift
if command -v evalkit >/dev/null 2>&1; then
  exec evalkit run --config "$config" "$@"
fi
exec "${PYTHON:-python3}" -m evalkit run --config "$config" "$@"
