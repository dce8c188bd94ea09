"""The comparison benchmarks: alternating pairs, their summary, a row for every library path, and runs end to end.

The scripts print times; these tests never judge them. They check what the figures rest on: the sides
alternate (AB, BA, ...), the verdict is the median's, a row that was not measured fails the "every
library" line, `adapter_overhead.py` and `repeated_calls.py` cover every library of rlrun's table (SKRL
on both frameworks), and (slow) each script runs to its summary at tiny sizes.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlrun.libraries import LIBRARIES

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPT_ROWS = ("rsl_rl", "skrl", "skrl_jax", "sb3", "rl_games", "torchrl")


@pytest.fixture
def benchmark(monkeypatch):
    """Import a module of `benchmarks/` (the scripts import each other by name, as `python benchmarks/x.py`)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module


def test_pairs_alternate_which_side_runs_first_and_return_each_sides_own_time(benchmark):
    alternating = benchmark("alternating")
    ran = []

    def side(name, seconds):
        return lambda: ran.append(name) or seconds

    times = [alternating.pair(index, side("A", 1.0), side("B", 2.0)) for index in range(4)]
    assert ran == ["A", "B", "B", "A", "A", "B", "B", "A"]
    assert times == [(1.0, 2.0)] * 4
    assert [alternating.order(index, "A", "B") for index in range(2)] == ["A first", "B first"]


def test_alternate_prints_each_pair_and_returns_the_ratios_of_first_to_second(benchmark, capsys):
    alternating = benchmark("alternating")
    durations = {"A": iter([2.0, 3.0, 1.0]), "B": iter([1.0, 1.0, 2.0])}
    summary = alternating.alternate(
        3, lambda: next(durations["A"]), lambda: next(durations["B"]), names=("A", "B"), goal=1.5, word="round"
    )
    assert summary.ratios == (2.0, 3.0, 0.5) and summary.median == 2.0 and summary.met
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("  round 1 (A first): A   2.00 s, B   1.00 s, ratio 2.000")
    assert lines[1].startswith("  round 2 (B first)") and "median 2.000" in lines[3]


def _sides(ratios):
    """Two sides whose pairs give `ratios` (first / second), the second side always 1 s."""
    values = iter(ratios)
    return (lambda: next(values)), (lambda: 1.0)


def test_up_to_adds_pairs_two_at_a_time_while_the_interval_holds_the_goal(benchmark, capsys):
    alternating = benchmark("alternating")
    # Five pairs around the goal leave it inside the interval; from the seventh pair on, ratios well above it.
    ratios = [0.95, 1.01, 0.97, 1.02, 0.99] + [1.05] * 40
    first, second = _sides(ratios)
    summary = alternating.alternate(5, first, second, names=("a", "b"), goal=0.98, up_to=40)
    assert summary.resolved and summary.interval()[0] >= 0.98
    count = len(summary.ratios)
    assert 5 < count < 40 and (count - 5) % 2 == 0  # two at a time, one of each order
    assert not alternating.Summary(tuple(ratios[: count - 2]), 0.98, 0, 0).resolved  # it stopped at the first chance
    assert "two more pairs at a time, up to 40" in capsys.readouterr().out


def test_up_to_stops_as_soon_below_the_goal_as_above_it(benchmark):
    alternating = benchmark("alternating")
    first, second = _sides([0.99, 0.97, 1.00, 0.96, 0.98, 0.97] + [0.90] * 40)
    summary = alternating.alternate(6, first, second, names=("a", "b"), goal=0.98, up_to=40)
    assert summary.resolved and summary.interval()[1] < 0.98 and not summary.met
    assert len(summary.ratios) < 40 and len(summary.ratios) % 2 == 0


def test_up_to_stops_at_its_cap_and_the_line_says_the_verdict_is_not_resolved(benchmark, capsys):
    alternating = benchmark("alternating")
    first, second = _sides([0.97, 0.99] * 20)
    summary = alternating.alternate(6, first, second, names=("a", "b"), goal=0.98, up_to=12)
    assert len(summary.ratios) == 12 and not summary.resolved
    assert capsys.readouterr().out.rstrip().endswith("(not resolved: the 90% interval holds the goal)")
    first, second = _sides([0.97, 0.99] * 20)
    assert len(alternating.alternate(6, first, second, names=("a", "b"), goal=0.98).ratios) == 6  # no up_to: no more


def test_summary_judges_the_median_against_the_goal_and_prints_the_spread(benchmark):
    Summary = benchmark("alternating").Summary
    summary = Summary((0.90, 1.02, 0.98), goal=0.98, load_before=1.0, load_after=1.5)
    assert summary.median == 0.98 and summary.met  # the goal's own value meets it
    line = summary.line()
    assert "median 0.980" in line and "spread 0.900-1.020 over 3 pairs" in line and "1.00 -> 1.50" in line
    assert line.endswith("goal >= 0.98: met")
    assert Summary((6.0, 4.0, 4.5), goal=5.0, load_before=0, load_after=0).line("x", 2).endswith("NOT met")


def test_a_median_just_under_the_goal_prints_the_digits_that_show_it_under(benchmark, capsys):
    """Rounded to 3 decimals, 0.97996 would print as 0.980 beside NOT met (SKRL's row, 30 pairs, 2026-12-03)."""
    alternating = benchmark("alternating")

    def summary(median):
        return alternating.Summary((median - 0.01, median, median + 0.01), goal=0.98, load_before=0, load_after=0)

    assert summary(0.97996).shown() == "0.97996" and "median 0.97996," in summary(0.97996).line()
    assert summary(0.9799996).shown() == "0.979999"  # 6 decimals at most
    assert summary(0.98004).shown() == "0.980" and summary(0.97949).shown() == "0.979"  # already on its side
    assert summary(1.0).shown(2) == "1.00"
    alternating.print_table({"a": summary(0.97996)}, ("a",), 0.98)
    row = capsys.readouterr().out.splitlines()[2]
    assert row.split()[:2] == ["a", "0.97996"] and row.endswith("NOT met")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # the fixture only imports
@given(
    value=st.floats(min_value=1e-3, max_value=1e10, allow_nan=False),
    goal=st.floats(min_value=1e-3, max_value=1e10, allow_nan=False),
    digits=st.integers(0, 3),
    higher_is_better=st.booleans(),
    thousands=st.booleans(),
)
def test_a_printed_figure_always_sides_with_its_verdict(benchmark, value, goal, digits, higher_is_better, thousands):
    """Whatever the figure, the goal and the direction, the printed text reads on the verdict's side of the goal
    (the scripts print the verdict from the unrounded figure): never 2.00x beside NOT met for 1.996x against
    2.0, nor 0.300 ms beside "missed" for 0.3004 against <= 0.3."""
    sided = benchmark("alternating").sided

    def meets(figure):
        return figure >= goal if higher_is_better else figure <= goal

    text = sided(value, goal, digits=digits, higher_is_better=higher_is_better, thousands=thousands)
    assert meets(float(text.replace(",", ""))) == meets(value), text
    assert ("," in text) == (thousands and value >= 1000), text


def test_the_other_scripts_goals_print_on_their_verdicts_side(benchmark):
    """The figures of `env_vs_numpy.py` (>= 2.0x), `hermetic_overhead.py` (<= 0.3 ms, lower is better) and `gpu.py`
    (1e9 steps/s, with thousands), as they print them through `sided`."""
    sided = benchmark("alternating").sided
    assert sided(1.996, 2.0, digits=2) == "1.996" and sided(2.004, 2.0, digits=2) == "2.00"
    assert sided(0.3004, 0.3, higher_is_better=False) == "0.3004"
    assert sided(0.2996, 0.3, higher_is_better=False) == "0.300"  # 0.300 <= 0.3: already on its side
    assert sided(999_999_999.7, 1e9, digits=0, thousands=True) == "999,999,999.7"
    assert sided(1_500_000_000.2, 1e9, digits=0, thousands=True) == "1,500,000,000"


def test_the_guard_costs_cover_every_restorable_guard_the_scope_would_capture(benchmark):
    from rlrun.hermetic import GUARDS

    ticks = iter(range(0, 10**9, 1000))  # each clock read 1 us after the last: every timing reads 1 us
    costs = benchmark("hermetic_overhead").guard_costs(2, clock=lambda: next(ticks))
    captured = [guard.name for guard in GUARDS if guard.restored and guard.available()]
    assert list(costs) == captured and len(set(captured)) == len(captured)
    assert set(costs.values()) == {(1.0, 1.0)}


def test_the_medians_interval_is_the_order_statistics_whose_binomial_tails_fit_the_confidence(benchmark):
    """The k-th ratio from each end covers the median with 1 - 2 P(Bin(n, 1/2) <= k - 1). n = 5: P(0) = 1/32 <= 5%,
    P(<= 1) = 6/32 > 5%: the smallest and the largest. n = 9: P(<= 1) = 10/512 <= 5%, P(<= 2) = 46/512 > 5%: the
    second from each end. Fewer than 5: none."""
    Summary = benchmark("alternating").Summary

    def summary(*ratios):
        return Summary(ratios, goal=0.98, load_before=0, load_after=0)

    assert summary(1.0, 0.9, 1.1, 0.95).interval() is None
    assert "interval" not in summary(1.0, 0.9, 1.1, 0.95).line()
    assert summary(1.0, 0.9, 1.1, 0.95, 1.05).interval() == (0.9, 1.1)
    nine = summary(0.91, 0.99, 1.03, 0.97, 0.93, 1.01, 1.07, 0.95, 1.05)
    assert nine.interval() == (0.93, 1.05)
    assert "median 0.990 (90% interval 0.930-1.050), spread 0.910-1.070 over 9 pairs" in nine.line()
    many = summary(*[1 + index / 1000 for index in range(31)])
    low, high = many.interval()
    assert (low, high) == (1.01, 1.02)  # the 11th from each end: P(Bin(31, 1/2) <= 10) = 3.5%, P(<= 11) = 7.5%


def test_a_row_not_measured_fails_the_every_row_verdict(benchmark, capsys):
    alternating = benchmark("alternating")
    met = alternating.Summary((1.1,), goal=0.98, load_before=0, load_after=0)
    alternating.print_table({"a": met, "b": "not measured (not installed)"}, ("a", "b"), 0.98)
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == "every row (a, b): NOT met (1 of 2 rows measured)"
    alternating.print_table({"a": met, "b": met}, ("a", "b"), 0.98)
    assert capsys.readouterr().out.splitlines()[-1] == "every row (a, b): met"


def test_both_scripts_cover_every_library_of_the_table_and_skrl_on_jax(benchmark):
    own = {name for name, library in LIBRARIES.items() if library.provider == "rlrun"}
    assert set(SCRIPT_ROWS) == own | {"skrl_jax"}  # a library added to rlrun's table needs a row in both scripts
    assert benchmark("adapter_overhead").ROWS == SCRIPT_ROWS
    assert benchmark("repeated_calls").ROWS == SCRIPT_ROWS


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # the fixture only imports
@given(
    iterations=st.integers(1, 10_000),
    seconds=st.floats(min_value=1e-3, max_value=1e3, allow_nan=False),
    target=st.floats(min_value=1e-2, max_value=1e2, allow_nan=False),
)
def test_a_row_is_sized_to_the_nearest_whole_iteration_of_its_target(benchmark, iterations, seconds, target):
    sized = benchmark("adapter_overhead").sized(iterations, seconds, target)
    per_iteration = seconds / iterations
    assert sized >= 1
    if sized > 1:
        assert abs(sized * per_iteration - target) <= per_iteration / 2 * (1 + 1e-9)
    else:
        assert target <= 1.5 * per_iteration * (1 + 1e-9)


def test_a_row_is_timed_at_the_length_its_calibration_run_gives_unless_iterations_are_set(benchmark, monkeypatch):
    """After one warm-up per side, the library alone runs at the row's `ITERATIONS`; every pair then runs both
    sides at the iterations that make `--seconds` (here each iteration takes 10 ms of the fake clock)."""
    adapter_overhead = benchmark("adapter_overhead")
    runs = []

    def fake_side(name):
        def run(tmp, iterations):
            runs.append((name, iterations))

        return run

    row = type("Row", (), {"LABEL": "fake", "NUM_ENVS": 8, "ITERATIONS": 10})
    row.direct, row.through_rlrun = staticmethod(fake_side("direct")), staticmethod(fake_side("rlrun"))
    monkeypatch.setattr(adapter_overhead, "timed", lambda run: run() or 0.01 * runs[-1][1])
    summary = adapter_overhead.measure(row, 2, None, seconds=0.5)
    pairs = [("direct", 50), ("rlrun", 50), ("rlrun", 50), ("direct", 50)]  # the second pair led by rlrun
    assert runs == [("direct", 10), ("rlrun", 10), ("direct", 10), *pairs]
    assert summary.ratios == (1.0, 1.0)
    runs.clear()
    adapter_overhead.measure(row, 1, 3, seconds=0.5)
    assert runs == [("direct", 3), ("rlrun", 3), ("direct", 3), ("rlrun", 3)]


@pytest.mark.parametrize("name", SCRIPT_ROWS)
def test_every_overhead_row_has_its_size_and_takes_the_iterations_the_script_passes(benchmark, name):
    row = benchmark(f"overhead_{name}")
    assert row.LABEL and row.NUM_ENVS > 0 and row.ITERATIONS > 0
    for side in (row.direct, row.through_rlrun):
        assert list(inspect.signature(side).parameters)[:2] == ["tmp", "iterations"]


def test_repeated_calls_runs_skrl_on_jax_as_skrl_with_the_jax_framework(benchmark):
    repeated_calls = benchmark("repeated_calls")
    assert repeated_calls.library_and_framework("skrl_jax") == ("skrl", "jax")
    assert repeated_calls.library_and_framework("sb3") == ("sb3", None)


def run_script(*arguments: str) -> str:
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / arguments[0]), *arguments[1:]],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", SCRIPT_ROWS)
def test_adapter_overhead_runs_each_row_to_its_verdict(name):
    pytest.importorskip("jax" if name == "skrl_jax" else LIBRARIES[name].import_name)
    out = run_script("adapter_overhead.py", "--pairs", "1", "--iterations", "1", "--libraries", name)
    assert "pair 1 (library first): library alone" in out and "over 1 pair," in out
    assert out.splitlines()[-1].endswith("NOT met (1 of 6 rows measured)")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sb3", "skrl_jax"])
def test_repeated_calls_runs_a_library_to_its_verdict(name):
    pytest.importorskip("jax" if name == "skrl_jax" else LIBRARIES[name].import_name)
    out = run_script("repeated_calls.py", "--calls", "1", "--rounds", "1", "--iterations", "1", "--libraries", name)
    assert "round 1 (processes first): processes" in out and "over 1 pair," in out
    assert out.splitlines()[-1].endswith("NOT met (1 of 6 rows measured)")


GOAL_SCRIPTS = {
    "env_vs_numpy": (
        ["--num_envs", "4096", "--pairs", "1", "--env_steps", "30", "--tasks", "rlrun/CartPole-v1"],
        r"rlrun/CartPole-v1 .* (\d+\.\d+)x .* goal >= 1\.0x: (met|NOT met)$",
        lambda figure: figure >= 1.0,
    ),
    "hermetic_overhead": (
        ["--calls", "50", "--guards", "5"],
        r"^scope cost per call: (\d+\.\d+) ms; goal <= 0\.3 ms: (met|missed)$",
        lambda figure: figure <= 0.3,
    ),
    "statistics_overhead": (
        ["--num_envs", "64", "--block", "5", "--blocks", "4"],
        r"^wrapper +own time +(\d+\.\d+) us per step .* goal <= 10 us: (met|not met)$",
        lambda figure: figure <= 10.0,
    ),
}
"""Scripts that print a goal's verdict beside their figure: arguments for a tiny run, the goal line, the goal."""


@pytest.mark.slow
@pytest.mark.parametrize("name", GOAL_SCRIPTS)
def test_the_goal_scripts_run_to_a_verdict_their_printed_figure_agrees_with(name):
    """At tiny sizes each script prints its goal line, and the figure printed there sides with the verdict."""
    arguments, pattern, meets = GOAL_SCRIPTS[name]
    out = run_script(f"{name}.py", *arguments)
    found = [match for line in out.splitlines() if (match := re.search(pattern, line.strip()))]
    assert found, out[-2000:]
    for match in found:
        assert meets(float(match.group(1))) == (match.group(2) == "met"), match.group(0)


def test_the_overhead_parts_ablations_leave_out_their_part_and_only_for_the_call(benchmark, tmp_path, monkeypatch):
    """`overhead_parts.py`: the statistics pass-through records nothing; plain checkpoints skip run.json; no fsync
    writes and lists the same files without an fsync."""
    import torch

    from rlrun import runs
    from rlrun.envs import EpisodeStatistics, make_env
    from rlrun.runs import atomic

    parts = benchmark("overhead_parts")
    called = []
    fsyncs = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda descriptor: fsyncs.append(descriptor) or fsync(descriptor))

    def run(tmp, iterations):
        env = EpisodeStatistics(make_env("rlrun/CartPole-v1", 2, env_kwargs={"max_episode_steps": 3}))
        env.reset(seed=0)
        for _ in range(4):
            env.step(torch.zeros(2, dtype=torch.int64))
        record = runs.RunRecord.create(tmp, "lib", "exp", None, {"library": "lib", "task": "t"}, {})
        record.save_checkpoint("model_0.pt", lambda path: Path(path).write_bytes(b"w"), iteration=0)
        write = lambda path: Path(path).write_bytes(b"b")  # noqa: E731
        record.save_checkpoints([("best.pt", write, {"iteration": 1}), ("model_1.pt", write, {"iteration": 1})])
        listed = [entry["file"] for entry in runs.read_manifest(record.dir)["checkpoints"]]
        record.finish("finished")
        called.append(((env.env_steps, env.episodes, listed), record, len(fsyncs)))
        fsyncs.clear()

    for name, variant in parts.variants(type("Row", (), {"direct": run, "through_rlrun": run})).items():
        variant(tmp_path / name.replace(" ", "_"), 1)
    (alone, _, synced), (through, _, _), (bare, _, _), (plain, plain_record, _), (unsynced, _, none) = called
    files = ["model_0.pt", "best.pt", "model_1.pt"]
    assert alone == through == unsynced == (8, 2, files)
    assert synced > 0 and none == 0  # the same files, written and listed, none of them fsynced
    assert atomic.os is os  # put back after the call
    assert bare == (8, 0, files)  # steps counted, no episode recorded
    assert plain == (8, 2, []) and (plain_record.dir / "model_0.pt").read_bytes() == b"w"  # run.json not rewritten
    assert (plain_record.dir / "best.pt").read_bytes() == b"b"  # a batch (SKRL's moments) written plainly too
    assert [entry["file"] for entry in plain_record.manifest["checkpoints"]] == files
    assert EpisodeStatistics.step is not parts._bare_step  # put back after the call
    assert runs.RunRecord.save_checkpoints is not parts._plain_checkpoints


def test_the_no_kept_executables_ablation_is_the_jax_rows_and_reads_every_executable_from_the_disk(benchmark, tmp_path):
    """`overhead_parts.py`'s JAX-only variant: no executable of an earlier call in memory, none kept by the call."""
    from rlrun.libraries import skrl_jax_cache

    parts = benchmark("overhead_parts")
    seen = []

    def run(tmp, iterations):
        seen.append((skrl_jax_cache._keep_executables, dict(skrl_jax_cache._kept)))

    assert "no kept executables" not in parts.variants(type("Row", (), {"direct": run, "through_rlrun": run}))
    jax_row = type("Row", (), {"direct": run, "through_rlrun": run, "FRAMEWORK": "jax"})
    keep = skrl_jax_cache._keep_executables
    skrl_jax_cache._kept[("folder", "key", 0, (0,))] = ("executable", 1, None)  # as an earlier call left it
    try:
        parts.variants(jax_row)["no kept executables"](tmp_path, 1)
    finally:
        skrl_jax_cache.forget_kept_executables()
    ((replaced, kept),) = seen
    assert replaced is not keep and replaced("folder") is None and kept == {}
    assert skrl_jax_cache._keep_executables is keep  # put back after the call


@pytest.mark.slow
def test_overhead_parts_times_every_variant_of_a_row():
    pytest.importorskip("rl_games")
    out = run_script("overhead_parts.py", "--library", "rl_games", "--rounds", "1", "--iterations", "1")
    for name in ("library alone", "through rlrun", "without step statistics", "plain checkpoints", "no fsync"):
        assert f"  {name}" in out and "library alone / this" in out
    assert "no kept executables" not in out  # a JAX row's variant


def test_overhead_split_fits_a_line_per_side_and_finds_where_the_ratio_reaches_the_goal(benchmark):
    """Library alone: 0.1 s + 1.0 s an iteration; rlrun: 0.2 s + 1.01 s. Per iteration 1/1.01 = 0.990 >= 0.98,
    so the ratio (0.1 + n) / (0.2 + 1.01 n) reaches 0.98 from n = (0.98 x 0.2 - 0.1) / (1 - 0.98 x 1.01) = 9.6."""
    Split = benchmark("overhead_split").Split
    split = Split(1, 5, library=(1.1, 5.1), rlrun=(1.21, 5.25))
    assert split.line(split.library) == pytest.approx((0.1, 1.0))
    assert split.per_call == pytest.approx(0.1) and split.per_iteration == pytest.approx(1 / 1.01)
    reach = split.reaches(0.98)
    assert reach == pytest.approx(0.096 / 0.0102)
    assert (0.1 + reach) / (0.2 + 1.01 * reach) == pytest.approx(0.98)
    assert Split(1, 5, library=(1.1, 5.1), rlrun=(1.15, 5.35)).reaches(0.98) == float("inf")  # 1/1.05 a step
    assert Split(1, 5, library=(1.2, 5.2), rlrun=(1.1, 5.1)).reaches(0.98) == 0.0  # rlrun cheaper per call


def test_overhead_split_times_four_sides_in_rotating_order_and_prints_the_split(benchmark, capsys):
    split = benchmark("overhead_split")
    ran = []

    def row_side(name, fixed, per_iteration):
        def run(tmp, iterations):
            ran.append((name, iterations))
            return fixed + per_iteration * iterations

        return run

    row = type("Row", (), {"LABEL": "fake", "NUM_ENVS": 4})
    row.direct, row.through_rlrun = row_side("library", 0.1, 1.0), row_side("rlrun", 0.2, 1.01)
    sides = {}

    def fake_side(run, iterations, threads=None):  # each side "takes" what its run returns
        sides[run, iterations] = lambda: run(None, iterations)
        return sides[run, iterations]

    original = split.side
    split.side = fake_side
    try:
        splits = split.measure(row, rounds=4, short=1, long=3)
    finally:
        split.side = original
    assert ran[:2] == [("library", 1), ("rlrun", 1)]  # warm-up: the short sides
    rounds = [ran[2 + 4 * index : 6 + 4 * index] for index in range(4)]
    assert [first for first, *_ in rounds] == [("library", 1), ("rlrun", 1), ("library", 3), ("rlrun", 3)]
    assert all(sorted(each) == sorted(rounds[0]) for each in rounds)
    assert all(s.per_call == pytest.approx(0.1) and s.per_iteration == pytest.approx(1 / 1.01) for s in splits)
    out = capsys.readouterr().out
    assert "fake: 1 and 3 iterations, 4 rounds" in out and "rlrun per call +100.0 ms, per iteration 0.990" in out
    assert "whole call >= 0.98 from 10 iterations" in out  # 9.4, rounded up


@pytest.mark.slow
def test_overhead_split_runs_a_row_end_to_end():
    out = run_script("overhead_split.py", "--libraries", "rsl_rl", "--rounds", "1", "--short", "1", "--long", "2")
    assert "rsl_rl    rlrun per call" in out and "per iteration, library alone / rlrun" in out


def test_the_gpu_script_runs_every_part_off_cuda_at_tiny_sizes(tmp_path):
    """`gpu.py --device cpu --quick`: the code path of the GPU figures (env-only, training with the census and
    the flags read around it), so that a script's own bug shows without a GPU; with `--save`, its record."""
    pytest.importorskip("rsl_rl")
    record = tmp_path / "gpu.json"
    out = run_script("gpu.py", "--device", "cpu", "--quick", "--save", str(record))
    lines = out.splitlines()
    for task in ("rlrun/CartPole-v1", "rlrun/CartPoleContinuous-v1", "rlrun/Pendulum-v1"):
        assert any(line.startswith(f"env-only {task} ") and "no graphs off CUDA" in line for line in lines), task
    assert "census: clean (check_leaks=True raised nothing), flags restored" in out
    assert lines[-1] == "  every part ran"
    figures = json.loads(record.read_text(encoding="utf-8"))["figures"]
    assert len(figures) == 3 * 2 + 1  # eager steps/s of each task at 2^8 and 2^10 envs, and the training's
    assert all(figure["value"] > 0 for figure in figures)


def test_the_gpu_script_refuses_a_machine_without_cuda_in_one_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    environment = {key: value for key, value in os.environ.items() if key != "PYTHON"}
    completed = subprocess.run(
        ["bash", str(BENCHMARKS / "gpu.sh")], capture_output=True, text=True, env=environment, timeout=300, check=False
    )
    assert completed.returncode == 1
    assert completed.stderr.strip().splitlines()[-1].startswith("gpu.sh: no Python here whose torch sees a CUDA device")


def test_checkpoint_moments_writes_the_same_files_on_every_side_and_prints_each(benchmark, tmp_path, capsys):
    """`checkpoint_moments.py`: the library's saves and the record's (both ways) write the same checkpoints, the
    record lists them all, and the script prints each side's cost against the library's saves."""
    import torch

    moments = benchmark("checkpoint_moments")
    plan = moments.moments(3)
    assert plan == [["best_agent.pt", "agent_0.pt"], ["agent_1.pt"], ["best_agent.pt", "agent_2.pt"]]
    training, state = moments.Training(0.1), moments.agent_state()
    moments.library_saves(tmp_path / "alone", training, state, plan)
    files = sorted(path.name for path in (tmp_path / "alone" / "checkpoints").iterdir())
    for background in (True, False):
        root = tmp_path / f"record_{background}"
        moments.through_record(background)(root, training, state, plan)
        (run_dir,) = root.glob("bench/moments/*")
        assert sorted(path.name for path in (run_dir / "checkpoints").iterdir()) == files
        listed = [entry["file"] for entry in runs_manifest(run_dir)["checkpoints"]]
        assert listed == [
            "checkpoints/agent_0.pt",
            "checkpoints/agent_1.pt",
            "checkpoints/best_agent.pt",
            "checkpoints/agent_2.pt",
        ]
    threads = torch.get_num_threads()
    assert moments.main(["--moments", "2", "--rounds", "1", "--work_ms", "0.1", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for side in ("library's saves", "rlrun, in the background", "rlrun, in the caller"):
        assert f"  {side}" in out
    assert "ms a moment" in out and torch.get_num_threads() == threads


def runs_manifest(run_dir: Path) -> dict:
    from rlrun import runs

    return runs.read_manifest(run_dir)


def test_commit_interference_times_every_variant_and_both_committers_commit(benchmark, tmp_path, capsys):
    """`commit_interference.py`: each variant beside the loop is timed, the thread and the child process both make
    commits (each a moved file in the folder), and the caller's torch threads come back."""
    import torch

    interference = benchmark("commit_interference")
    threads = torch.get_num_threads()
    assert interference.main(["--rounds", "1", "--steps", "50", "--period_ms", "1", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for variant in interference.VARIANTS:
        assert f"  {variant} " in out
    rates = [float(line.split(",")[-1].split()[0]) for line in out.splitlines() if line.endswith("commits/s")]
    assert len(rates) == 2 and all(rate > 0 for rate in rates)
    assert torch.get_num_threads() == threads and list(tmp_path.iterdir()) == []
    folder = tmp_path / "commits"
    assert interference.commits(str(folder), 0.0, iter([True, True, False]).__next__) == 2
    assert sorted(path.name for path in folder.iterdir()) == [".tmp", "agent_0.pt", "agent_1.pt"]


@pytest.mark.parametrize("workers", [[2], [1, 2], [4, 1, 2]])
def test_bench_throughput_rotates_its_sides_so_the_pool_and_ray_run_as_close_to_inline_as_each_other(
    benchmark, workers
):
    """Over as many rounds as there are sides, each side runs once in every position, and the pool and Ray at one
    size are as many benches away from inline in all: a drift of the host's speed weighs on both ratios alike."""
    bench_throughput = benchmark("bench_throughput")
    sides = bench_throughput.sides(workers)
    assert sorted(sides, key=str) == sorted(
        [("inline", None), *(("process", n) for n in set(workers)), *(("ray", n) for n in set(workers))], key=str
    )
    orders = [bench_throughput.rotation(sides, round_) for round_ in range(len(sides))]
    for position in range(len(sides)):
        assert sorted((order[position] for order in orders), key=str) == sorted(sides, key=str)

    def distance(side):
        return sum(abs(order.index(side) - order.index(("inline", None))) for order in orders)

    for size in workers:
        assert distance(("process", size)) == distance(("ray", size)) > 0


def test_bench_throughput_counts_as_outside_the_cells_the_wall_time_their_training_over_the_workers_leaves(
    benchmark, monkeypatch
):
    """A bench of 4 cells of 10 s on 2 workers that took 27 s spent 7 s outside its cells: the fixed cost the page
    shows beside each executor's ratio (and inline, whose cells fill its wall time, spends none)."""
    bench_throughput = benchmark("bench_throughput")
    clock = iter([100.0, 127.0, 200.0, 240.0])
    monkeypatch.setattr(bench_throughput.time, "perf_counter", lambda: next(clock))
    requests = []

    def fake_bench(request, check_leaks):
        requests.append((request.executor, request.workers, check_leaks))
        rows = [{"wall_s": 10.0} for _ in request.seeds]
        return type("Result", (), {"completed": len(rows), "failed": 0, "rows": rows})()

    monkeypatch.setattr(bench_throughput.rlrun, "bench", fake_bench)
    rate, outside, cell = bench_throughput.bench(Path("unused"), 4, 3, "ray", 2)
    assert (rate, outside, cell) == (pytest.approx(60 * 4 / 27), pytest.approx(7.0), pytest.approx(10.0))
    assert bench_throughput.bench(Path("unused"), 4, 3) == (pytest.approx(6.0), pytest.approx(0.0), 10.0)
    assert requests == [("ray", 2, False), ("inline", None, True)]
