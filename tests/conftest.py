"""Suite-wide set-up: the leak detector is on for every rlrun call, and the meddling test task exists.

With `RLRUN_CHECK_LEAKS=1`, any difference the detector finds after a call raises `LeakDetected`
(or is attached to the call's own exception, which the tests check), so every test fails on a leak.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal

import pytest

os.environ["RLRUN_CHECK_LEAKS"] = "1"
# onnxruntime's telemetry threads open and close an eventfd and sockets every few seconds once it is
# imported; the leak detector's fd census would see them come and go in unrelated tests.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
# Compiled env steps (rlrun.envs.kernels) are built once into this checkout's own cache, not the user's:
# a clean clone builds each kernel once (a slow C++ compile), a second run of the suite reuses it.
os.environ.setdefault("RLRUN_CACHE_DIR", os.path.join(os.path.dirname(os.path.dirname(__file__)), ".cache", "rlrun"))

import support

support.register()


@pytest.fixture
def log_root(tmp_path):
    """A fresh directory for run directories."""
    root = tmp_path / "logs"
    return root


HANDLED = (signal.SIGINT, signal.SIGTERM)


@pytest.fixture(autouse=True)
def signal_handlers_come_back():
    """Every test leaves SIGINT's and SIGTERM's handlers as it found them. The Ctrl-C tests rely on Python's
    default SIGINT handler at their start (`rlrun.signals.InterruptLatch` installs only over it): a handler left by
    one test would make every later one fail far from its cause, so the test that left it fails instead."""
    before = {number: signal.getsignal(number) for number in HANDLED}
    yield
    after = {number: signal.getsignal(number) for number in HANDLED}
    for number in HANDLED:
        signal.signal(number, before[number])
    changed = {signal.Signals(number).name: after[number] for number in HANDLED if after[number] != before[number]}
    assert not changed, f"the test left signal handlers behind: {changed}"


def pytest_collection_modifyitems(config, items):
    """Skip the cases of a library path this installation lacks (`support.REQUIRES`: a test parametrized by
    `skrl_jax` without JAX); run the slow tests (learning, subprocesses) last, so quick failures show first."""
    for item in items:
        parameters = getattr(getattr(item, "callspec", None), "params", {})
        missing = next(filter(None, map(support.missing_module, parameters.values())), None)
        if missing is not None:
            item.add_marker(pytest.mark.skip(reason=f"{missing} is not installed"))
    items.sort(key=lambda item: item.get_closest_marker("slow") is not None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that needs an optional library this installation lacks is skipped, not failed: an
    `rlrun.errors.MissingDependency` (rlrun's own refusal) or a `ModuleNotFoundError`, and only when the module
    it names is one of the declared optional libraries (`optional_modules`) and indeed not importable here, so
    that a wrong refusal of an installed library, or a typo'd import (of `rlrun.anything`, of any module no
    extra installs), still fails."""
    report = yield
    missing = _missing_module(call.excinfo.value) if call.excinfo is not None and report.failed else None
    if missing is not None:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {missing} is not installed")
    return report


OPTIONAL_MODULES = frozenset(
    {
        "jaxlib", "flax", "optax", "msgpack", "tqdm",  # the jax and skrl extras, beside the libraries' own
        "tensordict",  # torchrl
        "mujoco",  # mujoco
        "onnx", "onnxscript", "onnxruntime",  # export
        "moviepy", "imageio_ffmpeg", "pygame",  # video
        "rliable", "matplotlib", "scipy", "pandas", "seaborn", "arch",  # bench
        "ray", "fsspec",  # ray
        "rl_zoo3",  # zoo
        "optuna", "optuna_dashboard",  # tune
        "envpool", "sklearn",  # looked for when present, never required
    }
)  # fmt: skip
"""The top-level modules of pyproject's extras that `optional_modules` does not read from rlrun's own tables."""


def optional_modules() -> frozenset[str]:
    """The top-level modules an installation may lack and still be whole: every library row's import name
    (`rlrun.libraries.LIBRARIES`, rlrun's own rows), every framework an extra installs (`FRAMEWORKS`), and
    the rest of pyproject's extras (`OPTIONAL_MODULES`). Anything else missing (`rlrun`, torch, a typo) is a bug."""
    from rlrun.libraries.table import FRAMEWORKS, LIBRARIES

    libraries = {row.import_name for row in dict.values(LIBRARIES)}  # without reading plugin entry points
    frameworks = {module for module, extra in FRAMEWORKS.values() if extra is not None}
    return frozenset(libraries | frameworks | OPTIONAL_MODULES)


def _missing_module(error: BaseException) -> str | None:
    """The declared optional module that `error` says is missing and that is indeed not importable, or None."""
    from rlrun.errors import MissingDependency

    if isinstance(error, MissingDependency):
        names = re.findall(r"(?:no module|needs) '([\w.]+)'", str(error))
    elif isinstance(error, ModuleNotFoundError) and error.name:
        names = [error.name]
    else:
        return None
    optional = optional_modules()
    return next(
        (
            name
            for name in names
            if name.split(".")[0] in optional and importlib.util.find_spec(name.split(".")[0]) is None
        ),
        None,
    )
