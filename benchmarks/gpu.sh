#!/usr/bin/env bash
# Every GPU figure in one call (benchmarks/gpu.py under a 5-minute limit), for the day a device is lent.
#
# The Python: $PYTHON, else the first of .venv/bin/python and python3 whose torch sees a CUDA device (a lent
# machine's python3 holds a CUDA torch, and nothing can be fetched there). rlrun runs from src/. Requirements
# that Python lacks come from wheels in .whl/, made beforehand on a machine with network by
# `bash scripts/device_wheels.sh` and carried along; they are installed into a temporary folder, never into
# that Python. Arguments go to gpu.py.
set -euo pipefail
cd "$(dirname "$0")/.."
sees_cuda() { "$1" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; }
python=${PYTHON:-}
if [ -z "$python" ]; then
    for candidate in .venv/bin/python python3; do
        if command -v "$candidate" >/dev/null && sees_cuda "$candidate"; then python=$candidate; break; fi
    done
fi
[ -n "$python" ] || { echo "gpu.sh: no Python here whose torch sees a CUDA device (set PYTHON=...)" >&2; exit 1; }
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
if compgen -G ".whl/*.whl" >/dev/null; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl
fi
export PYTHONPATH="$site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
"$python" -c "import rlrun.api, gymnasium, omegaconf, rsl_rl" || {
    echo "gpu.sh: rlrun's requirements are missing here: run 'bash scripts/device_wheels.sh' where pip reaches" \
        "PyPI and bring .whl/ along" >&2; exit 1; }
echo "gpu.sh: $("$python" -c 'import sys; print(sys.executable)')"
timeout 300 "$python" benchmarks/gpu.py "$@"
