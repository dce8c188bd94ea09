"""Running a bench: every cell a hermetic training, rows as cells end, resumable, the same rows on every executor."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

import rlrun
from rlrun.benching.request import BenchRun
from support import MEDDLING_TASK, SMALL_RSL_RL, bench_request, drop_a_ctrl_c, result_rows, two_nodes

pytest.importorskip("rsl_rl")
pytest.importorskip("stable_baselines3")  # the libraries its cases train with

SB3_SMALL = ("agent.n_steps=8", "agent.batch_size=16", "agent.policy_kwargs.net_arch=[16,16]")
TIMES = ("wall_s", "steps_per_s", "time_to_threshold_s", "run_dir", "checkpoint")
WHERE = ("node_id", "host")
"""Where a cell ran: the only other fields that differ between executors."""


def small_bench(out: Path, **fields) -> rlrun.BenchRequest:
    spec = {"tasks": ("rlrun/CartPole-v1",), "runs": ("sb3",), "seeds": (0, 1), "overrides": SB3_SMALL}
    return bench_request(out, **{**spec, **fields})


lines = result_rows


def without_times(row: dict) -> dict:
    return {key: value for key, value in row.items() if key not in TIMES + WHERE}


def test_the_command_says_where_its_cells_run_and_each_cell_as_it_starts_before_any_ends(tmp_path, capsys):
    """Piped to a file (no terminal), a bench's first line comes before the executor starts and names it and the
    results file; each cell says it started before it ends."""
    out = tmp_path / "bench"
    argv = ["bench", "--tasks", "rlrun/CartPole-v1", "--libraries", "sb3", "--seeds", "0,1", "--iterations", "2",
            "--num_envs", "2", "--no_report", "--out", str(out), *SB3_SMALL]  # fmt: skip
    assert rlrun.main(argv) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"bench: 2 cells on inline, results to {out / 'results.jsonl'}"
    shown = [line.split(" rlrun/")[0] for line in lines[1:]]
    assert shown == ["[0/2] started", "[1/2] done", "[1/2] started", "[2/2] done"]


def test_an_inline_bench_trains_every_cell_and_writes_one_row_each(tmp_path):
    out = tmp_path / "bench"
    result = rlrun.bench(small_bench(out, eval_episodes=2))
    assert (result.completed, result.failed, result.skipped, result.reused) == (2, 0, 0, 0)
    rows = lines(out)
    assert [row["seed"] for row in rows] == [0, 1] and all(row["status"] == "completed" for row in rows)
    for row in rows:
        assert row["env_steps"] == 2 * 8 * 2 and row["iterations"] == 2
        assert row["eval_return"] is not None and row["threshold"] == 475.0
        assert (Path(row["run_dir"]) / "metrics.csv").is_file()
        assert Path(row["run_dir"]).parent == out / "runs" / "sb3" / "bench"
        assert (row["node_id"], row["host"]) == (None, socket.gethostname())  # inline: this machine, no Ray node


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped Ctrl-C itself
def test_a_ctrl_c_that_python_drops_in_a_finalizer_between_two_cells_stops_the_bench(tmp_path, monkeypatch):
    """Python raises a SIGINT's KeyboardInterrupt in whatever code runs, a weakref finalizer included, and drops
    it there. One that lands between two cells of an API bench is remembered: the next cell's training stops at
    its start, and the bench with it, instead of training every cell left."""
    import importlib

    from rlrun.errors import TrainingStopped

    bench = importlib.import_module("rlrun.benching.run")

    run_cell = bench.run_cell

    def then_a_dropped_ctrl_c(cell, *args, **kwargs):
        row = run_cell(cell, *args, **kwargs)
        drop_a_ctrl_c()  # Python drops the KeyboardInterrupt raised in a finalizer
        return row

    monkeypatch.setattr(bench, "run_cell", then_a_dropped_ctrl_c)
    out = tmp_path / "bench"
    with pytest.raises(TrainingStopped) as raised:
        rlrun.bench(small_bench(out, seeds=(0, 1, 2), iterations=200))
    assert raised.value.reason == "interrupted"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert [row["status"] for row in lines(out)] == ["completed", "interrupted"]  # the second stopped at its start


class CtrlCAt:
    """A bench display that presses Ctrl-C (a real SIGINT to this process) when a cell reaches `iteration`."""

    def __init__(self, iteration: int) -> None:
        self.at = iteration
        self.sent = False

    def __call__(self, cells, where, results):
        return self

    def start(self, key):
        pass

    def iteration(self, key, iteration, steps_per_s, mean_return):
        if iteration >= self.at and not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)

    def finish(self, key, status, summary):
        pass

    def stop(self):
        pass


def test_a_ctrl_c_records_the_stopped_cell_and_the_next_run_goes_on_from_its_checkpoint(tmp_path):
    from rlrun.benching.run import bench as run_bench
    from rlrun.errors import TrainingStopped

    out = tmp_path / "bench"
    request = small_bench(out, seeds=(0,), iterations=6)
    with pytest.raises(TrainingStopped) as raised:
        run_bench(request, display=CtrlCAt(3))
    assert raised.value.reason == "interrupted" and raised.value.bench == out
    (stopped,) = lines(out)
    assert stopped["status"] == "interrupted" and 3 <= stopped["iterations"] < 6
    done = stopped["iterations"]  # the env steps the training took: its iterations', and the stop's step or two
    assert Path(stopped["checkpoint"]).is_file() and done * 8 * 2 <= stopped["env_steps"] < (done + 1) * 8 * 2

    again = rlrun.bench(request)
    (row,) = again.rows
    assert row["status"] == "completed" and row["iterations"] == 6
    assert row["env_steps"] == stopped["env_steps"] + (6 - done) * 8 * 2
    assert row["note"] == f"resumed from {stopped['run_dir']} at iteration {stopped['iterations']}"
    resumed = json.loads((Path(row["run_dir"]) / "run.json").read_text())
    assert (
        resumed["parent"]["checkpoint"] == stopped["checkpoint"]
        and resumed["max_iterations"] == 6 - stopped["iterations"]
    )


def test_a_stopped_row_whose_checkpoint_lies_outside_the_log_root_is_trained_from_the_start(tmp_path):
    """results.jsonl is data: a planted row cannot steer the bench into reading a checkpoint elsewhere."""
    out = tmp_path / "bench"
    request = small_bench(out, seeds=(0,), iterations=2)
    planted = tmp_path / "elsewhere.zip"
    planted.write_bytes(b"not a checkpoint")
    from rlrun.benching.planning import plan_bench
    from rlrun.hermetic import hermetic_call

    with hermetic_call(name="test") as call:
        (cell,) = plan_bench(call, request).cells
    out.mkdir()
    row = {**cell.row(status="interrupted"), "checkpoint": str(planted), "iterations": 1, "env_steps": 16}
    (out / "results.jsonl").write_text(json.dumps(row) + "\n")
    (row,) = rlrun.bench(request).rows
    assert row["status"] == "completed" and row["note"] is None and row["iterations"] == 2


def test_running_a_bench_again_reuses_completed_cells_and_force_reruns_them(tmp_path):
    out = tmp_path / "bench"
    first = rlrun.bench(small_bench(out))
    again = rlrun.bench(small_bench(out))
    assert again.reused == 2 and again.completed == 2
    assert [row["run_dir"] for row in again.rows] == [row["run_dir"] for row in first.rows]
    forced = rlrun.bench(small_bench(out, force=True))
    assert forced.reused == 0
    assert {row["run_dir"] for row in forced.rows}.isdisjoint(row["run_dir"] for row in first.rows)
    assert len(lines(out)) == 2, "a rerun replaces the rows of its cells"


def test_a_cell_that_raises_is_a_failed_row_and_the_bench_goes_on(tmp_path):
    out = tmp_path / "bench"
    request = small_bench(
        out,
        tasks=(MEDDLING_TASK,),
        runs=(
            BenchRun("rsl_rl"),
            BenchRun("rsl_rl", variant="explodes", overrides=("env.fail_at=12",)),
        ),
        overrides=SMALL_RSL_RL,
        seeds=(0,),
    )
    result = rlrun.bench(request)
    status = {row["run"]: row for row in result.rows}
    assert status["rsl_rl/ppo"]["status"] == "completed"
    failed = status["rsl_rl/ppo[explodes]"]
    assert failed["status"] == "failed" and "the environment exploded on purpose" in failed["error"]
    assert "\n" not in failed["error"]
    assert result.failed == 1 and result.completed == 1


TWO_LIBRARIES = {
    "tasks": ("rlrun/Pendulum-v1",),
    "runs": (
        BenchRun("sb3", variant="small", overrides=SB3_SMALL),
        BenchRun("rsl_rl", variant="small", overrides=SMALL_RSL_RL),
    ),
    "overrides": ("env.max_episode_steps=10",),
    "seeds": (3,),
}


def checkpoint_content(path: str) -> dict[str, bytes]:
    """A checkpoint's bytes; for SB3's zip, the bytes of each member but `data`: the weights, optimiser state and
    versions. (`data` holds wall-clock times (`start_time`, each episode's `t`) and object reprs.)"""
    if path.endswith(".zip"):
        with zipfile.ZipFile(path) as archive:
            return {name: archive.read(name) for name in archive.namelist() if name != "data"}
    return {"": Path(path).read_bytes()}


def assert_same_cells(first: rlrun.BenchResult, second: rlrun.BenchResult) -> None:
    assert [without_times(row) for row in first.rows] == [without_times(row) for row in second.rows]
    for one, other in zip(first.rows, second.rows, strict=True):
        assert one["final_return"] is not None
        assert checkpoint_content(one["checkpoint"]) == checkpoint_content(other["checkpoint"])


def test_the_same_cell_gives_the_same_row_and_checkpoint_bytes_inline_and_in_a_process_pool(tmp_path):
    inline = rlrun.bench(small_bench(tmp_path / "inline", **TWO_LIBRARIES))
    pooled = rlrun.bench(small_bench(tmp_path / "pool", **TWO_LIBRARIES, executor="process", workers=2))
    assert_same_cells(inline, pooled)
    assert {(row["node_id"], row["host"]) for row in pooled.rows} == {(None, socket.gethostname())}


@pytest.mark.slow
def test_the_same_cell_gives_the_same_row_and_checkpoint_bytes_on_ray(tmp_path):
    pytest.importorskip("ray")
    inline = rlrun.bench(small_bench(tmp_path / "inline", **TWO_LIBRARIES))
    # Ray keeps native threads and file descriptors in this process after `ray.shutdown()` (README): the
    # leak detector would report them, so it is off for this call alone.
    boards: list[RecordingBoard] = []
    on_ray = rlrun.bench(
        small_bench(tmp_path / "ray", **TWO_LIBRARIES, executor="ray", workers=2),
        check_leaks=False,
        display=lambda cells, where, results: boards.append(RecordingBoard(cells)) or boards[-1],
    )
    assert_same_cells(inline, on_ray)
    for row in on_ray.rows:  # the live table moves as on the pool: each iteration, between start and finish
        mine = [event[0] for event in boards[0].events if event[1:2] == (row["key"],)]
        assert mine == ["start", *["iteration"] * row["iterations"], "finish"]
    assert all(isinstance(row["node_id"], str) and len(row["node_id"]) == 56 for row in on_ray.rows)  # Ray's node id
    assert {row["host"] for row in on_ray.rows} == {socket.gethostname()}


BENCH_SCRIPT = """
import sys
import rlrun
sys.exit(rlrun.main(["bench", "--tasks", "rlrun/CartPole-v1", "--libraries", "sb3", "--seeds", "0-5",
                     "--iterations", "2", "--num_envs", "2", "--out", sys.argv[1], "--no_report",
                     "agent.n_steps=8", "agent.batch_size=16", "agent.policy_kwargs.net_arch=[16,16]"]))
"""


@pytest.mark.slow
def test_a_bench_killed_with_sigkill_resumes_with_no_lost_and_no_duplicate_row(tmp_path):
    out = tmp_path / "bench"
    command = [sys.executable, "-c", BENCH_SCRIPT, str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 2):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    kept = [json.loads(line) for line in results.read_text().splitlines()]  # every line parses: never torn
    assert 2 <= len(kept) < 6
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(row["seed"] for row in rows) == [0, 1, 2, 3, 4, 5]
    assert all(row["status"] == "completed" for row in rows)
    assert f"{len(kept)} reused" in finished.stdout or f"{len(kept)} reused" in finished.stderr + finished.stdout
    by_seed = {row["seed"]: row for row in rows}
    assert all(by_seed[row["seed"]]["run_dir"] == row["run_dir"] for row in kept), "finished cells were not rerun"


class RecordingBoard:
    """A bench display that records what the bench tells it."""

    def __init__(self, cells):
        self.labels = dict(cells)
        self.events: list[tuple] = []

    def start(self, key):
        self.events.append(("start", key))

    def iteration(self, key, iteration, steps_per_s, mean_return):
        self.events.append(("iteration", key, iteration))

    def finish(self, key, status, summary):
        self.events.append(("finish", key, status, summary))

    def stop(self):
        self.events.append(("stop",))


def test_a_pool_bench_shows_every_iteration_and_a_worker_killed_mid_cell_fails_that_cell_alone(tmp_path):
    """The pool's workers send each iteration back (`rlrun.executors.report`), so the live table moves while a
    cell trains; a worker SIGKILLed in the middle of a cell fails that cell with the reason, is replaced, and
    the next cell completes."""
    boards: list[RecordingBoard] = []

    def display(cells, where, results):
        boards.append(RecordingBoard(cells))
        return boards[-1]

    result = rlrun.bench(
        rlrun.BenchRequest(
            tasks=("dying_task:RlrunTestDying-v0", "rlrun/CartPoleContinuous-v1"),
            runs=("rsl_rl",),
            seeds=(0,),
            iterations=3,
            num_envs=2,
            overrides=SMALL_RSL_RL,
            out=str(tmp_path / "bench"),
            executor="process",
            workers=1,
            report=False,
        ),
        display=display,
    )
    (board,) = boards
    died, trained = sorted(result.rows, key=lambda row: row["task"] != "dying_task:RlrunTestDying-v0")
    assert died["status"] == "failed" and died["error"] == "worker died: killed by signal SIGKILL"
    assert trained["status"] == "completed" and trained["iterations"] == 3
    key = trained["key"]
    mine = [event for event in board.events if event[1:2] == (key,)]
    assert [event[0] for event in mine] == ["start", "iteration", "iteration", "iteration", "finish"]
    assert [event[2] for event in mine if event[0] == "iteration"] == [1, 2, 3]
    assert board.events[-1] == ("stop",)


# --- cells on another node ------------------------------------------------------------------------------------


def files_under(folder: Path) -> dict[str, bytes | None]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes() if path.is_file() else None
        for path in sorted(folder.rglob("*"))
    }


def away_cells(monkeypatch, node_disk: Path | None, decoy: bool = False) -> dict[int, Path]:
    """Run every cell as a Ray task on a node other than the driver's would (`where().away`), then move its run
    folder out of the driver's sight, to `node_disk`, as a node without a shared disk keeps it (None: a disk the
    node shares with the driver, the folder stays); returns where each seed's folder went. With `decoy`, the
    first cell's name is then taken on the driver by another run's folder (a cell here that started in the same
    second)."""
    import importlib

    from rlrun.executors.base import Where, placed

    bench = importlib.import_module("rlrun.benching.run")
    run_cell = bench.run_cell
    moved: dict[int, Path] = {}

    def on_another_node(cell, *args, **kwargs):
        with placed(Where(node_id="f" * 56, host="node-2", away=True)):
            row = run_cell(cell, *args, **kwargs)
        if row["run_dir"] is not None and node_disk is not None:
            node_disk.mkdir(exist_ok=True)
            moved[row["seed"]] = node_disk / Path(row["run_dir"]).name
            shutil.move(row["run_dir"], moved[row["seed"]])
            if decoy and len(moved) == 1:
                Path(row["run_dir"]).mkdir()
                (Path(row["run_dir"]) / "run.json").write_text("decoy", encoding="utf-8")
        return row

    monkeypatch.setattr(bench, "run_cell", on_another_node)
    return moved


def test_a_cell_on_another_node_sends_its_run_folder_home_to_the_same_path(tmp_path, monkeypatch):
    out, node_disk = tmp_path / "bench", tmp_path / "node-disk"
    moved = away_cells(monkeypatch, node_disk)
    result = rlrun.bench(small_bench(out, eval_episodes=1))
    assert result.completed == 2
    rows = lines(out)
    assert len(rows) == 2 and all("run_archive" not in row for row in rows)
    for row in rows:
        assert row["status"] == "completed" and (row["node_id"], row["host"]) == ("f" * 56, "node-2")
        run_dir = Path(row["run_dir"])
        assert run_dir == out / "runs" / "sb3" / "bench" / moved[row["seed"]].name, "the same path on the driver"
        assert Path(row["checkpoint"]).is_file() and Path(row["checkpoint"]).is_relative_to(run_dir)
        assert (run_dir / "metrics.csv").is_file()
        assert files_under(run_dir) == files_under(moved[row["seed"]]), "every file, byte for byte"


def test_a_run_folder_whose_name_is_taken_on_the_driver_comes_home_beside_it(tmp_path, monkeypatch):
    """Two nodes name their run folders by the second they start: a folder sent back whose name a run here took
    in the meantime goes beside it (`<name>_2`), and the run here is untouched."""
    out = tmp_path / "bench"
    moved = away_cells(monkeypatch, tmp_path / "node-disk", decoy=True)
    rlrun.bench(small_bench(out))
    first = next(row for row in lines(out) if row["seed"] == 0)
    taken = out / "runs" / "sb3" / "bench" / moved[0].name
    assert (taken / "run.json").read_text(encoding="utf-8") == "decoy" and len(list(taken.iterdir())) == 1
    run_dir = Path(first["run_dir"])
    assert run_dir.name.startswith(moved[0].name + "_") and run_dir.parent == taken.parent
    assert files_under(run_dir) == files_under(moved[0]) and Path(first["checkpoint"]).is_relative_to(run_dir)
    assert len({row["run_dir"] for row in lines(out)}) == 2


def test_a_cell_on_another_node_that_shares_the_drivers_disk_keeps_its_run_folder(tmp_path, monkeypatch):
    away_cells(monkeypatch, None)
    out = tmp_path / "bench"
    rlrun.bench(small_bench(out, seeds=(0,)))
    (row,) = lines(out)
    assert row["status"] == "completed" and Path(row["run_dir"]).parent == out / "runs" / "sb3" / "bench"
    assert len(list(Path(row["run_dir"]).parent.iterdir())) == 1, "the folder already there is the run: no copy"


def test_a_run_folder_over_the_bound_fails_its_cell_naming_the_bound(tmp_path, monkeypatch):
    import importlib

    monkeypatch.setattr(importlib.import_module("rlrun.benching.cell"), "MAX_RUN_BYTES", 1000)
    away_cells(monkeypatch, tmp_path / "node-disk")
    result = rlrun.bench(small_bench(tmp_path / "bench", seeds=(0,)))
    (row,) = result.rows
    assert row["status"] == "failed" and result.failed == 1
    assert row["error"].startswith("sending the run folder back: UnsafeArchive: run folder ")
    assert "holds more than 1000 bytes of files" in row["error"] and "\n" not in row["error"]


def test_with_storage_every_cell_uploads_its_folder_and_one_from_another_node_comes_home_from_there(
    tmp_path, monkeypatch
):
    """`--storage`: each cell uploads its run folder; the driver copies a cell's folder from the storage when the
    cell ran on a node whose disk it cannot see, with no bound of Ray's object store (a 1000-byte one here)."""
    import importlib

    monkeypatch.setattr(importlib.import_module("rlrun.benching.cell"), "MAX_RUN_BYTES", 1000)
    out, bucket = tmp_path / "bench", tmp_path / "bucket"
    moved = away_cells(monkeypatch, tmp_path / "node-disk")
    result = rlrun.bench(small_bench(out, storage=str(bucket)))
    assert result.completed == 2
    for row in lines(out):
        run_dir = Path(row["run_dir"])
        relative = run_dir.relative_to(out / "runs")
        assert row["stored"] == f"file://{bucket / relative}"
        assert files_under(run_dir) == files_under(moved[row["seed"]]) == files_under(bucket / relative)
        assert Path(row["checkpoint"]).is_file() and Path(row["checkpoint"]).is_relative_to(run_dir)


def test_with_storage_an_inline_cell_uploads_its_folder_and_keeps_its_own(tmp_path):
    out, bucket = tmp_path / "bench", tmp_path / "bucket"
    result = rlrun.bench(small_bench(out, seeds=(0,), storage=f"file://{bucket}"))
    (row,) = result.rows
    relative = Path(row["run_dir"]).relative_to(out / "runs")
    assert row["stored"] == f"file://{bucket / relative}" and files_under(bucket / relative) == files_under(
        Path(row["run_dir"])
    )
    assert len(list(Path(row["run_dir"]).parent.iterdir())) == 1, "its own folder is the run: no copy"


def test_a_link_planted_in_the_storage_fails_the_cell_that_comes_home_from_there(tmp_path, monkeypatch):
    import importlib

    out, bucket, secret = tmp_path / "bench", tmp_path / "bucket", tmp_path / "secret"
    secret.write_text("not yours", encoding="utf-8")
    away_cells(monkeypatch, tmp_path / "node-disk")
    bench = importlib.import_module("rlrun.benching.run")
    on_another_node = bench.run_cell

    def and_a_planted_link(cell, *args, **kwargs):
        row = on_another_node(cell, *args, **kwargs)
        (bucket / Path(row["run_dir"]).relative_to(out / "runs") / "notes.txt").symlink_to(secret)
        return row

    monkeypatch.setattr(bench, "run_cell", and_a_planted_link)
    result = rlrun.bench(small_bench(out, seeds=(0,), storage=str(bucket)))
    (row,) = result.rows
    assert row["status"] == "failed" and row["error"].startswith("receiving the run folder: UnsafeArchive: ")
    assert "'notes.txt', which is not a file or a folder" in row["error"]
    assert not list((out / "runs" / "sb3" / "bench").iterdir()), "nothing written, the claimed folder removed"


@pytest.mark.slow
@pytest.mark.parametrize("via", ["object store", "storage"])
def test_a_bench_on_two_nodes_without_a_shared_disk_brings_every_run_folder_home(tmp_path, monkeypatch, via):
    """A real two-node Ray cluster on this machine: the second node's processes live in their own mount namespace,
    where the driver's out folder is another folder (`unshare -m` and a bind mount), as on a machine with its own
    disk. The cells that run there write their run folders there and send them back (through Ray's object store, or
    `--storage`, a folder both nodes see); after the bench, every run folder, checkpoint and metrics.csv named in
    results.jsonl is on the driver's disk, a cell of the second node plays from its checkpoint here, and the report
    counts every seed."""
    ray = pytest.importorskip("ray")
    out, node_disk = tmp_path / "bench", tmp_path / "node-disk"
    seeds = (0, 1, 2, 3)
    storage = str(tmp_path / "bucket") if via == "storage" else None
    with two_nodes(out, node_disk, monkeypatch) as (address, away_id):
        request = small_bench(out, seeds=seeds, iterations=6, executor="ray", address=address, report=True)
        result = rlrun.bench(dataclasses.replace(request, storage=storage), check_leaks=False)
    assert not ray.is_initialized()
    rows = lines(out)
    assert sorted(row["seed"] for row in rows) == list(seeds) and all(row["status"] == "completed" for row in rows)
    ran_away = [row for row in rows if row["node_id"] == away_id]
    assert ran_away, "some cells ran on the second node (Ray spreads four one-CPU cells over two one-CPU nodes)"
    assert len({row["node_id"] for row in rows}) == 2
    for row in rows:
        run_dir = Path(row["run_dir"])
        assert run_dir.is_relative_to(out / "runs") and (run_dir / "metrics.csv").is_file()
        assert Path(row["checkpoint"]).is_file()
    written_away = {path.name for path in (node_disk / "runs" / "sb3" / "bench").iterdir()}
    assert written_away == {Path(row["run_dir"]).name for row in ran_away}, "the second node wrote on its own disk"
    for row in ran_away:
        run_dir = Path(row["run_dir"])
        assert files_under(run_dir) == files_under(node_disk / "runs" / "sb3" / "bench" / run_dir.name)
        if storage is not None:
            assert files_under(run_dir) == files_under(Path(storage) / "sb3" / "bench" / run_dir.name)
    played = rlrun.play(
        rlrun.PlayRequest(
            task="rlrun/CartPole-v1", library="sb3", checkpoint=ran_away[0]["checkpoint"], num_episodes=1, num_envs=1
        )
    )
    assert len(played.returns) == 1 and played.checkpoint == Path(ran_away[0]["checkpoint"])
    assert result.completed == 4 and result.report is not None and result.report.is_file()
    from rlrun.reports import read_results, summarize

    ((run,),) = (task.runs for task in summarize(read_results(out / "results.jsonl").cells, reps=50, curve_reps=50))
    assert run.seeds == seeds and run.curve_seeds == 4, "the report counts every seed, with its learning curve"


@pytest.mark.slow
def test_a_cell_whose_node_is_killed_goes_on_from_its_stored_checkpoint_on_the_other_node(tmp_path, monkeypatch):
    """Two one-CPU nodes, two cells of the flaky task: the one on the second node kills that node (its raylet and
    worker, SIGKILL) in its third iteration. Its checkpoints reached `--storage` as the training listed them; with
    `--retries 1` the cell runs again on the head node from the newest of them and completes with every env step."""
    pytest.importorskip("ray")
    counter = tmp_path / "failures"
    counter.write_text("1", encoding="utf-8")
    out, node_disk, bucket = tmp_path / "bench", tmp_path / "node-disk", tmp_path / "bucket"
    away_env = {"RLRUN_TEST_KILL_NODE": "1", "RLRUN_TEST_FAILURES": str(counter)}  # the head's cells never fail
    with two_nodes(out, node_disk, monkeypatch, **away_env) as (address, away_id):
        request = bench_request(
            out, tasks=("dying_task:RlrunTestFlaky-v0",), runs=("rsl_rl",), iterations=4, seeds=(0, 1),
            overrides=(*SMALL_RSL_RL, "agent.save_interval=1"), executor="ray", address=address, retries=1,
            storage=str(bucket),
        )  # fmt: skip
        result = rlrun.bench(request, check_leaks=False)
    assert counter.read_text(encoding="utf-8") == "0", "the second node was killed once"
    rows = lines(out)
    assert [row["status"] for row in rows] == ["completed", "completed"] and result.completed == 2, rows
    (killed,) = [row for row in rows if row["attempts"] == 2]
    assert "resumed from" in killed["note"] and "at iteration" in killed["note"], killed
    assert "NodeDiedError" in killed["note"], "the first attempt died with the second node"
    assert killed["node_id"] != away_id, "the retry ran on the node that was left"
    assert {row["iterations"] for row in rows} == {4} and {row["env_steps"] for row in rows} == {4 * 2 * 8}
    resumed_from = Path(killed["note"].split("resumed from ", 1)[1].split(" at iteration")[0])
    assert resumed_from.parent == out / "runs" / "rsl_rl" / "bench"  # copied from the storage to the head's disk
    assert files_under(resumed_from).keys() <= files_under(bucket / "rsl_rl" / "bench" / resumed_from.name).keys()
    assert Path(killed["checkpoint"]).is_file()


def test_a_crafted_run_folder_sent_back_fails_its_cell_and_leaves_nothing(tmp_path):
    """What comes back from a node is data: an archive holding a link fails the cell with the reason, and the
    folder claimed for it on the driver is gone again."""
    import io
    import tarfile

    from rlrun.api.requests import TrainRequest
    from rlrun.benching.cell import RUN_ARCHIVE, Cell, receive_run

    root = tmp_path / "runs"
    cell = Cell("k", "sb3/ppo", "", TrainRequest(task="rlrun/CartPole-v1", log_root=str(root)), 0, None, None)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        link = tarfile.TarInfo("checkpoints")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc"
        archive.addfile(link)
    run_dir = root / "sb3" / "bench" / "2026-12-05_08-00-00"
    row = cell.row(status="completed", run_dir=str(run_dir), host="node-2", **{RUN_ARCHIVE: buffer.getvalue()})
    received = receive_run(row, cell, root)
    assert received["status"] == "failed" and RUN_ARCHIVE not in received
    assert received["error"].startswith("receiving the run folder: UnsafeArchive: the run folder sent back by 'node-2'")
    assert "'checkpoints', which is not a file or a folder" in received["error"]
    assert not run_dir.exists() and list((root / "sb3" / "bench").iterdir()) == []
