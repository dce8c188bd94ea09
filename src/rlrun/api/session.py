"""The guarded setup every call shares, written once: `session` opens it around a call's body.

Inside `session` the library may change any global: the hermetic scope captured them all and
restores them when the block ends (`rlrun.hermetic.scope`). The session also gives torch a fresh
process's thread-local state, seeds the call's RNGs, builds and checks the task's environment,
collects the call's reference cycles, and closes the environment and the progress display however
the block ends.
"""

from __future__ import annotations

import contextlib
import datetime
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, cast

from rlrun import rollout, runs
from rlrun.api.plans import AgentPlan, LibraryPlan, PlayPlan, TaskPlan, TrainPlan
from rlrun.api.requests import PlayResult
from rlrun.api.resolution import env_errors
from rlrun.errors import UnsupportedTask, UserError
from rlrun.hermetic import Call, fresh_torch_state
from rlrun.libraries import check_sees, libraries_for
from rlrun.libraries.base import PlayJob
from rlrun.progress import Progress
from rlrun.trust import paths

if TYPE_CHECKING:
    from gymnasium.vector import VectorEnv

    from rlrun.envs import EpisodeStatistics, TorchVectorEnv


class Session:
    """A call's guarded span: the task's environment (`env`), to be instrumented by the call's body."""

    def __init__(self, env: TorchVectorEnv) -> None:
        self.env = env
        """The task's torch vector env; `instrument` replaces it with its wrapped self."""

    def instrument(
        self, video: Video | None = None, on_step: Callable[[EpisodeStatistics], None] | None = None
    ) -> EpisodeStatistics:
        """Wrap `env` with Gymnasium's video recorder (first env only) and rlrun's episode statistics."""
        from rlrun.envs import EpisodeStatistics

        env = cast("VectorEnv", self.env)  # `make_env` builds Gymnasium vector envs, which its wrappers need
        if video is not None:
            import os

            from gymnasium.wrappers.vector import RecordVideo

            # Frames are drawn off-screen: SDL needs no display or sound card (the environment guard puts these back).
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
            os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

            interval = video.interval
            with warnings.catch_warnings():
                # Expected here: SAME_STEP autoreset drops each episode's last frame; the folder may hold other clips.
                warnings.filterwarnings("ignore", message=".*(same-step|Overwriting existing videos)")
                env = RecordVideo(
                    env,
                    video_folder=str(video.folder),
                    record_first_only=True,
                    step_trigger=(lambda step: step % interval == 0) if interval else (lambda step: step == 0),
                    video_length=video.length,
                    name_prefix=video.prefix,
                    gc_trigger=None,
                )
            # The outermost wrapper is what `session` closes, should the statistics fail to wrap it.
            self.env = cast("TorchVectorEnv", env)
        stats = EpisodeStatistics(env, on_step=on_step)
        self.env = stats
        return stats


@contextlib.contextmanager
def session(
    call: Call, plan: TaskPlan, *, deterministic: bool = False, progress: Progress | None = None
) -> Iterator[Session]:
    """Capture every guard, set torch's fresh state and the call's seeds, build the task's env; on the
    way out close the env, stop the progress display, collect cycles and restore every guard."""
    run = plan.checkpoint_run if isinstance(plan, LibraryPlan) else None
    # A checkpoint of a run (play, export, resume) is read only from inside the run folder as it was found.
    with (
        call.guarded(),
        _collected(),
        fresh_torch_state(),
        _determinism(deterministic, plan.device),
        paths.confined(run.home if run is not None else None),
    ):
        _seed_everything(plan.seed)
        _set_threads(plan.threads)
        opened = Session(_make_env(plan))
        try:
            yield opened
        finally:
            if progress is not None:
                progress.stop()
            opened.env.close()


@contextlib.contextmanager
def checkpoint_fit(checkpoint: Path, task: str) -> Iterator[None]:
    """Turn torch's refusal to load a checkpoint's tensors into the model built for this task (another task's
    shapes, another network) into one user-facing line; adapters that check the fit themselves raise their own."""
    try:
        yield
    except UserError:
        raise
    except RuntimeError as error:
        text = str(error)
        if "Error(s) in loading state_dict" not in text:
            raise
        lines = [line.strip() for line in text.splitlines()[1:] if line.strip()]
        detail = next((line for line in lines if line.startswith("size mismatch")), lines[0] if lines else text)
        raise UnsupportedTask(
            f"checkpoint {str(checkpoint)!r} does not fit task {task!r} with this agent configuration "
            f"({detail[:300]}); pass the --task and agent configuration it was trained with, or another checkpoint."
        ) from None


def play_job(plan: LibraryPlan, env: TorchVectorEnv, checkpoint: Path, deterministic: bool) -> PlayJob:
    """What an adapter needs to rebuild the policy of `checkpoint` for the plan's library, env and settings."""
    return PlayJob(
        env=env,
        config=plan.library_config,
        checkpoint=checkpoint,
        device=plan.device,
        deterministic=deterministic,
        algorithm=plan.algorithm,
        ml_framework=plan.ml_framework,
        seed=plan.seed,
    )


def check_resume_fit(plan: TrainPlan, env: TorchVectorEnv) -> None:
    """Rebuild the policy from the checkpoint to resume from, before the run directory exists, so that a checkpoint
    of another task or network is refused without leaving a run behind. The torch, NumPy and Python RNG streams are
    put back afterwards: the check must not move the training's draws."""
    import random

    import numpy as np
    import torch

    assert plan.resume_from is not None
    job = play_job(plan, env, plan.resume_from, deterministic=True)
    python_state, numpy_state = random.getstate(), np.random.get_state()
    devices = [torch.cuda.current_device()] if plan.device.startswith("cuda") and torch.cuda.is_initialized() else []
    try:
        with torch.random.fork_rng(devices=devices), checkpoint_fit(plan.resume_from, plan.task), console(plan):
            plan.adapter.load_policy(job)
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)


@dataclass(frozen=True)
class Video:
    """Where and what to record: clips of `length` steps every `interval` steps (None: one clip, at the start)."""

    folder: Path
    length: int
    interval: int | None
    prefix: str

    def files(self) -> tuple[Path, ...]:
        """The clips recorded, oldest first."""
        return tuple(sorted(self.folder.glob(f"{self.prefix}*.mp4"), key=lambda path: path.stat().st_mtime_ns))


def video_prefix(name: str) -> str:
    """A clip name that no earlier clip in the same folder has: `<name>-<YYYY-MM-DD_HH-MM-SS-ffffff>`."""
    return f"{name}-{datetime.datetime.now().strftime('%Y-%m-%d_%H-%M-%S-%f')}"


@contextlib.contextmanager
def console(plan: LibraryPlan, run_dir: Path | None = None) -> Iterator[None]:
    """Send the library's console output to `<run_dir>/console.log` (nowhere without a run directory)
    unless `plan.verbose`: what it prints (stdout) and what its loggers (the adapter's `LOGGERS`) write.

    The loggers get one handler writing there for the span, then their own handlers back (the logging
    guard would restore them too).

    The library's own deprecation notices (`DeprecationWarning`, `PendingDeprecationWarning`, `FutureWarning`)
    are shown once, never raised: a caller's `warnings.simplefilter("error")` is meant for the caller's code, and
    a notice about the library's internals is no reason to fail its training. Without `plan.verbose` they go to
    the log too; every other warning follows the caller's filters.
    """
    with _library_notices(None if plan.verbose else run_dir, plan.verbose):
        if plan.verbose:
            yield
            return
        with _quiet(plan, run_dir):
            yield


NOTICES = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)
"""The warning categories a library's internals raise that no caller of rlrun can act on."""


@contextlib.contextmanager
def _library_notices(run_dir: Path | None, verbose: bool) -> Iterator[None]:
    with warnings.catch_warnings():
        for category in NOTICES:
            warnings.simplefilter("default", category)
        if not verbose:
            shown = warnings.showwarning

            def show(
                message: Warning | str,
                category: type[Warning],
                filename: str,
                lineno: int,
                file: TextIO | None = None,
                line: str | None = None,
            ) -> None:
                if not issubclass(category, NOTICES):
                    shown(message, category, filename, lineno, file, line)
                elif run_dir is not None:
                    with open(run_dir / "console.log", "a", encoding="utf-8") as log:
                        log.write(warnings.formatwarning(message, category, filename, lineno))

            warnings.showwarning = show
        yield


@contextlib.contextmanager
def _quiet(plan: LibraryPlan, run_dir: Path | None) -> Iterator[None]:
    import io
    import logging

    with contextlib.ExitStack() as stack:
        log: io.TextIOBase = (
            io.StringIO()
            if run_dir is None
            else stack.enter_context(open(run_dir / "console.log", "a", encoding="utf-8"))
        )
        stack.enter_context(contextlib.redirect_stdout(log))
        for name in plan.adapter.LOGGERS:
            logger = logging.getLogger(name)
            handler: logging.Handler = logging.NullHandler() if run_dir is None else logging.StreamHandler(log)
            if logger.handlers and logger.handlers[0].formatter is not None:
                handler.setFormatter(logger.handlers[0].formatter)
            stack.callback(setattr, logger, "handlers", logger.handlers)
            logger.handlers = [handler]
        yield


def run_episodes(
    env: TorchVectorEnv, policy: rollout.Policy, plan: AgentPlan | PlayPlan, progress: Progress | None
) -> rollout.Episodes:
    """Run `policy` for the plan's episodes (or steps) and close the env, which writes its video."""
    episodes = rollout.evaluate(
        env,
        policy,
        num_episodes=plan.num_episodes,
        max_steps=plan.max_steps,
        seed=plan.seed,
        progress=progress,
    )
    env.close()  # writes the video
    return episodes


def play_result(
    plan: TaskPlan, library: str, episodes: rollout.Episodes, video: Video | None, checkpoint: Path | None = None
) -> PlayResult:
    """The result of a rollout (play, zero and random agents)."""
    run = plan.checkpoint_run if isinstance(plan, LibraryPlan) else None
    return PlayResult(
        task=plan.task,
        library=library,
        checkpoint=checkpoint,
        run_dir=run.path if run else None,
        returns=episodes.returns,
        lengths=episodes.lengths,
        mean_return=episodes.mean_return,
        std_return=episodes.std_return,
        mean_length=episodes.mean_length,
        env_steps=episodes.env_steps,
        steps_per_s=episodes.env_steps / max(episodes.wall_time_s, 1e-9),
        videos=video.files() if video else (),
        checkpoint_saved=runs.checkpoint_entry(run, checkpoint) if run and checkpoint else None,
    )


def _seed_everything(seed: int) -> None:
    """Seed this call's global RNGs (the scope restores the caller's states afterwards)."""
    import random

    import numpy
    import torch

    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)  # seeds CUDA's generators too, lazily, without initialising CUDA


def _set_threads(threads: int) -> None:
    """The call's torch intra-op threads (the scope's guard puts the caller's count back)."""
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def _determinism(enabled: bool, device: str) -> Iterator[None]:
    import os

    import torch

    if enabled:
        if device.startswith("cuda"):
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        torch.use_deterministic_algorithms(True)
    yield


def _make_env(plan: TaskPlan) -> TorchVectorEnv:
    """Build the task's torch vector env and check the plan's algorithm can act in it."""
    from rlrun.envs import make_env

    with env_errors(plan.task):
        env = make_env(
            plan.task,
            plan.num_envs,
            device=plan.device,
            vectorization=plan.vectorization,
            env_kwargs=plan.env_config,
            render_mode="rgb_array" if plan.video else None,
        )
    try:
        if isinstance(plan, LibraryPlan):
            from rlrun.envs.contract import is_image

            images = is_image(env.single_observation_space)
            check_sees(plan.library, plan.task, images)
            _check_acts(plan, type(env.single_action_space).__name__, images)
        if plan.video and env.render_mode != "rgb_array":
            raise UnsupportedTask(
                f"{plan.task} does not render rgb_array images, so it cannot be recorded; drop --video."
            )
        # Gymnasium's `VectorEnv` type knows no device: `make_env`'s envs are torch vector envs all the same.
        return cast("TorchVectorEnv", env)
    except BaseException:
        env.close()
        raise


def _check_acts(plan: LibraryPlan, space: str, images: bool) -> None:
    supported = plan.adapter.ALGORITHMS[plan.algorithm]
    if space in supported:
        return
    others = [name for name, spaces in plan.adapter.ALGORITHMS.items() if space in spaces]
    able = [name for name in libraries_for(space, images=images) if name != plan.library.name]
    ways = [f"--algorithm {name}" for name in others] + [f"--library {name}" for name in able]
    raise UnsupportedTask(
        f"{plan.library.name} {plan.algorithm} cannot act in {plan.task}'s {space} action space "
        f"(it supports {', '.join(supported)})" + (f"; use {' or '.join(ways)}." if ways else ".")
    )


@contextlib.contextmanager
def _collected() -> Iterator[None]:
    """Free what the call left in reference cycles before the scope restores and the detector looks.

    Library objects that own processes or files and are only released by the cycle collector would
    otherwise outlive the call: GitPython's `Repo` (which RSL-RL's logger creates to record the code
    state) keeps two `git cat-file` child processes until it is collected. Everything that existed
    before the call is frozen out of the collection (`gc.freeze`), so the collection walks the call's own
    objects only, not every object of the process (a long walk once a large library is imported); a caller's
    own freeze is left alone.
    """
    import gc

    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        yield
    finally:
        gc.collect()
        if freeze:
            gc.unfreeze()
