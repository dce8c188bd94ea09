"""Torch's process-global settings: their guards, and the explicit policy a call states inside its scope.

Restore rules, as torch 2.13 behaves:
- TF32: put `set_float32_matmul_precision(saved)` back first, then cuDNN's legacy `allow_tf32`, then
  every backend's `fp32_precision` that still differs; the legacy getters raise in a state that mixes
  legacy and new writes, even where the values agree.
- Setters are called only where the value differs: `use_deterministic_algorithms` imports
  `torch._dynamo` (slowly, with env vars and atexit hooks) on its first call.
- CUDA's RNG is read only when CUDA is already initialised; nothing here initialises it.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from rlrun.hermetic.registry import Guard, module_loaded, object_guard, register

_torch_loaded = module_loaded("torch")


def _torch() -> types.ModuleType:
    return sys.modules["torch"]


def torch_value_guard(name: str, get: Callable[[], Any], set: Callable[[Any], None], *, doc: str) -> Guard:
    """An `object_guard` over a torch setting: category `torch`, skipped until torch is imported."""
    return object_guard(name, get, set, doc=doc, category="torch", available=_torch_loaded)


_resolved: dict[str, Any] = {}


def _resolve(path: str) -> Any:
    """Return `torch.<path>`; the backend modules are singletons, so lookups are cached."""
    target = _resolved.get(path)
    if target is None:
        target = _torch()
        for part in path.split("."):
            target = getattr(target, part)
        if "." not in path or path.startswith("backends."):
            _resolved[path] = target
    return target


# --- TF32 and float32 matmul precision ----------------------------------------------------------------------

_FP32_PRECISION_PATHS = (
    "backends",
    "backends.cuda.matmul",
    "backends.cudnn",
    "backends.cudnn.conv",
    "backends.cudnn.rnn",
    "backends.mkldnn",
    "backends.mkldnn.matmul",
    "backends.mkldnn.conv",
    "backends.mkldnn.rnn",
)


def _matmul_precision() -> str | None:
    try:
        precision: str = _torch().get_float32_matmul_precision()
    except RuntimeError:  # mixed legacy/new TF32 state: the legacy getter refuses to answer
        return None
    return precision


def _legacy_tf32() -> tuple[bool | None, bool | None]:
    """The legacy cuBLAS and cuDNN `allow_tf32` booleans, None where torch refuses to answer."""
    values = []
    binding = _resolve("_C")
    for getter in ("_get_cublas_allow_tf32", "_get_cudnn_allow_tf32"):
        try:
            values.append(getattr(binding, getter)())
        except (AttributeError, RuntimeError):
            values.append(None)
    return values[0], values[1]


def _capture_tf32() -> tuple[str | None, tuple[bool | None, bool | None], dict[str, str]]:
    precisions = {}
    for path in _FP32_PRECISION_PATHS:
        try:
            precisions[path] = _resolve(path).fp32_precision
        except AttributeError:  # torch before the fp32_precision API
            continue
    return _matmul_precision(), _legacy_tf32(), precisions


def _restore_tf32(saved: tuple[str | None, tuple[bool | None, bool | None], dict[str, str]]) -> None:
    if _capture_tf32() == saved:
        return
    matmul_precision, (_, cudnn_allow_tf32), precisions = saved
    if matmul_precision is not None:
        _torch().set_float32_matmul_precision(matmul_precision)
    if cudnn_allow_tf32 is not None:
        # The legacy setter writes cuDNN conv and RNN together; writing them through the new API instead
        # leaves a state in which the legacy getter raises, even with the same values.
        _torch().backends.cudnn.allow_tf32 = cudnn_allow_tf32
    for path, precision in precisions.items():
        backend = _resolve(path)
        if backend.fp32_precision != precision:
            backend.fp32_precision = precision


register(
    Guard(
        "torch TF32 and float32 matmul precision",
        "`torch.get_float32_matmul_precision()`, the legacy `allow_tf32` flags and every backend's "
        "`fp32_precision`; restored precision first, then cuDNN's legacy flag, then each backend.",
        _capture_tf32,
        _restore_tf32,
        category="torch",
        available=_torch_loaded,
    )
)

# --- other torch.backends flags -----------------------------------------------------------------------------

_BACKEND_FLAGS = (
    "backends.cudnn.enabled",
    "backends.cudnn.benchmark",
    "backends.cudnn.deterministic",
    "backends.cudnn.benchmark_limit",
    "backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
)
_SDP_BACKENDS = ("flash", "mem_efficient", "math", "cudnn")
_FLAG_OWNERS = tuple((path, *path.rsplit(".", 1)) for path in _BACKEND_FLAGS)
_SDP_GETTERS = tuple((f"sdp.{backend}", f"{backend}_sdp_enabled") for backend in _SDP_BACKENDS)


def _capture_backend_flags() -> dict[str, Any]:
    flags = {}
    for path, owner, name in _FLAG_OWNERS:
        try:
            flags[path] = getattr(_resolve(owner), name)
        except (AttributeError, RuntimeError):
            continue
    cuda = _resolve("backends.cuda")
    for key, name in _SDP_GETTERS:
        getter = getattr(cuda, name, None)
        if getter is not None:
            flags[key] = getter()
    return flags


def _restore_backend_flags(saved: dict[str, Any]) -> None:
    current = _capture_backend_flags()
    if current == saved:
        return
    cuda = _torch().backends.cuda
    for key, value in saved.items():
        if current.get(key) == value:
            continue
        if key.startswith("sdp."):
            getattr(cuda, f"enable_{key[4:]}_sdp")(value)
        else:
            owner, name = key.rsplit(".", 1)
            setattr(_resolve(owner), name, value)


register(
    Guard(
        "torch.backends flags",
        "cuDNN `enabled`, `benchmark`, `deterministic`, `benchmark_limit`; cuBLAS reduced-precision "
        "reductions; the scaled-dot-product attention backends.",
        _capture_backend_flags,
        _restore_backend_flags,
        category="torch",
        available=_torch_loaded,
    )
)


def _deterministic_algorithms() -> tuple[bool, bool]:
    torch = _torch()
    return torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()


def _set_deterministic_algorithms(saved: tuple[bool, bool]) -> None:
    _torch().use_deterministic_algorithms(saved[0], warn_only=saved[1])


register(
    torch_value_guard(
        "torch deterministic algorithms",
        _deterministic_algorithms,
        _set_deterministic_algorithms,
        doc="`torch.use_deterministic_algorithms` mode and `warn_only`.",
    )
)
register(
    torch_value_guard(
        "torch default dtype",
        lambda: _torch().get_default_dtype(),
        lambda dtype: _torch().set_default_dtype(dtype),
        doc="`torch.get_default_dtype()`.",
    )
)


def _default_device() -> Any:
    """The device set by `torch.set_default_device`, None when unset (and on a torch without it)."""
    context = getattr(getattr(_torch(), "_GLOBAL_DEVICE_CONTEXT", None), "device_context", None)
    return None if context is None else context.device


register(
    torch_value_guard(
        "torch default device",
        _default_device,
        lambda device: _torch().set_default_device(device),
        doc="The device set by `torch.set_default_device` (None when unset).",
    )
)
register(
    torch_value_guard(
        "torch intra-op threads",
        lambda: _torch().get_num_threads(),
        lambda threads: _torch().set_num_threads(threads),
        doc="`torch.get_num_threads()`.",
    )
)
register(
    torch_value_guard(
        "torch grad mode",
        lambda: _torch().is_grad_enabled(),
        lambda enabled: _torch().set_grad_enabled(enabled),
        doc="`torch.is_grad_enabled()` of the calling thread.",
    )
)
register(
    torch_value_guard(
        "torch anomaly mode",
        lambda: (_torch().is_anomaly_enabled(), _torch().is_anomaly_check_nan_enabled()),
        lambda saved: _torch().set_anomaly_enabled(saved[0], saved[1]),
        doc="`torch.is_anomaly_enabled()` and its `check_nan` setting.",
    )
)

_PRINT_OPTIONS = ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")


def _print_options() -> dict[str, Any]:
    options = _torch()._tensor_str.PRINT_OPTS
    return {name: getattr(options, name) for name in _PRINT_OPTIONS}


def _set_print_options(saved: dict[str, Any]) -> None:
    options = _torch()._tensor_str.PRINT_OPTS
    for name, value in saved.items():
        setattr(options, name, value)


register(
    torch_value_guard(
        "torch print options",
        _print_options,
        _set_print_options,
        doc="`torch.set_printoptions` precision, threshold, edgeitems, linewidth and sci_mode.",
    )
)

_DYNAMO_LIMITS = ("recompile_limit", "accumulated_recompile_limit", "cache_size_limit")


_dynamo_limit_names: list[str] = []
"""The limits this torch has, found on first use (a lookup on dynamo's config module is far slower than a list's)."""


def _dynamo_limits() -> dict[str, Any]:
    config = sys.modules["torch._dynamo.config"]
    if not _dynamo_limit_names:
        # `cache_size_limit` is an alias of `recompile_limit` where both exist; read the first one present of each.
        names = [name for name in _DYNAMO_LIMITS[:2] if hasattr(config, name)] or [_DYNAMO_LIMITS[2]]
        _dynamo_limit_names.extend(names)
    return {name: getattr(config, name) for name in _dynamo_limit_names}


def _set_dynamo_limits(saved: dict[str, Any]) -> None:
    config = sys.modules["torch._dynamo.config"]
    for name, value in saved.items():
        if getattr(config, name) != value:
            setattr(config, name, value)


register(
    object_guard(
        "torch._dynamo limits",
        _dynamo_limits,
        _set_dynamo_limits,
        doc="`torch._dynamo.config` cache and recompile limits (rl_games raises them at import).",
        category="torch",
        available=module_loaded("torch._dynamo.config"),
    )
)

# --- torch random number generators -------------------------------------------------------------------------


def _capture_torch_rng() -> tuple[Any, Any]:
    torch = _torch()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def _restore_torch_rng(saved: tuple[Any, Any]) -> None:
    torch = _torch()
    cpu, cuda = saved
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def _torch_rng_fingerprint(saved: tuple[Any, Any]) -> Any:
    cpu, cuda = saved
    return hash(cpu.numpy().tobytes()), None if cuda is None else tuple(hash(s.numpy().tobytes()) for s in cuda)


register(
    Guard(
        "torch RNG",
        "The CPU generator's state, and every CUDA generator's where CUDA is already initialised.",
        _capture_torch_rng,
        _restore_torch_rng,
        fingerprint=_torch_rng_fingerprint,
        category="rng",
        available=_torch_loaded,
    )
)


# --- policy: what a call sets inside its scope --------------------------------------------------------------


def torch_backend_flags(
    *, matmul_allow_tf32: bool, cudnn_allow_tf32: bool, deterministic: bool, benchmark: bool
) -> None:
    """Set the four backend flags a library adapter wants for its call, each only where it differs.

    Call it inside a hermetic scope: the scope's guards put the caller's values back. Matmul TF32 goes
    through the legacy CUDA-only setter while the CPU (oneDNN) matmul precision is untouched; once
    something set it (`set_float32_matmul_precision`), the legacy setter alone would leave a mixed state
    in which torch's getters raise, so the precision is set as a whole instead (`high` / `highest`).
    """
    _set_matmul_tf32(matmul_allow_tf32)
    cudnn = _torch().backends.cudnn
    for name, value in (("allow_tf32", cudnn_allow_tf32), ("deterministic", deterministic), ("benchmark", benchmark)):
        try:
            current = getattr(cudnn, name)
        except RuntimeError:  # mixed legacy/new TF32 state left by the caller: set it outright
            current = None
        if current != value:
            setattr(cudnn, name, value)


def _set_matmul_tf32(allow: bool) -> None:
    torch = _torch()
    precision = _matmul_precision()
    try:
        cpu_precision = torch.backends.mkldnn.matmul.fp32_precision
    except AttributeError:  # torch before the fp32_precision API
        cpu_precision = "none"
    if cpu_precision == "none" and precision is not None:
        if torch.backends.cuda.matmul.allow_tf32 != allow:
            torch.backends.cuda.matmul.allow_tf32 = allow
    elif precision != ("high" if allow else "highest"):
        torch.set_float32_matmul_precision("high" if allow else "highest")


@contextmanager
def fresh_torch_state() -> Iterator[None]:
    """Give the call the thread-local torch state of a fresh process, whatever the caller set.

    Grad mode on, inference mode off, anomaly detection off, float32 default dtype, no default
    device, deterministic algorithms off. The scope's guards restore the caller's values after.
    """
    torch = _torch()
    with ExitStack() as stack:
        if torch.is_inference_mode_enabled():
            stack.enter_context(torch.inference_mode(False))
        if not torch.is_grad_enabled():
            torch.set_grad_enabled(True)
        if torch.is_anomaly_enabled():
            torch.set_anomaly_enabled(False)
        if torch.get_default_dtype() is not torch.float32:
            torch.set_default_dtype(torch.float32)
        if _default_device() is not None:
            torch.set_default_device(None)
        if torch.are_deterministic_algorithms_enabled():
            torch.use_deterministic_algorithms(False)
        yield
