"""RSL-RL (`rsl-rl-lib` 5.x): its `OnPolicyRunner` on rlrun's torch vector envs.

RSL-RL changes no process setting; it consumes the torch RNG, never closes its TensorBoard
writer (closed here in `finally`), prints a table per iteration (redirected by the caller) and
consumes its configuration dict (deep-copied per call). It has no categorical distribution, so
it trains continuous (Box) tasks only. Checkpoints are `model_<iteration>.pt`, written atomically (a
training stopped early is saved as of the last iteration whose update ran).
RSL-RL's own loader (`runner.load(path)`) unpickles with `weights_only=False`, so rlrun never hands it a
path: it reads the file once with `weights_only=True` (`rlrun.trust.checkpoints`) and gives the state it
checked to the algorithm's `load`, as `runner.load` would after its own read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rlrun.hermetic import torch_backend_flags
from rlrun.libraries.base import PlayJob, Policy, TrainJob, TrainOutcome, require_count, require_keys
from rlrun.libraries.rsl_rl_config import CODE_NAMES as CODE_NAMES  # the adapter's trust table
from rlrun.trust.checkpoints import read_weights

if TYPE_CHECKING:
    from gymnasium.spaces import Box

    from rlrun.envs import TorchVectorEnv

IMPORTS = {"torch": ("tensordict", "rsl_rl", "rsl_rl.runners", "torch.utils.tensorboard", "git")}
ALGORITHMS = {"ppo": ("Box",)}
DEFAULT_ALGORITHM = "ppo"
LOGGERS: tuple[str, ...] = ()
CHECKPOINT_KEYS = ("actor_state_dict", "critic_state_dict", "optimizer_state_dict", "iter")


def env_steps_per_iteration(config: dict[str, Any], num_envs: int) -> int:
    return int(config["num_steps_per_env"]) * num_envs


def check_checkpoint(path: Path) -> None:
    """Load the file with `weights_only=True` and check it holds an RSL-RL runner state."""
    read_checkpoint(path)


def read_checkpoint(path: Path, map_location: str = "cpu") -> dict[str, Any]:
    """The RSL-RL runner state in the file, read once and loaded with `weights_only=True` onto `map_location`."""
    state = read_weights(path, "an RSL-RL checkpoint", map_location=map_location)
    require_keys(path, state, CHECKPOINT_KEYS, "an RSL-RL runner checkpoint")
    require_count(path, state, "iter", "an RSL-RL runner checkpoint")
    return state


def _restore(runner: Any, path: Path, device: str) -> None:
    """What RSL-RL's `runner.load(path)` does, from the state rlrun read and checked: the algorithm loads
    weights, optimiser (and its learning rate) and normaliser statistics, and the iteration counter comes back."""
    state = read_checkpoint(path, map_location=device)
    if runner.alg.load(state, None, True):
        runner.current_learning_iteration = state["iter"]


class RslRlVecEnv:
    """RSL-RL's duck-typed `VecEnv` over rlrun's torch vector env (SAME_STEP autoreset).

    Observations go out as a TensorDict with one group, `policy`; actions are clipped to the Box;
    `extras["time_outs"]` marks truncations that were not terminations, so PPO bootstraps them.
    """

    def __init__(self, env: TorchVectorEnv, config: dict[str, Any], seed: int | None) -> None:
        import torch

        space = cast("Box", env.single_action_space)  # RSL-RL acts in Box spaces only (`ALGORITHMS`)
        self.env = env
        self.cfg = config
        self.num_envs = env.num_envs
        self.num_actions = int(torch.tensor(space.shape).prod().item())
        self.device = env.device
        self.max_episode_length = int(getattr(env, "max_episode_steps", 0) or 0)
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self._low = torch.as_tensor(space.low, dtype=torch.float32, device=self.device)
        self._high = torch.as_tensor(space.high, dtype=torch.float32, device=self.device)
        observations, _ = env.reset(seed=seed)
        self._observations = self._group(observations)

    def _group(self, observations: Any) -> Any:
        from tensordict import TensorDict

        return TensorDict({"policy": observations}, batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> Any:
        return self._observations

    def step(self, actions: Any) -> tuple[Any, Any, Any, dict[str, Any]]:
        import torch

        actions = torch.clamp(actions.reshape(self.num_envs, -1), self._low, self._high)
        observations, rewards, terminated, truncated, _ = self.env.step(actions)
        self._observations = self._group(observations)
        dones = terminated | truncated
        self.episode_length_buf = torch.where(dones, 0, self.episode_length_buf + 1)
        return self._observations, rewards, dones.to(torch.long), {"time_outs": truncated & ~terminated}


def _runner(env: TorchVectorEnv, config: dict[str, Any], log_dir: Path | None, device: str, seed: int | None) -> Any:
    from rsl_rl.runners import OnPolicyRunner

    runner = OnPolicyRunner(
        RslRlVecEnv(env, config, seed), config, log_dir=str(log_dir) if log_dir else None, device=device
    )
    # RSL-RL stores a git diff of the repository holding rsl_rl itself (none for a pip install; the enclosing
    # project's when the environment lives inside one) through GitPython, whose persistent `git cat-file`
    # processes outlive the call until the collector happens to stop them. run.json records the versions.
    runner.logger.git_status_repos = []
    return runner


def train(job: TrainJob) -> TrainOutcome:
    """Run `OnPolicyRunner.learn` for `job.max_iterations` iterations, checkpointing atomically."""
    # Isaac Lab's policy for RSL-RL: TF32 on, cuDNN autotuning off; deterministic only on request.
    torch_backend_flags(
        matmul_allow_tf32=not job.deterministic,
        cudnn_allow_tf32=not job.deterministic,
        deterministic=job.deterministic,
        benchmark=False,
    )
    runner = _runner(job.env, job.config, job.run_dir, job.device, job.seed)
    saved: list[Path] = []
    write = runner.save

    def save(path: str, infos: dict[str, Any] | None = None) -> None:
        index = int(Path(path).stem.rsplit("_", 1)[-1])  # RSL-RL names a checkpoint by its last iteration's index
        saved.append(job.save_checkpoint(Path(path).name, lambda temporary: write(temporary, infos), index + 1))

    runner.save = save  # RSL-RL writes model_<it>.pt with a bare torch.save; go through rlrun's atomic writer
    updates = _count_updates(runner.alg)
    try:
        if job.resume_from is not None:
            # Weights, optimiser (and its learning rate), normaliser statistics and the iteration counter come
            # back; RSL-RL would repeat the saved iteration's number, so the count continues after it.
            _restore(runner, job.resume_from, job.device)
            runner.current_learning_iteration += 1
        first = runner.current_learning_iteration
        try:
            runner.learn(num_learning_iterations=job.max_iterations)
        except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM or a stop request: keep what the runner has learned
            last = first + updates[0] - 1  # the index of the last iteration whose update ran
            if last >= 0:
                try:
                    runner.current_learning_iteration = last  # what RSL-RL writes as the checkpoint's `iter`
                    save(f"model_{last}.pt")
                except BaseException as failure:  # a failed write or a second Ctrl-C: the stop goes on
                    stop.add_note(f"rlrun: the checkpoint at the stop was not saved: {failure!r}")
            raise
    finally:
        writer = getattr(runner.logger, "writer", None)
        if writer is not None:
            writer.close()  # RSL-RL stops only its W&B/Neptune writers; TensorBoard's thread would stay
    return TrainOutcome(iterations=runner.current_learning_iteration + 1, checkpoint=saved[-1] if saved else None)


def _count_updates(algorithm: Any) -> list[int]:
    """Count the algorithm's completed `update` calls (in a one-item list), so that a training stopped in
    the middle of an iteration is saved at the last iteration whose update ran, not the one it was in."""
    update = algorithm.update
    count = [0]

    def counted_update(*args: Any, **kwargs: Any) -> Any:
        result = update(*args, **kwargs)
        count[0] += 1
        return result

    algorithm.update = counted_update
    return count


def export_policy(job: PlayJob) -> Any:
    """The deterministic actor as a plain module on the CPU: observation normaliser, MLP, mean action."""
    runner = _runner(job.env, job.config, None, "cpu", None)
    _restore(runner, job.checkpoint, "cpu")
    return runner.alg.get_policy().as_jit().to("cpu")


def load_policy(job: PlayJob) -> Policy:
    """Rebuild the runner without a log directory, load the checkpoint and return its actor."""
    import torch

    runner = _runner(job.env, job.config, None, job.device, None)
    _restore(runner, job.checkpoint, job.device)
    actor = runner.get_inference_policy(job.device)
    rsl_env = runner.env
    stochastic = not job.deterministic

    def policy(observations: Any) -> Any:
        actions = actor(rsl_env._group(observations), stochastic_output=stochastic)
        return torch.clamp(actions, rsl_env._low, rsl_env._high)

    return policy
