"""Per-library, per-task agent configurations (YAML) and `agent.*=` / `env.*=` override merging.

Agent configurations live in `configs/<library>/<algorithm>/<namespace>/<Task-vN>.yaml` for tuned tasks and
`configs/<library>/<algorithm>/default.yaml` for any other task (`loading`). Besides the library's own keys, each
holds rlrun's run defaults at the top level (`num_envs`, `max_iterations`, `seed`), which the library adapter
removes before the library sees the configuration. A training starts from the shipped configuration, an
`--agent_config` file or RL Zoo's entry (`starting`, `agent_config`, `zoo`); overrides are OmegaConf dotlists in
struct mode (`overrides`), each value checked against the default it replaces (`checks`).
"""

from rlrun.configs.agent_config import AGENT_CONFIG_FLAG, check_agent_config_path, read_agent_config
from rlrun.configs.checks import COUNT_KEY, RATE_KEY
from rlrun.configs.loading import (
    CONFIG_PACKAGES,
    RUN_KEYS,
    config_name,
    has_tuned_config,
    library_config,
    load_agent_config,
    parsed_yaml,
)
from rlrun.configs.overrides import OVERRIDE_SCOPES, apply_overrides, split_overrides
from rlrun.configs.starting import starting_config
from rlrun.configs.yaml_text import to_yaml

__all__ = [
    "AGENT_CONFIG_FLAG",
    "CONFIG_PACKAGES",
    "COUNT_KEY",
    "OVERRIDE_SCOPES",
    "RATE_KEY",
    "RUN_KEYS",
    "apply_overrides",
    "check_agent_config_path",
    "config_name",
    "has_tuned_config",
    "library_config",
    "load_agent_config",
    "parsed_yaml",
    "read_agent_config",
    "split_overrides",
    "starting_config",
    "to_yaml",
]
