"""RL Zoo's tuned hyperparameters (rl_zoo3's shipped `hyperparams/<algo>.yml`) as rlrun's sb3 configurations.

RL Zoo (`rl_zoo3`, the `zoo` extra) publishes tuned Stable-Baselines3 hyperparameters per Gymnasium id, with
benchmark results for each. An SB3 training on an id that RL Zoo has tuned, and that rlrun ships no tuned
configuration for, starts from RL Zoo's entry mapped to rlrun's sb3 layout:

- `n_envs` becomes `num_envs` (RL Zoo's default: 1) and `n_timesteps` becomes `max_iterations`, counted in
  the sb3 adapter's iterations (a rollout of `n_steps` per env, or a `train_freq` cycle), rounded up;
- `policy_kwargs` strings (`"dict(net_arch=[400, 300], activation_fn=nn.ReLU)"`) are read with `ast`,
  never `eval` (RL Zoo's own reading): literals, `dict(...)` and `torch.nn` activations only;
- schedules (`lin_7.3e-4`) pass through: the sb3 adapter reads them;
- every other key is a keyword of the algorithm's constructor, as in RL Zoo, and the keys RL Zoo does not
  set are SB3's own defaults, as in RL Zoo's benchmark: rlrun's default configuration, whose values are SB3's
  except those in `SB3_DEFAULTS`, so that `agent.` overrides can still set any of them;
- what rlrun does not apply (`normalize`, `frame_stack`, `env_wrapper`, callbacks, ...) refuses the entry by
  name (`ZooRefused`): the caller then keeps rlrun's own configuration and says why in one line;
- an Atari id takes RL Zoo's `atari` entry, as RL Zoo does. Its `AtariWrapper` and `frame_stack: 4` are what
  rlrun's Atari task already is (`rlrun.envs.atari`: frame skip with max-pooling, no-op starts, 84x84 grayscale,
  4 frames stacked), less two training aids, mapped to the sb3 adapter's `clip_reward: true` (the agent learns
  from reward signs; returns stay game scores); RL Zoo's end of a training episode at each lost life is not
  applied (the note in run.json says so).

The YAML is read from the installed package's folder, found without importing `rl_zoo3` (which imports
SB3, Gymnasium and its own env registrations).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rlrun.errors import InvalidArgument

ALGORITHMS = ("ppo", "a2c", "sac", "td3")
"""The sb3 algorithms rlrun runs that RL Zoo tunes (`hyperparams/<algorithm>.yml`)."""
SB3_DEFAULTS = {"ppo": {"n_steps": 2048}, "sac": {"learning_starts": 100}, "td3": {"learning_starts": 100}}
"""SB3's own defaults where rlrun's default configuration differs from them (RL Zoo's entries leave out the
keys whose SB3 default they keep; `tests/configs/test_zoo.py` checks this table against SB3's signatures)."""
NOT_APPLIED = {
    "frame_stack": "frame stacking (a VecFrameStack wrapper)",
    "env_wrapper": "Gymnasium wrappers around each env",
    "vec_env_wrapper": "VecEnv wrappers",
    "callback": "training callbacks",
    "normalize_kwargs": "observation and reward normalisation (VecNormalize)",
    "monitor_kwargs": "Monitor wrapper options",
    "env_kwargs": "env keyword arguments",
    "replay_buffer_class": "a replay buffer class",
    "replay_buffer_kwargs": "replay buffer options",
    "n_eval_envs": "evaluation envs",
}
"""RL Zoo keys that rlrun does not apply -> what they ask for (an entry holding one is refused by name)."""
ATARI_ENTRY = "atari"
"""The key of RL Zoo's entry for every Atari id."""
ATARI_WRAPPER = "stable_baselines3.common.atari_wrappers.AtariWrapper"
ATARI_NOTE = (
    "RL Zoo's atari entry wraps each env in SB3's AtariWrapper; rlrun's Atari task has its preprocessing and "
    "clip_reward: true its reward clipping, but an episode is a whole game (AtariWrapper ends one at each lost life)."
)
NN_MODULES = ("nn", "th.nn", "torch.nn")
"""How RL Zoo's policy_kwargs name `torch.nn` (`nn.ReLU`, `th.nn.Tanh`)."""


class ZooRefused(Exception):
    """RL Zoo's entry asks for something rlrun does not apply; the message names it in one line."""


def hyperparams_file(algorithm: str) -> Path | None:
    """The installed rl_zoo3's `hyperparams/<algorithm>.yml`, or None (rl_zoo3 missing, or an untuned algorithm)."""
    if algorithm not in ALGORITHMS:
        return None
    try:
        spec = importlib.util.find_spec("rl_zoo3")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "hyperparams" / f"{algorithm}.yml"
        if path.is_file():
            return path
    return None


def entry(algorithm: str, name: str) -> tuple[Path, dict[str, Any]] | None:
    """RL Zoo's tuned entry `name` (an exact Gymnasium id, or `ATARI_ENTRY` for an Atari id, its wrapping mapped
    as the module docstring says) and the file it is in, or None."""
    import copy

    from rlrun.configs.loading import parsed_yaml

    path = hyperparams_file(algorithm)
    if path is None:
        return None
    table = parsed_yaml(path) or {}
    found = table.get(name)
    if not isinstance(found, Mapping):
        return None
    hyper = copy.deepcopy(dict(found))
    if name == ATARI_ENTRY:
        hyper = _atari(hyper)
    return path, hyper


def _atari(hyper: dict[str, Any]) -> dict[str, Any]:
    """RL Zoo's atari entry with its AtariWrapper and 4-frame stack taken as rlrun's Atari task (left in place,
    and so refused, if it asks for anything else)."""
    wrapper = hyper.get("env_wrapper")
    wrappers = wrapper if isinstance(wrapper, list) else [wrapper]
    if wrappers == [ATARI_WRAPPER] and hyper.get("frame_stack") == 4:
        del hyper["env_wrapper"], hyper["frame_stack"]
        hyper["clip_reward"] = True
        if hyper.get("policy") == "CnnPolicy" and "policy_kwargs" not in hyper:
            hyper["policy_kwargs"] = {"net_arch": []}  # SB3's own for NatureCNN, not rlrun's MLP default
    return hyper


def version() -> str | None:
    try:
        return importlib.metadata.version("rl_zoo3")
    except importlib.metadata.PackageNotFoundError:
        return None


def to_rlrun(
    algorithm: str,
    found: Mapping[str, Any],
    default: Mapping[str, Any],
    steps_per_iteration: Callable[[dict[str, Any], int], int],
    where: str,
) -> dict[str, Any]:
    """RL Zoo's entry as rlrun's sb3 configuration (see the module docstring); `ZooRefused` naming what rlrun
    does not apply. `default` is rlrun's own configuration for the algorithm (for its keys RL Zoo lacks) and
    `steps_per_iteration` the sb3 adapter's, which also checks the result as it checks any configuration."""
    hyper = dict(found)
    num_envs = hyper.pop("n_envs", 1)
    timesteps = hyper.pop("n_timesteps", None)
    normalize = hyper.pop("normalize", False)
    if normalize not in (False, None, "false", "False"):
        raise ZooRefused(f"{where} normalises observations (normalize: {normalize}), which rlrun does not apply")
    for key in hyper:
        if key in NOT_APPLIED:
            raise ZooRefused(f"{where} asks for {NOT_APPLIED[key]} ({key}), which rlrun does not apply")
    if isinstance(hyper.get("policy_kwargs"), str):
        hyper["policy_kwargs"] = parse_kwargs(hyper["policy_kwargs"], f"{where} policy_kwargs")
    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
        raise ZooRefused(f"{where} has n_envs {num_envs!r}, not a positive integer")
    config: dict[str, Any] = {**default, **SB3_DEFAULTS.get(algorithm, {}), "num_envs": num_envs}
    if isinstance(hyper.get("policy_kwargs"), Mapping):
        hyper["policy_kwargs"] = {**(default.get("policy_kwargs") or {}), **hyper["policy_kwargs"]}
    config.update(hyper)
    library = {key: value for key, value in config.items() if key not in ("num_envs", "max_iterations", "seed")}
    try:
        steps = steps_per_iteration(library, num_envs)
    except InvalidArgument as error:
        raise ZooRefused(f"{where}: {str(error).rstrip('.')}") from None
    if timesteps is not None:
        try:
            config["max_iterations"] = max(1, math.ceil(float(timesteps) / steps))
        except (TypeError, ValueError):
            raise ZooRefused(f"{where} has n_timesteps {timesteps!r}, not a number") from None
    else:
        config["max_iterations"] = default.get("max_iterations", 1)
    return config


def parse_kwargs(text: str, where: str) -> dict[str, Any]:
    """RL Zoo's `dict(...)` keyword string as a mapping, read with `ast` (RL Zoo itself calls `eval`).

    Literals, lists, tuples, `dict(...)` and `{...}` are read as they are; `nn.ReLU` (or `th.nn.ReLU`,
    `torch.nn.ReLU`) becomes the name `ReLU`, which rlrun's sb3 adapter turns back into the module; any other
    name or call refuses the entry (`ZooRefused`), naming it.
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ZooRefused(f"{where} {text!r} is not a Python expression") from None
    value = _literal(tree.body, where)
    if not isinstance(value, dict):
        raise ZooRefused(f"{where} {text!r} is not a dict(...) of keywords")
    return value


def _literal(node: ast.expr, where: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _literal(node.operand, where)
        if isinstance(operand, int | float) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(item, where) for item in node.elts]
    if isinstance(node, ast.Dict):
        keys = [key for key in node.keys if key is not None]  # a None key is a `**mapping`
        if len(keys) == len(node.keys):
            pairs = zip(keys, node.values, strict=True)
            return {_literal(key, where): _literal(value, where) for key, value in pairs}
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "dict"
        and not node.args
        and all(keyword.arg is not None for keyword in node.keywords)
    ):
        return {keyword.arg: _literal(keyword.value, where) for keyword in node.keywords}
    if isinstance(node, ast.Attribute) and ast.unparse(node.value) in NN_MODULES:
        return node.attr
    raise ZooRefused(f"{where} names {ast.unparse(node)}, which rlrun cannot pass to SB3 from a configuration")
