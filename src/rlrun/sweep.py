"""What a bench and a tune share: YAML spec files (`rlrun bench SPEC.yaml`, `rlrun tune SPEC.yaml`), seed lists
such as `0-4`, the out folder with its run directories, the executor's settings, and the play request that
evaluates a training. Each mistake is one line naming the file, flag or key and the fix.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlrun import runs
from rlrun.api.requests import PlayRequest, TrainRequest
from rlrun.errors import InvalidArgument, MissingDependency, did_you_mean

MAX_CELLS = 100_000
"""The most cells a bench, or seeds a list, may have."""

EXECUTOR_NAMES = ("inline", "process", "ray")


def read_spec(
    path: str | Path, what: str, keys: Sequence[str], overrides: dict[str, Any], *, not_a_file: str, example: str
) -> dict[str, Any]:
    """The spec at `path` as a mapping whose keys are all in `keys`, with every `overrides` value that is not
    None in place of its own. `what` names the file in errors (`bench spec`); `not_a_file` is the fix when the
    path is not a file, `example` lists keys a spec has."""
    import yaml

    source = runs.check_path(path, what)
    if not source.is_file():
        raise InvalidArgument(f"{what} {str(source)!r} is not a file; {not_a_file}")
    try:
        spec = yaml.safe_load(source.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise InvalidArgument(f"{what} {str(source)!r} is not valid YAML: {' '.join(str(error).split())}") from None
    if not isinstance(spec, dict):
        raise InvalidArgument(f"{what} {str(source)!r} must be a mapping of keys such as {example}.")
    for key in spec:
        if key not in keys:
            raise InvalidArgument(
                f"{what} key {key!r} is unknown.{did_you_mean(str(key), keys, listing=0)} "
                f"Valid keys: {', '.join(keys)}."
            )
    spec.update({key: value for key, value in overrides.items() if value is not None})
    return spec


def parse_seeds(seeds: tuple[int, ...] | str | int) -> tuple[int, ...]:
    """`(0, 1)`, `"0-4"`, `"0,3,7"` or `3` as a tuple of distinct seeds, in order."""
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        seeds = (seeds,)
    if isinstance(seeds, str):
        values: list[int] = []
        for part in seeds.split(","):
            match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
            if match is None:
                raise InvalidArgument(f"--seeds {seeds!r} is not a seed list: use 0-4, 0,3,7 or 1.")
            low, high = int(match[1]), int(match[2] or match[1])
            if high < low or high - low > MAX_CELLS:
                raise InvalidArgument(f"--seeds {seeds!r}: the range {part.strip()!r} is empty or too long.")
            values.extend(range(low, high + 1))
        seeds = tuple(values)
    if not isinstance(seeds, tuple | list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise InvalidArgument(f"--seeds {seeds!r} must be integers, such as 0-4 or 0,3,7.")
    if not seeds:
        raise InvalidArgument("--seeds is empty: give at least one seed, such as 0 or 0-4.")
    return tuple(dict.fromkeys(seeds))


def out_folders(out: str, log_root: str | None, name: str | None, what: str, unnamed: str) -> tuple[Path, Path, str]:
    """The absolute out folder, the run directories' root (`<out>/runs` unless given) and the experiment name
    (the out folder's, unless given; `unnamed` for a nameless folder) of a bench or a study (`what`), each
    checked; nothing is made."""
    folder = runs.check_path(out, "--out").absolute()
    if folder.exists() and not folder.is_dir():
        raise InvalidArgument(f"--out {str(folder)!r} is a file; pass a folder for the {what}'s results.")
    runs.check_log_root(folder, "--out")
    root = runs.check_log_root(log_root) if log_root else folder / "runs"
    label = "study name" if what == "study" else f"{what} name"
    checked = runs.check_name(name or runs.experiment_name(folder.name or unnamed), label)
    return folder, root, checked


def check_executor(executor: str, address: str | None) -> None:
    """The executor's name, and an address only for Ray, with Ray installed."""
    if executor not in EXECUTOR_NAMES:
        raise InvalidArgument(
            f"--executor {executor!r} is not one of {', '.join(EXECUTOR_NAMES)}."
            f"{did_you_mean(str(executor), EXECUTOR_NAMES)}"
        )
    if address is not None and executor != "ray":
        raise InvalidArgument(f"--address is for --executor ray, not {executor!r}: add --executor ray.")
    if executor == "ray" and not has("ray"):
        raise MissingDependency("--executor ray needs Ray, which is not installed: pip install 'rlrun[ray]'.")


def has(module: str) -> bool:
    """Whether `module` can be imported (found without importing it)."""
    return importlib.util.find_spec(module) is not None


def evaluation(request: TrainRequest, checkpoint: Any, episodes: int) -> PlayRequest:
    """The play request that evaluates a training's `checkpoint` for `episodes` episodes: the same task, library,
    seed and device, and the training's `env.` overrides (its `agent.` ones are in the run's own configuration)."""
    return PlayRequest(
        task=request.task,
        library=request.library,
        algorithm=request.algorithm,
        ml_framework=request.ml_framework,
        checkpoint=str(checkpoint),
        num_episodes=episodes,
        seed=request.seed,
        device=request.device,
        overrides=tuple(word for word in request.overrides if word.startswith("env.")),
        log_root=request.log_root,
    )


def one_line(error: BaseException) -> str:
    """An exception as one line: its type and its message with every run of whitespace one space."""
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}"
