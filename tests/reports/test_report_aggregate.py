"""IQM, stratified-bootstrap CIs, curve bands and performance profiles against hand computations."""

from __future__ import annotations

import pytest

from rlrun.reports import aggregate, curve_band, iqm, iqm_ci, performance_profile, read_results, summarize

np = pytest.importorskip("numpy")
pytest.importorskip("rliable")

CP, PD = "rlrun/CartPole-v1", "Pendulum-v1"


def test_iqm_by_hand():
    assert iqm([460.0, 500.0, 480.0]) == pytest.approx(480.0)  # 3 values: int(0.75) = 0 cut, the mean
    assert iqm([10.0, 1.0, 3.0, 2.0]) == pytest.approx(2.5)  # 4 values: drop 1 and 10, mean of 2 and 3
    assert iqm([0.0, 100.0, 1.0, 3.0, 2.0]) == pytest.approx(2.0)  # 5 values: drop 0 and 100 -> mean(1, 2, 3)


def test_the_bootstrap_statistic_is_rliables_iqm():
    from rliable import metrics

    rng = np.random.default_rng(3)
    for n in range(1, 13):
        scores = rng.normal(size=(n, 1))
        assert aggregate._iqm_columns(scores)[0] == pytest.approx(metrics.aggregate_iqm(scores))


def test_a_two_seed_ci_by_hand():
    # resamples of (0, 1): (0,0) -> 0 w.p. 1/4, mixed -> 0.5 w.p. 1/2, (1,1) -> 1 w.p. 1/4: the 2.5% and 97.5%
    # percentiles are 0 and 1
    estimate = iqm_ci([0.0, 1.0], reps=2000)
    assert (estimate.value, estimate.low, estimate.high, estimate.n) == (0.5, 0.0, 1.0, 2)


def test_the_ci_contains_the_iqm_lies_within_the_values_and_is_reproducible():
    values = [10.0, 1.0, 3.0, 2.0]
    state = np.random.get_state()
    first = iqm_ci(values, reps=2000, seed=7)
    assert first == iqm_ci(values, reps=2000, seed=7)
    assert min(values) <= first.low <= first.value == 2.5 <= first.high <= max(values)
    assert first.low < first.high
    after = np.random.get_state()  # rliable draws from NumPy's global state: seeded and restored
    assert after[0] == state[0] and np.array_equal(after[1], state[1]) and after[2:] == state[2:]


@pytest.mark.parametrize("values", [[42.0], [3.0, 3.0, 3.0]])
def test_the_ci_collapses_to_the_value_with_one_seed_or_equal_values(values):
    estimate = iqm_ci(values)
    assert estimate.value == estimate.low == estimate.high == values[0]
    assert estimate.n == len(values)


def test_curve_band_on_a_common_grid():
    steps = [0.0, 10.0, 20.0]
    band = curve_band([(steps, [0.0, 1.0, 2.0]), ([5.0, 15.0, 30.0], [1.0, 2.0, 4.0])], points=3, reps=500)
    assert band is not None and band.n == 2
    assert band.x == (5.0, 12.5, 20.0)  # the range both seeds reached
    assert band.iqm == pytest.approx((0.75, 1.5, 7 / 3))  # mean of (0.5, 1), (1.25, 1.75), (2, 2 + 2 * 5 / 15)
    assert all(lo <= mid <= hi for lo, mid, hi in zip(band.low, band.iqm, band.high, strict=True))
    single = curve_band([(steps, [0.0, 1.0, 2.0])], points=5)
    assert single is not None and single.low == single.iqm == single.high == (0.0, 0.5, 1.0, 1.5, 2.0)
    assert curve_band([([0.0, 1.0], [1.0, 1.0]), ([2.0, 3.0], [1.0, 1.0])]) is None
    assert curve_band([]) is None


def test_summaries_of_the_fixture_by_hand(bench_out):
    tasks = {t.task: t for t in summarize(read_results(bench_out / "results.jsonl").cells, reps=2000)}
    assert list(tasks) == [CP, PD]
    cp = {r.run: r for r in tasks[CP].runs}
    pd = {r.run: r for r in tasks[PD].runs}
    assert list(cp) == ["sb3/ppo", "skrl/ppo"] and list(pd) == ["sb3/ppo", "skrl/ppo", "sb3/dqn"]

    sb3 = cp["sb3/ppo"]
    assert sb3.seeds == (0, 1, 2) and sb3.failures == 0  # the superseded failed attempt is gone
    assert sb3.final_return is not None and sb3.final_return.value == pytest.approx((480 + 500 + 460) / 3)
    assert 460.0 <= sb3.final_return.low <= 480.0 <= sb3.final_return.high <= 500.0
    assert sb3.eval_return == aggregate.Estimate(500.0, 500.0, 500.0, 3)
    assert sb3.median_steps_per_s == 1100.0
    assert (sb3.threshold, sb3.reached) == (475.0, 2)
    assert sb3.median_time_to_threshold_s == 12.0 and sb3.median_steps_to_threshold == 24000.0

    skrl = cp["skrl/ppo"]
    assert skrl.final_return is not None and skrl.final_return.value == pytest.approx(250.0)
    assert skrl.eval_return is None and skrl.reached == 0 and skrl.median_time_to_threshold_s is None
    assert skrl.curve_seeds == 2  # cp-skrl-2 has no metrics.csv

    assert pd["sb3/ppo"].final_return is not None and pd["sb3/ppo"].final_return.value == pytest.approx(-500.0)
    assert pd["sb3/ppo"].threshold is None and pd["sb3/ppo"].median_steps_per_s == 950.0
    failing = pd["skrl/ppo"]
    assert failing.final_return is not None and failing.final_return.value == pytest.approx(-850.0 / 3)
    assert failing.seeds == (0, 1, 2) and failing.failures == 1 and failing.failed[0].seed == 3
    dqn = pd["sb3/dqn"]
    assert dqn.seeds == () and dqn.final_return is None and len(dqn.skipped) == 1


def test_learning_curve_bands_of_the_fixture(bench_out):
    tasks = summarize(read_results(bench_out / "results.jsonl").cells, reps=200, curve_reps=200)
    sb3 = tasks[0].runs[0]
    assert sb3.curve_steps is not None and sb3.curve_wall is not None
    assert (sb3.curve_steps.x[0], sb3.curve_steps.x[-1]) == (2048.0, 20480.0)
    assert sb3.curve_steps.iqm[0] == pytest.approx(48.0) and sb3.curve_steps.iqm[-1] == pytest.approx(480.0)
    # wall time: from the slowest seed's first point (1000 steps/s) to the slowest seed's last: the seeds that
    # ended sooner hold their final return, so the curve ends at the IQM of the three final returns
    assert sb3.curve_wall.x[0] == pytest.approx(2.048) and sb3.curve_wall.x[-1] == pytest.approx(20480 / 1000)
    assert sb3.curve_wall.iqm[-1] == pytest.approx((480 + 500 + 460) / 3)
    assert sb3.curve_steps.n == 3 and sb3.seed_points == ()


def test_the_wall_time_band_holds_each_seeds_last_value_to_the_slowest_end():
    """Three seeds that all end near -200, the fastest after 10 s, the slowest after 30 s: the band ends at their
    final returns at 30 s, not at the fastest seed's end with the slow seeds still early in training."""
    fast = ([1.0, 5.0, 10.0], [-1200.0, -600.0, -200.0])
    middle = ([1.0, 10.0, 20.0], [-1200.0, -890.0, -210.0])
    slow = ([1.0, 15.0, 30.0], [-1200.0, -890.0, -190.0])
    cut = curve_band([fast, middle, slow], points=4, reps=200)
    held = curve_band([fast, middle, slow], points=4, reps=200, hold=True)
    assert cut is not None and held is not None
    assert cut.x[-1] == 10.0 and cut.iqm[-1] < -500.0  # what the figure drew before: every seed cut at 10 s
    assert held.x == pytest.approx((1.0, 1.0 + 29 / 3, 1.0 + 58 / 3, 30.0))
    assert held.iqm[-1] == pytest.approx((-200.0 - 210.0 - 190.0) / 3)
    assert held.low[-1] == pytest.approx(-210.0) and held.high[-1] == pytest.approx(-190.0)  # 3 seeds: [min, max]


def test_one_point_per_seed_is_kept_as_points_not_a_band(tmp_path):
    import json

    rows = []
    for seed in range(3):
        run_dir = tmp_path / f"r{seed}"
        run_dir.mkdir()
        (run_dir / "metrics.csv").write_text(
            "iteration,env_steps,wall_s,mean_return\n0,0,0.0,\n" + f"1,{1000 + seed},{2.0 + seed},{10.0 * seed}\n"
        )
        rows.append(
            {
                "key": f"k{seed}",
                "task": "T",
                "run": "sb3/ppo",
                "seed": seed,
                "status": "completed",
                "final_return": 10.0 * seed,
                "run_dir": str(run_dir),
            }
        )
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run,) = summarize(read_results(tmp_path / "results.jsonl").cells, reps=200, curve_reps=200)[0].runs
    assert run.curve_steps is None and run.curve_wall is None
    assert run.seed_points == ((1000.0, 2.0, 0.0), (1001.0, 3.0, 10.0), (1002.0, 4.0, 20.0))


def test_performance_profile_by_hand(bench_out):
    cells = read_results(bench_out / "results.jsonl", curves=False).cells
    profile = performance_profile(cells, reps=500, normalisation="field")
    assert profile is not None and profile.runs == ("sb3/ppo", "skrl/ppo") and profile.left_out == ()
    assert profile.tasks == (CP, PD) and profile.seeds == {"sb3/ppo": 3, "skrl/ppo": 3}
    assert profile.taus[50] == 0.5
    # normalised: CartPole by [200, 500], Pendulum by [-800, -150]
    # sb3/ppo:  .933 1 .867 | 0 .923 .462  -> above 0.5: 4 of 6, above 0: 5 of 6
    # skrl/ppo: 0 .333 .167 | .769 1 .615  -> above 0.5: 3 of 6, above 0: 5 of 6
    assert profile.fraction["sb3/ppo"][50] == pytest.approx(4 / 6)
    assert profile.fraction["skrl/ppo"][50] == pytest.approx(3 / 6)
    assert profile.fraction["sb3/ppo"][0] == pytest.approx(5 / 6) == profile.fraction["skrl/ppo"][0]
    assert profile.fraction["sb3/ppo"][-1] == 0.0
    for run in profile.runs:
        assert all(0.0 <= lo <= hi <= 1.0 for lo, hi in zip(profile.low[run], profile.high[run], strict=True))
    one_task = [c for c in cells if c.task == CP]
    assert performance_profile(one_task) is None


def test_with_three_seeds_the_ci_is_min_max_and_the_iqm_the_mean():
    """What the report's fewer-than-5-seeds warning says, checked on rliable's own bootstrap."""
    for values in ([1.0, 5.0], [1.0, 2.0, 9.0]):
        estimate = iqm_ci(values, reps=2000)
        assert estimate.value == pytest.approx(sum(values) / len(values))
        assert (estimate.low, estimate.high) == (min(values), max(values))
    four = iqm_ci([1.0, 2.0, 3.0, 10.0], reps=2000)
    assert four.value == pytest.approx(2.5)
