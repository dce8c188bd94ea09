"""`rlrun.hermetic.process_guards` in its corner cases: exit hooks registered during a call."""

from __future__ import annotations

import atexit

from rlrun.hermetic import hermetic_call


def test_atexit_callbacks_registered_during_a_call_run_at_its_end_and_are_unregistered():
    ran = []
    with hermetic_call(check_leaks=True) as call, call.guarded():
        atexit.register(ran.append, "exit hook")
    assert ran == ["exit hook"]
    assert atexit.unregister(ran.append) is None  # nothing left to unregister: idempotent either way
