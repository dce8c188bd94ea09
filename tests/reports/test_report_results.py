"""Reading results.jsonl and metrics.csv: torn lines, reruns, relative run dirs, missing curves (stdlib only)."""

from __future__ import annotations

import json
import subprocess
import sys

from report_data import NO_CURVE, STEPS_PER_ITERATION

from rlrun.reports import read_curve, read_results


def test_a_torn_last_line_is_skipped_and_counted(bench_out):
    results = read_results(bench_out / "results.jsonl")
    lines = (bench_out / "results.jsonl").read_text().splitlines()
    assert results.unreadable_lines == (len(lines),)
    assert "pd-dqn-1" not in {c.key for c in results.cells}
    assert len(results.cells) == 14  # 15 rows, one of them superseded by a rerun


def test_the_later_row_for_a_key_wins_in_the_first_rows_place(tmp_path):
    path = tmp_path / "results.jsonl"
    rows = [
        {"key": "a", "task": "T", "run": "sb3/ppo", "seed": 0, "status": "failed", "error": "boom"},
        {"key": "b", "task": "T", "run": "sb3/ppo", "seed": 1, "status": "completed", "final_return": 1.0},
        {"key": "a", "task": "T", "run": "sb3/ppo", "seed": 0, "status": "completed", "final_return": 7.5},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    results = read_results(path)
    assert [c.key for c in results.cells] == ["a", "b"]
    assert results.cells[0].status == "completed" and results.cells[0].final_return == 7.5
    assert results.cells[0].error is None
    assert results.unreadable_lines == ()


def test_numbers_too_large_for_a_float_read_as_missing(tmp_path):
    path = tmp_path / "results.jsonl"
    huge = "1" + "0" * 400  # a JSON integer float() cannot hold
    line = f'{{"key": "a", "task": "T", "run": "sb3/ppo", "seed": 0, "status": "completed", "env_steps": {huge}, '
    path.write_text(line + f'"final_return": {huge}, "wall_s": 1e999, "eval_return": 2.5}}\n')
    cell = read_results(path).cells[0]
    assert (cell.env_steps, cell.final_return, cell.wall_s, cell.eval_return) == (None, None, None, 2.5)


def test_the_fixture_rerun_supersedes_the_failed_attempt(bench_out):
    cell = next(c for c in read_results(bench_out / "results.jsonl").cells if c.key == "cp-sb3-0")
    assert cell.status == "completed" and cell.final_return == 480.0


def test_curves_load_from_relative_run_dirs_and_skip_rows_before_the_first_episode(bench_out):
    cells = {c.key: c for c in read_results(bench_out / "results.jsonl").cells}
    curve = cells["cp-sb3-1"].curve
    assert cells["cp-sb3-1"].run_dir == bench_out / "runs" / "cp-sb3-1"
    assert curve is not None and len(curve) == 10  # iteration 0 has no return yet
    assert curve.env_steps[0] == STEPS_PER_ITERATION and curve.mean_return[-1] == 500.0
    assert curve.wall_s[-1] == 10 * STEPS_PER_ITERATION / 1200.0


def test_a_missing_metrics_file_means_no_curve_and_a_torn_metrics_row_is_skipped(bench_out):
    cells = {c.key: c for c in read_results(bench_out / "results.jsonl").cells}
    assert cells[NO_CURVE].curve is None
    assert cells["pd-dqn-0"].curve is None and cells["pd-dqn-0"].run_dir is None
    failed = cells["pd-skrl-3"].curve
    assert failed is not None and failed.env_steps == (2048.0, 4096.0)
    assert read_curve(None) is None
    assert read_curve(bench_out / "nowhere") is None


def test_skipped_cells_keep_their_note_and_failed_cells_their_error(bench_out):
    cells = {c.key: c for c in read_results(bench_out / "results.jsonl", curves=False).cells}
    assert cells["pd-dqn-0"].status == "skipped" and "discrete action space" in (cells["pd-dqn-0"].note or "")
    assert cells["pd-skrl-3"].error == "ValueError: env raised at step 3 | bad action"


def test_importing_the_reports_package_is_cheap():
    code = (
        "import sys, rlrun.reports, rlrun.reports.aggregate, rlrun.reports.plots, rlrun.reports.markdown\n"
        "heavy = [m for m in ('numpy', 'scipy', 'matplotlib', 'rliable', 'torch', 'pandas') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_configuration_source_comes_from_the_row_else_run_json_read_as_bounded_data(tmp_path):
    from rlrun.reports.results import config_text, read_config_source

    run = tmp_path / "run"
    run.mkdir()
    assert read_config_source(run) is None and read_config_source(None) is None  # no run.json: unknown
    (run / "run.json").write_text(json.dumps({"agent_config": {"from": "file", "path": "/home/me/cfg/my.yaml"}}))
    assert read_config_source(run) == "file: me/cfg/my.yaml"
    (run / "run.json").write_text("{not json")
    assert read_config_source(run) is None
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"agent_config": {"from": "rlrun", "path": "x.yaml"}}))
    (run / "run.json").unlink()
    (run / "run.json").symlink_to(elsewhere)
    assert read_config_source(run) is None, "a run.json that is a link out of its folder is not read"
    assert config_text({"from": "rl_zoo3", "path": "/z/rl_zoo3/hyperparams/ppo.yml", "entry": "Pendulum-v1"}) == (
        "rl_zoo3: rl_zoo3/hyperparams/ppo.yml [Pendulum-v1]"
    )
    assert config_text("rlrun: sb3/ppo/default.yaml") == "rlrun: sb3/ppo/default.yaml" and config_text(3) is None
    fitted = {"from": "rlrun", "path": "sb3/ppo/rlrun/CartPole-v1.yaml", "fitted": {"batch_size": {"to": 64}}}
    assert config_text(fitted) == "rlrun: ppo/rlrun/CartPole-v1.yaml (minibatch fitted to num_envs)"
