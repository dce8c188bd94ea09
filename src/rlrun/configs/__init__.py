"""Per-library, per-task agent configurations (YAML) and `agent.*=` / `env.*=` override merging.

Agent configurations live in `configs/<library>/<algorithm>/<namespace>/<Task-vN>.yaml` for tuned
tasks and `configs/<library>/<algorithm>/default.yaml` for any other task. Besides the library's own keys, each holds
rlrun's run defaults at the top level (`num_envs`, `max_iterations`, `seed`), which the library
adapter removes before the library sees the configuration. Overrides are OmegaConf dotlists in
struct mode: a key the configuration lacks is an error that names the nearest valid key.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from rlrun.errors import InvalidArgument, UnknownConfigKey

OVERRIDE_SCOPES = ("agent", "env")
RUN_KEYS = ("num_envs", "max_iterations", "seed")
"""Top-level keys of an agent configuration that belong to rlrun, not to the library."""


CONFIG_PACKAGES: dict[str, str] = {}
"""Library name -> the package whose files hold its configurations, laid out as here
(`<library>/<algorithm>/default.yaml`, ...), for libraries that packages add (`rlrun.libraries` entry points);
a library not listed has its configurations here."""


def _root(library: str) -> Any:
    return resources.files(CONFIG_PACKAGES.get(library, __name__))


def library_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The library's own part of an agent configuration: a deep copy without rlrun's `RUN_KEYS`."""
    import copy

    return {key: copy.deepcopy(value) for key, value in config.items() if key not in RUN_KEYS}


def config_name(library: str, algorithm: str, task: str) -> str:
    """The packaged file holding the tuned configuration of `library`'s `algorithm` for `task`."""
    return f"{library}/{algorithm}/{task}.yaml"


def has_tuned_config(library: str, algorithm: str, task: str) -> bool:
    """True when rlrun ships a configuration tuned for this library, algorithm and task."""
    return _root(library).joinpath(config_name(library, algorithm, task)).is_file()


def load_agent_config(library: str, algorithm: str, task: str) -> dict[str, Any]:
    """Return the tuned configuration for the task, or the algorithm's generic `default.yaml` (a new copy)."""
    import copy

    root = _root(library)
    path = root.joinpath(config_name(library, algorithm, task))
    if not path.is_file():
        path = root.joinpath(f"{library}/{algorithm}/default.yaml")
    return copy.deepcopy(parsed_yaml(path))


_PARSED: dict[tuple[str, str], Any] = {}
"""YAML documents already parsed, by file and text (see `parsed_yaml`)."""


def parsed_yaml(path: Any) -> Any:
    """The YAML document in the file at `path` (a `Path` or a package resource), parsed once per text.

    Every call's planning reads the same few files (the shipped configuration, RL Zoo's table): reading one
    takes microseconds, parsing it milliseconds (RL Zoo's `ppo.yml` most), so the parsed document is kept per
    path and text, and an edited file is parsed again. The result is shared: callers copy what they change.
    """
    import yaml

    text = path.read_text(encoding="utf-8")
    key = (str(path), text)
    if key not in _PARSED:
        if len(_PARSED) >= 64:  # a bound for a process that reads many edited files; a few in practice
            _PARSED.clear()
        _PARSED[key] = yaml.safe_load(text)
    return _PARSED[key]


AGENT_CONFIG_FLAG = "--agent_config"


def starting_config(
    library: str,
    algorithm: str,
    task: str,
    *,
    path: str | None = None,
    steps_per_iteration: Callable[[dict[str, Any], int], int] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The agent configuration a training starts from, before overrides, and where it came from.

    In order: the file at `path` (`--agent_config`); rlrun's configuration tuned for the task; for sb3 with
    rl_zoo3 installed, RL Zoo's tuned entry for the task (`rlrun.configs.zoo`, mapped with the adapter's
    `steps_per_iteration`); rlrun's default for the algorithm. The second value, recorded in run.json as
    `agent_config`, says which: `{"from": "file" | "rlrun" | "rl_zoo3", "path": ...}` (RL Zoo's also names
    its `entry` and `version`, and a refused RL Zoo entry leaves a `note` beside rlrun's default).
    """
    shipped = load_agent_config(library, algorithm, task)
    if path is not None:
        file = check_agent_config_path(path)
        return read_agent_config(file, shipped), {"from": "file", "path": str(file)}
    source: dict[str, Any] = {"from": "rlrun", "path": _shipped_name(library, algorithm, task)}
    if library != "sb3" or has_tuned_config(library, algorithm, task) or steps_per_iteration is None:
        return shipped, source
    from rlrun.configs import zoo

    found = zoo.entry(algorithm, task)
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
    return config, {"from": "rl_zoo3", "path": str(file), "entry": task, "version": zoo.version()}


def _shipped_name(library: str, algorithm: str, task: str) -> str:
    name = config_name(library, algorithm, task)
    return name if _root(library).joinpath(name).is_file() else f"{library}/{algorithm}/default.yaml"


def check_agent_config_path(path: str) -> Path:
    """`path` as an absolute path to an existing file; else `InvalidArgument` saying what to pass."""
    import os

    hint = "pass the path of a YAML agent configuration, such as a run's params/agent.yaml"
    if not isinstance(path, str | os.PathLike) or not os.fspath(path) or "\x00" in os.fspath(path):
        raise InvalidArgument(f"{AGENT_CONFIG_FLAG} {path!r} is not a file path; {hint}.")
    file = Path(path).absolute()
    try:
        exists, is_file = file.exists(), file.is_file()
    except OSError as error:  # a name too long, a loop of links
        raise InvalidArgument(f"{AGENT_CONFIG_FLAG} {str(path)[:80]!r}: {error.strerror}; {hint}.") from None
    if not exists:
        raise InvalidArgument(f"{AGENT_CONFIG_FLAG} {str(path)!r} does not exist; {hint}.")
    if not is_file:
        raise InvalidArgument(f"{AGENT_CONFIG_FLAG} {str(path)!r} is not a file; {hint}.")
    return file


def read_agent_config(path: Path, shipped: Mapping[str, Any]) -> dict[str, Any]:
    """The agent configuration in the YAML file at `path`, checked against `shipped` (the configuration it
    replaces) the way overrides are: a value that cannot stand where the shipped one stood is refused, in
    one line naming the file and the key. Keys the file adds are kept; rlrun's run keys (`num_envs`,
    `max_iterations`, `seed`) it lacks are the shipped ones."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or type(error).__name__
        raise InvalidArgument(
            f"{AGENT_CONFIG_FLAG} {str(path)!r} cannot be read ({reason}); pass a YAML file."
        ) from None
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        reason = " ".join(str(getattr(error, "problem", None) or "invalid YAML").split())
        raise InvalidArgument(
            f"{AGENT_CONFIG_FLAG} {str(path)!r} is not YAML ({reason}{where}); fix the file, "
            "or start from a run's params/agent.yaml."
        ) from None
    if not isinstance(config, dict) or not all(isinstance(key, str) for key in config):
        raise InvalidArgument(
            f"{AGENT_CONFIG_FLAG} {str(path)!r} holds {_kind(config)}, not a mapping of configuration keys; "
            "pass a file like a run's params/agent.yaml."
        )
    for key, value in _leaves(config):
        _check_type(shipped, value, key, "agent", origin=f"{AGENT_CONFIG_FLAG} {str(path)!r}")
    return {**{key: shipped[key] for key in RUN_KEYS if key in shipped and key not in config}, **config}


def _kind(value: Any) -> str:
    """What a YAML document holds, in words: `nothing`, `a list`, `a str`, `a mapping with non-string keys`."""
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping with non-string keys"
    return f"a {type(value).__name__}"


def split_overrides(overrides: Iterable[str]) -> dict[str, list[str]]:
    """Sort `scope.key=value` words by scope; anything else is rejected with the expected form."""
    scoped: dict[str, list[str]] = {scope: [] for scope in OVERRIDE_SCOPES}
    for word in overrides:
        scope, _, rest = word.partition(".")
        if scope not in scoped or "=" not in rest or not rest.split("=", 1)[0]:
            raise InvalidArgument(
                f"override {word!r} is not of the form agent.<key>=<value> or env.<key>=<value> "
                "(for example agent.algorithm.learning_rate=3e-4 or env.max_episode_steps=200)."
            )
        scoped[scope].append(rest)
    return scoped


def apply_overrides(config: Mapping[str, Any], dotlist: list[str], *, scope: str) -> dict[str, Any]:
    """Return `config` with OmegaConf dotlist overrides applied; unknown keys raise `UnknownConfigKey`."""
    if not dotlist:
        return _plain(config)
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

    base = OmegaConf.create(dict(config))
    OmegaConf.set_struct(base, True)
    try:  # every override in one merge (each merge copies the whole configuration: about 1.5 ms)
        merged = OmegaConf.merge(base, OmegaConf.from_dotlist(dotlist))
    except (OmegaConfBaseException, yaml.YAMLError):
        merged = None  # one by one below, to name the override at fault
    if merged is not None:
        for item in dotlist:
            key = item.split("=", 1)[0]
            _check_type(config, OmegaConf.select(merged, key), key, scope)
        return OmegaConf.to_container(merged, resolve=True)  # type: ignore[return-value]
    for item in dotlist:
        key = item.split("=", 1)[0]
        try:
            base = OmegaConf.merge(base, OmegaConf.from_dotlist([item]))
        except ConfigKeyError:
            close = _nearest_key(config, key)
            hint = f" Did you mean '{scope}.{close}'?" if close else _keys_beside(config, key, scope)
            raise UnknownConfigKey(f"unknown {scope} configuration key '{scope}.{key}'.{hint}") from None
        except OmegaConfBaseException as error:
            listed = _list_above(config, key)
            if listed is not None:  # `hidden_dims.0=32`: OmegaConf reads the index as a key of a new section
                name, value = listed
                raise InvalidArgument(
                    f"override '{scope}.{item}' reaches into {scope}.{name}, a list; pass the whole list, "
                    f"e.g. {scope}.{name}={json.dumps(value)}."
                ) from None
            message = str(error).splitlines()[0]
            raise InvalidArgument(f"cannot apply override '{scope}.{item}': {message}") from None
        except yaml.YAMLError as error:  # OmegaConf parses each value as YAML: `[16,` is not a list
            reason = " ".join(str(getattr(error, "problem", None) or error).split())
            raise InvalidArgument(
                f"override '{scope}.{item}' is not a YAML value ({reason}); quote or complete it, e.g. [64, 64]."
            ) from None
        _check_type(config, OmegaConf.select(base, key), key, scope)
    return OmegaConf.to_container(base, resolve=True)  # type: ignore[return-value]


RATE_KEY = re.compile(r"(^|_)(learning_rate|lr)$")
"""Keys of learning rates: a rate must be a positive number (every library's optimiser refuses others)."""
COUNT_KEY = re.compile(r"(^|_)(num|n)(_|$)|steps|epochs|rollouts|horizon|batches|batch_size|minibatch")
"""Keys of counts (rollout lengths, epochs, minibatches): where the default is at least 1, so is the value
(the libraries divide by them or build empty batches: a ZeroDivisionError deep in an update otherwise)."""


def _check_type(config: Mapping[str, Any], new: Any, key: str, scope: str, origin: str = "override") -> None:
    """Refuse an override whose value cannot stand where the default stood: a number or a boolean where
    one stood, a list where a list stood (of integers where integers stood), a mapping where a mapping
    stood, and a learning rate that is not positive. What the library would reject only later, in the
    middle of a call, is caught here, before the run directory exists."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    old: Any = config
    for part in key.split("."):
        if not isinstance(old, Mapping) or part not in old:
            return
        old = old[part]
    if isinstance(new, ListConfig | DictConfig):
        new = OmegaConf.to_container(new, resolve=True)
    shown = f"override '{scope}.{key}={new}'" if origin == "override" else f"{origin}: '{scope}.{key}: {new}'"
    last = key.rsplit(".", 1)[-1]
    numbers = (int, float)
    rate = RATE_KEY.search(last) and isinstance(old, numbers) and not isinstance(old, bool)
    if rate and isinstance(new, numbers) and not isinstance(new, bool) and not new > 0:
        raise InvalidArgument(f"{shown}: a learning rate must be positive (the default is {old!r}).")
    count = COUNT_KEY.search(last) and isinstance(old, int) and not isinstance(old, bool) and old >= 1
    if count and isinstance(new, int) and not isinstance(new, bool) and new < 1:
        raise InvalidArgument(f"{shown}: this count must be at least 1 (the default is {old!r}).")
    if (new is None and origin != "override") or (isinstance(new, str) and new.startswith("lin_")):
        return  # a file may leave an optional value unset; `lin_<start>` is RL Zoo's schedule (the adapter reads it)
    if isinstance(old, list):
        if not isinstance(new, list):
            raise InvalidArgument(f"{shown} expects a list, like the default {old!r}.")

        def integers(values: list[Any]) -> bool:
            return all(isinstance(item, int) and not isinstance(item, bool) for item in values)

        if old and integers(old) and not integers(new):
            raise InvalidArgument(f"{shown} expects a list of integers, like the default {old!r}.")
        return
    if isinstance(old, Mapping):
        if not isinstance(new, Mapping):
            raise InvalidArgument(f"{shown} expects a mapping of keys, like the default {old!r}.")
        return
    if isinstance(old, bool):
        ok, expected = isinstance(new, bool), "true or false"
    elif isinstance(old, int):
        ok, expected = isinstance(new, int) and not isinstance(new, bool), "an integer"
    elif isinstance(old, float):
        ok, expected = isinstance(new, (int, float)) and not isinstance(new, bool), "a number"
    else:
        return
    if not ok:
        raise InvalidArgument(f"{shown} expects {expected} (the default is {old!r}).")


def to_yaml(config: Mapping[str, Any]) -> str:
    """Render a configuration as YAML, keys in their original order (`yaml.safe_dump`'s text, written by libyaml's
    emitter where PyYAML has it: 0.1-0.4 ms a configuration instead of 0.5-1.7 ms, twice in every training call)."""
    import yaml

    return yaml.dump(_plain(config), Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)


def _leaves(config: Mapping[Any, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """Every `(dotted.key, value)` of a nested mapping, mappings themselves included (before their keys)."""
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        yield dotted, value
        if isinstance(value, Mapping):
            yield from _leaves(value, f"{dotted}.")


def _list_above(config: Mapping[str, Any], key: str) -> tuple[str, list[Any]] | None:
    """The list that dotted `key` reaches into (its dotted name and default), if any."""
    value: Any = config
    parts = key.split(".")
    for depth, part in enumerate(parts[:-1]):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
        if isinstance(value, list):
            return ".".join(parts[: depth + 1]), value
    return None


def _nearest_key(config: Mapping[str, Any], key: str) -> str | None:
    """The valid dotted key `key` most likely meant: a sibling spelt alike (`algorithm.learning_rat`), else a key
    elsewhere spelt alike (`algoritm.learning_rate`), else one with the same last part (`learning_rate`). A
    shared section alone is no likeness: `algorithm.zzz` is not `algorithm.schedule`."""
    parent, _, last = key.rpartition(".")
    valid = [name for name in _dotted_keys(config) if not key.startswith(f"{name}.")]  # no ancestors
    siblings = {name.rpartition(".")[2]: name for name in valid if name.rpartition(".")[0] == parent}
    others = [name for name in valid if name.rpartition(".")[0] != parent]
    close = [siblings[name] for name in difflib.get_close_matches(last, list(siblings), n=1, cutoff=0.6)]
    close = close or difflib.get_close_matches(key, others, n=1, cutoff=0.5)
    close = close or [name for name in valid if name.rpartition(".")[2] == last][:1]
    return close[0] if close else None


def _keys_beside(config: Mapping[str, Any], key: str, scope: str, listing: int = 12) -> str:
    """The keys of the deepest section of `config` that `key` (dotted) reaches, as a hint: where nothing is
    close to a key, the user needs to see what is there."""
    section, path = config, [scope]
    for part in key.split(".")[:-1]:
        inner = section.get(part)
        if not isinstance(inner, Mapping):
            break
        section, path = inner, [*path, part]
    names = [str(name) for name in section]
    if not names:
        return ""
    shown = ", ".join(names[:listing]) + (f" and {len(names) - listing} more" if len(names) > listing else "")
    return f" Keys of {'.'.join(path)}: {shown}."


def _dotted_keys(config: Mapping[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        keys.append(dotted)
        if isinstance(value, Mapping):
            keys += _dotted_keys(value, f"{dotted}.")
    return keys


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value
