"""Checks of a request's own values, before its task or library is looked at: the request's type, every
field's type, numbers in range, names compared without regard to case; the device and seed it resolves to.

They need nothing imported beyond torch (for the device) and raise a one-line `UserError` that says the fix.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import secrets
import types
from typing import Any, TypeVar

from rlrun.api.requests import VECTORIZATION_MODES, TaskRequest
from rlrun.errors import InvalidArgument, MissingDependency, did_you_mean

RequestT = TypeVar("RequestT", bound=TaskRequest)

MAX_NUM_ENVS = 1 << 20
MAX_SEED = 2**32 - 1

CASE_FREE_FIELDS = ("library", "algorithm", "ml_framework", "format", "vectorization", "device")
"""Fields whose values are names, compared without regard to case everywhere (`PPO`, `JAX`, `ONNX`)."""


def normalised(request: RequestT) -> RequestT:
    """The request with every case-free name lower-cased."""
    changes = {
        name: getattr(request, name).lower()
        for name in CASE_FREE_FIELDS
        if isinstance(getattr(request, name, None), str) and getattr(request, name) != getattr(request, name).lower()
    }
    return dataclasses.replace(request, **changes) if changes else request


def check_request_type(request: Any, expected: type, call: str) -> None:
    if not isinstance(request, expected):
        raise InvalidArgument(
            f"rlrun.{call} takes a {expected.__name__}, not {type(request).__name__}; "
            f"build the request with rlrun.{expected.__name__}(task=...)."
        )


def check_int(value: Any, name: str, *, minimum: int, maximum: int | None = None, flag: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{flag} must be an integer, not {value!r}.")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
        raise InvalidArgument(f"{flag} {value} is out of range: {name} must be {bound}.")


def _check_field_types(request: Any) -> None:
    """Every field of a request holds a value of its declared type (the API has no argparse to convert)."""
    import typing

    hints = typing.get_type_hints(type(request))
    for item in dataclasses.fields(request):
        value, kind = getattr(request, item.name), hints[item.name]
        allowed = typing.get_args(kind) if typing.get_origin(kind) in (typing.Union, types.UnionType) else (kind,)
        plain = tuple(typing.get_origin(option) or option for option in allowed)
        if tuple in plain:
            plain = (*plain, list)  # a list of words is as good as a tuple (and what JSON gives)
        if bool not in plain and isinstance(value, bool) and int in plain:
            ok = False
        else:
            ok = any(option is type(None) and value is None for option in allowed) or isinstance(
                value, tuple(option for option in plain if option is not type(None))
            )
        if ok and isinstance(value, tuple | list):
            ok = all(isinstance(word, str) for word in value)
        if not ok:
            names = " or ".join(getattr(option, "__name__", str(option)) for option in plain)
            names = names.replace("NoneType", "None")
            raise InvalidArgument(
                f"{type(request).__name__}.{item.name} must be {names}, not {value!r}; "
                f"pass {item.name}= a value of that type."
            )


def check_common(request: TaskRequest) -> None:
    _check_field_types(request)
    if not isinstance(request.task, str) or not request.task:
        raise InvalidArgument(f"--task must name a task, not {request.task!r} (see `rlrun list`).")
    check_int(request.num_envs, "the number of environments", minimum=1, maximum=MAX_NUM_ENVS, flag="--num_envs")
    check_int(request.threads, "the number of threads", minimum=1, maximum=1024, flag="--threads")
    if request.seed != -1:
        check_int(request.seed, "the seed", minimum=0, maximum=MAX_SEED, flag="--seed")
    if request.vectorization not in VECTORIZATION_MODES:
        raise InvalidArgument(
            f"--vectorization {request.vectorization!r} is not one of {', '.join(VECTORIZATION_MODES)}."
            f"{did_you_mean(str(request.vectorization), VECTORIZATION_MODES)}"
        )
    if request.video:
        check_int(request.video_length, "the video length", minimum=1, flag="--video_length")
        if not has("moviepy"):
            raise MissingDependency(
                "recording videos needs moviepy, which is not installed: pip install 'rlrun[video]'"
            )
    if isinstance(request.overrides, str):
        raise InvalidArgument("overrides must be a sequence of 'agent.key=value' strings, not one string.")


def resolve_device(device: str | None) -> str:
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise InvalidArgument(f"--device {device!r} is not a device: use cpu, cuda or cuda:N.")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise InvalidArgument(f"--device {device!r} requested but CUDA is not available here; pass --device cpu.")
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise InvalidArgument(f"--device {device!r}: only {torch.cuda.device_count()} CUDA device(s) are visible.")
    return device


def has(module: str) -> bool:
    """Whether `module` can be imported (found without importing it)."""
    return importlib.util.find_spec(module) is not None


def jax_has_cuda() -> bool:
    """Whether a CUDA build of jaxlib is installed (found without importing or initialising JAX)."""
    return any(has(name) for name in ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_cuda12_pjrt"))


def resolve_seed(seed: int | None, default: Any) -> int:
    if seed is None:
        seed = default if isinstance(default, int) else 42
    if seed == -1:
        seed = secrets.randbelow(MAX_SEED)  # OS entropy: the caller's RNGs are not consumed
    return seed
