"""Atari ids as rlrun runs them: Gymnasium's `ALE/<Game>-v5` (from ale-py) behind the standard preprocessing.

An Atari task is the game seen the way the Atari literature trains on it (Mnih et al. 2015, Machado et al. 2018),
the same on every vectorization:

- each agent step repeats the action for `frameskip` frames (4) and returns the pixel-wise maximum of the last two;
- the screen in grayscale, resized to 84x84 (OpenCV's area interpolation), the last 4 such frames stacked:
  observations are uint8 images `[4, 84, 84]`;
- up to 30 no-op actions after every reset; sticky actions with Gymnasium's `-v5` probability (0.25);
- an episode is a whole game (no end at a lost life, no FIRE pressed at reset) and rewards are the game's own,
  unclipped, so that a return is the game score that human-normalised figures compare.

`--vectorization envpool` runs it on EnvPool's C++ pool (`envpool.make_gymnasium("<Game>-v5", ...)` with the
options above); `sync` and `async` on Gymnasium's vector envs of ale-py's `AtariEnv` with Gymnasium's
`AtariPreprocessing` and `FrameStackObservation` wrappers. The `env.` keys both honour are `ATARI_KEYS`. The two
engines are not bit for bit alike (sticky-action and no-op random streams differ; the first stacked observation
after a reset is the reset frame repeated on Gymnasium's side): statistically the same task, not the same stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MODULE = "ale_py"
"""The module that registers Gymnasium's `ALE/` ids (and ships the ROMs)."""
EXTRA = "atari"
"""The pip extra that installs it (and OpenCV, which Gymnasium's Atari preprocessing resizes with)."""

NOOP_MAX = 30
SCREEN = 84
STACK = 4

ATARI_KEYS = frozenset(
    {"repeat_action_probability", "full_action_space", "frameskip", "mode", "difficulty", "max_episode_steps"}
)
"""The `env.` keys an Atari task takes on every vectorization, with Gymnasium's meaning (`max_episode_steps` in
agent steps; ALE's own limit of 108,000 frames, 27,000 steps, stays)."""


def is_atari(task: str, entry_point: Any = None) -> bool:
    """Whether `task` is one of ale-py's Gymnasium Atari ids (`ALE/<Game>-v5`), by name and, when given, by the
    spec's entry point."""
    named = task.startswith("ALE/") and task.endswith("-v5")
    return named and (entry_point is None or str(entry_point).startswith(f"{MODULE}."))


def refused_key(env_kwargs: Mapping[str, Any], defaults: Mapping[str, Any]) -> str | None:
    """The first `env.` key an Atari task cannot honour: not in `ATARI_KEYS` and not equal to its default."""
    for key, value in env_kwargs.items():
        if key not in ATARI_KEYS and (key not in defaults or defaults[key] != value):
            return key
    return None


def check_atari(task: str, env_kwargs: Mapping[str, Any], vectorization: str, *, video: bool = False) -> None:
    """Raise the user error that stops an Atari task on `vectorization` (sync, async or envpool), if any."""
    import importlib.util

    from rlrun.envs.signatures import env_config
    from rlrun.errors import InvalidArgument, MissingDependency

    key = refused_key(env_kwargs, env_config(task))
    if key is not None:
        raise InvalidArgument(
            f"{task}: env.{key}={env_kwargs[key]!r} is not taken by an Atari task, which runs the standard "
            f"preprocessing (it takes {', '.join('env.' + name for name in sorted(ATARI_KEYS))}); drop it."
        )
    try:
        frameskip(env_kwargs)
    except ValueError as error:
        raise InvalidArgument(f"{task}: {error}.") from None
    if video:
        raise InvalidArgument(f"{task}: Atari tasks do not record videos here; drop --video.")
    if vectorization in ("sync", "async") and importlib.util.find_spec("cv2") is None:
        raise MissingDependency(
            f"{task} on --vectorization {vectorization} needs OpenCV for Gymnasium's Atari preprocessing: "
            f"pip install 'rlrun[{EXTRA}]', or use --vectorization envpool."
        )


def frameskip(env_kwargs: Mapping[str, Any]) -> int:
    value = env_kwargs.get("frameskip", 4)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"env.frameskip for an Atari task is a whole number of frames >= 1, got {value!r}")
    return value


def envpool_options(task: str, env_kwargs: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """EnvPool's id for `task` and the keyword arguments that make its env the task above."""
    options: dict[str, Any] = {
        "frame_skip": frameskip(env_kwargs),
        "repeat_action_probability": float(env_kwargs.get("repeat_action_probability", 0.25)),
        "full_action_space": bool(env_kwargs.get("full_action_space", False)),
        "noop_max": NOOP_MAX,
        "img_height": SCREEN,
        "img_width": SCREEN,
        "stack_num": STACK,
        "gray_scale": True,
        "episodic_life": False,
        "reward_clip": False,
        "use_fire_reset": False,
    }
    for key in ("mode", "difficulty"):
        if env_kwargs.get(key) is not None:
            options[key] = int(env_kwargs[key])
    if env_kwargs.get("max_episode_steps") is not None:
        options["max_episode_steps"] = int(env_kwargs["max_episode_steps"])
    return task.removeprefix("ALE/"), options


def gymnasium_options(env_kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """The keyword arguments for `gymnasium.make_vec` of an Atari id, and the wrappers each env gets, for the task
    above on Gymnasium's vector envs (ALE steps single frames; the preprocessing skips and pools them)."""
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, TimeLimit

    skip = frameskip(env_kwargs)
    make: dict[str, Any] = {
        "repeat_action_probability": float(env_kwargs.get("repeat_action_probability", 0.25)),
        "full_action_space": bool(env_kwargs.get("full_action_space", False)),
    }
    make.update({key: env_kwargs[key] for key in ("mode", "difficulty") if env_kwargs.get(key) is not None})
    make["frameskip"] = 1
    limit = env_kwargs.get("max_episode_steps")

    def preprocess(env: Any) -> Any:
        return AtariPreprocessing(
            env,
            noop_max=NOOP_MAX,
            frame_skip=skip,
            screen_size=SCREEN,
            terminal_on_life_loss=False,
            grayscale_obs=True,
            scale_obs=False,
        )

    wrappers: list[Any] = [preprocess, lambda env: FrameStackObservation(env, STACK)]
    if limit is not None:
        wrappers.append(lambda env: TimeLimit(env, int(limit)))
    return make, wrappers


__all__ = [
    "ATARI_KEYS",
    "EXTRA",
    "MODULE",
    "check_atari",
    "envpool_options",
    "gymnasium_options",
    "is_atari",
    "refused_key",
]
