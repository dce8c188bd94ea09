"""The leak detector reports what a call leaves behind that the scope cannot put back."""

from __future__ import annotations

import atexit
import subprocess
import sys
import threading

import pytest

from rlrun.errors import LeakDetected
from rlrun.hermetic import Guard, census, hermetic_call, registered

ORIGINAL_ATEXIT_REGISTER = atexit.register  # what a library holding its own reference would call


def leak(body):
    """Run `body` in a checked call and return the detector's report."""
    with pytest.raises(LeakDetected) as raised, hermetic_call(check_leaks=True) as call, call.guarded():
        body()
    return str(raised.value)


def test_a_thread_left_running_is_reported_by_name():
    stop = threading.Event()
    writer = threading.Thread(target=stop.wait, name="left-behind-writer")
    report = leak(writer.start)
    stop.set()
    writer.join()  # a thread still ending would show up in the next test's census
    assert report.startswith("threads was modified by the call: added") and "left-behind-writer" in report


def test_an_open_file_is_reported_with_its_path(tmp_path):
    files = []
    report = leak(lambda: files.append(open(tmp_path / "left-open.txt", "w")))  # noqa: SIM115
    files[0].close()
    assert "open file descriptors was modified by the call" in report and "left-open.txt" in report


def test_a_child_process_left_running_is_reported():
    children = []
    report = leak(lambda: children.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])))
    children[0].kill()
    children[0].wait()
    assert "child processes was modified by the call" in report


def test_an_exit_hook_added_behind_the_recorder_is_reported():
    def hook():
        pass

    report = leak(lambda: ORIGINAL_ATEXIT_REGISTER(hook))
    atexit.unregister(hook)
    assert "atexit callbacks was modified by the call" in report


def test_an_unregistered_global_is_reported_with_before_and_after():
    holder = {"value": 1}
    watched = Guard("test: watched value", "A value the scope watches but does not restore.", lambda: holder["value"])
    with registered(watched):
        report = leak(lambda: holder.update(value=2))
    assert report == "test: watched value was modified by the call: 1 -> 2"


def test_reports_are_attached_to_the_call_error_instead_of_replacing_it():
    stop = threading.Event()
    straggler = threading.Thread(target=stop.wait, name="left-behind")

    def body():
        straggler.start()
        raise ValueError("the call's own error")

    with pytest.raises(ValueError) as raised, hermetic_call(check_leaks=True) as call, call.guarded():
        body()
    stop.set()
    straggler.join()
    assert any("rlrun leak detector: threads" in note for note in raised.value.__notes__)


def test_the_detector_is_off_unless_asked(monkeypatch):
    monkeypatch.delenv("RLRUN_CHECK_LEAKS")
    assert census.leak_check_requested(None) is False
    monkeypatch.setenv("RLRUN_CHECK_LEAKS", "1")
    assert census.leak_check_requested(None) is True
    assert census.leak_check_requested(False) is False


def test_snapshots_never_initialise_cuda_nor_import_anything():
    modules = set(sys.modules)
    census.snapshot()
    assert set(sys.modules) == modules
    assert "torch" not in sys.modules or not sys.modules["torch"].cuda.is_initialized()


def test_a_file_left_in_the_working_directory_is_reported(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report = leak(lambda: (tmp_path / "STRAY_LOG.TXT").write_text("left behind"))
    assert "files in the working directory" in report and "STRAY_LOG.TXT" in report


@pytest.mark.parametrize("action", ["always", "error"])
def test_a_mujoco_warning_is_a_python_warning_and_no_log_file_is_left(tmp_path, monkeypatch, action):
    """Gymnasium's HalfCheetah-v5 makes MuJoCo 4 warn as it compiles; without a callback MuJoCo appends the
    warning to MUJOCO_LOG.TXT in the working directory. Under `error` the warning is dropped: an exception
    raised into MuJoCo's C++ caller would end the process."""
    pytest.importorskip("mujoco")
    import warnings

    import gymnasium

    from rlrun.envs import resolve_task

    monkeypatch.chdir(tmp_path)
    with hermetic_call(check_leaks=True) as call:
        resolve_task("HalfCheetah-v5", call.import_modules)  # imports MuJoCo before the capture
        mujoco = sys.modules["mujoco"]
        caller = mujoco.get_mju_user_warning()
        with call.guarded(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter(action)
            gymnasium.make("HalfCheetah-v5").close()
            gymnasium.make("HalfCheetah-v5").close()
    assert list(tmp_path.iterdir()) == []
    shown = [str(warning.message) for warning in caught if "settotalmass" in str(warning.message)]
    assert len(shown) == (2 if action == "always" else 0)
    assert mujoco.get_mju_user_warning() is caller
