"""Numbers and names from files are checked before they are believed or shown (`rlrun.trust.text`, lookups).

A planted run's `mean_return` (1e308, Infinity, 1e999) never makes it `best`, its `created_at` (the year 9999,
text that is no time) never makes it `latest`: each is ignored with a one-line warning naming the run. A run
folder named with terminal escapes prints as escapes. report.md shows `<script>`, `<img onerror>`, remote images
and `javascript:` links from results.jsonl or a study as text, never as HTML, links or images. The command-line
cases go through `rlrun.main` with the leak detector on (tests/conftest.py).
"""

from __future__ import annotations

import io
import json
import re
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

import rlrun
from rlrun import progress
from rlrun.runs import experiment_name
from rlrun.trust.text import code, markdown, terminal
from support import MEDDLING_TASK, SMALL_RSL_RL

EXPERIMENT = experiment_name(MEDDLING_TASK)
ESCAPES = "2026-01-01_00-00-00_\x1b]0;owned\x07\x1b[2J\x1b[1A\u202e"
"""A run folder's name that would set the window title, clear the screen and reverse the text after it."""
ATTACKS = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "![](http://attacker.example/pixel.png)",
    "[x](javascript:alert(1))",
    "<a href='javascript:alert(1)'>x</a>",
    "[x]: javascript:alert(1)",
    "<javascript:alert(1)>",
    "\\[x\\](javascript:alert(1))",
    "``` <script>",
)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One small RSL-RL run of the meddling task: its run folder."""
    root = tmp_path_factory.mktemp("trained") / "logs"
    result = rlrun.train(
        rlrun.TrainRequest(task=MEDDLING_TASK, num_envs=2, max_iterations=1, log_root=str(root), overrides=SMALL_RSL_RL)
    )
    return result.run_dir


def copy_run(trained, root, name, experiment=EXPERIMENT, **changes):
    """A copy of the trained run at `root/rsl_rl/experiment/name`, its run.json's top level and checkpoint
    entries updated with `changes` (`created_at`, `mean_return`); returns it."""
    target = root / "rsl_rl" / experiment / name
    shutil.copytree(trained, target)
    manifest = json.loads((target / "run.json").read_text())
    if "created_at" in changes:
        manifest["created_at"] = changes["created_at"]
    if "mean_return" in changes:
        manifest["checkpoints"] = [
            {**entry, "mean_return": changes["mean_return"]} for entry in manifest["checkpoints"]
        ]
    (target / "run.json").write_text(json.dumps(manifest))
    return target


def played(capsys, root, selector):
    """`rlrun play --json` on `root` with `--checkpoint selector`; the checkpoint it played."""
    argv = ["play", "--task", MEDDLING_TASK, "--log_root", str(root), "--num_episodes", "1", "--num_envs", "2"]
    code = rlrun.main([*argv, "--checkpoint", selector, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)["checkpoint"]


def warned(recwarn, *fragments):
    """The one warning line that holds every fragment."""
    lines = [str(item.message) for item in recwarn if all(fragment in str(item.message) for fragment in fragments)]
    assert len(lines) == 1 and "\n" not in lines[0], [str(item.message) for item in recwarn]
    return lines[0]


# --- numbers: best and latest ----------------------------------------------------------------------------------


@pytest.mark.parametrize("claim", ["1e308", "Infinity", "1e999", "-Infinity", "NaN", "1" + "0" * 400])
def test_an_impossible_mean_return_never_makes_a_planted_run_best(capsys, recwarn, trained, tmp_path, claim):
    """The safe outcome: `best` plays the honest run, across experiments of a shared log root, and a warning names
    the planted one."""
    root = tmp_path / "logs"
    honest = copy_run(trained, root, "2026-01-01_00-00-00", mean_return=5.0)
    planted = copy_run(trained, root, "2026-01-02_00-00-00", experiment="shared", mean_return=123456.25)
    text = (planted / "run.json").read_text().replace("123456.25", claim)
    (planted / "run.json").write_text(text)
    chosen = played(capsys, root, "best")
    assert chosen.startswith(str(honest))
    warned(recwarn, "--checkpoint best ignores run", repr(str(planted)), "not a finite number")


@pytest.mark.parametrize("claim", ["9999-12-31T23:59:59+00:00", "9999-01-01", "not a time", "2026-13-45"])
def test_an_impossible_created_at_never_makes_a_planted_run_latest(capsys, recwarn, trained, tmp_path, claim):
    """The safe outcome: `latest` plays the honest run; the planted one counts as the oldest, with a warning."""
    root = tmp_path / "logs"
    honest = copy_run(trained, root, "2026-01-01_00-00-00", created_at="2026-01-01T00:00:00+00:00")
    planted = copy_run(trained, root, "9999-01-01_00-00-00", created_at=claim)
    assert played(capsys, root, "latest").startswith(str(honest))
    warned(recwarn, "ignores the created_at", repr(str(planted)), "counts as the oldest")


def test_when_nothing_is_left_the_error_names_the_ignored_runs(capsys, trained, tmp_path):
    root = tmp_path / "logs"
    planted = copy_run(trained, root, "2026-01-01_00-00-00", created_at="9999-01-01")
    manifest = json.loads((planted / "run.json").read_text())
    (planted / "run.json").write_text(json.dumps({**manifest, "checkpoints": []}))
    argv = ["play", "--task", MEDDLING_TASK, "--log_root", str(root), "--checkpoint", "latest"]
    assert rlrun.main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "created_at does not parse or lies in the future" in lines[0]
    assert repr(str(planted)) in lines[0]


# --- names on a terminal ---------------------------------------------------------------------------------------


def test_a_run_folder_named_with_terminal_escapes_prints_escaped(capsys, trained, tmp_path):
    root = tmp_path / "logs"
    copy_run(trained, root, ESCAPES)
    argv = ["play", "--task", MEDDLING_TASK, "--log_root", str(root), "--num_episodes", "1", "--num_envs", "2"]
    assert rlrun.main(argv) == 0
    captured = capsys.readouterr()
    assert "\x1b" not in captured.out + captured.err and "\x07" not in captured.out + captured.err
    assert "\\x1b]0;owned\\x07\\x1b[2J\\x1b[1A\\u202e" in captured.out
    assert rlrun.main([*argv, "--load_run", "nope"]) == 2  # the error lists the newest runs' names
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "\\x1b]0;owned" in lines[0] and "\x1b" not in captured.err


def test_progress_lines_and_the_bench_board_escape_labels():
    stream = io.StringIO()
    line = progress.LineProgress(stream, interval=0.0)
    line.start(f"play {ESCAPES}", 10, 5)
    line.update(5, 1.0, force=True)
    board = progress.BenchBoard([("a", ESCAPES)], stream, live=False)
    board.start("a")
    board.finish("a", "failed", "ValueError: \x1b[31mred\x1b[0m")
    assert "\x1b" not in stream.getvalue() and "\\x1b[2J" in stream.getvalue()


def test_terminal_escapes_controls_formats_and_undecodable_bytes():
    assert terminal("plain name-1.2_x ünïcode") == "plain name-1.2_x ünïcode"
    assert terminal("a\x1b[2Jb\nc\td\x7f\x9b") == "a\\x1b[2Jb\\x0ac\\x09d\\x7f\\x9b"
    assert terminal("\u202eevil\u2066") == "\\u202eevil\\u2066"
    assert terminal(b"run-\xff".decode("utf-8", "surrogateescape")) == "run-\\xff"


# --- report.md -------------------------------------------------------------------------------------------------


def rendered(text):
    """report.md as a GFM viewer renders it (CommonMark with tables)."""
    return MarkdownIt("commonmark").enable("table").render(text)


def assert_inert(html):
    """No script, no tag with an event handler, and every link and image one of rlrun's own figure files."""
    assert "<script" not in html and not re.search(r"<[a-z][^>]*\bon[a-z]+=", html)
    assert all(target.startswith("plots/") for target in re.findall(r'(?:href|src)="([^"]*)"', html))


def test_rlrun_report_escapes_every_string_from_results_jsonl(capsys, tmp_path):
    pytest.importorskip("rliable")
    out = tmp_path / "bench"
    out.mkdir()
    rows = []
    for seed, attack in enumerate(ATTACKS):
        common = {"task": f"Task{attack}", "library": "sb3", "algorithm": "ppo", "threshold": 1.0}
        rows.append({**common, "key": f"c{seed}", "run": f"sb3/ppo {attack}", "seed": seed, "status": "completed",
                     "final_return": 1.0 + seed, "eval_return": 1.0, "steps_per_s": 10.0, "wall_s": 1.0,
                     "env_steps": 10})  # fmt: skip
        rows.append({**common, "key": f"f{seed}", "run": attack, "seed": seed, "status": "failed", "error": attack})
        rows.append({**common, "key": f"s{seed}", "run": attack, "seed": seed, "status": "skipped", "note": attack})
    (out / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert rlrun.main(["report", str(out)]) == 0, capsys.readouterr().err
    report = (out / "report.md").read_text()
    assert "<script" not in report and "<img" not in report and "<a " not in report
    assert "](" not in report.replace("](plots/", "") and "![](" not in report
    assert_inert(rendered(report))
    assert "&lt;script&gt;alert\\(1\\)&lt;/script&gt;" in report  # shown, as text


def test_the_tune_report_escapes_every_string_from_the_study(tmp_path):
    optuna = pytest.importorskip("optuna")
    from rlrun.reports.tune import render

    study = optuna.create_study(study_name=ATTACKS[0] + "`", direction="maximize")
    values = list(ATTACKS)
    for number, attack in enumerate(ATTACKS):
        distributions = {key: optuna.distributions.CategoricalDistribution(values) for key in (attack, "agent.x|y")}
        study.add_trial(
            optuna.trial.create_trial(
                params={attack: attack, "agent.x|y": attack}, distributions=distributions, value=float(number)
            )
        )
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL, user_attrs={"error": ATTACKS[1]}))
    text = render(study, "sqlite:///" + ATTACKS[2], [], tmp_path)
    html = rendered(text)
    assert_inert(html)
    assert "&lt;script&gt;" in html and "javascript:alert(1)" in html  # shown, as text


# --- the escapes, for any text ---------------------------------------------------------------------------------


@given(st.text())
def test_markdown_text_renders_as_the_same_text_and_nothing_else(value):
    html = rendered(markdown(value))
    assert "<a " not in html and "<img" not in html and "<script" not in html and "<code>" not in html


@given(st.text())
def test_a_code_span_is_one_span_whatever_it_holds(value):
    html = rendered("x " + code(value) + " y")
    assert html.count("<code>") == 1 and "<a " not in html and "<img" not in html and "<script" not in html


@given(st.text(), st.text())
def test_table_cells_stay_in_their_column(first, second):
    row = f"| {markdown(first, table=True)} | {code(second, table=True)} |"
    html = rendered(f"| a | b |\n|---|---|\n{row}")
    assert html.count("<td>") == 2 and "<a " not in html and "<img" not in html
