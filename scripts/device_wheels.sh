#!/usr/bin/env bash
# The wheels benchmarks/gpu.sh needs on a lent GPU machine, into .whl/ (ignored by git): what rlrun and RSL-RL
# need beyond that machine's image (a Python with a CUDA torch, NumPy, PyYAML, rich, TensorBoard, ONNX; nothing
# can be fetched there). Run it here, where pip reaches PyPI; then carry .whl/ with the working tree (about 2 MB).
#
#     bash scripts/device_wheels.sh            # DEVICE_PYTHON=3.12 by default: the lent machine's Python
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
version=${DEVICE_PYTHON:-3.12}
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
    platforms+=(--platform "$tag")
done
rm -rf .whl && mkdir .whl
# rlrun's own requirements missing there, RSL-RL with its own, and tensordict of the torch 2.11 line the image has
# (its compiled part does not link torch).
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version "$version" --implementation cp \
    "${platforms[@]}" -d .whl \
    gymnasium==1.4.0 farama-notifications==0.0.6 omegaconf==2.3.0 \
    rsl-rl-lib==5.5.1 tensordict==0.12.4 pyvers==0.2.3 orjson==3.13.0 importlib-metadata==10.2.0 \
    gitpython==3.2.1 gitdb==4.0.12 smmap==5.0.3
"$python" -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3  # an sdist only: built here, pure Python
ls .whl
