"""What a training records of its configuration, so that the run can be repeated from its own folder.

`params/agent.yaml` holds the agent configuration as it ran: the shipped, RL Zoo or `--agent_config`
configuration with every override applied and rlrun's run keys (`num_envs`, `max_iterations`, `seed`) set to
the values the call settled (`ran`), not the ones the configuration was shipped with. `params/env.yaml` holds
the task's keyword arguments as they ran. A comment header in each says where the configuration came from and
the command that repeats the run; YAML comments are not data, so a file reads back as it was written.
run.json's `agent_config` names the source, the overrides, what was fitted and both files' SHA-256.
"""

from __future__ import annotations

import hashlib
import shlex
from typing import Any

from rlrun.configs.yaml_text import to_yaml


def ran(agent: dict[str, Any], **run_keys: Any) -> dict[str, Any]:
    """`agent` with rlrun's run keys (`RUN_KEYS`) set to what the call settled, each in its place (a key the
    configuration lacked goes last): the configuration as it runs, not as it was shipped."""
    return {**agent, **run_keys}


def repeat_command(
    *, library: str, algorithm: str, task: str, framework: str | None, config: str, overrides: list[str]
) -> str:
    """The command line that trains again from an agent configuration saved at `config` (`framework`: None where
    the library has one; `overrides`: the run's, of which the `env.` ones are repeated)."""
    words = [
        "rlrun train",
        f"--library {library}",
        f"--algorithm {algorithm}",
        f"--task {shlex.quote(task)}",
        *([f"--ml_framework {framework}"] if framework else []),
        f"--agent_config {config}",
        *(shlex.quote(word) for word in env_overrides(overrides)),
    ]
    return " ".join(words)


def env_overrides(overrides: list[str]) -> list[str]:
    return [word for word in overrides if word.startswith("env.")]


def params_files(
    agent: dict[str, Any], env: dict[str, Any], *, source: dict[str, Any], task: str, num_envs: int, repeat: str
) -> dict[str, str]:
    """The text of `params/agent.yaml` and `params/env.yaml`: each configuration under its comment header."""
    overrides = list(source.get("overrides", ()))
    agent_header = [
        "The agent configuration this run trained with, overrides applied; num_envs, max_iterations and seed are",
        "the values that ran (a resumed run: the iterations it added).",
        f"Started from: {describe_source(source)}.",
        f"Overrides: {' '.join(overrides) or 'none'}.",
        *(
            f"Fitted to num_envs {num_envs}: {key} {change['from']} -> {change['to']} (keeps its minibatches)."
            for key, change in source.get("fitted", {}).items()
        ),
        f"Repeat it: {repeat}",
    ]
    env_header = [
        f"The keyword arguments {task} was made with, env.* overrides applied "
        f"({' '.join(env_overrides(overrides)) or 'none'}).",
    ]
    return {"agent.yaml": commented(agent_header) + to_yaml(agent), "env.yaml": commented(env_header) + to_yaml(env)}


def recorded_source(source: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    """run.json's `agent_config`: where the configuration came from, the overrides, and each params file's
    SHA-256 (of the bytes written), so that a copy of the run can be checked against its record."""
    digests = {name: hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in files.items()}
    return {**source, "sha256": digests}


def describe_source(source: dict[str, Any]) -> str:
    """One phrase for a configuration's source (`starting_config`'s second value)."""
    origin = source.get("from")
    if origin == "rl_zoo3":
        return f"RL Zoo's entry {source.get('entry')} in {source.get('path')} (rl_zoo3 {source.get('version')})"
    if origin == "file":
        return f"the file {source.get('path')}"
    if origin == "run":
        return f"the run's own {source.get('path')}"
    return f"rlrun's {source.get('path')}"


def commented(lines: list[str]) -> str:
    """`lines` as YAML comment lines."""
    return "".join(f"# {line}\n" for line in lines)
