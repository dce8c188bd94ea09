"""A study's outputs on a made-up study (no training): trials.csv, the PNG plots, report.md, matplotlib left alone."""

from __future__ import annotations

import csv
import warnings

import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("optuna")
import matplotlib
import matplotlib.pyplot as plt
import optuna

from rlrun.reports.tune import trial_rows, write_report, write_trials


@pytest.fixture
def study() -> optuna.Study:
    """Six trials over two keys: four completed, one pruned, one failed with its error."""
    with _quiet():
        made = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    space = {
        "agent.learning_rate": optuna.distributions.FloatDistribution(1e-5, 1e-2, log=True),
        "agent.n_epochs": optuna.distributions.IntDistribution(1, 20),
    }
    for number in range(6):
        trial = made.ask(space)
        trial.set_user_attr("env_steps", 1000)
        trial.report(float(number), step=500)
        if number == 4:
            made.tell(trial, state=optuna.trial.TrialState.PRUNED)
        elif number == 5:
            trial.set_user_attr("error", "RuntimeError: boom")
            made.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            made.tell(trial, 10.0 * number + trial.params["agent.n_epochs"])
    return made


class _quiet:
    def __enter__(self):
        self.level = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.WARNING)

    def __exit__(self, *exc):
        optuna.logging.set_verbosity(self.level)


def test_trials_csv_has_a_row_per_trial_with_params_and_states(tmp_path, study):
    path = write_trials(tmp_path, study.get_trials())
    rows = list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))
    assert [row["state"] for row in rows] == ["COMPLETE"] * 4 + ["PRUNED", "FAIL"]
    assert {"param.agent.learning_rate", "param.agent.n_epochs"} <= set(rows[0])
    assert rows[4]["value"] == "4.0", "a pruned trial's value is its last reported one"
    assert rows[5]["error"] == "RuntimeError: boom" and rows[5]["value"] == ""
    columns, _ = trial_rows(study.get_trials())
    assert columns[:3] == ["number", "state", "value"]


def test_the_report_draws_every_plot_and_leaves_matplotlib_as_it_was(tmp_path, study):
    rc_before = dict(matplotlib.rcParams)
    figures_before = plt.get_fignums()
    report = write_report(tmp_path, study, "sqlite:///study.db", study.best_trial)
    assert dict(matplotlib.rcParams) == rc_before, "Optuna's ggplot style must not stay"
    assert plt.get_fignums() == figures_before, "every figure is closed"
    for stem in ("history", "importances", "parallel_coordinates"):
        assert (tmp_path / "plots" / f"{stem}.png").stat().st_size > 1000, stem
    text = report.read_text(encoding="utf-8")
    best = study.best_trial
    assert f"## Best trial: {best.number}, value {best.value:.2f}" in text
    assert "optuna-dashboard study.db" in text and "trial 5: RuntimeError: boom" in text
    assert "![Parameter importances](plots/importances.png)" in text


def test_a_study_without_completed_trials_says_why_plots_are_missing(tmp_path):
    with _quiet():
        empty = optuna.create_study(direction="maximize")
    text = write_report(tmp_path, empty, "sqlite:///study.db").read_text(encoding="utf-8")
    assert "no best trial" in text and "needs 1 or more completed trials" in text
    assert not (tmp_path / "plots" / "history.png").exists()


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_every_parallel_coordinate_line_is_visibly_coloured(direction):
    """Optuna's "Blues" map draws the worst trial near-white on white; the floored map keeps every line readable."""
    from matplotlib.collections import LineCollection

    from rlrun.reports.tune import _parallel

    with _quiet():
        made = optuna.create_study(direction=direction, sampler=optuna.samplers.RandomSampler(seed=0))
    space = {"agent.learning_rate": optuna.distributions.FloatDistribution(1e-5, 1e-2, log=True)}
    for number in range(8):
        trial = made.ask(space)
        made.tell(trial, float(number))
    with matplotlib.rc_context(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna's ExperimentalWarning for its matplotlib plots
        axes = _parallel(made)
        try:
            (lines,) = [c for c in axes.collections if isinstance(c, LineCollection) and c.get_array() is not None]
            colours = lines.to_rgba(lines.get_array())
            lightest = max(sum(rgba[:3]) / 3 for rgba in colours)
            assert lightest < 0.76, f"a trial line is near-white (mean RGB {lightest:.2f})"
            assert min(lines.get_linewidths()) >= 1.5
        finally:
            plt.close(axes.figure)
