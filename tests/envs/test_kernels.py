"""Compiled steps (`rlrun.envs.kernels`): when they are used, what a build leaves, how a failed build is told."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlrun
from rlrun.envs import kernels
from rlrun.envs.cartpole import CartPoleVectorEnv
from rlrun.errors import InvalidArgument

HERE = Path(__file__).parent
DISCRETE = {"continuous": False}
"""The kernel options of a discrete cart-pole."""


def test_auto_steps_compiled_from_1024_envs_on_the_cpu_and_eagerly_below():
    assert CartPoleVectorEnv(kernels.AUTO_ENVS - 1).kernel == "eager"
    assert CartPoleVectorEnv(kernels.AUTO_ENVS).kernel == "compiled"
    assert CartPoleVectorEnv(kernels.AUTO_ENVS, kernel="eager").kernel == "eager"
    assert CartPoleVectorEnv(8, kernel="compiled").kernel == "compiled"


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
def test_compiled_and_eager_steps_agree_and_a_constant_changed_later_takes_effect(continuous):
    eager = CartPoleVectorEnv(1500, continuous=continuous, kernel="eager")
    compiled = CartPoleVectorEnv(1500, continuous=continuous, kernel="compiled")
    generator = torch.Generator().manual_seed(0)
    for env in (eager, compiled):
        env.reset(seed=3)
    components = compiled.components
    for step in range(300):
        if step == 150:
            for env in (eager, compiled):
                env.force_mag, env.tau = 5.0, 0.01
        if step == 200:  # a state written between steps is the one the kernel steps from
            moved = eager.state.clone()
            moved[:, 1] += 0.5
            eager.state = compiled.state = moved
        if continuous:
            actions = torch.rand(1500, 1, generator=generator) * 3 - 1.5
        else:
            actions = torch.randint(0, 2, (1500,), generator=generator)
        first, second = eager.step(actions), compiled.step(actions)
        for a, b in zip(first[:4], second[:4], strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape and a.is_contiguous() and b.is_contiguous()
        torch.testing.assert_close(first[0], second[0], rtol=0, atol=1e-5)
        # The kernel's two observations: the final ones, and the copy the restarts wrote (memory of its own).
        torch.testing.assert_close(first[4]["final_obs"], second[4]["final_obs"], rtol=0, atol=1e-5)
        assert torch.equal(first[4]["_final_obs"], second[4]["_final_obs"])
        assert second[0].data_ptr() != second[4]["final_obs"].data_ptr()
        for a, b in zip(first[1:4], second[1:4], strict=True):
            assert torch.equal(a, b)
        assert torch.equal(eager.steps, compiled.steps)
        torch.testing.assert_close(eager.components, compiled.components, rtol=0, atol=1e-9)
    assert compiled.components is components  # the same tensor throughout, its memory the kernel's latest


def test_the_first_compiled_step_frees_one_block_the_size_of_its_outputs_and_later_steps_none(monkeypatch):
    freed = []
    monkeypatch.setattr(kernels, "reuse_freed_memory", lambda outputs: freed.append(outputs))
    env = CartPoleVectorEnv(kernels.AUTO_ENVS, kernel="compiled")
    env.reset(seed=0)
    for _ in range(3):
        obs, *_ = env.step(torch.zeros(kernels.AUTO_ENVS, dtype=torch.int64))
    assert len(freed) == 1 and obs.shape == (kernels.AUTO_ENVS, 4)
    assert freed[0][0].shape == obs.shape and len(freed[0]) >= 5  # the kernel's outputs themselves
    eager = CartPoleVectorEnv(8, kernel="eager")
    eager.reset(seed=0)
    eager.step(torch.zeros(8, dtype=torch.int64))
    assert len(freed) == 1  # an eager step frees none


MALLINFO = """
import ctypes, sys, torch
from rlrun.envs import kernels

FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"

class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(name, ctypes.c_size_t) for name in FIELDS.split()]

mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = Info
outputs = [torch.empty(2**20, dtype=torch.uint8) for _ in range(3)]  # alive: no block freed yet
if sys.argv[1] == "freed":
    kernels.reuse_freed_memory(outputs)
before = mallinfo2().hblkhd
block = torch.empty(3 * 2**20 - 2**16, dtype=torch.uint8)
print(mallinfo2().hblkhd - before)  # what a new block of a step's size took from fresh mappings
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_after_the_block_a_steps_worth_of_memory_comes_from_the_heap_not_fresh_mappings():
    """glibc maps a block above its mmap threshold afresh (page faults on every write), and raises the
    threshold to a freed mapped block's size: after `reuse_freed_memory`, a step's outputs fit under it."""
    import ctypes
    import subprocess

    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("not glibc 2.33 or later")

    def mapped(mode):
        run = subprocess.run([sys.executable, "-c", MALLINFO, mode], capture_output=True, text=True, check=True)
        return int(run.stdout.split()[-1])

    assert mapped("new process") >= 3 * 2**20 - 2**16  # the control: a fresh mapping
    assert mapped("freed") == 0


@pytest.mark.slow
def test_a_kernel_that_writes_its_input_state_is_refused_when_it_is_built(tmp_path, monkeypatch):
    monkeypatch.setenv(kernels.CACHE_VARIABLE, str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), *sys.path]))
    from kernel_tasks import InPlaceCartPole

    with pytest.raises(InvalidArgument, match="kernel='compiled'"):
        InPlaceCartPole(8, kernel="compiled")
    reason = (kernels.kernel_folder(InPlaceCartPole, DISCRETE) / kernels.FAILED).read_text()
    assert "wrote its input state" in reason


@pytest.mark.parametrize("bad", [2, -1, -2, 3, 2**62])
def test_a_discrete_action_outside_the_space_raises_in_the_compiled_step_too_and_changes_nothing(bad):
    """The kernel finds it (`refused_actions`), in a batch wider than a vector and in the loop's tail."""
    env = CartPoleVectorEnv(37, kernel="compiled")
    env.reset(seed=0)
    env.step(torch.ones(37, dtype=torch.int64))
    state, steps = env.components.clone(), env.steps.clone()
    for where in (2, 36):
        actions = torch.zeros(37, dtype=torch.int64)
        actions[where] = bad
        with pytest.raises(IndexError, match=rf"0 \(push left\) or 1 \(push right\), not {bad}\."):
            env.step(actions)
        assert torch.equal(env.components, state) and torch.equal(env.steps, steps)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(st.integers(-3, 3) | st.sampled_from([0, 1, 2**63 - 1, -(2**63)]), min_size=2, max_size=40))
def test_compiled_and_eager_steps_refuse_the_same_discrete_actions_and_agree_on_the_rest(actions):
    """Property: for any int64 actions, the compiled step raises IndexError exactly when the eager one does,
    neither changes its state when it does, and otherwise both step alike."""
    envs = [CartPoleVectorEnv(len(actions), kernel=mode) for mode in ("eager", "compiled")]
    for env in envs:
        env.reset(seed=len(actions))
    batch = torch.tensor(actions, dtype=torch.int64)
    outcomes = []
    for env in envs:
        state, steps = env.components.clone(), env.steps.clone()
        try:
            outcomes.append(env.step(batch))
        except IndexError:
            assert torch.equal(env.components, state) and torch.equal(env.steps, steps)
            outcomes.append(None)
    eager, compiled = outcomes
    assert (eager is None) == (compiled is None) == any(a not in (0, 1) for a in actions)
    if eager is not None:
        torch.testing.assert_close(eager[0], compiled[0], rtol=0, atol=1e-5)
        assert torch.equal(eager[2], compiled[2]) and torch.equal(eager[3], compiled[3])
        torch.testing.assert_close(envs[0].components, envs[1].components, rtol=0, atol=1e-9)


def test_a_refusal_that_check_actions_does_not_explain_still_raises_and_changes_nothing(monkeypatch):
    """A task whose `refused_actions` and `check_actions` disagree gets an error naming both, not a silent step."""
    env = CartPoleVectorEnv(8, kernel="compiled")
    env.reset(seed=0)
    monkeypatch.setattr(env, "check_actions", lambda actions: None)
    state = env.components.clone()
    with pytest.raises(RuntimeError, match="refused_actions refused actions that check_actions accepts"):
        env.step(torch.tensor([0, 1, 7, 0, 1, 1, 0, 0]))
    assert torch.equal(env.components, state)


def test_the_discrete_and_the_continuous_cart_pole_have_a_kernel_each():
    discrete, continuous = (CartPoleVectorEnv(8, continuous=flag, kernel="compiled") for flag in (False, True))
    assert discrete.kernel_options() == DISCRETE and continuous.kernel_options() == {"continuous": True}
    folders = {kernels.kernel_folder(CartPoleVectorEnv, env.kernel_options()) for env in (discrete, continuous)}
    assert len(folders) == 2 and all((folder / kernels.LIBRARY).is_file() for folder in folders)


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
def test_the_compiled_step_takes_actions_of_another_dtype_or_strided_as_the_eager_step_does(continuous):
    """The kernel reads its actions as one contiguous dtype: others are converted, strided ones copied."""
    plain = torch.tensor([0.9, -0.3, 0.5, -1.7, 0.2, -0.8, 1.2, 0.0], dtype=torch.float64)
    if not continuous:
        plain = (plain > 0).long()
    wide = torch.stack([plain, -plain], dim=1)  # wide[:, 0] has a stride of 2
    variants = [plain, plain.float() if continuous else plain.int(), wide[:, 0]]
    eager = CartPoleVectorEnv(8, continuous=continuous, kernel="eager")
    eager.reset(seed=1)
    expected = eager.step(plain)[0]
    for actions in variants:
        env = CartPoleVectorEnv(8, continuous=continuous, kernel="compiled")
        env.reset(seed=1)
        torch.testing.assert_close(env.step(actions)[0], expected, rtol=0, atol=1e-6)


def test_a_bad_kernel_mode_is_refused_with_the_nearest_one():
    with pytest.raises(InvalidArgument, match=r"Unknown kernel 'compile'\. Did you mean 'compiled'"):
        CartPoleVectorEnv(8, kernel="compile")


def test_the_cache_key_follows_the_dynamics_source_and_the_cache_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(kernels.CACHE_VARIABLE, str(tmp_path))
    from kernel_tasks import UnexportableCartPole

    own, other = kernels.kernel_folder(CartPoleVectorEnv), kernels.kernel_folder(UnexportableCartPole)
    assert own.parent == other.parent == tmp_path / "kernels"
    assert own.name.split("-")[-1] != other.name.split("-")[-1]


def test_a_failed_build_is_told_once_then_auto_steps_eagerly_and_compiled_is_refused(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv(kernels.CACHE_VARIABLE, str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), *sys.path]))
    from kernel_tasks import UnexportableCartPole

    env = UnexportableCartPole(kernels.AUTO_ENVS)
    assert env.kernel == "eager"
    failed = kernels.kernel_folder(UnexportableCartPole, DISCRETE) / kernels.FAILED
    assert failed.is_file() and "exit status 1" in failed.read_text()
    assert f"could not compile the kernel (see {failed})" in capfd.readouterr().err
    # Only the failure and the lock file stay: no temporary folder, no half-built library.
    assert sorted(path.name for path in (tmp_path / "kernels").iterdir()) == sorted(
        [failed.parent.name, f"{failed.parent.name}.lock"]
    )
    assert [path.name for path in failed.parent.iterdir()] == [kernels.FAILED]

    assert UnexportableCartPole(kernels.AUTO_ENVS).kernel == "eager"  # not tried again
    assert "building it failed" in capfd.readouterr().err
    with pytest.raises(
        InvalidArgument, match=r"kernel='compiled': building the kernel failed earlier; see .*FAILED\.txt"
    ):
        UnexportableCartPole(8, kernel="compiled")


@pytest.mark.slow
def test_a_build_writes_only_into_the_cache_and_runs_in_a_child(tmp_path, monkeypatch):
    """The build leaves nothing in the temporary directory and imports no compiler into this process."""
    monkeypatch.setenv(kernels.CACHE_VARIABLE, str(tmp_path / "cache"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    compilers = {name for name in sys.modules if name.startswith(("torch._inductor", "torch._export"))}
    env = CartPoleVectorEnv(8, kernel="compiled")
    assert env.kernel == "compiled"
    assert list((tmp_path / "tmp").iterdir()) == []
    folder = kernels.kernel_folder(CartPoleVectorEnv, env.kernel_options())
    assert sorted(path.name for path in folder.iterdir()) == ["build.txt", kernels.LIBRARY]
    assert {name for name in sys.modules if name.startswith(("torch._inductor", "torch._export"))} == compilers


def test_a_training_call_with_the_compiled_step_is_hermetic(tmp_path):
    """The suite's leak detector checks the call: a compiled step starts no thread and leaves no file open."""
    result = rlrun.train(
        rlrun.TrainRequest(
            task="rlrun/CartPoleContinuous-v1",
            library="rsl_rl",
            num_envs=kernels.AUTO_ENVS,
            max_iterations=2,
            log_root=str(tmp_path),
            overrides=("agent.num_steps_per_env=8",),
        )
    )
    assert result.iterations == 2
    assert "kernel: auto" in (Path(result.run_dir) / "params" / "env.yaml").read_text()
