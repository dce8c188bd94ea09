"""`console`: a library's deprecation notices never fail a call, whatever the caller's warning filters say,
and land in the run's console.log; every other warning still follows the caller's filters."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest

import rlrun
from rlrun.api.session import console
from support import CONTRACT_CASES


def plan(verbose: bool = False) -> SimpleNamespace:
    return SimpleNamespace(verbose=verbose, adapter=SimpleNamespace(LOGGERS=()))


@pytest.mark.parametrize("category", [DeprecationWarning, PendingDeprecationWarning, FutureWarning])
def test_a_library_notice_is_logged_not_raised_under_the_callers_error_filter(category, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        filters = list(warnings.filters)
        with console(plan(), tmp_path):
            warnings.warn("the library's internals moved", category, stacklevel=1)
        assert warnings.filters == filters
    assert "the library's internals moved" in (tmp_path / "console.log").read_text()


def test_other_warnings_follow_the_callers_filters(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="observations are not normalised"), console(plan(), tmp_path):
            warnings.warn("observations are not normalised", UserWarning, stacklevel=1)


def test_verbose_shows_a_notice_without_raising_it(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("error")
        with console(plan(verbose=True), tmp_path):
            warnings.warn("the library's internals moved", DeprecationWarning, stacklevel=1)
    assert [str(warning.message) for warning in caught] == ["the library's internals moved"]
    assert not (tmp_path / "console.log").exists()


@pytest.mark.parametrize("case", sorted(CONTRACT_CASES))
def test_training_under_the_callers_error_filter_succeeds_and_keeps_the_filters(case, tmp_path):
    spec = CONTRACT_CASES[case][0]
    if spec.get("ml_framework") == "jax":
        pytest.importorskip("jax")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        filters = list(warnings.filters)
        result = rlrun.train(rlrun.TrainRequest(task="rlrun/Pendulum-v1", log_root=str(tmp_path), **spec))
        assert warnings.filters == filters
    assert result.status == "completed"
