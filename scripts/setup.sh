#!/usr/bin/env bash
# Creates .venv with everything rlrun and its test suite need; safe to run again (it only fills gaps).
# torch comes first and alone: `torch==2.13.0` takes the CPU wheel on this machine's disk, and with
# it installed no later requirement can pull another (multi-GB CUDA) build.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
extras=${RLRUN_EXTRAS:-all,dev}
quiet=(-q --disable-pip-version-check)
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
    .venv/bin/pip install "${quiet[@]}" -U pip
fi
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    .venv/bin/pip install "${quiet[@]}" torch==2.13.0
fi
.venv/bin/pip install "${quiet[@]}" -e ".[${extras}]" 2> >(grep -v "^WARNING: Location" >&2)
.venv/bin/python - <<'PY'
import importlib.metadata as m
assert m.version("torch").startswith("2.13.0"), f"unexpected torch {m.version('torch')}: a requirement pulled another build"
PY
