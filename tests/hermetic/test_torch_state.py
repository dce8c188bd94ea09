"""The torch policy a call states inside its scope, and the fresh-process torch state it runs with."""

from __future__ import annotations

import pytest
import torch

from rlrun.hermetic import fresh_torch_state, hermetic_call, torch_backend_flags
from support import MUTATIONS


@pytest.mark.parametrize("caller_precision", [None, "high", "medium"])
@pytest.mark.parametrize("allow", [False, True])
def test_tf32_policy_leaves_a_state_torch_can_read_whatever_the_caller_set(caller_precision, allow):
    with hermetic_call() as call, call.guarded():
        if caller_precision is not None:  # what a library like rl_games does before the adapter states its policy
            torch.set_float32_matmul_precision(caller_precision)
        torch_backend_flags(matmul_allow_tf32=allow, cudnn_allow_tf32=allow, deterministic=True, benchmark=False)
        assert torch.get_float32_matmul_precision() == ("high" if allow else "highest")
        assert torch.backends.cuda.matmul.allow_tf32 is allow and torch.backends.cudnn.allow_tf32 is allow
        assert torch.backends.cudnn.deterministic is True and torch.backends.cudnn.benchmark is False
    assert torch.get_float32_matmul_precision() == "highest"


def test_tf32_policy_does_not_touch_the_cpu_matmul_precision_by_default():
    with hermetic_call() as call, call.guarded():
        torch_backend_flags(matmul_allow_tf32=True, cudnn_allow_tf32=True, deterministic=False, benchmark=False)
        assert torch.backends.mkldnn.matmul.fp32_precision == "none"


def test_a_call_gets_a_fresh_process_torch_state_whatever_the_caller_runs_under():
    seen = {}
    with torch.inference_mode(), hermetic_call() as call, call.guarded():
        torch.set_default_dtype(torch.float64)
        with fresh_torch_state():
            seen.update(
                grad=torch.is_grad_enabled(),
                inference=torch.is_inference_mode_enabled(),
                dtype=torch.get_default_dtype(),
                trainable=torch.zeros(1, requires_grad=True).mul(2).requires_grad,
            )
    assert seen == {"grad": True, "inference": False, "dtype": torch.float32, "trainable": True}
    assert torch.get_default_dtype() is torch.float32


def test_the_tf32_getters_work_after_restoring_a_mixed_legacy_and_new_state():
    with hermetic_call() as call, call.guarded():
        MUTATIONS["torch TF32 and float32 matmul precision"]()  # the mixed legacy/new state of reference C.5
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is True


def test_deterministic_algorithms_setter_is_not_called_when_nothing_changed(monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda *args, **kwargs: calls.append(args))
    with hermetic_call() as call, call.guarded():
        pass
    assert calls == []
