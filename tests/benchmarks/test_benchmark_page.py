"""The benchmark page: records saved by the scripts, and `docs/benchmarks.md` rendered from them.

A script run with `--save` writes one record (`benchmarks/results.py`); `scripts/benchmark_page.py` renders the
page from the records in `benchmarks/results/`. These tests check that a page made from records shows every
figure with its command, that a benchmark without a record reads "not measured", that the committed page is
exactly what the committed records render (so it cannot drift from them), and that a script's `--save` writes a
record with everything the page shows.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture
def page_module(monkeypatch):
    """`scripts/benchmark_page.py` (a script: it puts `benchmarks/` on the path to read the records' format)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("benchmark_page", ROOT / "scripts" / "benchmark_page.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "benchmark_page", module)  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def results(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("results")


def make_records(results, alternating, folder: Path) -> dict[str, str]:
    """Two records saved into `folder`, as two scripts would save them; returns each command by script."""
    adapter = results.Record("adapter_overhead.py", "python benchmarks/adapter_overhead.py --pairs 5 --save")
    ratios = (0.97996, 0.981, 0.975, 0.99, 0.978)
    adapter.add_summary("library alone / through rlrun, rsl_rl", alternating.Summary(ratios, 0.98, 0.5, 0.7))
    adapter.add("library alone / through rlrun, torchrl", None, goal=(">=", 0.98), verdict="not measured",
                missing="not measured (TorchRL is not installed)")  # fmt: skip
    adapter.save(folder / "adapter_overhead.json")
    solve = results.Record("time_to_solve.py", "python benchmarks/time_to_solve.py --seeds 1 2 --save")
    solve.add("seconds to 475, rlrun/CartPoleContinuous-v1", 3.5, unit="s", spread=(3.0, float("inf")),
              spread_kind="min-max of seeds 1, 2", goal=("<=", 4.0))  # fmt: skip
    solve.add("seconds to -200, rlrun/Pendulum-v1", float("inf"), unit="s", note="no seed reached it")
    solve.save(folder / "time_to_solve.json")
    return {"adapter_overhead": adapter.command, "time_to_solve": solve.command}


def test_a_page_from_records_shows_every_figure_with_its_command_and_a_missing_record_as_not_measured(
    page_module, results, tmp_path
):
    alternating = importlib.import_module("alternating")
    commands = make_records(results, alternating, tmp_path)
    records = page_module.load_records(tmp_path)
    page = page_module.page(records)
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    for name, record in records.items():
        for figure in record["figures"]:
            (row,) = [row for row in rows if row.startswith(f"| {figure['name']} |")]
            assert f"`{commands[name]}`" in row and record["date"] in row
            assert results.shown_machine(record) in row and results.shown_load(record) in row
    (rsl_rl,) = [row for row in rows if "rsl_rl" in row]
    assert "| 0.97996 |" in rsl_rl and "| not met |" in rsl_rl  # the median sides with its verdict
    assert "0.975-0.990 (min-max of 5 pairs); 90% interval of the median 0.975-0.990" in rsl_rl
    assert "| >= 0.98 |" in rsl_rl and "load 0.50 -> 0.70 during this row" in rsl_rl
    (torchrl,) = [row for row in rows if "torchrl" in row]
    assert "| not measured (TorchRL is not installed) |" in torchrl and "| not measured |" in torchrl
    (cartpole,) = [row for row in rows if "CartPoleContinuous" in row]
    assert "| 3.50 s | 3.00 s - not reached (min-max of seeds 1, 2) | <= 4 s | met |" in cartpole
    (pendulum,) = [row for row in rows if "Pendulum" in row]
    assert "| not reached | no seed reached it | - | - |" in pendulum
    for script in ("startup", "memory_growth", "hermetic_overhead"):  # no record: not measured, with its command
        (row,) = [row for row in rows if f"`benchmarks/{script}.py`" in row]
        assert "| not measured |" in row and f"`python benchmarks/{script}.py --save`" in row
    (gpu,) = [row for row in rows if "gpu.sh" in row]
    assert "| not measured |" in gpu and "`bash benchmarks/gpu.sh --save" in gpu
    assert (
        "Not measured: no record in `benchmarks/results/`. To measure: `python benchmarks/startup.py --save`." in page
    )
    assert "Measured by `python benchmarks/adapter_overhead.py --pairs 5 --save`" in page


def test_the_committed_page_is_what_the_committed_records_render(page_module):
    """docs/benchmarks.md holds exactly the figures of benchmarks/results/*.json: no figure without a record."""
    assert page_module.page(page_module.load_records()) == page_module.PAGE.read_text(encoding="utf-8"), (
        "run: python scripts/benchmark_page.py"
    )
    assert page_module.main(["--check"]) == 0


def test_the_committed_page_and_records_tell_figures_not_their_history(page_module):
    page = page_module.PAGE.read_text(encoding="utf-8")
    for word in (r"\bsessions?\b", r"\bissues? \d", r"\bgoal \d", r"\bnewest first\b", r"\blog entr"):
        assert not re.search(word, page, re.IGNORECASE), word
    records = page_module.load_records()
    assert records, "benchmarks/results/ holds no record"
    for name, record in records.items():
        assert record["command"].startswith((f"python benchmarks/{name}.py", "bash benchmarks/")), name
        assert "--save" in record["command"], name


def test_a_record_judges_its_goal_keeps_no_infinity_and_saves_to_the_scripts_default_path(
    results, tmp_path, monkeypatch
):
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    record = results.Record.start("/somewhere/benchmarks/startup.py", ["--repeats", "3", "--save"])
    assert record.command == "python benchmarks/startup.py --repeats 3 --save"
    assert record.add("a", 0.3, goal=("<=", 0.3))["verdict"] == "met"
    assert record.add("b", 0.31, goal=("<=", 0.3))["verdict"] == "not met"
    assert record.add("c", float("inf"), goal=("<=", 0.3))["verdict"] == "not met"
    assert record.add("d", 2.0, goal=(">=", 2.0))["verdict"] == "met"
    assert record.add("e", 1.0)["verdict"] is None
    path = record.save()
    assert path == tmp_path / "results" / "startup.json"
    saved = json.loads(path.read_text(encoding="utf-8"))  # strict JSON: no Infinity
    assert saved["figures"][2]["value"] is None and saved["figures"][2]["missing"] == "not reached"
    assert set(saved) == {"script", "command", "date", "runtime_s", "machine", "load", "figures"}
    assert set(saved["machine"]) == {"cpu", "cores", "memory_gib", "python", "torch"}
    assert set(saved["load"]) == {"before", "after"}


def test_a_script_run_with_save_writes_its_figures_and_prints_as_without(tmp_path):
    """`env_throughput.py` at tiny sizes: the record holds each printed rate with the spread of its blocks, and the
    printed output is the same lines as a run without `--save`."""
    record_path = tmp_path / "env_throughput.json"
    arguments = ["--num_envs", "16", "--steps", "10", "--sync_steps", "5", "--threads", "1"]

    def run(*extra: str) -> str:
        completed = subprocess.run(
            [sys.executable, str(BENCHMARKS / "env_throughput.py"), *arguments, *extra],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        return completed.stdout

    saved_out = run("--save", str(record_path))
    plain_out = run()
    assert [line.split()[0] for line in saved_out.splitlines()] == [line.split()[0] for line in plain_out.splitlines()]
    record = json.loads(record_path.read_text(encoding="utf-8"))
    assert record["command"] == f"python benchmarks/env_throughput.py {' '.join(arguments)} --save {record_path}"
    assert record["script"] == "benchmarks/env_throughput.py" and record["machine"]["cores"] >= 1
    rates, ratio = record["figures"][:3], record["figures"][3]
    for figure in rates:
        low, high = figure["spread"]
        assert low <= high == figure["value"] and figure["spread_kind"].startswith("min-max of 5 blocks")
    assert ratio["goal"] == {"op": ">=", "value": 100.0} and ratio["verdict"] in ("met", "not met")
    printed = re.search(r"ratio rlrun / SyncVectorEnv: ([\d,]+)x", saved_out)
    assert printed is not None and ratio["value"] == pytest.approx(rates[0]["value"] / rates[1]["value"])
