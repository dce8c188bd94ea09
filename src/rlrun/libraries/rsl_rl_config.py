"""RSL-RL's configuration keys that select code, as rlrun's table (the adapter's `CODE_NAMES`).

RSL-RL resolves every `class_name` with `resolve_callable`: a simple name is searched through all of `rsl_rl`'s
modules, and `package.module:attr` or `package.module.attr` is imported from anywhere, so a configuration could
import and call any installed module (`torch.hub:load` imports a `hubconf.py` from a folder the file names). The
symmetry extension resolves `data_augmentation_func` the same way; the logger is a class too. Activations,
optimisers, RNN types and the learning-rate schedule are RSL-RL's own tables, listed here as RSL-RL spells them.
rlrun allows the classes its adapter runs with (what its shipped configurations use, and the Gaussian
distributions the adapter clips to the action space) and nothing else (`rlrun.trust.names`).
"""

from __future__ import annotations

from rlrun.trust.names import Rule

ACTIVATIONS = (
    "elu",
    "selu",
    "relu",
    "crelu",
    "lrelu",
    "tanh",
    "sigmoid",
    "softplus",
    "gelu",
    "swish",
    "mish",
    "identity",
)
"""RSL-RL's `resolve_nn_activation` names."""
CODE_NAMES: dict[str, Rule] = {
    "class_name": ("OnPolicyRunner",),
    "algorithm.class_name": ("PPO",),
    "actor.class_name": ("MLPModel",),
    "critic.class_name": ("MLPModel",),
    "**.distribution_cfg.class_name": ("GaussianDistribution", "HeteroscedasticGaussianDistribution"),
    "**.class_name": (),
    "**.data_augmentation_func": (),
    "logger": ("tensorboard",),
    "torch_compile_mode": (),
    "**.activation": ACTIVATIONS,
    "**.rnn_type": ("lstm", "gru"),
    "algorithm.optimizer": ("adam", "adamw", "sgd", "rmsprop"),
    "algorithm.schedule": ("adaptive", "fixed"),
}
"""Dotted key patterns of RSL-RL's runner configuration -> the names rlrun allows there (the first match rules):
the runner Isaac Lab names at the top (rlrun runs `OnPolicyRunner`, which ignores the key), the algorithm, models
and distribution rlrun runs; no other `class_name` (a logger's, a student's or teacher's),
no augmentation function, TensorBoard as the logger (W&B and Neptune would send the run off the machine), no
`torch.compile` mode (it compiles inside the call)."""
