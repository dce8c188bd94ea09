"""The agent configuration a training starts from, before overrides: a file, rlrun's own, or RL Zoo's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlrun.configs.agent_config import check_agent_config_path, read_agent_config
from rlrun.configs.loading import has_tuned_config, load_agent_config, shipped_name


def starting_config(
    library: str,
    algorithm: str,
    task: str,
    *,
    path: str | None = None,
    steps_per_iteration: Callable[[dict[str, Any], int], int] | None = None,
    atari: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The agent configuration a training starts from, before overrides, and where it came from.

    In order: the file at `path` (`--agent_config`); rlrun's configuration tuned for the task; for sb3 with
    rl_zoo3 installed, RL Zoo's tuned entry for the task (`rlrun.configs.zoo`, mapped with the adapter's
    `steps_per_iteration`); rlrun's default for the algorithm. The second value, recorded in run.json as
    `agent_config`, says which: `{"from": "file" | "rlrun" | "rl_zoo3", "path": ...}` (RL Zoo's also names
    its `entry` and `version`, and a refused RL Zoo entry leaves a `note` beside rlrun's default). An `atari`
    task (the caller knows: `rlrun.envs.atari.is_atari`) takes RL Zoo's `atari` entry.
    """
    shipped = load_agent_config(library, algorithm, task)
    if path is not None:
        file = check_agent_config_path(path)
        return read_agent_config(file, shipped), {"from": "file", "path": str(file)}
    source: dict[str, Any] = {"from": "rlrun", "path": shipped_name(library, algorithm, task)}
    if library != "sb3" or has_tuned_config(library, algorithm, task) or steps_per_iteration is None:
        return shipped, source
    from rlrun.configs import zoo

    name = zoo.ATARI_ENTRY if atari else task
    found = zoo.entry(algorithm, name)
    if found is None:
        return shipped, source
    file, hyper = found
    where = f"RL Zoo's {algorithm} entry for {task}"
    try:
        config = zoo.to_rlrun(algorithm, hyper, shipped, steps_per_iteration, where)
    except zoo.ZooRefused as refused:
        import warnings

        note = f"{refused}: rlrun's own {library} {algorithm} configuration is used instead."
        # One line (no source line under it), and no `__warningregistry__` written into a module.
        warnings.warn_explicit(note, UserWarning, "rlrun", 0)
        return shipped, {**source, "note": note}
    source = {"from": "rl_zoo3", "path": str(file), "entry": name, "version": zoo.version()}
    if name == zoo.ATARI_ENTRY:
        source["note"] = zoo.ATARI_NOTE
    return config, source
