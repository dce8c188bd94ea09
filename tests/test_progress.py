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
    steps = updates[1:-1]  # a few times a second, and at every iteration's end
    assert steps[0] == 2 and {16, 32} <= set(steps) and steps[-1] == 32
    assert steps == sorted(steps) and set(steps) <= set(range(2, 2 * 8 * 2 + 1, 2))


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


def test_bench_board_plain_says_where_the_cells_run_then_prints_each_cell_as_it_starts_and_ends():
    from rlrun.progress import BenchBoard

    stream = io.StringIO()
    cells = [("a", "task A  rsl_rl/ppo  seed 0"), ("b", "task B  sb3/ppo  seed 0")]
    board = BenchBoard(cells, stream=stream, live=False, intro="on ray x2, results to out/results.jsonl")
    assert stream.getvalue() == "bench: 2 cells on ray x2, results to out/results.jsonl\n"  # before any cell starts
    assert board.eta() == "-"  # no cell has finished: nothing to estimate from
    board.start("a")
    board.iteration("a", 3, 12345.6, None)
    assert board.state == {"a": "running", "b": "queued"} and board.detail["a"] == "it 3  12,346 steps/s  return -"
    assert stream.getvalue().splitlines()[1:] == ["[0/2] started task A  rsl_rl/ppo  seed 0"]  # no line per iteration
    board.finish("a", "completed", "return 12.0")
    board.start("b")
    board.finish("b", "failed", "worker died: killed by signal SIGKILL")
    board.stop()
    lines = stream.getvalue().splitlines()[2:]
    assert lines[0].startswith("[1/2] done task A  rsl_rl/ppo  seed 0: return 12.0  eta ")
    assert lines[1] == "[1/2] started task B  sb3/ppo  seed 0"
    assert lines[2].startswith("[2/2] failed task B  sb3/ppo  seed 0: worker died: killed by signal SIGKILL  eta ")
    assert board.state == {"a": "done", "b": "failed"}


def test_bench_board_live_draws_a_table_of_every_cell_and_its_progress():
    from rlrun.progress import BenchBoard

    stream = io.StringIO()
    board = BenchBoard([("a", "cell A"), ("b", "cell B")], stream=stream, live=True)
    assert stream.getvalue() == "bench: 2 cells\n"  # said before the first cell starts, as in plain output
    board.start("a")
    board.iteration("a", 1, 100.0, 5.0)  # within a quarter second of the last draw: drawn at the next event
    board.finish("a", "completed", "return 5.0")
    board.stop()
    text = stream.getvalue()
    assert "bench: 2 cells" in text and "cell A" in text and "cell B" in text
    assert "done" in text and "queued" in text and "return 5.0" in text


def test_time_left_is_measured_from_the_end_of_the_first_iteration(monkeypatch):
    """A first iteration that compiles (JAX) takes 60 s, the next ones 1 s each: the time left is read from the
    pace after the first, and before it ends the display says it is warming up instead of reading hours."""
    from rlrun import progress

    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    meter = progress._Meter(interval=0.0)
    meter.begin("train skrl rlrun/Pendulum-v1", total=100 * 64, per_iteration=64)
    clock[0] = 30.0
    assert meter.fields(0, None)["left"] == "warming up"
    clock[0] = 60.0
    assert meter.fields(64, None)["left"] == "warming up"
    clock[0] = 70.0
    shown = meter.fields(64 * 11, None)  # 10 iterations in 10 s since the first: 89 left at 1 s each
    assert shown["left"] == "1:29" and shown["rate"] == "64 steps/s"


def test_step_lines_print_each_step_with_the_seconds_since_the_job_began_and_escape_it():
    import io

    from rlrun.progress import StepLines

    stream = io.StringIO()
    say = StepLines("report", stream)
    say("drawing 3 figures")
    say("a name with an escape \x1b[31m")
    first, second = stream.getvalue().splitlines()
    assert first.startswith("report: drawing 3 figures  [") and first.endswith(" s]")
    assert "\x1b" not in second
