"""`rlrun.play`: plan, then rebuild the trained policy and run it for N episodes inside the guarded session."""

from __future__ import annotations

from rlrun.api.planning import plan_play
from rlrun.api.requests import PlayRequest, PlayResult
from rlrun.api.session import Video, checkpoint_fit, console, play_job, play_result, run_episodes, session, video_prefix
from rlrun.hermetic import Call, hermetic_call
from rlrun.progress import Progress
from rlrun.trust import paths


def play(request: PlayRequest, *, check_leaks: bool | None = None, progress: Progress | None = None) -> PlayResult:
    """Evaluate a trained agent; the process is left exactly as it was found."""
    with hermetic_call(check_leaks=check_leaks, name="rlrun.play") as call:
        return play_in_call(call, request, progress)


def play_in_call(call: Call, request: PlayRequest, progress: Progress | None = None) -> PlayResult:
    """`play` within an already open hermetic call."""
    plan = plan_play(call, request)
    home = plan.checkpoint_run.path if plan.checkpoint_run else plan.checkpoint.parent
    if plan.video:
        paths.output_folder(home, "videos", plan.log_root, make=False)  # refused before anything runs
    with session(call, plan, progress=progress) as opened:
        job = play_job(plan, opened.env, plan.checkpoint, plan.deterministic)
        with console(plan), checkpoint_fit(plan.checkpoint, plan.task):
            policy = plan.adapter.load_policy(job)
        video = None
        if plan.video:
            folder = paths.output_folder(paths.output_folder(home, "videos", plan.log_root), "play")  # never a link
            video = Video(folder, plan.video_length, None, video_prefix(plan.checkpoint.stem))
        env = opened.instrument(video)
        if progress is not None:
            progress.start(f"play {plan.library.name} {plan.task}", None, None)
        episodes = run_episodes(env, policy, plan, progress)
        return play_result(plan, plan.library.name, episodes, video, plan.checkpoint)
