"""Progress displays: one compact line with iteration, env steps/s, mean return and time left; no threads."""

from __future__ import annotations

import io
import threading

import rlrun
from rlrun.progress import LineProgress, RichProgress, for_stream
from support import MEDDLING_TASK, SMALL_RSL_RL


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_live_display_draws_without_a_refresh_thread():
    stream = Terminal()
    display = RichProgress(stream, interval=0.0)
    threads = threading.active_count()
    display.start("train rsl_rl task", total_env_steps=1000, env_steps_per_iteration=100)
    display.update(500, 123.4)
    assert threading.active_count() == threads
    display.stop()
    text = stream.getvalue()
    for fragment in ("train rsl_rl task", "it 5/10", "steps/s", "return 123.4", "left"):
        assert fragment in text


def test_plain_lines_for_logs_and_pipes():
    stream = io.StringIO()
    display = LineProgress(stream, interval=0.0)
    display.start("train", total_env_steps=1000, env_steps_per_iteration=100)
    display.update(250, None)
    display.stop()
    assert stream.getvalue().startswith("train: 25% it 2/10") and "return -" in stream.getvalue()


def test_the_display_is_chosen_by_whether_the_stream_is_a_terminal():
    assert isinstance(for_stream(Terminal()), RichProgress)
    assert isinstance(for_stream(io.StringIO()), LineProgress)


def test_a_call_drives_the_display_from_its_environment_steps(log_root):
    updates = []

    class Recorder:
        def start(self, label, total_env_steps, env_steps_per_iteration):
            updates.append(("start", total_env_steps, env_steps_per_iteration))

        def update(self, env_steps, mean_return):
            updates.append(env_steps)

        def stop(self):
            updates.append("stop")

    request = rlrun.TrainRequest(
        task=MEDDLING_TASK, num_envs=2, max_iterations=2, log_root=str(log_root), overrides=SMALL_RSL_RL
    )
    rlrun.train(request, progress=Recorder())
    assert updates[0] == ("start", 2 * 8 * 2, 8 * 2) and updates[-1] == "stop"
    assert updates[1:-1] == list(range(2, 2 * 8 * 2 + 1, 2))


def test_verbose_passes_the_library_console_output_through(log_root, capsys):
    request = rlrun.TrainRequest(
        task=MEDDLING_TASK, num_envs=2, max_iterations=1, log_root=str(log_root), overrides=SMALL_RSL_RL, verbose=True
    )
    result = rlrun.train(request)
    assert "Learning iteration" in capsys.readouterr().out  # RSL-RL's own table
    assert not (result.run_dir / "console.log").exists()
    quiet = rlrun.train(rlrun.TrainRequest(**{**request.__dict__, "verbose": False}))
    assert "Learning iteration" not in capsys.readouterr().out
    assert "Learning iteration" in (quiet.run_dir / "console.log").read_text()
