#!/usr/bin/env bash
# The README's quick start, exactly as written, in brand-new venvs of the oldest and the newest
# Python evalkit supports that this machine has (pyenv's versions and python3.X on PATH), with
# nothing installed or upgraded first: what a new user meets. The two commands are read from
# README.md's quick-start block, so the docs and this check cannot drift apart.
#
# Run: bash .ci/readme_quickstart.sh            (both ends of the range)
#      bash .ci/readme_quickstart.sh 3.10       (one version)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

oldest="$(sed -n 's/^requires-python = ">=\([0-9.]*\)"$/\1/p' pyproject.toml)"
mapfile -t commands < <(sed -n '/^## Quick start/,/^```$/p' README.md | grep -E '^pip install ')
if [ "${#commands[@]}" -ne 2 ]; then
  echo "README.md's quick start should hold two 'pip install' commands, found ${#commands[@]}" >&2
  exit 1
fi

# every interpreter on this machine: "X.Y path", one per minor version
interpreters() {
  local candidates=()
  if command -v pyenv >/dev/null 2>&1; then
    candidates+=("$(pyenv root)"/versions/*/bin/python3)
  fi
  candidates+=("${PYENV_ROOT:-${HOME:-/root}/.pyenv}"/versions/*/bin/python3)  # pyenv's folder, pyenv not on PATH
  candidates+=("$(command -v python3 2>/dev/null || true)")
  for minor in $(seq 8 20); do
    path="$(command -v "python3.$minor" 2>/dev/null || true)"
    [ -n "$path" ] && candidates+=("$path")
  done
  for python in "${candidates[@]}"; do
    [ -x "$python" ] || continue
    version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" || continue
    echo "$version $python"
  done | sort -t. -k1,1n -k2,2n -u -k1,1 | awk '!seen[$1]++'
}

supported="$(interpreters | awk -v oldest="$oldest" '{ split($1, v, "."); split(oldest, o, "."); if (v[1] > o[1] || (v[1] == o[1] && v[2] >= o[2])) print }')"
if [ "$#" -gt 0 ]; then
  chosen="$(echo "$supported" | awk -v want="$1" '$1 == want')"
else
  chosen="$( (echo "$supported" | head -1; echo "$supported" | tail -1) | awk '!seen[$1]++')"
fi
if [ -z "$chosen" ]; then
  echo "no Python >= $oldest found for the quick-start check" >&2
  exit 1
fi

while read -r version python; do
  venv="$(mktemp -d)/venv"
  echo "== README quick start on Python $version ($python), a brand-new venv at $venv"
  "$python" -m venv "$venv"
  (
    # shellcheck disable=SC1091
    source "$venv/bin/activate"
    unset PYTHONPATH
    cd "$root"
    for command in "${commands[@]}"; do
      echo "\$ $command"
      bash -c "$command"
    done
  )
  rm -rf "$(dirname "$venv")"
done <<< "$chosen"
