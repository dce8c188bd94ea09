"""The validation vocabulary of every request family (a call's, a bench's, a tune's): the request's type, every
field's type, the bounds a field's metadata states, names compared without regard to case; the device and seed
a call resolves to.

A field states its bounds in its metadata, beside its docstring, and `check_fields` checks them all:

    workers: int | None = field(default=None, metadata={"minimum": 1})      # an integer, at least 1
    num_gpus: float = field(default=0.0, metadata={"at_least": 0.0})         # a finite number, 0 or more
    seconds: float | None = field(default=None, metadata={"above": 0.0})     # a finite number, more than 0

They need nothing imported beyond torch (for the device) and raise a one-line `UserError` that says the fix.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
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


def check_count(value: Any, flag: str, *, minimum: int = 1, maximum: int | None = None) -> None:
    """`value` is an integer (not a bool) of at least `minimum` (and at most `maximum`, when given)."""
    named = {0: "0 or a positive integer", 1: "a positive integer"}
    bound = named.get(minimum, f"an integer of at least {minimum}")
    if maximum is not None:
        bound = f"an integer from {minimum} to {maximum}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{flag} {value!r} must be an integer: {bound}.")
    if value < minimum or (maximum is not None and value > maximum):
        raise InvalidArgument(f"{flag} {value!r} must be {bound}.")


def check_real(value: Any, flag: str, *, above: float | None = None, at_least: float | None = None) -> None:
    """`value` is a finite number (not a bool) greater than `above`, or at least `at_least`."""
    number = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    if not number or (above is not None and value <= above) or (at_least is not None and value < at_least):
        if above == 0:
            bound = "a positive number"
        elif at_least == 0:
            bound = "a number, 0 or more"
        else:
            bound = f"a number above {above}" if above is not None else f"a number of at least {at_least}"
        raise InvalidArgument(f"{flag} {value!r} must be {bound}.")


def check_choice(value: Any, flag: str, choices: tuple[str, ...]) -> None:
    """`value` is one of `choices`; else the error names the nearest."""
    if value not in choices:
        nearest = did_you_mean(str(value), choices)
        raise InvalidArgument(f"{flag} {value!r} is not one of {', '.join(choices)}.{nearest}")


def check_fields(request: Any) -> None:
    """Every field of `request` that is not None within the bounds its metadata states (`minimum` with an optional
    `maximum`, `above`, `at_least`), named by its command-line flag."""
    for item in dataclasses.fields(request):
        value, meta = getattr(request, item.name), item.metadata
        if value is None:
            continue
        flag = meta.get("flag", f"--{item.name}")
        if "minimum" in meta:
            check_count(value, flag, minimum=meta["minimum"], maximum=meta.get("maximum"))
        if "above" in meta or "at_least" in meta:
            check_real(value, flag, above=meta.get("above"), at_least=meta.get("at_least"))
        if "choices" in meta:
            check_choice(value, flag, meta["choices"])


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
    if not request.log_root.strip():
        raise InvalidArgument("--log_root '' names no folder; give one, such as --log_root logs (the default).")
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


def pick_threads(requested: int | None, num_envs: int, cores: int | None = None) -> int:
    """torch intra-op threads for a call: `requested`, else one thread per 16,384 environments, at most
    half the cores this process may use, and one on a machine of 2 cores or fewer.

    Small ops (a step of a few thousand environments, a small MLP's update) run fastest on one thread,
    and with more threads than free cores every op waits for a thread that another process holds: on 2
    shared cores, a training at torch's default is several times slower than at one thread
    (`benchmarks/shared_cpu.py`). Large batches on a large machine still get several threads. The
    caller's own setting comes back after the call (the `torch intra-op threads` guard).
    """
    if requested is not None:
        return requested
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores <= 2:
        return 1
    return max(1, min(cores // 2, num_envs // 16_384))
