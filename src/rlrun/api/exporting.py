"""`rlrun.export`: the deterministic policy of a checkpoint to ONNX and TorchScript, checked against the live policy.

The files go to `exported/` in the checkpoint's run folder, written only through real folders: a run folder or
`exported/` that is a link, or a run folder under the log root that resolves outside it, is refused before the
call runs (`rlrun.trust.paths.output_folder`), and each file replaces whatever is at its name (a link
included) instead of writing through it (`rlrun.runs.atomic`)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlrun import runs
from rlrun.api.checks import has
from rlrun.api.planning import plan_export
from rlrun.api.requests import EXPORT_FORMATS, ExportRequest, ExportResult
from rlrun.api.session import checkpoint_fit, console, play_job, session
from rlrun.hermetic import Call, hermetic_call
from rlrun.trust import paths

if TYPE_CHECKING:
    from rlrun.envs import TorchVectorEnv


def export(request: ExportRequest, *, check_leaks: bool | None = None) -> ExportResult:
    """Export a trained policy to `exported/policy.onnx` and `exported/policy.pt` in its run directory."""
    with hermetic_call(check_leaks=check_leaks, name="rlrun.export") as call:
        return export_in_call(call, request)


def export_in_call(call: Call, request: ExportRequest, progress: Callable[[str], None] | None = None) -> ExportResult:
    """`export` within an already open hermetic call; `progress(text)` hears each step as it starts."""
    say = progress or (lambda text: None)
    plan = plan_export(call, request)
    run_dir = plan.checkpoint_run.path if plan.checkpoint_run else plan.checkpoint.parent
    paths.output_folder(run_dir, "exported", plan.log_root, make=False)  # refused before anything runs
    with session(call, plan) as opened:
        import torch

        env = opened.env
        say(f"building the {plan.library.name} policy from {plan.checkpoint.name}")
        job = play_job(plan, env, plan.checkpoint, deterministic=True)
        with console(plan), checkpoint_fit(plan.checkpoint, plan.task):
            module = plan.adapter.export_policy(job).eval()
        say(f"a {plan.validation_steps}-step rollout of the policy for the observations to check against")
        observations = _validation_observations(env, module, plan.validation_steps, plan.seed)
        with torch.inference_mode():
            expected = module(observations)
        directory = paths.output_folder(run_dir, "exported", plan.log_root)  # a real folder, never a link
        files, errors = [], {}
        # ONNX from the trace too: modules that libraries script (rl_games' normaliser) export that way.
        example = observations[:1]
        traced = torch.jit.trace(module, example)
        for name in plan.formats:
            path = directory / EXPORT_FORMATS[name]
            say(f"writing exported/{path.name} and running it on those observations")
            runs.atomic_save(path, functools.partial(_write, name, traced, example))
            files.append(path)
            exported = _run(name, path, observations)
            if exported is not None:
                errors[path.name] = float((exported - expected.to(exported.dtype)).abs().max())
        return ExportResult(
            task=plan.task,
            library=plan.library.name,
            checkpoint=plan.checkpoint,
            files=tuple(files),
            max_abs_error=errors,
        )


def _validation_observations(env: TorchVectorEnv, module: Any, steps: int, seed: int) -> Any:
    """Observations the policy really meets: a short deterministic rollout of the policy itself."""
    import torch

    observations, _ = env.reset(seed=seed)
    seen = []
    low = high = None
    space = env.single_action_space
    if hasattr(space, "low") and hasattr(space, "high"):  # a Box
        low = torch.as_tensor(space.low, dtype=torch.float32, device=env.device)
        high = torch.as_tensor(space.high, dtype=torch.float32, device=env.device)
    for _ in range(steps):
        seen.append(observations.to("cpu", torch.float32))
        with torch.inference_mode():
            actions = module(observations.to("cpu", torch.float32)).to(env.device)
        if low is not None:
            actions = torch.clamp(actions, low, high)
        observations, *_ = env.step(actions)
    return torch.cat(seen)


def _write(name: str, traced: Any, example: Any, path: str) -> None:
    """Write the traced policy as TorchScript or ONNX (a dynamic batch dimension) to `path`."""
    import torch

    if name == "torchscript":
        traced.save(path)
    else:
        with warnings.catch_warnings():  # the exporter reads no signature from a traced module: nothing to act on
            warnings.filterwarnings("ignore", message="no signature found", category=UserWarning)
            torch.onnx.export(
                traced,
                (example,),
                path,
                input_names=["obs"],
                output_names=["actions"],
                dynamic_axes={"obs": {0: "batch"}, "actions": {0: "batch"}},
                opset_version=18,
                dynamo=False,
            )


def _run(name: str, path: Path, observations: Any) -> Any:
    """The exported file's actions on `observations` (None when onnxruntime is not installed)."""
    import torch

    if name == "torchscript":
        with torch.inference_mode():
            return torch.jit.load(str(path))(observations)
    if not has("onnxruntime"):
        return None
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return torch.from_numpy(session.run(None, {"obs": observations.numpy()})[0])
