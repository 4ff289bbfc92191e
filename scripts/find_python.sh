#!/usr/bin/env bash
# Prints the path of a working Python >= 3.12 interpreter, or explains what to install and fails.
# Order: $PYTHON from the user, a working `python3.12` on PATH, then pyenv's 3.12.x installs.
set -u
works() { "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 12) else 1)' >/dev/null 2>&1; }

if [[ -n "${PYTHON:-}" ]]; then
  if works "$PYTHON"; then command -v "$PYTHON" || echo "$PYTHON"; exit 0; fi
  echo "PYTHON=$PYTHON is not a working Python >= 3.12" >&2; exit 1
fi
if command -v python3.12 >/dev/null 2>&1 && works python3.12; then
  command -v python3.12; exit 0
fi
roots=()
command -v pyenv >/dev/null 2>&1 && roots+=("$(pyenv root 2>/dev/null)")
roots+=("${PYENV_ROOT:-}" "$HOME/.pyenv")
for root in "${roots[@]}"; do
  [[ -n "$root" && -d "$root/versions" ]] || continue
  for candidate in $(ls -d "$root"/versions/3.12* 2>/dev/null | sort -rV); do
    if works "$candidate/bin/python3.12"; then echo "$candidate/bin/python3.12"; exit 0; fi
  done
done
echo "No Python 3.12 found. Install it (e.g. 'pyenv install 3.12' or your OS package python3.12)" \
     "or run 'make PYTHON=/path/to/python3.12 ...'." >&2
exit 1
