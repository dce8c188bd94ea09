#!/usr/bin/env bash
# Every GPU figure in one call, for the day a device is lent: set up (CPU wheel replaced by the CUDA one
# only if torch cannot see a GPU), then benchmarks/gpu.py under a 5-minute limit.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
[ -x "$python" ] || { bash scripts/setup.sh; python=.venv/bin/python; }
"$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || {
    echo "torch sees no CUDA device here: install a CUDA build of torch 2.13 in the venv first" >&2; exit 1; }
timeout 300 "$python" benchmarks/gpu.py
