"""The commands a crafted file reaches, as `rlrun.main` argument lists with the cheapest budgets that still run
the path: one episode of one env, two envs for a training of one iteration, one trial.

- `play`, `export`, `resume`: the planted run under the log root, found as `latest` (or as the case says);
- `train`: a new run into the log root (a planted link in the log root's folders);
- `checkpoint`, `checkpoint_export`: a lone checkpoint file given with --checkpoint;
- `agent_config`: `train --agent_config FILE` (the case's file, else the planted run's params/agent.yaml);
- `override`: `train` with the case's trailing agent./env. words;
- `bench`, `tune`: the case's spec (`--out` on the command line unless the spec's own is the attack);
- `report`: `rlrun report` of the case's bench folder.
"""

from __future__ import annotations

from collections.abc import Callable

from security_cases import Built, Case
from security_harness import LIBRARIES, TASK, Workspace

Surface = Callable[[Workspace, Case, Built], list[str]]


def _head(command: str, workspace: Workspace, case: Case, built: Built) -> list[str]:
    words = [command, "--task", TASK, *LIBRARIES[case.library]["flags"], "--log_root", str(workspace.logs)]
    return words + (["--json"] if built.json else [])


def _play(workspace: Workspace, case: Case, built: Built, surface: str = "play") -> list[str]:
    budget = ["--num_episodes", "1", "--num_envs", "1"]
    return [*_head("play", workspace, case, built), *budget, *built.argv.get(surface, ())]


def _export(workspace: Workspace, case: Case, built: Built, surface: str = "export") -> list[str]:
    budget = ["--format", "torchscript", "--num_envs", "1", "--validation_steps", "2"]
    return [*_head("export", workspace, case, built), *budget, *built.argv.get(surface, ())]


def _train(workspace: Workspace, case: Case, built: Built, surface: str, *words: str) -> list[str]:
    budget = ["--max_iterations", "1", "--num_envs", "2"]
    return [*_head("train", workspace, case, built), *budget, *words, *built.argv.get(surface, ())]


def _lone(built: Built) -> list[str]:
    assert built.checkpoint is not None, "the case built no lone checkpoint"
    return ["--checkpoint", str(built.checkpoint)]


def _agent_config(workspace: Workspace, case: Case, built: Built) -> list[str]:
    path = built.agent_config
    if path is None:
        assert built.run is not None, "the case built neither an agent configuration nor a run"
        path = built.run / "params" / "agent.yaml"
    small = LIBRARIES[case.library]["small"]
    return _train(workspace, case, built, "agent_config", "--agent_config", str(path), *small)


def _sweep(command: str) -> Surface:
    def surface(workspace: Workspace, case: Case, built: Built) -> list[str]:
        assert built.spec is not None, f"the case built no {command} spec"
        out = [] if built.spec_owns_out else ["--out", str(workspace.out)]
        return [command, str(built.spec), *out, *(["--json"] if built.json else []), *built.argv.get(command, ())]

    return surface


def _report(workspace: Workspace, case: Case, built: Built) -> list[str]:
    assert built.report is not None, "the case built no bench folder"
    return ["report", str(built.report)]


SURFACES: dict[str, Surface] = {
    "play": _play,
    "export": _export,
    "resume": lambda w, c, b: _train(w, c, b, "resume", "--resume"),
    "train": lambda w, c, b: _train(w, c, b, "train", *LIBRARIES[c.library]["small"]),
    "checkpoint": lambda w, c, b: [*_play(w, c, b, "checkpoint"), *_lone(b)],
    "checkpoint_export": lambda w, c, b: [*_export(w, c, b, "checkpoint_export"), *_lone(b)],
    "agent_config": _agent_config,
    "override": lambda w, c, b: _train(w, c, b, "override", *LIBRARIES[c.library]["small"], *b.overrides),
    "bench": _sweep("bench"),
    "tune": _sweep("tune"),
    "report": _report,
}
