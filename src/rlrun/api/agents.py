"""`rlrun.zero_agent` and `rlrun.random_agent`: a task run with zero or random actions, no library."""

from __future__ import annotations

from rlrun import rollout
from rlrun.api.planning import plan_agent
from rlrun.api.requests import AgentRequest, PlayResult
from rlrun.api.session import Video, play_result, run_episodes, session, video_prefix
from rlrun.hermetic import Call, hermetic_call
from rlrun.progress import Progress
from rlrun.trust import paths


def zero_agent(
    request: AgentRequest, *, check_leaks: bool | None = None, progress: Progress | None = None
) -> PlayResult:
    """Run the task with the zero action (action 0 in discrete spaces); report episode returns."""
    with hermetic_call(check_leaks=check_leaks, name="rlrun.zero_agent") as call:
        return agent_in_call(call, request, "zero", progress)


def random_agent(
    request: AgentRequest, *, check_leaks: bool | None = None, progress: Progress | None = None
) -> PlayResult:
    """Run the task with uniformly random actions; report episode returns."""
    with hermetic_call(check_leaks=check_leaks, name="rlrun.random_agent") as call:
        return agent_in_call(call, request, "random", progress)


def agent_in_call(call: Call, request: AgentRequest, kind: str, progress: Progress | None = None) -> PlayResult:
    """`zero_agent` (kind `zero`) or `random_agent` (kind `random`) within an already open hermetic call."""
    plan = plan_agent(call, request, kind)
    with session(call, plan, progress=progress) as opened:
        video = None
        if plan.video:
            folder = paths.real_folders(plan.log_root, f"{kind}_agent", plan.experiment, "videos")  # never a link
            video = Video(folder, plan.video_length, None, video_prefix(kind))
        env = opened.instrument(video)
        policy = rollout.zero_policy(env) if kind == "zero" else rollout.random_policy(env, plan.seed)
        if progress is not None:
            progress.start(f"{kind} agent {plan.task}", request.max_steps and request.max_steps * plan.num_envs, None)
        return play_result(plan, kind, run_episodes(env, policy, plan, progress), video)
