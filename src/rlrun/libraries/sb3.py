"""Stable-Baselines3 (`stable-baselines3` 2.x): PPO, A2C, SAC and TD3 on rlrun's torch vector envs.

SB3 works on NumPy `VecEnv`s: `Sb3VecEnv` (`rlrun.libraries.sb3_env`) is one over rlrun's torch vector env
(SAME_STEP autoreset), with SB3's `infos` for the envs whose episode ended.

Process globals: given a seed, SB3's `set_random_seed` reseeds `random`, NumPy and torch and, on CUDA,
sets cuDNN `deterministic=True, benchmark=False`; the scope's guards restore all of them. Importing SB3
adds a warnings filter, which rlrun's import phase drops (the caller's filters stay theirs). Its logger
(the stdout table, which rlrun redirects, and a TensorBoard writer in the run directory) is closed in
`finally`.

Configuration: the algorithm's constructor keywords, plus the adapter's own keys `policy` (`MlpPolicy`),
`save_interval` (iterations between checkpoints) and, for SAC and TD3, `noise_type` (`normal`,
`ornstein-uhlenbeck` or null) and `noise_std`, as in RL Zoo. `policy_kwargs.activation_fn` names a
`torch.nn` module (`Tanh`, `ReLU`, ...); `learning_rate`, `clip_range` and `clip_range_vf` may be RL Zoo's
linear schedules (`lin_1e-3`). These names are checked before a run starts. `--resume` continues with
the checkpoint's network and the configuration's other hyperparameters.

Iterations (`--max_iterations`): for PPO and A2C, one rollout of `n_steps` steps per env and one update
(Isaac Lab's `n_timesteps = max_iterations * n_steps * num_envs`); for SAC and TD3, one `train_freq`
cycle: `train_freq` steps per env, then `gradient_steps` updates (`train_freq` must count steps, not
episodes).

Checkpoints: SB3's own `.zip` (`model_<iterations>.zip`; a training stopped early is saved as of its
last finished rollout), written through rlrun's atomic writer and
read back with SB3's `load`, which reads the tensors with `torch.load(weights_only=True)` but unpickles
(cloudpickle) the hyperparameters, spaces and schedules kept in the zip's `data` entry: load only files
you trust. `check_checkpoint` reads the zip's entries and tensors without unpickling or building anything.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from rlrun.configs import RUN_KEYS
from rlrun.errors import CorruptCheckpoint, InvalidArgument, UnsupportedTask, did_you_mean
from rlrun.hermetic import torch_backend_flags
from rlrun.libraries.base import PlayJob, Policy, TrainJob, TrainOutcome, unreadable
from rlrun.libraries.sb3_env import vec_env_class

IMPORTS = {"torch": ("stable_baselines3", "torch.utils.tensorboard")}
ALGORITHMS = {"ppo": ("Box", "Discrete"), "a2c": ("Box", "Discrete"), "sac": ("Box",), "td3": ("Box",)}
DEFAULT_ALGORITHM = "ppo"
LOGGERS: tuple[str, ...] = ()
CLASS_NAMES = {"ppo": "PPO", "a2c": "A2C", "sac": "SAC", "td3": "TD3"}
ADAPTER_KEYS = ("policy", "save_interval", "noise_type", "noise_std")
"""Configuration keys the adapter consumes; every other key is a keyword of the algorithm's constructor."""
SCHEDULED_KEYS = ("learning_rate", "clip_range", "clip_range_vf")
"""Constructor keywords that may be RL Zoo's linear schedules (`lin_1e-3`) as well as numbers."""
CHECKPOINT_ENTRIES = ("data", "policy.pth", "_stable_baselines3_version")
POLICY_MODULES = {
    "stable_baselines3.common.policies": "ppo",  # or A2C: the saved hyperparameters tell them apart
    "stable_baselines3.sac.policies": "sac",
    "stable_baselines3.td3.policies": "td3",
}
"""The module of a saved model's policy class -> the algorithm that uses it."""


def env_steps_per_iteration(config: dict[str, Any], num_envs: int) -> int:
    """On-policy configurations (`n_steps`): one rollout; off-policy ones (`train_freq`): one training cycle.

    rlrun calls this before a run starts, so it also checks the names in the configuration (see
    `check_config`): a configuration the adapter cannot read is refused before anything changes.
    """
    check_config(config)
    if "n_steps" in config:
        return int(config["n_steps"]) * num_envs
    return _train_freq_steps(config.get("train_freq", 1)) * num_envs


def check_config(config: dict[str, Any]) -> None:
    """Raise `InvalidArgument` for a name the adapter cannot turn into an object (activation, schedule, noise),
    or a key that is neither the adapter's nor a keyword of SB3's algorithms (an `--agent_config` may add keys)."""
    known = (*ADAPTER_KEYS, *RUN_KEYS)
    unknown = [key for key in config if key not in known and key not in _constructor_keywords()]
    if unknown:
        close = did_you_mean(unknown[0], [*ADAPTER_KEYS, *_constructor_keywords()], listing=0)
        algorithms = ", ".join(CLASS_NAMES.values())
        raise InvalidArgument(
            f"agent.{unknown[0]} is not a keyword of SB3's {algorithms} nor an rlrun sb3 key.{close} "
            "Remove it from the agent configuration."
        )
    activation = (config.get("policy_kwargs") or {}).get("activation_fn")
    if isinstance(activation, str):
        _activation(activation)
    for key in SCHEDULED_KEYS:
        if isinstance(config.get(key), str):
            _schedule_start(key, config[key])
    _noise_class(config.get("noise_type"))


@functools.cache
def _constructor_keywords() -> frozenset[str]:
    """The keywords SB3's algorithm constructors take (any of them: the configuration does not name its algorithm)."""
    import inspect

    import stable_baselines3

    names: set[str] = set()
    for name in CLASS_NAMES.values():
        names.update(inspect.signature(getattr(stable_baselines3, name)).parameters)
    return frozenset(names - {"self", "env", "seed", "device", "_init_setup_model"})


def _train_freq_steps(train_freq: Any) -> int:
    """The steps per env of an SB3 `train_freq` (an integer or `[n, "step"]`); episodes cannot be counted ahead."""
    if isinstance(train_freq, (list, tuple)) and len(train_freq) == 2 and train_freq[1] == "step":
        train_freq = train_freq[0]
    if isinstance(train_freq, bool) or not isinstance(train_freq, int) or train_freq < 1:
        raise InvalidArgument(
            f"agent.train_freq {train_freq!r} is not a number of steps: rlrun counts iterations in train_freq "
            "cycles of a fixed length, so pass a positive integer (steps per env), e.g. agent.train_freq=1."
        )
    return train_freq


# --- checkpoints --------------------------------------------------------------------------------------------


def check_checkpoint(path: Path) -> None:
    """Check that the file is an SB3 model zip of a known algorithm, reading it without unpickling anything."""
    saved_algorithm(path)


def saved_algorithm(path: Path) -> str:
    """The algorithm (`ppo`, `a2c`, `sac`, `td3`) that saved the SB3 model at `path`; `CorruptCheckpoint` if none."""
    try:
        data, state = _read_model_zip(path)
    except CorruptCheckpoint:
        raise
    except Exception as error:
        raise unreadable(path, "a Stable-Baselines3 model", error) from error
    policy_class = data.get("policy_class") if isinstance(data, dict) else None
    module = policy_class.get("__module__") if isinstance(policy_class, dict) else None
    if module not in POLICY_MODULES or not isinstance(state, dict):
        raise CorruptCheckpoint(
            f"checkpoint {str(path)!r} is not a Stable-Baselines3 model of {', '.join(CLASS_NAMES.values())} "
            f"(policy class from {module!r})."
        )
    if POLICY_MODULES[module] == "ppo" and "clip_range" not in data:
        return "a2c"
    return POLICY_MODULES[module]


def _read_model_zip(path: Path) -> tuple[Any, Any]:
    """The zip's `data` entry as JSON (its cloudpickled values stay unread) and the policy's weights."""
    import io
    import json
    import zipfile

    import torch

    with zipfile.ZipFile(path) as archive:
        missing = [name for name in CHECKPOINT_ENTRIES if name not in archive.namelist()]
        if missing:
            raise CorruptCheckpoint(
                f"checkpoint {str(path)!r} is not a Stable-Baselines3 model (missing {', '.join(missing)})."
            )
        data = json.loads(archive.read("data"))
        state = torch.load(io.BytesIO(archive.read("policy.pth")), map_location="cpu", weights_only=True)
    return data, state


def _check_saved_algorithm(path: Path, algorithm: str) -> None:
    saved = saved_algorithm(path)
    if saved != algorithm:
        raise InvalidArgument(
            f"checkpoint {str(path)!r} holds an SB3 {CLASS_NAMES[saved]} model, not {CLASS_NAMES[algorithm]}; "
            f"pass --algorithm {saved}."
        )


def _save(model: Any) -> Any:
    """A writer for `job.save_checkpoint`: SB3's `save` into the open temporary file (no suffix is appended)."""

    def write(temporary: str) -> None:
        with open(temporary, "wb") as file:
            model.save(file)

    return write


# --- the VecEnv (`sb3_env`) ---------------------------------------------------------------------------------


def __getattr__(name: str) -> Any:
    if name == "Sb3VecEnv":  # imports SB3, so only on first use
        return vec_env_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- training -----------------------------------------------------------------------------------------------


class CheckpointCallbackMixin:
    """Counts iterations (one per rollout, on from `first`: a resumed run's parent's count) and saves every
    `save_interval` of them once their update is done."""

    def __init__(self, save: Any, save_interval: int, first: int = 0) -> None:
        super().__init__()  # type: ignore[call-arg]
        self.save = save
        self.save_interval = save_interval
        self.iterations = self.first = first

    def _on_rollout_start(self) -> None:
        # The previous iteration's update has run: that is the model a checkpoint of it must hold.
        if self.iterations > self.first and self.iterations % self.save_interval == 0:
            self.save(self.iterations)

    def _on_rollout_end(self) -> None:
        self.iterations += 1

    def _on_step(self) -> bool:
        return True


@functools.cache
def _callback_class() -> type:
    from stable_baselines3.common.callbacks import BaseCallback

    return type("Sb3Checkpoints", (CheckpointCallbackMixin, BaseCallback), {"__module__": __name__})


def _algorithm_class(algorithm: str) -> Any:
    import stable_baselines3

    return getattr(stable_baselines3, CLASS_NAMES[algorithm])


def constructor_kwargs(config: dict[str, Any], algorithm: str, action_space: Any) -> dict[str, Any]:
    """The algorithm's constructor keywords: the configuration less the adapter's keys, names made objects."""
    kwargs = {key: value for key, value in config.items() if key not in ADAPTER_KEYS}
    policy_kwargs = dict(kwargs.get("policy_kwargs") or {})
    if isinstance(policy_kwargs.get("activation_fn"), str):
        policy_kwargs["activation_fn"] = _activation(policy_kwargs["activation_fn"])
    if policy_kwargs:
        kwargs["policy_kwargs"] = policy_kwargs
    for key in SCHEDULED_KEYS:
        if isinstance(kwargs.get(key), str):
            kwargs[key] = _scheduled(key, kwargs[key])
    if isinstance(kwargs.get("train_freq"), list):
        kwargs["train_freq"] = tuple(kwargs["train_freq"])
    if algorithm not in ("ppo", "a2c"):
        kwargs["action_noise"] = _action_noise(config.get("noise_type"), config.get("noise_std", 0.1), action_space)
    return kwargs


def _scheduled(key: str, value: str) -> Any:
    """RL Zoo's `lin_<start>` (from `start` down to 0 over the training), or a number written as text (`3e-4`)."""
    from stable_baselines3.common.utils import LinearSchedule

    start = _schedule_start(key, value)
    return LinearSchedule(start, 0.0, 1.0) if value.startswith("lin_") else start


def _schedule_start(key: str, value: str) -> float:
    try:
        return float(value.removeprefix("lin_"))
    except ValueError:
        raise InvalidArgument(
            f"agent.{key} {value!r} is neither a number nor a linear schedule such as 'lin_1e-3'."
        ) from None


def _activation(name: str) -> type:
    import torch

    activation = getattr(torch.nn, name, None)
    if not (isinstance(activation, type) and issubclass(activation, torch.nn.Module)):
        raise InvalidArgument(
            f"agent.policy_kwargs.activation_fn {name!r} is not a torch.nn module; use e.g. Tanh, ReLU or ELU."
        )
    return activation


def _action_noise(kind: str | None, std: float, action_space: Any) -> Any:
    import numpy as np

    noise = _noise_class(kind)
    if noise is None:
        return None
    return noise(mean=np.zeros(action_space.shape), sigma=float(std) * np.ones(action_space.shape))


def _noise_class(kind: str | None) -> Any:
    """SB3's action noise class for RL Zoo's `noise_type` (None for no noise)."""
    if kind is None or kind == "none":
        return None
    from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

    noises = {"normal": NormalActionNoise, "ornstein-uhlenbeck": OrnsteinUhlenbeckActionNoise}
    if kind not in noises:
        raise InvalidArgument(f"agent.noise_type {kind!r} is not one of normal, ornstein-uhlenbeck or none.")
    return noises[kind]


def _model(job: TrainJob, vec_env: Any) -> Any:
    """Build the algorithm from the configuration, or load it from `job.resume_from` with its hyperparameters."""
    cls = _algorithm_class(job.algorithm)
    kwargs = constructor_kwargs(job.config, job.algorithm, vec_env.action_space)
    if job.resume_from is None:
        return cls(job.config.get("policy", "MlpPolicy"), vec_env, seed=job.seed, device=job.device, **kwargs)
    _check_saved_algorithm(job.resume_from, job.algorithm)
    kwargs.pop("policy_kwargs", None)  # the network is the checkpoint's; SB3 refuses other policy_kwargs
    try:
        model = cls.load(job.resume_from, env=vec_env, device=job.device, **kwargs)
    except ValueError as error:  # SB3 checks the saved spaces against the env's: another task's checkpoint
        reason = " ".join(str(error).split())[:300]
        raise UnsupportedTask(
            f"checkpoint {str(job.resume_from)!r} does not fit this task ({reason}); "
            "pass the --task it was trained on, or another checkpoint."
        ) from None
    model.set_random_seed(job.seed)
    return model


def train(job: TrainJob) -> TrainOutcome:
    """Run the algorithm's `learn` for `job.max_iterations` iterations, checkpointing atomically."""
    from stable_baselines3.common.logger import configure

    # SB3's own policy: torch's default TF32 settings (matmul off, cuDNN on), and the cuDNN flags its
    # seeding sets on CUDA (deterministic, no autotuning), on every device; no TF32 when asked to be deterministic.
    torch_backend_flags(
        matmul_allow_tf32=False, cudnn_allow_tf32=not job.deterministic, deterministic=True, benchmark=False
    )
    vec_env = vec_env_class()(job.env)
    model = _model(job, vec_env)
    saved: list[Path] = []

    def save(iterations: int) -> None:
        saved.append(job.save_checkpoint(f"model_{iterations}.zip", _save(model), iterations))

    checkpoints = _callback_class()(save, int(job.config.get("save_interval", 50)), job.resume_iteration)
    logger = configure(str(job.run_dir), ["stdout", "tensorboard"])
    try:
        model.set_logger(logger)
        try:
            model.learn(
                total_timesteps=job.max_iterations * env_steps_per_iteration(job.config, vec_env.num_envs),
                callback=checkpoints,
                reset_num_timesteps=job.resume_from is None,
            )
        except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM or a stop request: keep the model as it is
            if checkpoints.iterations > 0:  # named by the iterations whose rollout ended (their update ran)
                try:
                    save(checkpoints.iterations)
                except BaseException as failure:  # a failed write or a second Ctrl-C: the stop goes on
                    stop.add_note(f"rlrun: the checkpoint at the stop was not saved: {failure!r}")
            raise
        save(checkpoints.iterations)
    finally:
        logger.close()  # SB3 never closes it: TensorBoard's writer thread would stay
    return TrainOutcome(iterations=checkpoints.iterations, checkpoint=saved[-1])


# --- playing ------------------------------------------------------------------------------------------------


def load_policy(job: PlayJob) -> Policy:
    """Load the model with SB3's own loader and return its `predict` on torch tensors."""
    import torch
    from stable_baselines3.common.utils import check_for_correct_spaces

    _check_saved_algorithm(job.checkpoint, job.algorithm)
    model = _algorithm_class(job.algorithm).load(job.checkpoint, device=job.device)
    try:
        check_for_correct_spaces(vec_env_class()(job.env), model.observation_space, model.action_space)
    except ValueError as error:
        raise UnsupportedTask(
            f"checkpoint {str(job.checkpoint)!r} does not fit this task ({error}); "
            "pass the --task it was trained on, or another checkpoint."
        ) from None
    deterministic = job.deterministic

    def policy(observations: Any) -> Any:
        actions, _ = model.predict(observations.detach().cpu().numpy(), deterministic=deterministic)
        return torch.as_tensor(actions, device=observations.device)

    return policy


# --- export -------------------------------------------------------------------------------------------------


def export_policy(job: PlayJob) -> Any:
    """The model's deterministic policy on the CPU, as `predict(deterministic=True)` computes it before clipping."""
    _check_saved_algorithm(job.checkpoint, job.algorithm)
    model = _algorithm_class(job.algorithm).load(job.checkpoint, device="cpu")
    return _export_class()(model.policy, job.algorithm, model.action_space)


@functools.cache
def _export_class() -> type:
    import torch
    from stable_baselines3.common.policies import BaseModel

    class Sb3DeterministicPolicy(torch.nn.Module):
        """Observations in, actions out: PPO and A2C the action net's mean (argmax for Discrete), SAC and
        TD3 the squashed actor output scaled to the action space's bounds, as SB3's `predict` does."""

        def __init__(self, policy: Any, algorithm: str, action_space: Any) -> None:
            super().__init__()
            self.policy = policy
            self.algorithm = algorithm
            self.discrete = type(action_space).__name__ == "Discrete"
            self.squashed = algorithm in ("sac", "td3") or bool(getattr(policy, "squash_output", False))
            if not self.discrete:
                self.register_buffer("low", torch.as_tensor(action_space.low, dtype=torch.float32))
                self.register_buffer("high", torch.as_tensor(action_space.high, dtype=torch.float32))

        def forward(self, observations: Any) -> Any:
            if self.algorithm == "sac":
                actions = torch.tanh(self.policy.actor.get_action_dist_params(observations)[0])
            elif self.algorithm == "td3":
                actions = self.policy.actor(observations)  # its last layer is a tanh
            else:
                policy = self.policy
                features = BaseModel.extract_features(policy, observations, policy.pi_features_extractor)
                actions = policy.action_net(policy.mlp_extractor.forward_actor(features))
                if self.discrete:
                    return actions.argmax(dim=-1)
                if self.squashed:
                    actions = torch.tanh(actions)
            if self.squashed:
                return self.low + 0.5 * (actions + 1.0) * (self.high - self.low)
            return actions

    return Sb3DeterministicPolicy
