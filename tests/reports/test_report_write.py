"""write_report end to end on the fixture: the files, the figures' lines, the Markdown tables, hermeticity."""

from __future__ import annotations

import json
import re
import sys
import warnings

import pytest
from report_data import write_metrics

from rlrun.errors import InvalidArgument
from rlrun.reports import iqm_ci, performance_profile, preload, read_results, reference, summarize, write_report
from rlrun.reports.markdown import COLUMNS, fmt_estimate
from rlrun.reports.plots import make_plots

np = pytest.importorskip("numpy")
pytest.importorskip("rliable")
matplotlib = pytest.importorskip("matplotlib")

REPS = 2000
STEMS = ("curves_rlrun_CartPole-v1", "curves_Pendulum-v1", "throughput", "performance_profile")


@pytest.fixture
def report(bench_out):
    """Write the report once; check that matplotlib's, NumPy's and the warnings' global state are as they were."""
    preload()  # import effects (statsmodels adds warnings filters) happen here, not in the call
    filters_before = list(warnings.filters)
    rc_before = matplotlib.rcParams.copy()
    backend_before = dict.__getitem__(matplotlib.rcParams, "backend")  # without resolving it
    pyplot_before = "matplotlib.pyplot" in sys.modules
    random_before = np.random.get_state()
    path = write_report(bench_out, reps=REPS)
    assert dict.__getitem__(matplotlib.rcParams, "backend") == backend_before
    assert matplotlib.rcParams.copy() == rc_before
    assert ("matplotlib.pyplot" in sys.modules) == pyplot_before
    assert warnings.filters == filters_before
    random_after = np.random.get_state()
    assert np.array_equal(random_after[1], random_before[1]) and random_after[2:] == random_before[2:]
    return path


def table_rows(text: str, task: str) -> dict[str, list[str]]:
    """The cells of the runs table under `## task`, by run."""
    section = text.split(f"## {task}\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith("| run |"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if len(cells) == len(COLUMNS):
                rows[cells[0]] = cells[1:]
        elif rows and not line.startswith("|"):
            break
    return rows


def test_every_plot_file_exists_as_png_and_svg(report):
    plots = report.parent / "plots"
    for stem in STEMS:
        for fmt in ("png", "svg"):
            path = plots / f"{stem}.{fmt}"
            assert path.is_file() and path.stat().st_size > 1000, path
    assert (plots / "throughput.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (plots / "throughput.svg").read_text()[:2000]


def test_each_learning_curve_axes_has_one_line_per_run(bench_out):
    cells = read_results(bench_out / "results.jsonl").cells
    tasks = summarize(cells, reps=200, curve_reps=200)
    plots = make_plots(tasks, performance_profile(cells, reps=200))
    assert [p.stem for p in plots] == list(STEMS)
    for task, plot in zip(tasks, plots, strict=False):
        ran = [r.run for r in task.runs if r.seeds]  # the skipped-only sb3/dqn draws nothing
        assert plot.task == task.task and len(plot.figure.axes) == 2
        for axes in plot.figure.axes:
            assert [line.get_label() for line in axes.get_lines()] == ran
        assert "IQM" in plot.caption and "95% stratified-bootstrap CI" in plot.caption
        assert "training end to end" in plot.caption.lower()
    profile = plots[-1]
    assert [line.get_label() for line in profile.figure.axes[0].get_lines()] == ["sb3/ppo", "skrl/ppo"]
    assert "normalised per task by rlrun's reference table, random play = 0 and the reference = 1" in profile.caption
    random = reference("CartPole-v1").random
    assert f"rlrun/CartPole-v1: {random:g} to 475 (Gymnasium reward threshold)" in profile.caption
    assert "holds its last return from its end on (a step)" in plots[0].caption
    assert "training end to end" in plots[2].caption.lower()
    bars = plots[2].figure.axes[0].containers
    assert [c.get_label() for c in bars] == ["sb3/ppo", "skrl/ppo"]
    assert [b.get_height() for b in bars[0]] == [1100.0, 950.0]


def test_the_report_tables_list_each_run_with_its_numbers(report, bench_out):
    text = report.read_text()
    assert report == bench_out / "report.md"
    cp = table_rows(text, "rlrun/CartPole-v1")
    pd = table_rows(text, "Pendulum-v1")
    assert list(cp) == ["sb3/ppo", "skrl/ppo"] and list(pd) == ["sb3/ppo", "skrl/ppo"]

    final = iqm_ci([480.0, 500.0, 460.0], reps=REPS)  # the same seed: the same interval
    assert cp["sb3/ppo"] == [
        "3",
        "20,480",
        "10",
        fmt_estimate(final),
        "500.00 [500.00, 500.00]",
        "1,100",
        "12.0 s (2/3)",
        "24,000 (2/3)",
        "0",
        "rl_zoo3: rl_zoo3/hyperparams/ppo.yml \\[CartPole-v1\\]",  # from each run dir's run.json
    ]
    low, high = (float(x) for x in re.fullmatch(r"480\.00 \[(\S+), (\S+)\]", cp["sb3/ppo"][3]).groups())
    assert (low, high) == (460.0, 500.0)  # 3 seeds: the "95% CI" is [min, max] (the warning below says so)
    assert cp["skrl/ppo"][3].startswith("250.00 [") and cp["skrl/ppo"][4:] == [
        "—",
        "3,000",
        "not reached (0/3)",
        "not reached (0/3)",
        "0",
        "rlrun: skrl/ppo/default.yaml; unknown",  # cp-skrl-2's run dir has no run.json
    ]
    assert pd["sb3/ppo"][3].startswith("-500.00 [") and pd["sb3/ppo"][5:8] == ["950", "no threshold", "no threshold"]
    assert (
        pd["skrl/ppo"][0] == "3"
        and pd["skrl/ppo"][3].startswith("-283.33 [")
        and pd["skrl/ppo"][-2:]
        == [
            "1",
            "unknown",
        ]
    )


def test_under_each_table_the_budget_and_a_warning_for_fewer_than_5_seeds(report):
    text = report.read_text()
    for task in ("rlrun/CartPole-v1", "Pendulum-v1"):
        section = text.split(f"## {task}\n", 1)[1].split("\n## ", 1)[0]
        assert "Env-step budget: every seed of every run trained 20,480 env steps." in section
        assert "**Warning: fewer than 5 seeds** (sb3/ppo 3, skrl/ppo 3)." in section
        assert 'the "95% CI" is the [min, max] of the seeds' in section and "plain mean" in section


def budget_report(tmp_path, runs) -> str:
    out = tmp_path / "budgets"
    out.mkdir()
    rows = [
        {
            "key": f"{run}{seed}",
            "task": "T",
            "run": run,
            "seed": seed,
            "status": "completed",
            "final_return": 1.0,
            "env_steps": steps,
            "iterations": iterations,
        }
        for run, cells in runs.items()
        for seed, (steps, iterations) in enumerate(cells)
    ]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return write_report(out, reps=200).read_text()


def test_budgets_more_than_one_iteration_apart_are_stated(tmp_path):
    text = budget_report(
        tmp_path,
        {
            "rsl_rl/ppo": [(24_576, 3), (32_768, 4)] * 3,  # 8,192 env steps an iteration
            "skrl/ppo": [(20_480, 10)] * 5,
        },
    )
    assert (
        "Env-step budgets differ by more than one iteration: rsl_rl/ppo got 24,576 and 32,768; skrl/ppo got 20,480 "
        "env steps." in text
    )
    assert "| rsl_rl/ppo | 6 | 24,576 to 32,768 | 3 to 4 |" in text and "| skrl/ppo | 5 | 20,480 | 10 |" in text
    assert "Warning: fewer than 5 seeds" not in text  # 6 and 5 seeds


def test_budgets_within_one_iteration_are_called_equal(tmp_path):
    text = budget_report(tmp_path, {"sb3/ppo": [(20_480, 10)] * 2, "rsl_rl/ppo": [(24_576, 1)] * 2})
    assert "Env-step budgets equal within one iteration: sb3/ppo got 20,480; rsl_rl/ppo got 24,576 env steps" in text
    assert "largest iteration here is 24,576 env steps" in text and "(sb3/ppo 2, rsl_rl/ppo 2)" in text


def test_the_report_lists_failed_and_skipped_cells_and_links_the_plots(report):
    text = report.read_text()
    assert "| skrl/ppo | 3 | ValueError: env raised at step 3 \\| bad action |" in text
    # parentheses from results.jsonl are escaped: no text in it can make a link (rlrun.trust.text.markdown)
    assert (
        "| sb3/dqn | 0 | sb3/dqn needs a discrete action space; Pendulum-v1 has Box\\(-2.0, 2.0, \\(1,\\)\\) |" in text
    )
    assert "superseded attempt" not in text
    assert "Unreadable lines skipped (a torn last line is a bench stopped mid-write): 16." in text
    assert "14 cells over 2 tasks and 3 runs: 12 completed, 1 failed, 1 skipped" in text
    for stem in STEMS:
        assert f"(plots/{stem}.png)" in text and f"(plots/{stem}.svg)" in text
    assert "normalised per task" in text


def test_one_task_one_seed_has_no_profile_and_no_interval_and_old_figures_go(tmp_path):
    out = tmp_path / "one"
    (out / "plots").mkdir(parents=True)
    (out / "plots" / "performance_profile.svg").write_text("from an earlier report")
    (out / "plots" / "notes.txt").write_text("the user's")
    rows = [
        {"key": "k", "task": "T", "run": "sb3/ppo", "seed": 0, "status": "completed", "final_return": 3.5},
        {"key": "m", "task": "T", "run": "skrl/ppo", "seed": 0, "status": "completed", "run_dir": str(tmp_path / "m")},
    ]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_metrics(tmp_path / "m", 2.0, 100.0)
    text = write_report(out, reps=REPS).read_text()
    assert "| sb3/ppo | 1 | — | — | 3.50 (1 seed) |" in text and "| skrl/ppo | 1 | — | — | — |" in text
    assert "Needs final returns on two or more tasks." in text
    assert sorted(p.name for p in (out / "plots").iterdir()) == [
        "curves_T.png",
        "curves_T.svg",
        "notes.txt",
    ]  # no steps/s: no throughput chart; one task: no profile
    (curves,) = make_plots(summarize(read_results(out / "results.jsonl").cells), None)
    assert [[line.get_label() for line in axes.get_lines()] for axes in curves.figure.axes] == [["skrl/ppo"]] * 2
    assert "No learning curve (no metrics.csv or no finished episode): sb3/ppo." in curves.caption


def test_a_task_without_any_curve_gets_no_figure(tmp_path):
    out = tmp_path / "bare"
    out.mkdir()
    row = {"key": "k", "task": "T", "run": "sb3/ppo", "seed": 0, "status": "completed", "final_return": 1.0}
    (out / "results.jsonl").write_text(json.dumps(row) + "\n")
    text = write_report(out, reps=REPS).read_text()
    assert "No learning curve: no run directory holds a metrics.csv with a finished episode." in text
    assert not (out / "plots").exists() or not any((out / "plots").iterdir())


def test_an_out_dir_without_results_is_an_invalid_argument(tmp_path):
    with pytest.raises(InvalidArgument, match=r"no results\.jsonl in") as caught:
        write_report(tmp_path / "missing")
    message = str(caught.value)
    assert "\n" not in message and str(tmp_path / "missing") in message and "--out" in message
    assert not (tmp_path / "missing").exists()


def test_one_point_per_seed_is_drawn_as_markers_without_a_band(tmp_path):
    from matplotlib.collections import PolyCollection

    out = tmp_path / "sparse"
    out.mkdir()
    rows = []
    for seed in range(3):
        run_dir = out / f"r{seed}"
        write_metrics(run_dir, 10.0 * seed, 100.0, iterations=1)  # iteration 0 has no return: one point
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
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (curves,) = make_plots(summarize(read_results(out / "results.jsonl").cells, reps=200, curve_reps=200), None)
    for axes in curves.figure.axes:
        (line,) = axes.get_lines()
        assert line.get_linestyle() == "None" and line.get_marker() == "o" and len(line.get_xdata()) == 3
        assert list(line.get_ydata()) == [0.0, 10.0, 20.0]
        assert not [c for c in axes.collections if isinstance(c, PolyCollection)], "no band"
    assert "Points: one per seed" in curves.caption and "band:" not in curves.caption
