"""A training's record: each checkpoint and the run.json entry that lists it land as one batch of writes, and
run.json only ever lists complete checkpoints, whether the writer is interrupted or killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import rlrun
from rlrun import runs
from rlrun.errors import CheckpointNotFound
from rlrun.libraries import rsl_rl
from support import SHORT_RUNS


def new_record(tmp_path: Path) -> runs.RunRecord:
    return runs.RunRecord.create(tmp_path / "logs", "lib", "exp", None, {"library": "lib", "task": "t"}, {})


def writer(content: bytes):
    return lambda name: Path(name).write_bytes(content)


def on_disk(record: runs.RunRecord) -> list[str]:
    """The files run.json lists, as the disk has it now."""
    return [entry["file"] for entry in runs.read_manifest(record.dir)["checkpoints"]]


def in_memory(record: runs.RunRecord) -> list[str]:
    return [entry["file"] for entry in record.manifest["checkpoints"]]


def test_save_checkpoint_writes_the_file_and_lists_it_replacing_an_entry_of_the_same_file(tmp_path):
    record = new_record(tmp_path)
    assert record.save_checkpoint("model_0.pt", writer(b"first"), iteration=0) == record.dir / "model_0.pt"
    record.save_checkpoint("model_1.pt", writer(b"second"), iteration=1, mean_return=2.5)
    record.save_checkpoint("model_0.pt", writer(b"again"), iteration=2)
    assert (record.dir / "model_0.pt").read_bytes() == b"again"
    assert on_disk(record) == in_memory(record) == ["model_1.pt", "model_0.pt"]
    entries = runs.read_manifest(record.dir)["checkpoints"]
    assert [entry["iteration"] for entry in entries] == [1, 2] and entries[0]["mean_return"] == 2.5
    assert entries == record.manifest["checkpoints"] and all("saved_at" in entry for entry in entries)


def count_fsyncs(monkeypatch) -> dict[str, int]:
    counts = {"files": 0, "folders": 0}
    fsync = os.fsync

    def counted(descriptor: int) -> None:
        counts["folders" if stat.S_ISDIR(os.fstat(descriptor).st_mode) else "files"] += 1
        fsync(descriptor)

    monkeypatch.setattr(os, "fsync", counted)
    return counts


def test_a_checkpoint_and_its_run_json_entry_take_three_fsyncs_where_two_atomic_writes_took_four(tmp_path, monkeypatch):
    """One fsync of the run folder for both files, where two atomic writes make one after each."""
    record = new_record(tmp_path)
    counts = count_fsyncs(monkeypatch)
    runs.atomic_save(record.dir / "model_0.pt", writer(b"weights"))  # for comparison: two atomic writes
    record.manifest["checkpoints"].append({"file": "model_0.pt", "iteration": 0})
    record.write()
    assert counts == {"files": 2, "folders": 2}
    counts.update(files=0, folders=0)
    record.save_checkpoint("model_1.pt", writer(b"weights"), iteration=1)
    assert counts == {"files": 2, "folders": 1}
    counts.update(files=0, folders=0)
    (record.dir / "checkpoints").mkdir()  # SKRL's folder: its fsync, then the run folder's
    record.save_checkpoint("checkpoints/agent_8.pt", writer(b"weights"), iteration=2)
    assert counts == {"files": 2, "folders": 2}
    assert on_disk(record) == ["model_0.pt", "model_1.pt", "checkpoints/agent_8.pt"]


def test_checkpoints_of_one_moment_are_one_batch_listed_by_one_run_json_in_their_order(tmp_path, monkeypatch):
    """SKRL's best and current agent: 3 file fsyncs and 2 folder fsyncs, where two batches would make 4 and 4."""
    record = new_record(tmp_path)
    (record.dir / "checkpoints").mkdir()
    record.save_checkpoint("checkpoints/best_agent.pt", writer(b"old best"), iteration=1)
    counts = count_fsyncs(monkeypatch)
    moves = []
    replace = os.replace
    monkeypatch.setattr(os, "replace", lambda source, to: moves.append(Path(to).name) or replace(source, to))
    paths = record.save_checkpoints(
        [
            ("checkpoints/best_agent.pt", writer(b"best"), {"iteration": 2}),
            ("checkpoints/agent_3.pt", writer(b"current"), {"iteration": 3, "mean_return": 1.5}),
        ]
    )
    assert counts == {"files": 3, "folders": 2} and moves == ["best_agent.pt", "agent_3.pt", "run.json"]
    assert paths == [record.dir / "checkpoints/best_agent.pt", record.dir / "checkpoints/agent_3.pt"]
    assert [path.read_bytes() for path in paths] == [b"best", b"current"]
    assert on_disk(record) == in_memory(record) == ["checkpoints/best_agent.pt", "checkpoints/agent_3.pt"]
    entries = runs.read_manifest(record.dir)["checkpoints"]
    assert [entry["iteration"] for entry in entries] == [2, 3] and entries[1]["mean_return"] == 1.5


@pytest.mark.parametrize("moves_done", [0, 1, 2])
def test_a_batch_of_checkpoints_stopped_between_its_moves_lists_only_those_in_place(tmp_path, monkeypatch, moves_done):
    """A Ctrl-C at the first, second or third move (run.json's): the record lists what landed, in place of the
    entries those files had, and the run's last write lists only files that exist."""
    record = new_record(tmp_path)
    record.save_checkpoint("a.pt", writer(b"old a"), iteration=0)
    record.save_checkpoint("keep.pt", writer(b"kept"), iteration=0)
    replace, done = os.replace, []

    def interrupted(source, target):
        if len(done) == moves_done:
            raise KeyboardInterrupt
        done.append(target)
        replace(source, target)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        record.save_checkpoints([("a.pt", writer(b"new a"), {"iteration": 1}), ("b.pt", writer(b"b"), {})])
    monkeypatch.undo()
    expected = {0: ["a.pt", "keep.pt"], 1: ["keep.pt", "a.pt"], 2: ["keep.pt", "a.pt", "b.pt"]}[moves_done]
    assert in_memory(record) == expected and on_disk(record) == ["a.pt", "keep.pt"]
    assert (record.dir / "a.pt").read_bytes() == (b"new a" if moves_done else b"old a")
    assert (record.dir / "b.pt").exists() == (moves_done == 2)
    assert not list(record.dir.rglob(f"*{runs.TEMPORARY_SUFFIX}")), "the batch's temporary folders are gone"
    record.finish("interrupted")
    assert on_disk(record) == expected and all((record.dir / name).is_file() for name in expected)
    assert [entry["iteration"] for entry in record.manifest["checkpoints"] if entry["file"] == "a.pt"] == [
        1 if moves_done else 0
    ]


def interrupt_at(monkeypatch, step: int | None) -> None:
    """A KeyboardInterrupt instead of the `step`-th fsync or move (counted from 1), as a Ctrl-C landing there."""
    taken = []
    fsync, replace = os.fsync, os.replace

    def take() -> None:
        taken.append(None)
        if len(taken) == step:
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", lambda descriptor: take() or fsync(descriptor))
    monkeypatch.setattr(os, "replace", lambda source, target: take() or replace(source, target))


@pytest.mark.parametrize(
    ("step", "lands"),
    [(None, False), (1, False), (2, False), (3, False), (4, True), (5, True)],
    ids=[
        "in the writer",
        "checkpoint fsync",
        "run.json fsync",
        "checkpoint move",
        "run.json move",
        "folder fsync",
    ],
)
def test_an_interrupt_at_any_step_of_a_checkpoint_save_leaves_a_run_that_lists_only_files_that_exist(
    step, lands, tmp_path, monkeypatch
):
    """At step 4 the checkpoint is in place and run.json is not yet: the record still lists it, so the run's
    last write (`finish`, as a training's `finally` makes it) lists it on disk too."""
    record = new_record(tmp_path)
    record.save_checkpoint("model_0.pt", writer(b"first"), iteration=0)

    def interrupted_writer(name):
        Path(name).write_bytes(b"second")
        if step is None:
            raise KeyboardInterrupt

    interrupt_at(monkeypatch, step)
    with pytest.raises(KeyboardInterrupt):
        record.save_checkpoint("model_1.pt", interrupted_writer, iteration=1)
    monkeypatch.undo()
    # The batch's temporary folder went with its interrupted write or commit; once committed (the folder's
    # fsync comes after the moves), it waits for the run's next batch, until the run's last write.
    temporaries = [name for name in os.listdir(record.dir) if name.endswith(runs.TEMPORARY_SUFFIX)]
    assert len(temporaries) == (1 if step == 5 else 0)
    assert all(not os.listdir(record.dir / name) for name in temporaries)
    listed = sorted(set(os.listdir(record.dir)) - set(temporaries))
    assert listed == sorted(["model_0.pt", "run.json", "params", *(["model_1.pt"] * lands)])
    assert on_disk(record) == ["model_0.pt", *(["model_1.pt"] * (step == 5))]
    assert in_memory(record) == ["model_0.pt", *(["model_1.pt"] * lands)]
    record.finish("interrupted")
    assert not list(record.dir.rglob(f"*{runs.TEMPORARY_SUFFIX}"))
    assert on_disk(record) == in_memory(record)
    assert all((record.dir / name).is_file() for name in on_disk(record))
    newest, _ = runs.resolve_checkpoint("latest", log_root=tmp_path / "logs", library="lib", task="t")
    assert newest.name == on_disk(record)[-1] and newest.read_bytes() == (b"second" if lands else b"first")


@pytest.mark.parametrize("where", ["in the folder's removal", "right after the folder is made"])
def test_a_second_ctrl_c_inside_an_interrupted_save_leaves_no_temporary_once_the_run_finishes(
    where, tmp_path, monkeypatch
):
    """The first Ctrl-C stops the checkpoint's write; the second lands where the batch cleans up after it (the
    written file makes the folder's removal an `rmtree`, several system calls) or an instant after the folder is made,
    before the batch knows its folder. The run's last write (`finish`) still removes what was left."""
    record = new_record(tmp_path)
    record.save_checkpoint("model_0.pt", writer(b"first"), iteration=0)
    record.settle()
    if where == "in the folder's removal":

        def cut_short(*args, **kwargs):
            raise KeyboardInterrupt  # nothing removed

        monkeypatch.setattr(runs.atomic.shutil, "rmtree", cut_short)
    else:
        mkdir = os.mkdir

        def made_then_interrupted(path, *args, **kwargs):
            mkdir(path, *args, **kwargs)
            if str(path).endswith(runs.TEMPORARY_SUFFIX):
                raise KeyboardInterrupt

        monkeypatch.setattr(runs.atomic.os, "mkdir", made_then_interrupted)

    def interrupted_writer(name):
        Path(name).write_bytes(b"partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        record.save_checkpoint("model_1.pt", interrupted_writer, iteration=1)
    monkeypatch.undo()
    assert [name for name in os.listdir(record.dir) if name.endswith(runs.TEMPORARY_SUFFIX)]  # left, for now
    record.finish("interrupted")
    assert not list(record.dir.rglob(f"*{runs.TEMPORARY_SUFFIX}"))
    assert on_disk(record) == ["model_0.pt"]


def refuse_run_json_moves(monkeypatch) -> None:
    """Every move of a run.json fails as on a full disk; other moves go through."""
    replace = os.replace

    def refuse_run_json(source, target):
        if Path(target).name == runs.MANIFEST:
            raise OSError(28, "No space left on device")
        replace(source, target)

    monkeypatch.setattr(os, "replace", refuse_run_json)


def test_a_failure_between_the_two_moves_leaves_the_checkpoint_on_disk_and_run_json_without_it(tmp_path, monkeypatch):
    """A crash there (no `finish` after it) leaves the old run.json: it never lists a file that is not on disk."""
    record = new_record(tmp_path)
    refuse_run_json_moves(monkeypatch)
    with pytest.raises(OSError, match="No space"):
        record.save_checkpoint("model_0.pt", writer(b"weights"), iteration=0)
    monkeypatch.undo()
    assert (record.dir / "model_0.pt").read_bytes() == b"weights" and on_disk(record) == []
    assert not list(record.dir.rglob(f"*{runs.TEMPORARY_SUFFIX}"))
    with pytest.raises(CheckpointNotFound):
        runs.resolve_checkpoint("latest", log_root=tmp_path / "logs", library="lib", task="t")


# --- a training's record: batches committed in the background ---------------------------------------------


def background_record(tmp_path: Path) -> runs.RunRecord:
    """A background record whose first batch (its parameters and first run.json) is in place."""
    record = runs.RunRecord.create(
        tmp_path / "logs", "lib", "exp", None, {"library": "lib", "task": "t"}, {}, background=True
    )
    record.settle()
    return record


def commit_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "rlrun-commit"]


def test_in_the_background_create_returns_before_its_files_are_in_place_and_run_json_lands_last(tmp_path, monkeypatch):
    release = threading.Event()
    fsync, replace = os.fsync, os.replace
    moves = []
    monkeypatch.setattr(os, "fsync", lambda descriptor: release.wait(10) and fsync(descriptor))
    monkeypatch.setattr(os, "replace", lambda old, new: moves.append(Path(new).name) or replace(old, new))
    params = {"agent.yaml": "a: 1\n", "env.yaml": "b: 2\n"}
    manifest = {"library": "lib", "task": "t"}
    record = runs.RunRecord.create(tmp_path / "logs", "lib", "exp", None, manifest, params, background=True)
    assert not (record.dir / "run.json").exists() and len(commit_threads()) == 1
    release.set()
    record.settle()
    assert moves == ["agent.yaml", "env.yaml", "run.json"]
    assert (record.dir / "params" / "env.yaml").read_text() == "b: 2\n"
    assert runs.read_manifest(record.dir)["status"] == "running" and commit_threads() == []
    assert not list(record.dir.rglob(f"*{runs.TEMPORARY_SUFFIX}"))


def test_in_the_background_a_save_returns_before_the_disk_confirms_and_settle_lists_it(tmp_path, monkeypatch):
    record = background_record(tmp_path)
    release = threading.Event()
    fsync = os.fsync

    def held_fsync(descriptor: int) -> None:
        assert release.wait(10), "the test never released the disk"
        fsync(descriptor)

    monkeypatch.setattr(os, "fsync", held_fsync)
    path = record.save_checkpoint("model_0.pt", writer(b"weights"), iteration=0)
    assert path == record.dir / "model_0.pt" and not path.exists()  # the writer goes on; the disk has not confirmed
    assert on_disk(record) == in_memory(record) == [] and len(commit_threads()) == 1
    release.set()
    record.settle()
    assert path.read_bytes() == b"weights" and on_disk(record) == in_memory(record) == ["model_0.pt"]
    assert commit_threads() == [] and not list(record.dir.rglob(f"*{runs.TEMPORARY_SUFFIX}"))


def test_background_batches_land_in_order_on_one_thread_and_finish_waits_for_them(tmp_path, monkeypatch):
    record = background_record(tmp_path)
    release = threading.Event()
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda descriptor: release.wait(10) and fsync(descriptor))
    for index in range(3):
        record.save_checkpoint(f"model_{index}.pt", writer(b"w%d" % index), iteration=index)
    # The writer did not wait for the disk between saves, and one thread commits every batch.
    assert on_disk(record) == in_memory(record) == [] and len(commit_threads()) == 1
    release.set()
    record.save_checkpoint("model_0.pt", writer(b"again"), iteration=3)
    record.finish("completed")
    assert commit_threads() == []
    assert on_disk(record) == in_memory(record) == ["model_1.pt", "model_2.pt", "model_0.pt"]
    assert runs.read_manifest(record.dir)["status"] == "completed"
    assert (record.dir / "model_0.pt").read_bytes() == b"again"


def test_a_record_sweeps_each_directory_once_and_probes_the_file_mode_once(tmp_path, monkeypatch):
    """The run's directories hold no dead writer's temporaries after the first batch into them: later batches
    neither list them again nor make a probe file."""
    swept, probed = [], []
    sweep, probe = runs.atomic.sweep_temporaries, runs.atomic._new_file_mode
    monkeypatch.setattr(runs.atomic, "sweep_temporaries", lambda directory: swept.append(directory) or sweep(directory))
    monkeypatch.setattr(runs.atomic, "_new_file_mode", lambda folder: probed.append(folder) or probe(folder))
    record = background_record(tmp_path)
    (record.dir / "checkpoints").mkdir()
    for index in range(3):
        record.save_checkpoints([(f"checkpoints/model_{index}.pt", writer(b"w"), {"iteration": index})])
    record.settle()
    assert sorted(swept) == [record.dir, record.dir / "checkpoints"] and len(probed) == 1
    record.finish("completed")  # a write of run.json alone (`write_manifest`) sweeps the run's folder again
    assert on_disk(record) == [f"checkpoints/model_{index}.pt" for index in range(3)]
    mode = 0o666 & ~_umask()
    assert stat.S_IMODE((record.dir / "checkpoints" / "model_2.pt").stat().st_mode) == mode


def test_a_run_reuses_committed_batches_folders_and_never_one_a_batch_in_flight_writes_in(tmp_path, monkeypatch):
    made = []
    new_folder = runs.atomic._new_folder
    monkeypatch.setattr(runs.atomic, "_new_folder", lambda *args: made.append(new_folder(*args)) or made[-1])
    record = background_record(tmp_path)  # its first batch made the run folder's temporary folder
    (record.dir / "checkpoints").mkdir()
    release = threading.Event()
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda descriptor: release.wait(10) and fsync(descriptor))
    for index in range(3):  # all three in flight: each writes in folders of its own
        record.save_checkpoints([(f"checkpoints/model_{index}.pt", writer(b"w"), {"iteration": index})])
    assert len(made) == 1 + 2 + 2 + 2 and len(set(made)) == len(made)
    release.set()
    record._commits.wait()  # committed, not settled: the folders wait for the next batches
    for index in range(3, 6):
        record.save_checkpoints([(f"checkpoints/model_{index}.pt", writer(b"w"), {"iteration": index})])
        record._commits.wait()
    assert len(made) == 7  # no folder made for the three later batches
    record.finish("completed")
    assert on_disk(record) == [f"checkpoints/model_{index}.pt" for index in range(6)]
    assert not list(record.dir.rglob(f"*{runs.TEMPORARY_SUFFIX}")) and not any(Path(name).exists() for name in made)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_failed_background_commit_is_raised_once_and_the_next_finish_lists_what_landed(tmp_path, monkeypatch):
    """As in the foreground: the checkpoint moved before run.json's move failed, so the record lists it."""
    record = background_record(tmp_path)
    refuse_run_json_moves(monkeypatch)
    record.save_checkpoint("model_0.pt", writer(b"weights"), iteration=0)  # returns: the commit fails later
    record.save_checkpoint("model_1.pt", writer(b"later"), iteration=1)  # after a failed one: never moved
    with pytest.raises(OSError, match="No space"):
        record.finish("completed")
    monkeypatch.undo()
    assert commit_threads() == [] and on_disk(record) == []
    assert not (record.dir / "model_1.pt").exists() and not list(record.dir.rglob(f"*{runs.TEMPORARY_SUFFIX}"))
    record.finish("failed")
    assert on_disk(record) == in_memory(record) == ["model_0.pt"]
    assert runs.read_manifest(record.dir)["status"] == "failed"


def test_a_ctrl_c_while_waiting_for_a_commit_is_raised_after_the_commit_is_done(tmp_path, monkeypatch):
    record = background_record(tmp_path)
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda descriptor: time.sleep(0.1) or fsync(descriptor))
    record.save_checkpoint("model_0.pt", writer(b"weights"), iteration=0)
    join = threading.Thread.join
    interrupts = [KeyboardInterrupt()]

    def interrupted_join(thread, timeout=None):
        if interrupts:
            raise interrupts.pop()
        return join(thread, timeout)

    monkeypatch.setattr(threading.Thread, "join", interrupted_join)
    with pytest.raises(KeyboardInterrupt):
        record.settle()
    assert commit_threads() == []  # the commit finished before the Ctrl-C was raised
    assert on_disk(record) == ["model_0.pt"]


def test_a_ctrl_c_while_a_save_waits_for_the_oldest_commit_is_raised_and_the_checkpoint_still_lands(
    tmp_path, monkeypatch
):
    record = background_record(tmp_path)
    release = threading.Event()  # the disk holds every commit until the Ctrl-C: all of them stay in flight
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda descriptor: release.wait(10) and fsync(descriptor))
    in_flight = runs.atomic.BackgroundCommits.IN_FLIGHT
    for index in range(in_flight):
        record.save_checkpoint(f"model_{index}.pt", writer(b"w%d" % index), iteration=index)
    acquire = threading.Semaphore.acquire
    interrupts = [KeyboardInterrupt()]

    def interrupted_acquire(semaphore, blocking=True, timeout=None):
        if interrupts and threading.current_thread() is threading.main_thread():
            assert not acquire(semaphore, blocking=False)  # every slot is taken: the save waits for the oldest
            release.set()
            raise interrupts.pop()
        return acquire(semaphore, blocking, timeout)

    monkeypatch.setattr(threading.Semaphore, "acquire", interrupted_acquire)
    with pytest.raises(KeyboardInterrupt):  # was swallowed: a second Ctrl-C did not stop at once
        record.save_checkpoint(f"model_{in_flight}.pt", writer(b"last"), iteration=in_flight)
    assert not interrupts
    monkeypatch.setattr(threading.Semaphore, "acquire", acquire)
    record.settle()
    assert on_disk(record) == in_memory(record) == [f"model_{index}.pt" for index in range(in_flight + 1)]
    assert commit_threads() == [] and not list(record.dir.rglob(f"*{runs.TEMPORARY_SUFFIX}"))


# --- a training process killed with SIGKILL -----------------------------------------------------------------

TASK = "rlrun/CartPoleContinuous-v1"

# The training process, with every fsync slowed down by FSYNC_DELAY_S so that a kill can land inside a
# checkpoint write (the commits then fall behind the training, a few batches in flight at a time).
SLOW_WRITER = """
import os, sys, time
fsync = os.fsync
def slow_fsync(descriptor):
    time.sleep(float(os.environ["FSYNC_DELAY_S"]))
    fsync(descriptor)
os.fsync = slow_fsync
import rlrun
sys.exit(rlrun.main(sys.argv[1:]))
"""


def start_training(log_root: Path, fsync_delay_s: float) -> subprocess.Popen:
    words = ["train", "--task", TASK, "--num_envs", "8", "--max_iterations", "500", "--log_root", str(log_root)]
    overrides = ["agent.save_interval=1", "agent.num_steps_per_env=4", "agent.actor.hidden_dims=[256,256]"]
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path]),
        "FSYNC_DELAY_S": str(fsync_delay_s),
    }
    return subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, *words, *overrides],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def run_dir(log_root: Path) -> Path | None:
    found = list(log_root.glob("rsl_rl/*/*/run.json"))
    return found[0].parent if found else None


def wait_for(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the training process never reached the kill point")
        time.sleep(0.01)


def temporaries(directory: Path | None) -> list[Path]:
    return list(directory.glob(f".*{runs.TEMPORARY_SUFFIX}")) if directory else []


def writing(directory: Path | None) -> bool:
    """Whether a write is in flight: a temporary folder holds a file. A run keeps its committed batches' folders,
    empty, for its next batches (`atomic.Folders`), so an empty one is no write."""
    for folder in temporaries(directory):
        try:
            if any(folder.iterdir()):
                return True
        except FileNotFoundError:  # removed meanwhile (the run settled)
            continue
    return False


def listed_checkpoints(directory: Path | None) -> list[str]:
    manifest = runs.read_manifest(directory) if directory else None
    return [entry["file"] for entry in manifest["checkpoints"]] if manifest else []


KILL_POINTS = {
    # name: when to kill
    "while writing the first checkpoint": lambda d: writing(d) and not listed_checkpoints(d),
    "while writing the third checkpoint": lambda d: len(listed_checkpoints(d)) >= 2 and writing(d),
    "between two writes": lambda d: len(listed_checkpoints(d)) >= 3 and not writing(d),
}


@pytest.mark.slow
@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_the_newest_complete_checkpoint_loads_after_sigkill(point, log_root):
    # Between two writes the disk must keep up with the training (no delay), or a write is always in flight.
    process = start_training(log_root, fsync_delay_s=0.0 if point == "between two writes" else 0.4)
    try:
        wait_for(lambda: KILL_POINTS[point](run_dir(log_root)))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    directory = run_dir(log_root)
    manifest = json.loads((directory / "run.json").read_text())  # never a half-written manifest
    assert manifest["status"] == "running"  # killed: no chance to say otherwise

    for name in listed_checkpoints(directory):  # everything the manifest lists is complete
        rsl_rl.check_checkpoint(directory / name)
    for partial in temporaries(directory):  # a partial file is never named like a checkpoint
        assert not partial.name.startswith("model_") and partial.name.endswith(runs.TEMPORARY_SUFFIX)
    if point == "while writing the first checkpoint":
        with pytest.raises(CheckpointNotFound):
            runs.resolve_checkpoint("latest", log_root=log_root, library="rsl_rl", task=TASK)
        assert temporaries(directory)
        return
    checkpoint, _ = runs.resolve_checkpoint("latest", log_root=log_root, library="rsl_rl", task=TASK)
    assert checkpoint.name == listed_checkpoints(directory)[-1]
    state = torch.load(checkpoint, weights_only=True)
    assert state["iter"] == int(checkpoint.stem.split("_")[1])


@pytest.mark.parametrize("library", list(SHORT_RUNS))
def test_every_library_writes_its_checkpoints_through_rlruns_atomic_writer(library, tmp_path, monkeypatch):
    """Only the record's atomic batch lists checkpoints in run.json, so a checkpoint file on disk that run.json
    does not list was written some other way (and could be left half-written by a kill)."""
    writes = []
    save_checkpoints = runs.RunRecord.save_checkpoints

    def counted(record, checkpoints):
        writes.extend(record.dir / name for name, _, _ in checkpoints)
        return save_checkpoints(record, checkpoints)

    monkeypatch.setattr(runs.RunRecord, "save_checkpoints", counted)
    result = rlrun.train(
        rlrun.TrainRequest(
            task="rlrun/Pendulum-v1",
            library=library,
            num_envs=8,
            max_iterations=3,
            log_root=str(tmp_path),
            overrides=SHORT_RUNS[library],
        )
    )
    on_disk = {path for path in result.run_dir.rglob("*") if path.suffix in (".pt", ".pth", ".zip", ".pickle")}
    manifest = json.loads((result.run_dir / "run.json").read_text())
    recorded = {result.run_dir / entry["file"] for entry in manifest["checkpoints"]}
    assert on_disk and on_disk == recorded <= set(writes)
    assert not list(result.run_dir.rglob("*.rlrun-tmp"))
