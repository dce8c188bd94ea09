"""What a bench and a tune share: YAML spec files (`rlrun bench SPEC.yaml`, `rlrun tune SPEC.yaml`), seed lists
such as `0-4`, the out folder with its run directories, the executor's settings, and the play request that
evaluates a training. Each mistake is one line naming the file, flag or key and the fix.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlrun import runs
from rlrun.api.requests import PlayRequest, TrainRequest
from rlrun.errors import InvalidArgument, MissingDependency, did_you_mean
from rlrun.trust.limits import read_yaml

MAX_CELLS = 100_000
"""The most cells a bench, or seeds a list, may have."""

EXECUTOR_NAMES = ("inline", "process", "ray")
MAX_RETRIES = 100
"""The most times `--retries` runs a failed cell or trial again."""


def read_spec(
    path: str | Path,
    what: str,
    keys: Sequence[str],
    overrides: dict[str, Any],
    *,
    not_a_file: str,
    example: str,
    trust: bool = False,
) -> dict[str, Any]:
    """The spec at `path` as a mapping whose keys are all in `keys`, with every `overrides` value that is not
    None in place of its own. `what` names the file in errors (`bench spec`); `not_a_file` is the fix when the
    path is not a file, `example` lists keys a spec has.

    Unless `trust`, a value the spec keeps (one that no override replaces) may not reach beyond the spec's
    own folder and this machine (see `check_reach`)."""
    source = runs.check_path(path, what)
    if not source.is_file():
        raise InvalidArgument(f"{what} {str(source)!r} is not a file; {not_a_file}")
    spec = read_yaml(source, what)
    if not isinstance(spec, dict):
        raise InvalidArgument(f"{what} {str(source)!r} must be a mapping of keys such as {example}.")
    for key in spec:
        if key not in keys:
            raise InvalidArgument(
                f"{what} key {key!r} is unknown.{did_you_mean(str(key), keys, listing=0)} "
                f"Valid keys: {', '.join(keys)}."
            )
    given = {key: value for key, value in overrides.items() if value is not None}
    if not trust:
        check_reach({key: value for key, value in spec.items() if key not in given}, source, what)
    spec.update(given)
    return spec


TRUST_HINT = "or --trust_spec (trust=True in Python) to run the spec as written"
"""How to accept every value of a spec at once, ending each refusal of `check_reach`."""


def check_reach(values: dict[str, Any], source: Path, what: str) -> None:
    """Refuse the spec values that reach beyond the spec's folder or this machine, each in one line naming the
    key and how to allow it: `out`, `log_root` or a SQLite `storage` file outside the folder the spec is in
    (symlinks followed), a `storage` URL of a database server, a Ray `address`, a task whose `module:` part
    names a module to import (`tasks` or `task`). The person allows a value by giving it on the command line
    (or as `load_spec`'s keyword), or all of them with `--trust_spec`."""
    folder = Path(os.path.realpath(source.absolute().parent))
    for key in ("out", "log_root"):
        value = values.get(key)
        if isinstance(value, str | os.PathLike) and not _inside(value, folder):
            raise _untrusted(what, source, key, value, f"outside the spec's folder {str(folder)!r}")
    storage = values.get("storage")
    if isinstance(storage, str):
        problem = _folder_reach(storage, folder) if what == "bench spec" else _storage_reach(storage, folder)
        if problem is not None:
            raise _untrusted(what, source, "storage", storage, problem)
    if values.get("address") is not None:
        raise _untrusted(what, source, "address", values["address"], "which sends the work to a Ray cluster")
    for key in ("tasks", "task"):
        for task in _tasks(values.get(key)):
            module = task_module(task)
            if module is not None:
                raise _untrusted(
                    what, source, key, task, f"whose module {module!r} rlrun would import to find the task"
                )


def task_module(task: str) -> str | None:
    """The module a task id in Gymnasium's `module:id` form names (imported to register the id), or None."""
    module, colon, _ = task.partition(":")
    return module if colon and re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", module) else None


def _tasks(value: Any) -> list[str]:
    """The task ids in a spec's `tasks` (a list or a comma-separated string) or `task` value."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",")]
    if isinstance(value, list | tuple):
        return [item for item in value if isinstance(item, str)]
    return []


def _inside(path: str | os.PathLike[str], folder: Path) -> bool:
    """Whether `path` (relative ones from the working directory, as the command line takes them) ends inside
    `folder` once symlinks are followed."""
    try:
        return Path(os.path.realpath(Path(path).absolute())).is_relative_to(folder)
    except (OSError, ValueError):  # a NUL byte, a loop of links: planning names it
        return False


def _storage_reach(url: str, folder: Path) -> str | None:
    """Why a spec's storage URL reaches beyond its folder, in words; None for an SQLite database in memory or
    in a file inside `folder`. A URL that is no URL is left to planning, which refuses it."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return None
    if scheme.partition("+")[0].lower() != "sqlite":
        return "a database server that the study's trials would be written to"
    database, _, query = rest.partition("?")
    if query:
        return "with query options, which may point SQLite at another file"
    if database in ("", "/", "/:memory:"):
        return None
    if not database.startswith("/"):
        return "which names a host"
    if not _inside(database[1:], folder):
        return f"a database file outside the spec's folder {str(folder)!r}"
    return None


def _folder_reach(url: str, folder: Path) -> str | None:
    """Why a bench spec's `storage` (a path or an fsspec URL) reaches beyond its folder, in words; None for a
    path, or a `file://` URL, inside `folder`."""
    scheme, separator, rest = url.partition("://")
    if separator and scheme.lower() != "file":
        return "a filesystem off this machine that every cell's run folder would be uploaded to"
    path = rest if separator else url
    if not _inside(path, folder):
        return f"a folder outside the spec's folder {str(folder)!r} that every run folder would be copied to"
    return None


def _untrusted(what: str, source: Path, key: str, value: Any, problem: str) -> InvalidArgument:
    shown = shown_url(str(value)) if key == "storage" else str(value)
    return InvalidArgument(
        f"{what} {str(source)!r} sets {key} {shown!r}, {problem}; give --{key} {shlex.quote(shown)} on the command "
        f"line to allow it, {TRUST_HINT}."
    )


def shown_url(url: str) -> str:
    """`url` with the password of its `user:password@` part, if any, as `***`: a URL fit to print."""
    return re.sub(r"(://[^/@:]*):[^/@]*@", r"\1:***@", url)


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


def training_request(
    run: Any, request: Any, *, task: str, seed: int, overrides: Sequence[str], out: tuple[Path, str], iterations: int
) -> TrainRequest:
    """The training of one bench cell or tune trial: `run`'s library, algorithm and framework (a `BenchRun`, or
    the `TuneRequest` itself), `request`'s environments and device, written under `out` (the run directories'
    root and the experiment's name)."""
    return TrainRequest(
        task=task,
        library=run.library,
        algorithm=run.algorithm,
        ml_framework=run.ml_framework,
        num_envs=request.num_envs,
        seed=seed,
        device=request.device,
        overrides=tuple(overrides),
        log_root=str(out[0]),
        experiment=out[1],
        max_iterations=iterations,
    )


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
