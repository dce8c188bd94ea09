"""Sweeping temporaries (`rlrun.runs.sweep_temporaries`, which every batch's first write into a directory runs)
never deletes the temporary of a writer that is still writing, in another thread or another process: the
writer finishes, and its `os.replace` puts the whole file in place."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from rlrun import runs

HALF, REST = "first half,", " second half"


def temporaries(directory):
    return sorted(path.name for path in directory.glob(f".*{runs.TEMPORARY_SUFFIX}"))


def test_a_sweep_leaves_another_threads_unfinished_temporary_and_its_write_completes(tmp_path):
    target = tmp_path / "model.pt"
    target.write_text("old")
    half_written, finish = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def save(path):
        with open(path, "w") as file:
            file.write(HALF)
            file.flush()
            half_written.set()
            finish.wait(timeout=30)  # open and unfinished while the other thread sweeps
            file.write(REST)

    def writer():
        try:
            runs.atomic_save(target, save)
        except BaseException as error:  # reported by the test, not as an unhandled thread exception
            errors.append(error)

    thread = threading.Thread(target=writer, name="test-writer")
    thread.start()
    try:
        assert half_written.wait(timeout=30)
        live = temporaries(tmp_path)
        assert len(live) == 1
        assert runs.sweep_temporaries(tmp_path) == []
        runs.atomic_write_text(tmp_path / "run.json", "{}")  # a batch's own sweep of the directory
        assert temporaries(tmp_path) == live
    finally:
        finish.set()
        thread.join(timeout=30)
    assert not thread.is_alive() and errors == []
    assert target.read_text() == HALF + REST and (tmp_path / "run.json").read_text() == "{}"
    assert temporaries(tmp_path) == []


WRITER = textwrap.dedent(
    """
    import sys
    from rlrun import runs

    def save(path):
        with open(path, "w") as file:
            file.write(sys.argv[2])
            file.flush()
            print(path, flush=True)
            sys.stdin.readline()  # open and unfinished until the test says
            file.write(sys.argv[3])

    runs.atomic_save(sys.argv[1], save)
    print("replaced", flush=True)
    """
)


def test_a_sweep_leaves_another_processs_unfinished_temporary_and_its_write_completes(tmp_path):
    target = tmp_path / "model.pt"
    target.write_text("old")
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(target), HALF, REST],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        temporary = writer.stdout.readline().strip()
        assert temporary, writer.stderr.read()
        live = temporaries(tmp_path)
        assert len(live) == 1 and live[0] in temporary
        assert runs.sweep_temporaries(tmp_path) == []
        runs.atomic_write_text(tmp_path / "run.json", "{}")  # a batch's own sweep of the directory
        assert temporaries(tmp_path) == live
        out, err = writer.communicate("go\n", timeout=30)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.communicate()
    assert writer.returncode == 0 and out.strip() == "replaced", err
    assert target.read_text() == HALF + REST
    assert temporaries(tmp_path) == []
