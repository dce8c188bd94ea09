"""A call picks its own torch intra-op threads from the batch and the cores, and gives the caller's back."""

from __future__ import annotations

import pytest
import torch

import rlrun
from rlrun.api.planning import pick_threads


@pytest.mark.parametrize(
    ("requested", "num_envs", "cores", "expected"),
    [
        (None, 4096, 2, 1),
        (None, 1 << 20, 2, 1),
        (None, 4096, 16, 1),
        (None, 65536, 16, 4),
        (None, 1 << 20, 16, 8),
        (None, 1 << 20, 3, 1),
        (3, 4, 2, 3),
    ],
)
def test_the_thread_policy(requested, num_envs, cores, expected):
    assert pick_threads(requested, num_envs, cores) == expected


def test_a_call_runs_at_its_thread_count_and_the_caller_keeps_its_own(log_root):
    seen = []
    caller = torch.get_num_threads()
    other = 1 if caller != 1 else 2
    torch.set_num_threads(other)
    try:
        request = rlrun.TrainRequest(
            task="rlrun/CartPole-v1",
            library="sb3",
            num_envs=2,
            max_iterations=2,
            threads=3,
            overrides=("agent.n_steps=8", "agent.batch_size=16"),
            log_root=str(log_root),
        )
        rlrun.train(request, on_iteration=lambda row: seen.append(torch.get_num_threads()))
        assert seen == [3, 3]
        assert torch.get_num_threads() == other
    finally:
        torch.set_num_threads(caller)


def test_a_bad_thread_count_is_a_user_error(log_root):
    with pytest.raises(rlrun.errors.InvalidArgument, match="--threads 0"):
        rlrun.zero_agent(rlrun.AgentRequest(task="rlrun/CartPole-v1", threads=0))
