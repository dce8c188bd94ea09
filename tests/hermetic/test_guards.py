"""Every restorable guard in the registry puts back what a call changed, value and identity.

`MUTATIONS` holds one realistic change per guard; a test fails if a restorable guard has none, so a
guard cannot be added without showing that it restores.
"""

from __future__ import annotations

import atexit
import gc
import io
import logging
import multiprocessing
import os
import random
import signal
import sys
import threading
import warnings

import gymnasium
import numpy as np
import pytest
import torch
import torch._dynamo

from rlrun.hermetic import GUARDS, census, hermetic_call


def _set_printoptions():
    torch.set_printoptions(precision=2, sci_mode=True)


def _logging():
    logging.getLogger().setLevel(logging.DEBUG)
    logging.getLogger().addHandler(logging.NullHandler())
    logging.getLogger("rlrun_test.new_logger").addHandler(logging.NullHandler())
    logging.getLogger("gymnasium").propagate = False
    logging.disable(logging.INFO)


def _warnings():
    warnings.simplefilter("ignore")
    warnings.filters = []
    warnings.showwarning = lambda *args, **kwargs: None


def _environ():
    os.environ["RLRUN_TEST_ADDED"] = "1"
    os.environ["HOME"] = "/changed"
    del os.environ["PATH"]


def _streams(name):
    return lambda: setattr(sys, name, io.StringIO())


def _tf32():
    torch.set_float32_matmul_precision("high")
    torch.backends.cuda.matmul.allow_tf32 = False  # the mixed legacy/new state of reference C.5
    torch.backends.cudnn.allow_tf32 = False


def _backend_flags():
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.enable_flash_sdp(not torch.backends.cuda.flash_sdp_enabled())


def _gymnasium():
    gymnasium.register("rlrun_test/Added-v0", entry_point="gymnasium.envs.classic_control:PendulumEnv")
    del gymnasium.registry["CartPole-v0"]
    gymnasium.logger.min_level = 50


MUTATIONS = {
    "sys.argv": lambda: (sys.argv.append("--x"), setattr(sys, "argv", ["rebound"])),
    "sys.path": lambda: (sys.path.insert(0, "/x"), setattr(sys, "path", ["/rebound"])),
    "sys.meta_path": lambda: sys.meta_path.pop(),
    "sys.path_hooks": lambda: sys.path_hooks.append(lambda path: None),
    "os.environ": _environ,
    "cwd": lambda: os.chdir("/"),
    "sys.stdin": _streams("stdin"),
    "sys.stdout": _streams("stdout"),
    "sys.stderr": _streams("stderr"),
    "sys.excepthook": lambda: setattr(sys, "excepthook", lambda *args: None),
    "sys.displayhook": lambda: setattr(sys, "displayhook", lambda value: None),
    "sys.unraisablehook": lambda: setattr(sys, "unraisablehook", lambda value: None),
    "threading.excepthook": lambda: setattr(threading, "excepthook", lambda args: None),
    "sys.recursionlimit": lambda: sys.setrecursionlimit(sys.getrecursionlimit() + 1),
    "sys.switchinterval": lambda: sys.setswitchinterval(0.001),
    "warnings": _warnings,
    "logging": _logging,
    "signal handlers": lambda: (signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, print)),
    "atexit callbacks": lambda: atexit.register(print, "registered during the call"),
    "multiprocessing start method": lambda: multiprocessing.set_start_method("spawn", force=True),
    "garbage collector": lambda: (gc.disable(), gc.set_threshold(5, 5, 5)),
    "random": lambda: random.seed(1),
    "numpy.random": lambda: np.random.seed(1),
    "numpy error and print options": lambda: (np.seterr(all="raise"), np.set_printoptions(precision=3)),
    "gymnasium registry": _gymnasium,
    "torch TF32 and float32 matmul precision": _tf32,
    "torch.backends flags": _backend_flags,
    "torch deterministic algorithms": lambda: torch.use_deterministic_algorithms(True, warn_only=True),
    "torch default dtype": lambda: torch.set_default_dtype(torch.float64),
    "torch default device": lambda: torch.set_default_device("cpu"),
    "torch intra-op threads": lambda: torch.set_num_threads(1 if torch.get_num_threads() > 1 else 2),
    "torch grad mode": lambda: torch.set_grad_enabled(False),
    "torch anomaly mode": lambda: torch.set_anomaly_enabled(True, check_nan=False),
    "torch print options": _set_printoptions,
    "torch._dynamo limits": lambda: setattr(torch._dynamo.config, "recompile_limit", 64),
    "torch RNG": lambda: torch.manual_seed(1),
}


def test_every_restorable_guard_has_a_mutation_here():
    restorable = {guard.name for guard in GUARDS if guard.restored and guard.owner == "rlrun"}
    assert restorable - set(MUTATIONS) == set()


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_guard_restores_value_and_identity(name):
    (guard,) = [guard for guard in GUARDS if guard.name == name]
    before = census.snapshot()
    with hermetic_call(check_leaks=True) as call, call.guarded():
        MUTATIONS[name]()
        if name != "atexit callbacks":  # a registration through the recorder is not visible as a change
            assert guard.snapshot() != before[name], "the mutation did not change what the guard covers"
    assert census.compare(before, census.snapshot()) == []


def test_the_tf32_getters_work_after_restoring_a_mixed_legacy_and_new_state():
    with hermetic_call() as call, call.guarded():
        _tf32()
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is True


def test_deterministic_algorithms_setter_is_not_called_when_nothing_changed(monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda *args, **kwargs: calls.append(args))
    with hermetic_call() as call, call.guarded():
        pass
    assert calls == []


def test_cuda_is_never_initialised_to_observe_its_rng():
    with hermetic_call(check_leaks=True) as call, call.guarded():
        torch.manual_seed(3)
    assert not torch.cuda.is_initialized()


def test_atexit_callbacks_registered_during_a_call_run_at_its_end_and_are_unregistered():
    ran = []
    with hermetic_call(check_leaks=True) as call, call.guarded():
        atexit.register(ran.append, "exit hook")
    assert ran == ["exit hook"]
    assert atexit.unregister(ran.append) is None  # nothing left to unregister: idempotent either way
