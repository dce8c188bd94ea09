"""`rlrun.train`: plan, then train with the library's own runner inside the guarded session."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlrun import runs
from rlrun.api.clock import IterationClock
from rlrun.api.planning import plan_train
from rlrun.api.plans import TrainPlan
from rlrun.api.requests import TrainRequest, TrainResult
from rlrun.api.session import Video, check_resume_fit, console, session
from rlrun.configs.provenance import params_files, recorded_source
from rlrun.errors import TrainingStopped
from rlrun.hermetic import Call, hermetic_call
from rlrun.libraries.base import TrainJob, TrainOutcome
from rlrun.progress import Progress
from rlrun.runs.metrics import OnIteration
from rlrun.signals import LATCH, signals_held, stop_signals, termination_delivered

if TYPE_CHECKING:
    from rlrun.envs import EpisodeStatistics


def train(
    request: TrainRequest,
    *,
    check_leaks: bool | None = None,
    progress: Progress | None = None,
    on_iteration: OnIteration | None = None,
) -> TrainResult:
    """Train an agent; the process is left exactly as it was found (see `rlrun.hermetic`).

    `on_iteration(row)` is called with each row the run appends to its `metrics.csv`; returning True stops
    the training there, with a checkpoint, and the result's status is `stopped` (a tuner's pruner).
    """
    # The latch goes around the call: a Ctrl-C that Python drops while planning or importing is not lost.
    with termination_delivered(), LATCH.installed(), hermetic_call(check_leaks=check_leaks, name="rlrun.train") as call:
        return train_in_call(call, request, progress, on_iteration)


def train_in_call(
    call: Call, request: TrainRequest, progress: Progress | None = None, on_iteration: OnIteration | None = None
) -> TrainResult:
    """`train` within an already open hermetic call (the CLI opens one around argument parsing)."""
    plan = plan_train(call, request)
    clock = IterationClock(plan.env_steps_per_iteration, plan.resume_iteration, on_iteration, progress)
    # The signals are taken as stop requests from before the run directory exists until its manifest's last
    # write: no Ctrl-C can leave a run `running` without a word.
    with session(call, plan, deterministic=plan.deterministic, progress=progress) as opened, stop_signals(clock):
        record: runs.RunRecord | None = None
        started = time.perf_counter()
        try:
            if plan.resume_from is not None:
                check_resume_fit(plan, opened.env)
            record = _create_record(plan)
            clock.open(record.dir)
            video = (
                Video(record.dir / "videos" / "train", plan.video_length, plan.video_interval, "rl-video")
                if plan.video
                else None
            )
            env = opened.instrument(video, clock)
            if progress is not None:
                progress.start(
                    f"train {plan.library.name} {plan.task}",
                    plan.max_iterations * plan.env_steps_per_iteration,
                    plan.env_steps_per_iteration,
                )
            outcome, status = _run_library(plan, _job(plan, env, record), record, clock)
            wall = time.perf_counter() - started
            env.close()  # writes the last video clip
            result = _result(plan, record, env, outcome, status, wall, video)
            with signals_held():
                record.finish(status, result=runs.jsonable(result))
        except BaseException as error:
            if record is not None:
                _record_failure(record, error)
            raise
        finally:
            clock.close()
    if clock.stop_reason in ("interrupted", "terminated"):
        # A signal that came after the training ended: the run is complete, and the caller still asked to stop
        # (a bench must not go on to its next cell).
        late = TrainingStopped(clock.stop_reason)
        late.run_dir, late.checkpoint = result.run_dir, result.checkpoint
        raise late
    return result


def _job(plan: TrainPlan, env: EpisodeStatistics, record: runs.RunRecord) -> TrainJob:
    """What the adapter is handed: the instrumented env, the configuration, the budget, and how to save
    checkpoints (each with its run.json entry, in one batch of writes)."""

    def entry(iteration: int) -> dict[str, Any]:
        """What run.json records of a checkpoint beside its file (and `saved_at`)."""
        return {"iteration": iteration, "env_steps": env.env_steps, "mean_return": env.mean_return()}

    def save_checkpoint(name: str, write: Any, iteration: int) -> Path:
        return record.save_checkpoint(name, write, **entry(iteration))

    def save_checkpoints(checkpoints: Any) -> list[Path]:
        return record.save_checkpoints([(name, write, entry(it)) for name, write, it in checkpoints])

    return TrainJob(
        env=env,
        stats=env,
        config=plan.library_config,
        max_iterations=plan.max_iterations,
        seed=plan.seed,
        device=plan.device,
        run_dir=record.dir,
        save_checkpoint=save_checkpoint,
        save_checkpoints=save_checkpoints,
        resume_from=plan.resume_from,
        resume_iteration=plan.resume_iteration,
        deterministic=plan.deterministic,
        algorithm=plan.algorithm,
        ml_framework=plan.ml_framework,
    )


def _run_library(
    plan: TrainPlan, job: TrainJob, record: runs.RunRecord, clock: IterationClock
) -> tuple[TrainOutcome, str]:
    """The library's own runner, and the run's status: `completed`, or `stopped` by `on_iteration` (the last
    checkpoint is then the outcome). A signal's stop propagates."""
    try:
        with console(plan, record.dir), clock.interruptible():
            return plan.adapter.train(job), "completed"
    except TrainingStopped as stop:
        if stop.reason != "stopped":
            raise
        record.settle()  # the last checkpoint's commit: it is the outcome
        return TrainOutcome(iterations=_last_iteration(record, plan), checkpoint=_last_checkpoint(record)), "stopped"


def _result(
    plan: TrainPlan,
    record: runs.RunRecord,
    env: EpisodeStatistics,
    outcome: TrainOutcome,
    status: str,
    wall: float,
    video: Video | None,
) -> TrainResult:
    return TrainResult(
        task=plan.task,
        library=plan.library.name,
        run_dir=record.dir,
        checkpoint=outcome.checkpoint,
        seed=plan.seed,
        num_envs=plan.num_envs,
        iterations=outcome.iterations,
        env_steps=env.env_steps,
        episodes=env.episodes,
        mean_return=env.mean_return(),
        steps_per_s=env.env_steps / wall if wall > 0 else 0.0,
        wall_time_s=wall,
        videos=video.files() if video else (),
        status=status,
        agent_config=dict(record.manifest.get("agent_config") or {}),
    )


def _record_failure(record: runs.RunRecord, error: BaseException) -> None:
    """Mark the run with the status `error` leaves, after committing the checkpoints saved before it; a failure
    to write either is added to `error` as a note, never raised in its place."""
    status = _failure_status(error)
    try:
        with signals_held():
            record.settle()  # the checkpoints saved before the error are in place and listed
    except Exception as commit_error:
        error.add_note(f"rlrun: a checkpoint could not be written: {commit_error!r}")
    if isinstance(error, TrainingStopped):
        error.run_dir, error.checkpoint = record.dir, _last_checkpoint(record)
    try:
        with signals_held():
            record.finish(status, error=f"{type(error).__name__}: {error}")
    except Exception as manifest_error:  # never mask the call's own exception
        error.add_note(f"rlrun: could not mark the run {status}: {manifest_error!r}")


def _failure_status(error: BaseException) -> str:
    """The run status an exception leaves: `interrupted` (Ctrl-C), `terminated` (SIGTERM) or `failed`."""
    if isinstance(error, TrainingStopped):
        return error.reason
    return "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"


def _last_checkpoint(record: runs.RunRecord) -> Path | None:
    entries = record.manifest["checkpoints"]
    return record.dir / entries[-1]["file"] if entries else None


def _last_iteration(record: runs.RunRecord, plan: TrainPlan) -> int:
    entries = record.manifest["checkpoints"]
    return int(entries[-1]["iteration"]) if entries else plan.resume_iteration


def _create_record(plan: TrainPlan) -> runs.RunRecord:
    """Claim the run directory and write its parameters and first manifest."""
    parent = None
    if plan.resume_from is not None:
        parent = {
            "run": str(plan.checkpoint_run.path) if plan.checkpoint_run else None,
            "checkpoint": str(plan.resume_from),
        }
    params = params_files(
        plan.agent_config,
        plan.env_config,
        source=plan.agent_config_source,
        task=plan.task,
        num_envs=plan.num_envs,
        repeat=plan.repeat_command("<this file>"),
    )
    manifest = {
        "library": plan.library.name,
        "algorithm": plan.algorithm,
        "ml_framework": plan.ml_framework,
        "task": plan.task,
        "experiment": plan.experiment,
        "run_name": plan.run_name,
        "seed": plan.seed,
        "num_envs": plan.num_envs,
        "vectorization": plan.vectorization,
        "max_iterations": plan.max_iterations,
        "device": plan.device,
        "argv": list(plan.argv) if plan.argv is not None else None,
        "agent_config": recorded_source(plan.agent_config_source, params),
        "versions": runs.versions(plan.library.distribution),
        "parent": parent,
    }
    return runs.RunRecord.create(
        plan.log_root, plan.library.name, plan.experiment, plan.run_name, manifest, params, background=True
    )
