"""What a call imports before its capture: import effects belong to the import, not to the call
(`rlrun.hermetic.scope`). Naming a task needs NumPy, Gymnasium and rlrun's registry only (`import_tasks`);
running one needs torch too (`import_core`)."""

from __future__ import annotations

from rlrun.api.checks import has
from rlrun.hermetic import Call

TASK_IMPORTS = ("numpy", "gymnasium", "rlrun.envs")
"""What naming a task needs (Gymnasium's registry and rlrun's, no torch): imported first, so that a mistyped
task, library, algorithm, override key or checkpoint is answered before torch is imported (`early`)."""
CORE_IMPORTS = (*TASK_IMPORTS, "torch", "torch._dynamo")
"""Imported before any capture. `torch._dynamo` is what the first torch optimizer of a process imports
lazily (slowly, with an env var, warning filters and atexit hooks): an import effect, not the call's. A JAX
call builds no torch optimizer and leaves it out (it is slow to import). `import_core` also registers the
installed packages' `rlrun.tasks` (their modules imported as these are)."""
VIDEO_IMPORTS = (
    "pygame",
    "moviepy",
    "moviepy.video.io.ImageSequenceClip",
    "imageio_ffmpeg",
    "gymnasium.wrappers.vector",
)
EXPORT_IMPORTS = ("torch.onnx", "onnx", "onnxscript", "torch.jit")


def import_tasks(call: Call) -> None:
    """Import what naming a task needs and register the installed packages' tasks (`TASK_IMPORTS`)."""
    call.import_modules(TASK_IMPORTS)
    from rlrun.envs.tasks import load_task_plugins  # imported by now, with Gymnasium, as an import effect

    load_task_plugins(call.import_modules)


def import_core(call: Call, video: bool, framework: str | None = None) -> None:
    """Import what a call that runs a task needs (the video writer's too with `video`; on JAX no `torch._dynamo`)."""
    import_tasks(call)
    call.import_modules(CORE_IMPORTS if framework != "jax" else CORE_IMPORTS[:-1])
    if resource_tracker_due():
        call.prepare(start_resource_tracker)
    if video:
        call.import_modules([name for name in VIDEO_IMPORTS if has(name.partition(".")[0])])


def resource_tracker_due() -> bool:
    """Whether the start method is `spawn` or `forkserver` and multiprocessing's resource tracker has not started."""
    import multiprocessing
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker, "_resource_tracker", None)
    running = getattr(tracker, "_pid", None) is not None
    return not running and multiprocessing.get_start_method(allow_none=True) in ("spawn", "forkserver")


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker process now, as an effect of the import phase: under `spawn`
    or `forkserver`, the first lock or queue a library makes would start it inside the call (tqdm's bar lock,
    tensorboardX's event queue), for the rest of the process. Stopping it after the call instead would unlink
    the semaphores of locks that live on (tqdm's), so it is started before, as a fresh process running the
    library would have it. Under `fork` (Linux's default) nothing needs it (`resource_tracker_due`)."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


__all__ = [
    "CORE_IMPORTS",
    "EXPORT_IMPORTS",
    "TASK_IMPORTS",
    "VIDEO_IMPORTS",
    "import_core",
    "import_tasks",
    "resource_tracker_due",
    "start_resource_tracker",
]
