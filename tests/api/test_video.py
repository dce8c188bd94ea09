"""Videos: mp4 clips of the first environment, for native tasks and Gymnasium ids, in train, play and the agents."""

from __future__ import annotations

import numpy as np
import pytest

import rlrun
from rlrun.api import checks
from support import SHORT_RUNS, SMALL_RSL_RL


def frames(path):
    """Decode every frame of an mp4 with moviepy, the library that wrote it.

    moviepy 2.2's reader closes ffmpeg's pipes only when ffmpeg is still running at `close()`; when ffmpeg
    has already exited (a race with the decoding), the pipes are left to the garbage collector, which
    warns (`ResourceWarning`, an error in this suite). The helper holds the process and closes them."""
    from moviepy import VideoFileClip

    with VideoFileClip(str(path)) as clip:
        process = clip.reader.proc
        decoded = list(clip.iter_frames())
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
    process.wait()
    return decoded


def clip_lengths(video_length):
    """Gymnasium's recorder keeps video_length + 1 frames; moviepy 2.2 may drop the last one when it rounds
    the clip's duration at some frame rates."""
    return (video_length, video_length + 1)


@pytest.mark.parametrize("task", ["rlrun/CartPole-v1", "CartPole-v1", "rlrun/Pendulum-v1"])
def test_an_agent_records_one_clip_of_the_first_environment(task, log_root):
    result = rlrun.random_agent(
        rlrun.AgentRequest(task=task, num_envs=3, max_steps=30, video=True, video_length=12, log_root=str(log_root))
    )
    (clip,) = result.videos
    assert clip.parent == log_root.absolute() / "random_agent" / task.replace("/", "_") / "videos"
    images = frames(clip)
    assert len(images) in clip_lengths(12) and images[0].ndim == 3 and images[0].shape[2] == 3
    assert len({image.tobytes() for image in images}) > 1  # the pictures move
    assert images[0].std() > 0  # and are not blank


def test_training_records_periodic_clips_into_the_run_directory(log_root):
    result = rlrun.train(
        rlrun.TrainRequest(
            task="rlrun/Pendulum-v1",
            num_envs=4,
            max_iterations=5,
            log_root=str(log_root),
            overrides=SMALL_RSL_RL,
            video=True,
            video_length=5,
            video_interval=16,
        )
    )
    assert [clip.name for clip in result.videos] == [
        "rl-video-step-0.mp4",
        "rl-video-step-16.mp4",
        "rl-video-step-32.mp4",
    ]
    assert all(clip.parent == result.run_dir / "videos" / "train" for clip in result.videos)
    assert all(len(frames(clip)) in clip_lengths(5) for clip in result.videos)

    played = rlrun.play(
        rlrun.PlayRequest(task="rlrun/Pendulum-v1", num_episodes=1, log_root=str(log_root), video=True, video_length=8)
    )
    (clip,) = played.videos
    assert clip.parent == result.run_dir / "videos" / "play" and clip.name.startswith("model_4-")
    assert len(frames(clip)) in clip_lengths(8)


def test_the_native_picture_is_gymnasium_s_picture_of_the_same_state():
    import gymnasium
    import torch

    from rlrun.envs import make_env

    env = make_env("rlrun/CartPole-v1", 2, render_mode="rgb_array")
    env.reset(seed=3)
    env.step(torch.tensor([1, 0]))
    reference = gymnasium.make("CartPole-v1", render_mode="rgb_array")
    reference.reset(seed=0)
    reference.unwrapped.state = env.unwrapped.state[1].numpy()
    assert np.array_equal(env.render()[1], reference.render())
    assert not np.array_equal(env.render()[0], env.render()[1])
    reference.close()
    env.close()


def test_video_needs_moviepy_and_says_how_to_get_it(monkeypatch, capsys, log_root):
    monkeypatch.setattr(checks, "has", lambda module: module != "moviepy")
    assert rlrun.main(["random", "--task", "rlrun/Pendulum-v1", "--video", "--log_root", str(log_root)]) == 2
    assert "pip install 'rlrun[video]'" in capsys.readouterr().err
    assert not log_root.exists()


@pytest.mark.parametrize("library", list(SHORT_RUNS))
def test_every_library_records_its_training_and_its_play(library, log_root):
    common = {"task": "rlrun/Pendulum-v1", "library": library, "log_root": str(log_root), "video": True}
    trained = rlrun.train(
        rlrun.TrainRequest(**common, num_envs=8, max_iterations=2, overrides=SHORT_RUNS[library], video_length=6)
    )
    played = rlrun.play(rlrun.PlayRequest(**common, num_envs=2, num_episodes=1, video_length=6))
    (train_clip,) = trained.videos
    (play_clip,) = played.videos
    assert train_clip.parent == trained.run_dir / "videos" / "train"
    assert play_clip.parent == trained.run_dir / "videos" / "play"
    for clip in (train_clip, play_clip):
        images = frames(clip)
        assert len(images) in clip_lengths(6) and len({image.tobytes() for image in images}) > 1


def native_threads() -> list[str]:
    import os
    from pathlib import Path

    return sorted(Path(f"/proc/self/task/{task}/comm").read_text().strip() for task in os.listdir("/proc/self/task"))


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/task"), reason="reads /proc")
def test_a_classic_control_video_leaves_no_sdl_subsystem_or_native_thread(log_root):
    """Gymnasium's CartPole renders with `pygame.display.init()` and closes with `pygame.quit()`, which leaves SDL's
    timer thread running; the SDL guard shuts it down, and the call prints no SDL complaint about a display."""
    import pygame

    from rlrun.hermetic.process_guards import _capture_sdl, _sdl

    if _capture_sdl():  # a render outside rlrun (another test's) left SDL running: start from a process without
        pygame.quit()
        _sdl().SDL_Quit()
    rlrun.random_agent(rlrun.AgentRequest(task="CartPole-v1", num_envs=1, num_episodes=1))  # warm: import effects
    before = native_threads()
    rlrun.random_agent(
        rlrun.AgentRequest(task="CartPole-v1", num_envs=1, num_episodes=1, video=True, log_root=str(log_root))
    )
    assert "SDLTimer" not in native_threads() and native_threads() == before
    assert _capture_sdl() == 0
