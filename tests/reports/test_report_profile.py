"""Performance profiles normalised by rlrun's reference table (random = 0, reference = 1) or field-relative."""

from __future__ import annotations

import json

import pytest

from rlrun.errors import InvalidArgument
from rlrun.reports import performance_profile, read_results, reference
from rlrun.reports.plots import performance_profile_plot

np = pytest.importorskip("numpy")
pytest.importorskip("rliable")

CP, PD = "rlrun/CartPole-v1", "Pendulum-v1"


def test_scores_are_normalised_by_the_tables_random_and_reference_returns(bench_out):
    cells = read_results(bench_out / "results.jsonl", curves=False).cells
    profile = performance_profile(cells, reps=500)
    assert profile is not None and profile.normalisation == "reference" and profile.field_tasks == ()
    cartpole, pendulum = reference("CartPole-v1"), reference("Pendulum-v1")
    assert cartpole is not None and pendulum is not None
    assert reference(CP) is not None and reference(CP).reference == cartpole.reference == 475.0  # same_as
    assert profile.bounds == {CP: (cartpole.random, 475.0), PD: (pendulum.random, pendulum.reference)}
    scores = {
        "sb3/ppo": [cartpole.normalise(v) for v in (480.0, 500.0, 460.0)]
        + [pendulum.normalise(v) for v in (-800.0, -200.0, -500.0)],
        "skrl/ppo": [cartpole.normalise(v) for v in (200.0, 300.0, 250.0)]
        + [pendulum.normalise(v) for v in (-300.0, -150.0, -400.0)],
    }
    taus = np.asarray(profile.taus)
    assert taus[0] == 0.0 and taus[-1] == pytest.approx(1.1)  # 500 on CartPole is above the reference: 1.05
    for run, values in scores.items():
        expected = [np.mean(np.asarray(values) > tau) for tau in taus]
        assert profile.fraction[run] == pytest.approx(expected), run
    assert cartpole.normalise(475.0) == 1.0 and cartpole.normalise(cartpole.random) == 0.0


def test_the_field_relative_view_is_an_option_and_a_typo_is_refused(bench_out):
    cells = read_results(bench_out / "results.jsonl", curves=False).cells
    field = performance_profile(cells, reps=200, normalisation="field")
    assert field is not None and field.references == {} and field.bounds == {CP: (200.0, 500.0), PD: (-800.0, -150.0)}
    assert field.taus[0] == 0.0 and field.taus[-1] == 1.0
    with pytest.raises(InvalidArgument, match="'refrence' is unknown; choose one of reference, field"):
        performance_profile(cells, normalisation="refrence")


def test_a_task_without_a_reference_falls_back_to_field_relative_and_is_named(tmp_path):
    rows = [
        {
            "key": f"{task}{seed}",
            "task": task,
            "run": "sb3/ppo",
            "seed": seed,
            "status": "completed",
            "final_return": value,
        }
        for task, values in (("CartPole-v1", (100.0, 475.0)), ("Made-up-v0", (1.0, 3.0)))
        for seed, value in enumerate(values)
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    profile = performance_profile(read_results(tmp_path / "results.jsonl").cells, reps=200)
    assert profile is not None and profile.field_tasks == ("Made-up-v0",) and profile.bounds["Made-up-v0"] == (1.0, 3.0)
    caption = performance_profile_plot(profile).caption
    assert (
        "Gymnasium reward threshold" in caption
        and "field-relative (the bench's min = 0, max = 1): Made-up-v0" in caption
    )


def test_atari_scores_are_human_normalised(tmp_path):
    rows = [
        {"key": f"{task}", "task": task, "run": "sb3/ppo", "seed": 0, "status": "completed", "final_return": value}
        for task, value in (("ALE/Qbert-v5", 13455.0), ("ALE/DoubleDunk-v5", -18.6))
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    profile = performance_profile(read_results(tmp_path / "results.jsonl").cells, reps=200)
    assert profile is not None and profile.human
    assert profile.bounds == {"ALE/Qbert-v5": (163.9, 13455.0), "ALE/DoubleDunk-v5": (-18.6, -16.4)}
    figure = performance_profile_plot(profile)
    assert "human-normalised" in figure.figure.axes[0].get_xlabel()
