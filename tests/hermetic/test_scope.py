"""The scope: restore order and isolation, exceptions, interrupts, threads, nesting, the import phase."""

from __future__ import annotations

import logging
import multiprocessing
import os
import random
import sys
import threading
import types
import warnings

import pytest

from rlrun.errors import ConcurrentCall, RestoreFailed
from rlrun.hermetic import Guard, attributes_guard, census, hermetic_call, registered


def run_guarded(body, **kwargs):
    with hermetic_call(**kwargs) as call, call.guarded():
        return body()


def failing_restorer(saved):
    raise OSError("this restorer is broken")


BROKEN = Guard("test: broken restorer", "A guard whose restore always fails.", lambda: None, failing_restorer)


def test_a_failing_restorer_does_not_stop_the_others_nor_mask_the_call_error(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["caller"])
    argv = sys.argv

    def body():
        sys.argv.append("--changed")
        sys.argv = ["rebound"]
        raise ValueError("the call's own error")

    with registered(BROKEN), pytest.raises(ValueError, match="the call's own error") as raised:
        run_guarded(body)
    assert sys.argv is argv and argv == ["caller"]
    assert any("test: broken restorer" in note and "OSError" in note for note in raised.value.__notes__)


def test_a_failing_restorer_after_a_successful_call_raises_once_everything_else_is_restored(monkeypatch):
    monkeypatch.setenv("RLRUN_TEST_SENTINEL", "caller")

    def body():
        import os

        os.environ["RLRUN_TEST_SENTINEL"] = "changed"

    with registered(BROKEN), pytest.raises(RestoreFailed, match="test: broken restorer"):
        run_guarded(body)
    import os

    assert os.environ["RLRUN_TEST_SENTINEL"] == "caller"


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt(), SystemExit(4)], ids=["KeyboardInterrupt", "SystemExit"])
def test_interrupts_are_restored_for_then_propagate_unchanged(interrupt, monkeypatch):
    monkeypatch.setattr(warnings, "filters", list(warnings.filters))
    filters, contents = warnings.filters, list(warnings.filters)

    def body():
        warnings.simplefilter("ignore")
        warnings.filters = []
        raise interrupt

    with pytest.raises(type(interrupt)) as raised:
        run_guarded(body)
    assert raised.value is interrupt
    assert warnings.filters is filters and warnings.filters == contents


def test_restore_runs_in_reverse_capture_order():
    order = []
    first = Guard("test: first", "", lambda: None, lambda saved: order.append("first"))
    second = Guard("test: second", "", lambda: None, lambda saved: order.append("second"))
    with registered(first), registered(second):
        run_guarded(lambda: None)
    assert order == ["second", "first"]


def test_an_attribute_that_did_not_exist_is_deleted_again():
    namespace = types.SimpleNamespace(kept=1, changed=[1])
    original = namespace.changed
    guard = attributes_guard("test: namespace", lambda: namespace, doc="A test namespace.", category="test")

    def body():
        namespace.added = "new"
        namespace.changed = [2]
        del namespace.kept

    with registered(guard):
        run_guarded(body)
    assert vars(namespace) == {"kept": 1, "changed": [1]} and namespace.changed is original


def test_a_concurrent_call_from_another_thread_is_refused_with_the_way_out():
    errors = []

    def other_thread():
        try:
            with hermetic_call(name="second"):
                pass
        except ConcurrentCall as error:
            errors.append(error)

    with hermetic_call(name="first"):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    assert len(errors) == 1
    assert "ProcessPoolExecutor" in str(errors[0]) and "first" in str(errors[0])
    with hermetic_call(name="after"):  # the lock is free again
        pass


def test_nested_calls_on_one_thread_are_allowed_and_each_guards_its_own_span(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["caller"])

    def inner():
        sys.argv.append("inner")

    def outer():
        sys.argv.append("outer")
        run_guarded(inner)
        assert sys.argv == ["caller", "outer"]

    run_guarded(outer)
    assert sys.argv == ["caller"]


def test_import_effects_are_not_taken_for_the_call(tmp_path, monkeypatch):
    """An import keeps what it sets up for its library, but moves neither the caller's random streams nor its
    warning behaviour (the rule in `rlrun.hermetic.scope`)."""
    (tmp_path / "rlrun_test_noisy_import.py").write_text(
        "import logging, random, warnings\n"
        "warnings.filterwarnings('ignore', message='noisy import')\n"
        "logging.getLogger('rlrun_test_noisy').addHandler(logging.NullHandler())\n"
        "random.random()\n"
        "warnings.warn('the import warns', DeprecationWarning)\n"
        "import multiprocessing\n"
        "multiprocessing.set_start_method('spawn', force=True)\n"  # as TorchRL's import does
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(warnings, "filters", list(warnings.filters))
    warnings.simplefilter("error")  # the caller's: an import's warning must not be raised as an error
    filters, contents = warnings.filters, list(warnings.filters)
    state = random.getstate()
    method = multiprocessing.get_start_method(allow_none=True)
    with hermetic_call(check_leaks=True) as call:
        call.import_modules(["rlrun_test_noisy_import"])
        with call.guarded():
            pass
    assert logging.getLogger("rlrun_test_noisy").handlers  # the import kept its handler
    logging.getLogger("rlrun_test_noisy").handlers.clear()
    assert warnings.filters is filters and warnings.filters == contents  # but not its filter
    assert [str(warning.message) for warning in call.import_warnings] == ["the import warns"]
    assert random.getstate() == state
    assert multiprocessing.get_start_method(allow_none=True) == method
    monkeypatch.delitem(sys.modules, "rlrun_test_noisy_import")


def test_a_change_made_while_planning_is_reported_even_without_a_guarded_span(monkeypatch):
    monkeypatch.setattr(warnings, "filters", list(warnings.filters))
    with pytest.raises(Exception, match="warnings was modified by the call"), hermetic_call(check_leaks=True):
        warnings.filterwarnings("ignore", message="left behind by planning")
    assert census.leak_check_requested(None)  # the suite runs with RLRUN_CHECK_LEAKS=1


def test_an_exit_hook_of_a_nested_call_runs_once_and_is_counted_once():
    import atexit

    ran = []

    def hook():
        ran.append(1)

    with hermetic_call(check_leaks=True) as outer, outer.guarded():
        before = census.snapshot()
        with hermetic_call(check_leaks=True) as inner, inner.guarded():
            atexit.register(hook)
        assert ran == [1], "the nested call's hook runs at the nested call's end"
        assert census.compare(before, census.snapshot()) == []
    assert ran == [1], "and not again at the outer call's end"


def test_a_prepared_effect_belongs_to_the_import_phase_not_the_call(monkeypatch):
    """`Call.prepare(effect)` runs a once-per-process set-up before the capture (the resource tracker under
    `spawn`): what it changes stays, and the leak detector does not take it for the call's."""
    monkeypatch.delenv("RLRUN_TEST_PREPARED", raising=False)
    with hermetic_call(check_leaks=True) as call:
        call.prepare(lambda: os.environ.__setitem__("RLRUN_TEST_PREPARED", "1"))
        with call.guarded():
            pass
    assert os.environ["RLRUN_TEST_PREPARED"] == "1"


def test_cuda_is_never_initialised_to_observe_its_rng():
    import torch

    with hermetic_call(check_leaks=True) as call, call.guarded():
        torch.manual_seed(3)
    assert not torch.cuda.is_initialized()
