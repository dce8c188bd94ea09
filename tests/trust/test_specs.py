"""A bench or tune spec is data: it may not reach beyond its own folder or this machine unless the person says so.

A spec value that writes outside the spec's folder (`out`, `log_root`, a SQLite `storage` file), sends work or
data elsewhere (a database server's `storage` URL, a Ray `address`) or makes rlrun import a module (a task's
`module:` part) is refused in one line naming the key and how to allow it, unless the same key is given on the
command line (`load_spec`'s keyword in Python) or `--trust_spec` (`trust=True`) is given. With `--trust_spec`
the command line names each module a spec's task imports, on stderr, before it is imported. A storage URL of a
database SQLAlchemy does not know, or whose driver is not installed, is one line naming the package.

Every refusal goes through `rlrun.main`: exit 2, one stderr line, no file or folder made, no marker module
imported, a clean census (the leak detector is on for the suite: tests/conftest.py).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

import rlrun
from rlrun.benching.request import load_spec as load_bench_spec
from rlrun.errors import InvalidArgument, MissingDependency
from rlrun.hermetic import census
from rlrun.tuning.request import check_storage
from rlrun.tuning.request import load_spec as load_tune_spec

ERROR_PREFIX = "rlrun: error: "
MARKER_MODULE = "rlrun_spec_marker_task"
BENCH = "tasks: [rlrun/Pendulum-v1]\nruns: [rsl_rl]\n"
"""A bench spec without a budget: once its values are accepted, planning refuses it ('exactly one budget'),
so no test trains."""
TUNE = "task: rlrun/CartPole-v1\nlibrary: sb3\nsearch_space: {agent.gamma: 'uniform(0.9, 0.99)'}\n"
"""A tune spec without a budget, for the same reason."""
NO_BUDGET = "exactly one budget"


@pytest.fixture
def place(tmp_path, monkeypatch) -> Path:
    """`<tmp>/specs`, the spec's folder and the working directory, beside `<tmp>/elsewhere`; a module in the
    spec's folder that leaves a marker file when imported, importable (as a shared folder on sys.path is)."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (specs / f"{MARKER_MODULE}.py").write_text(
        f"from pathlib import Path\n\nPath({str(tmp_path / 'imported')!r}).write_text('imported')\n"
    )
    monkeypatch.chdir(specs)
    monkeypatch.syspath_prepend(str(specs))
    yield specs
    sys.modules.pop(MARKER_MODULE, None)


@pytest.fixture(scope="module", autouse=True)
def warm_up() -> None:
    """Import, once and through a call's import phase, what the calls here import: import effects (a logger,
    an exit hook) belong to the import, and the census each test takes around its call would blame them on it."""
    from rlrun.api import imports
    from rlrun.hermetic import hermetic_call
    from rlrun.libraries import LIBRARIES, load_adapter

    names = [*imports.CORE_IMPORTS, *["sqlalchemy.engine", "sqlalchemy.exc", "rlrun.executors", "rlrun.tuning.worker"]]
    for name in ("rsl_rl", "sb3"):
        if LIBRARIES[name].installed:
            names += load_adapter(LIBRARIES[name]).IMPORTS["torch"]
    with hermetic_call(name="trust tests warm-up") as call:
        call.import_modules([name for name in names if importlib.util.find_spec(name.partition(".")[0])])


def listing(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if "__pycache__" not in path.parts)


def run(argv: list[str], root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """`rlrun.main(argv)`: its exit code and stderr lines, once nothing new under `root` and a clean census
    are asserted."""
    files = listing(root)
    capsys.readouterr()
    before = census.snapshot()
    code = rlrun.main(argv)
    leaks = census.compare(before, census.settle(before))
    lines = capsys.readouterr().err.splitlines()
    assert listing(root) == files, "the call left files or folders behind"
    assert not leaks, leaks
    return code, lines


def refused(argv: list[str], root: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code, lines = run(argv, root, capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(ERROR_PREFIX), lines
    return lines[0]


def spec(folder: Path, text: str) -> str:
    path = folder / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


OUTSIDE = {
    # case: (command, spec text after the base, the key named); {elsewhere} is a folder beside the spec's
    "bench out absolute": ("bench", "out: {elsewhere}/bench\n", "out"),
    "bench out relative": ("bench", "out: ../elsewhere/bench\n", "out"),
    "bench out through a link": ("bench", "out: link/bench\n", "out"),
    "bench log_root": ("bench", "log_root: {elsewhere}/runs\n", "log_root"),
    "bench address": ("bench", "executor: ray\naddress: 10.0.0.1:6379\n", "address"),
    "bench module task": ("bench", f"tasks: ['{MARKER_MODULE}:Marked-v0']\n", "tasks"),
    "bench storage folder outside": ("bench", "storage: {elsewhere}/bucket\n", "storage"),
    "bench storage file URL outside": ("bench", "storage: file://{elsewhere}/bucket\n", "storage"),
    "bench storage bucket": ("bench", "storage: s3://bucket/prefix\n", "storage"),
    "tune out": ("tune", "out: {elsewhere}/tune\n", "out"),
    "tune log_root": ("tune", "log_root: /tmp/../{elsewhere}/runs\n", "log_root"),
    "tune storage file outside": ("tune", "storage: sqlite:///{elsewhere}/study.db\n", "storage"),
    "tune storage server": ("tune", "storage: postgresql://user:secret@db.example.com/studies\n", "storage"),
    "tune storage mysql": ("tune", "storage: mysql+pymysql://user@10.0.0.2/studies\n", "storage"),
    "tune storage query": ("tune", "storage: sqlite:///file:study.db?uri=true\n", "storage"),
    "tune address": ("tune", "executor: ray\naddress: ray://10.0.0.1:10001\n", "address"),
    "tune module task": ("tune", f"task: '{MARKER_MODULE}:Marked-v0'\n", "task"),
}


def outside_spec(case: str, place: Path) -> tuple[str, str, str]:
    command, extra, key = OUTSIDE[case]
    (place / "link").symlink_to(place.parent / "elsewhere")
    base = BENCH if command == "bench" else TUNE
    text = base + extra.replace("{elsewhere}", str(place.parent / "elsewhere"))
    if key in ("tasks", "task"):  # the task replaces the base's
        text = text.replace("tasks: [rlrun/Pendulum-v1]\n", "").replace("task: rlrun/CartPole-v1\n", "")
    return command, spec(place, text), key


@pytest.mark.parametrize("case", list(OUTSIDE))
def test_a_spec_that_reaches_beyond_its_folder_is_refused_naming_the_key(case, place, capsys):
    command, path, key = outside_spec(case, place)
    line = refused([command, path], place.parent, capsys)
    assert f"spec {path!r} sets {key} " in line and f"give --{key} " in line and "--trust_spec" in line, line
    assert "secret" not in line, "a password is printed"
    assert not (place.parent / "imported").exists(), "the spec's module was imported"


@pytest.mark.parametrize("case", [case for case in OUTSIDE if "module" not in case and "address" not in case])
def test_the_same_value_on_the_command_line_allows_it(case, place, capsys):
    command, path, key = outside_spec(case, place)
    given = str(yaml.safe_load(Path(path).read_text(encoding="utf-8"))[key])
    line = refused([command, path, f"--{key}", given], place.parent, capsys)
    assert "--trust_spec" not in line  # past the spec's check: refused for what else it lacks, or its driver
    assert NO_BUDGET in line or "not installed" in line, line


@pytest.mark.parametrize("case", [case for case in OUTSIDE if "module" not in case])
def test_trust_spec_runs_it_as_written(case, place, capsys):
    command, path, _ = outside_spec(case, place)
    line = refused([command, path, "--trust_spec"], place.parent, capsys)
    assert "--trust_spec" not in line, line


@pytest.mark.parametrize("command", ["bench", "tune"])
def test_trust_spec_names_the_module_a_task_imports_before_importing_it(command, place, capsys):
    _, path, _ = outside_spec(f"{command} module task", place)
    code, lines = run([command, path, "--trust_spec", "--iterations", "1"], place.parent / "specs", capsys)
    task = f"{MARKER_MODULE}:Marked-v0"
    assert lines[0] == f"rlrun: importing module {MARKER_MODULE} for task {task} (from spec {path})", lines
    assert code == 2 and len(lines) == 2 and lines[1].startswith(ERROR_PREFIX), lines
    assert (place.parent / "imported").exists(), "with --trust_spec the module is imported, after it was named"


def test_a_task_module_given_on_the_command_line_is_the_persons_choice(place, capsys):
    path = spec(place, f"tasks: ['{MARKER_MODULE}:Marked-v0']\nruns: [rsl_rl]\n")
    line = refused(["bench", path, "--tasks", "rlrun/Pendulum-v1"], place.parent, capsys)
    assert NO_BUDGET in line and not (place.parent / "imported").exists()


def test_values_inside_the_spec_folder_and_local_databases_need_no_word(place, capsys):
    (place / "link").symlink_to(place.parent / "elsewhere")
    text = TUNE + "out: results\nlog_root: ./results/runs\nstorage: sqlite:///results/study.db\nexecutor: process\n"
    line = refused(["tune", spec(place, text)], place.parent, capsys)
    assert NO_BUDGET in line
    assert load_tune_spec(spec(place, TUNE + "storage: 'sqlite://'\n")).storage == "sqlite://"
    assert load_bench_spec(spec(place, BENCH + f"out: {place}\n")).out == str(place)
    assert load_bench_spec(spec(place, BENCH + "storage: results/bucket\n")).storage == "results/bucket"


def test_the_python_api_asks_the_same(place):
    path = spec(place, BENCH + f"out: {place.parent / 'elsewhere'}\n")
    with pytest.raises(InvalidArgument, match=r"sets out .*outside the spec's folder"):
        load_bench_spec(path)
    assert load_bench_spec(path, out="mine").out == "mine"
    assert load_bench_spec(path, trust=True).out == str(place.parent / "elsewhere")


STORAGES = {
    # storage URL: what the one line says
    "postgres://user@host/db": "'postgres' is not a database SQLAlchemy knows",
    "foo://bar": "'foo' is not a database SQLAlchemy knows",
    "postgresql+nosuchdriver://user@host/db": "'nosuchdriver' is not a postgresql driver rlrun can use",
    "mssql+pymssql://user@host/db": "pip install pymssql",
}


@pytest.mark.parametrize("url", list(STORAGES))
def test_an_odd_storage_url_is_one_line(url, place, capsys):
    if "pymssql" in url and importlib.util.find_spec("pymssql") is not None:
        pytest.skip("pymssql is installed here")
    says = STORAGES[url]
    line = refused(["tune", spec(place, TUNE + f"storage: '{url}'\n"), "--trust_spec"], place.parent, capsys)
    assert says in line, line
    line = refused(["tune", spec(place, TUNE), "--storage", url], place.parent, capsys)
    assert says in line, line


def test_a_storage_driver_that_is_not_installed_names_its_package():
    drivers = {"psycopg2": "psycopg2-binary", "psycopg": "psycopg[binary]"}
    missing = [module for module in drivers if importlib.util.find_spec(module) is None]
    if len(missing) < len(drivers):
        pytest.skip("a PostgreSQL driver is installed here")
    with pytest.raises(MissingDependency, match=r"needs the postgresql driver .* pip install '?psycopg"):
        check_storage("postgresql://user@localhost/studies")
    with pytest.raises(MissingDependency, match=r"pip install psycopg2-binary"):
        check_storage("postgresql+psycopg2://user@localhost/studies")
    check_storage("sqlite:///study.db")
    check_storage("not a URL")  # planning refuses it, naming the form
