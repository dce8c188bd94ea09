"""The builders of the security corpus: each writes one kind of crafted file or folder into a case's workspace
and returns the `Built` that names it (see `security_cases`). Every payload that could run creates the
workspace's marker (`security_payloads`).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from security_cases import Built
from security_harness import EXPERIMENT, LIBRARIES, TASK, Workspace, copy_run, last_checkpoint
from security_payloads import (
    edit_manifest,
    edit_yaml,
    expression,
    hubconf,
    pickle_with_payload,
    sb3_with_payload,
    torch_with_payload,
    write_yaml,
)

Build = Callable[[Workspace, Any], Built]
Edit = Callable[[Workspace, Path], "Built | None"]


# --- builders -----------------------------------------------------------------------------------------------


def planted_run(library: str, edit: Edit | None = None, name: str | None = None) -> Build:
    """A copy of the genuine run of `library` under the log root, changed by `edit` (which may return the Built)."""

    def build(workspace: Workspace, genuine: Any) -> Built:
        run = copy_run(genuine.run(library), workspace.logs, library, name)
        built = edit(workspace, run) if edit else None
        return built or Built(run=run)

    return build


def agent_yaml(run: Path) -> Path:
    return run / "params" / "agent.yaml"


def in_config(change: Callable[[Workspace, Any], Any], file: str = "agent.yaml") -> Edit:
    """An edit of a planted run's `params/<file>`: `change(workspace, config)`."""

    def edit(workspace: Workspace, run: Path) -> None:
        edit_yaml(run / "params" / file, lambda config: change(workspace, config))

    return edit


def shared_config(library: str, change: Callable[[Workspace, Any], Any], name: str = "agent.yaml") -> Build:
    """An --agent_config file in the shared inputs: the genuine run's params/agent.yaml changed by `change`."""

    def build(workspace: Workspace, genuine: Any) -> Built:
        path = workspace.inputs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(agent_yaml(genuine.run(library)), path)
        edit_yaml(path, lambda config: change(workspace, config))
        return Built(agent_config=path)

    return build


def raw_config(text: Callable[[Workspace], str | bytes], name: str = "agent.yaml") -> Build:
    """An --agent_config file of exactly these bytes (or text)."""

    def build(workspace: Workspace, genuine: Any) -> Built:
        path = workspace.inputs / name
        content = text(workspace)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return Built(agent_config=path)

    return build


def raw_params(library: str, text: Callable[[Workspace], str | bytes], file: str = "agent.yaml") -> Build:
    """A planted run whose `params/<file>` is exactly these bytes (or text)."""

    def edit(workspace: Workspace, run: Path) -> None:
        content = text(workspace)
        (run / "params" / file).write_bytes(content if isinstance(content, bytes) else content.encode())

    return planted_run(library, edit)


def words(make: Callable[[Workspace], tuple[str, ...]]) -> Build:
    """Trailing override words."""
    return lambda workspace, genuine: Built(overrides=make(workspace))


def _run_entry(library: str, overrides: tuple[str, ...]) -> dict[str, Any]:
    flags = LIBRARIES[library]["flags"]
    entry: dict[str, Any] = {"library": flags[1], "variant": "shared", "overrides": [*LIBRARIES[library]["small"]]}
    if len(flags) > 2:
        entry["ml_framework"] = flags[3]
    entry["overrides"] += list(overrides)
    return entry


def bench_spec(
    library: str,
    run_overrides: Callable[[Workspace], tuple[str, ...]] = lambda workspace: (),
    keys: Callable[[Workspace], dict[str, Any]] = lambda workspace: {},
    owns_out: bool = False,
    argv: tuple[str, ...] = (),
) -> Build:
    """A bench spec in the shared inputs: one cell of `library` on the task, one iteration, no report."""

    def build(workspace: Workspace, genuine: Any) -> Built:
        spec = {**bench_fields(library, run_overrides(workspace)), **keys(workspace)}
        path = write_yaml(workspace.inputs / "bench.yaml", spec)
        return Built(spec=path, spec_owns_out=owns_out, argv={"bench": argv})

    return build


def bench_fields(library: str, run_overrides: tuple[str, ...] = (), iterations: int = 1) -> dict[str, Any]:
    """A bench spec of one cell of `library` on the task, `iterations` iterations, no report."""
    return {
        "tasks": [TASK],
        "runs": [_run_entry(library, run_overrides)],
        "seeds": [0],
        "iterations": iterations,
        "num_envs": 2,
        "report": False,
    }


def tune_fields(library: str) -> dict[str, Any]:
    flags = LIBRARIES[library]["flags"]
    fields: dict[str, Any] = {"task": TASK, "library": flags[1]}
    if len(flags) > 2:
        fields["ml_framework"] = flags[3]
    return {
        **fields,
        "iterations": 1,
        "n_trials": 1,
        "num_envs": 2,
        "overrides": list(LIBRARIES[library]["small"]),
        "sampler": "random",
        "pruner": "none",
        "report": False,
    }


def tune_spec(
    library: str,
    space: Callable[[Workspace], dict[str, str]],
    keys: Callable[[Workspace], dict[str, Any]] = lambda workspace: {},
    owns_out: bool = False,
    argv: tuple[str, ...] = (),
) -> Build:
    """A tune spec in the shared inputs: one trial of one iteration of `library` on the task, no report."""

    def build(workspace: Workspace, genuine: Any) -> Built:
        spec = {**tune_fields(library), "search_space": space(workspace), **keys(workspace)}
        path = write_yaml(workspace.inputs / "tune.yaml", spec)
        return Built(spec=path, spec_owns_out=owns_out, argv={"tune": argv})

    return build


def raw_spec(kind: str, text: Callable[[Workspace], str]) -> Build:
    def build(workspace: Workspace, genuine: Any) -> Built:
        path = workspace.inputs / f"{kind}.yaml"
        path.write_text(text(workspace), encoding="utf-8")
        return Built(spec=path)

    return build


def payload(workspace: Workspace) -> str:
    return expression(workspace.marker)


def hub(folder: Path, workspace: Workspace) -> dict[str, str]:
    """An RSL-RL logger entry that makes torch.hub import `folder/hubconf.py` (written here)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hubconf.py").write_text(hubconf(workspace.marker), encoding="utf-8")
    return {"class_name": "torch.hub:load", "repo_or_dir": str(folder), "model": "writer", "source": "local"}


def set_key(path: str, value: Callable[[Workspace], Any]) -> Callable[[Workspace, Any], None]:
    """A config change: set the dotted `path` (list indices as numbers) to `value(workspace)`."""

    def change(workspace: Workspace, config: Any) -> None:
        *parents, last = path.split(".")
        for part in parents:
            config = config[int(part)] if isinstance(config, list) else config[part]
        if isinstance(config, list):
            config[int(last)] = value(workspace)
        else:
            config[last] = value(workspace)

    return change


# --- class 2: a shared study ---------------------------------------------------------------------------------


def study(
    library: str,
    space: dict[str, str],
    fair: dict[str, Any],
    planted: dict[str, Any],
    planted_value: float,
    tamper: Callable[[sqlite3.Connection, int, Workspace], None],
) -> Build:
    """A tune folder whose study.db holds two finished trials (so a rerun trains nothing): a fair one, and one
    the attacker rewrote with SQL (`tamper(connection, trial_id, workspace)`), written as the best."""

    def build(workspace: Workspace, genuine: Any) -> Built:
        import optuna

        from rlrun.tuning.space import parse_space

        params = {param.key: param for param in parse_space(space)}
        distributions = {key: param.distribution() for key, param in params.items()}
        workspace.out.mkdir()
        database = workspace.out / "study.db"
        storage = optuna.storages.RDBStorage(f"sqlite:///{database}")
        try:
            previous = optuna.logging.get_verbosity()
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            try:
                made = optuna.create_study(storage=storage, study_name=workspace.out.name, direction="maximize")
                for values, value in ((fair, -1200.0), (planted, planted_value)):
                    stored = {key: params[key].store(item) for key, item in values.items()}
                    made.add_trial(optuna.trial.create_trial(params=stored, distributions=distributions, value=value))
            finally:
                optuna.logging.set_verbosity(previous)
        finally:
            storage.remove_session()
            storage.engine.dispose()
        connection = sqlite3.connect(database)
        try:
            (trial_id,) = connection.execute("SELECT trial_id FROM trials WHERE number = 1").fetchone()
            tamper(connection, trial_id, workspace)
            connection.commit()
        finally:
            connection.close()
        spec = {**tune_fields(library), "n_trials": 2, "search_space": space}
        return Built(spec=write_yaml(workspace.inputs / "tune.yaml", spec), payload=payload(workspace))

    return build


def choice_outside(key: str) -> Callable[[sqlite3.Connection, int, Workspace], None]:
    def tamper(connection: sqlite3.Connection, trial_id: int, workspace: Workspace) -> None:
        distribution = json.dumps({"name": "CategoricalDistribution", "attributes": {"choices": [payload(workspace)]}})
        connection.execute(
            "UPDATE trial_params SET param_value = 0, distribution_json = ? WHERE trial_id = ? AND param_name = ?",
            (distribution, trial_id, key),
        )

    return tamper


def value_of(value: float) -> Callable[[sqlite3.Connection, int, Workspace], None]:
    def tamper(connection: sqlite3.Connection, trial_id: int, workspace: Workspace) -> None:
        connection.execute("UPDATE trial_values SET value = ? WHERE trial_id = ?", (value, trial_id))

    return tamper


def param_outside(key: str, value: float, high: float) -> Callable[[sqlite3.Connection, int, Workspace], None]:
    def tamper(connection: sqlite3.Connection, trial_id: int, workspace: Workspace) -> None:
        (text,) = connection.execute(
            "SELECT distribution_json FROM trial_params WHERE trial_id = ? AND param_name = ?", (trial_id, key)
        ).fetchone()
        distribution = json.loads(text)
        distribution["attributes"]["high"] = high
        connection.execute(
            "UPDATE trial_params SET param_value = ?, distribution_json = ? WHERE trial_id = ? AND param_name = ?",
            (value, json.dumps(distribution), trial_id, key),
        )

    return tamper


# --- class 3 and 4: checkpoints ------------------------------------------------------------------------------


def sb3_zip_in_run(key: str) -> Build:
    def edit(workspace: Workspace, run: Path) -> None:
        checkpoint = last_checkpoint(run)
        sb3_with_payload(checkpoint, checkpoint, workspace.marker, key)

    return planted_run("sb3", edit)


def sb3_zip_alone(key: str) -> Build:
    def build(workspace: Workspace, genuine: Any) -> Built:
        source = last_checkpoint(genuine.run("sb3"))
        target = sb3_with_payload(source, workspace.inputs / "model_shared.zip", workspace.marker, key)
        fit = ("agent.policy_kwargs.net_arch=[16,16]",)  # the genuine run's network, which a lone zip does not say
        return Built(checkpoint=target, argv={"checkpoint": fit, "checkpoint_export": fit}, writes=("inputs/exported",))

    return build


def _with_payload(library: str, source: Path, target: Path, workspace: Workspace) -> Path:
    if library == "skrl_jax":
        return pickle_with_payload(source, target, workspace.marker)
    return torch_with_payload(source, target, workspace.marker)


def pickled_checkpoint(library: str) -> Build:
    """The planted run's newest checkpoint with a pickled global that creates the marker."""

    def edit(workspace: Workspace, run: Path) -> None:
        checkpoint = last_checkpoint(run)
        _with_payload(library, checkpoint, checkpoint, workspace)

    return planted_run(library, edit)


def swapped_checkpoint(library: str, reads: int) -> Build:
    """A genuine checkpoint that the attacker replaces with one that holds a pickled payload right after it
    has been read `reads` times (the replacement staged in the run folder, renamed over the file)."""

    def edit(workspace: Workspace, run: Path) -> Built:
        checkpoint = last_checkpoint(run)
        staged = _with_payload(library, checkpoint, run / f"staged{checkpoint.suffix}", workspace)
        return Built(run=run, swap=(checkpoint, staged, reads))

    return planted_run(library, edit)


# --- class 5: links ------------------------------------------------------------------------------------------


def _move_out(path: Path, workspace: Workspace) -> Path:
    """Move `path` to the outside folder and leave a link to it in its place."""
    target = workspace.outside / path.name
    shutil.move(path, target)
    os.symlink(target, path)
    return target


def linked_part(library: str, part: Callable[[Path], Path]) -> Build:
    return planted_run(library, lambda workspace, run: _move_out(part(run), workspace) and None)


def linked_run(library: str) -> Build:
    def build(workspace: Workspace, genuine: Any) -> Built:
        real = copy_run(genuine.run(library), workspace.outside, library)
        link = workspace.logs / LIBRARIES[library]["folder"] / EXPERIMENT / real.name
        link.parent.mkdir(parents=True)
        os.symlink(real, link)
        return Built(run=link, names=(link.name,))

    return build


def linked_after_check(library: str, reads: int) -> Build:
    """A genuine checkpoint that the attacker replaces, right before it is opened for the `reads + 1`-th time,
    with a link to a loadable copy outside the log root: the run was checked while it was sound (the race
    between the check and the read; the link staged in the run folder, renamed over the file)."""

    def edit(workspace: Workspace, run: Path) -> Built:
        checkpoint = last_checkpoint(run)
        copy = workspace.outside / checkpoint.name
        shutil.copyfile(checkpoint, copy)
        staged = run / f"staged-link{checkpoint.suffix}"
        os.symlink(copy, staged)
        return Built(run=run, swap=(checkpoint, staged, reads), names=(checkpoint.name,))

    return planted_run(library, edit)


def linked_folder(library: str, experiment: bool) -> Build:
    """The log root's library folder (or its experiment folder) is a link to a folder outside."""

    def build(workspace: Workspace, genuine: Any) -> Built:
        library_folder = workspace.logs / LIBRARIES[library]["folder"]
        link = library_folder / EXPERIMENT if experiment else library_folder
        link.parent.mkdir(parents=True)
        target = workspace.outside / link.name
        target.mkdir()
        os.symlink(target, link)
        return Built()

    return build


def looping_checkpoint(library: str) -> Build:
    def edit(workspace: Workspace, run: Path) -> None:
        checkpoint = last_checkpoint(run)
        checkpoint.unlink()
        os.symlink(checkpoint.name, checkpoint)  # a link to itself

    return planted_run(library, edit)


# --- class 6: values and names --------------------------------------------------------------------------------

PLANTED = "2020-01-01_00-00-00_planted"


def planted_best(library: str, value: str) -> Build:
    """A genuine run scored -1200, and an older planted copy in another experiment folder of the shared log root
    whose checkpoint's mean_return is `value` (JSON text: 1e308, Infinity, 1e999, "Infinity")."""

    def build(workspace: Workspace, genuine: Any) -> Built:
        fair = copy_run(genuine.run(library), workspace.logs, library)
        edit_manifest(fair, lambda manifest: manifest["checkpoints"][-1].update(mean_return=-1200.0))
        planted = copy_run(genuine.run(library), workspace.logs, library, PLANTED, experiment="shared")

        def plant(manifest: dict[str, Any]) -> None:
            manifest.update(created_at="2020-01-01T00:00:00.000000+00:00", experiment="shared")
            manifest["checkpoints"][-1]["mean_return"] = 0.123456789

        edit_manifest(
            planted, plant, text=lambda text: text.replace('"mean_return": 0.123456789', f'"mean_return": {value}')
        )
        best = ("--checkpoint", "best")
        return Built(run=fair, planted=PLANTED, argv={"play": best, "export": best})

    return build


def planted_latest(library: str) -> Build:
    """A genuine run, and a planted copy beside it created (it says) in the year 9999."""

    def build(workspace: Workspace, genuine: Any) -> Built:
        fair = copy_run(genuine.run(library), workspace.logs, library)
        planted = copy_run(genuine.run(library), workspace.logs, library, PLANTED)
        edit_manifest(planted, lambda manifest: manifest.update(created_at="9999-12-31T23:59:59.999999+00:00"))
        return Built(run=fair, planted=PLANTED)

    return build


ESCAPES = "2026-01-01_00-00-00_\x1b]0;owned\x07\x1b[2J\x1b[31mrun"


def escaped_name(library: str) -> Build:
    def edit(workspace: Workspace, run: Path) -> Built:
        return Built(run=run, json=False)

    return planted_run(library, edit, name=ESCAPES)


def results(library: str, hostile: str) -> Build:
    """A bench folder whose results.jsonl carries `hostile` text in every free-text field of a completed and a
    failed row (task, run label, variant, error, note)."""

    def build(workspace: Workspace, genuine: Any) -> Built:
        workspace.out.mkdir()
        base = {"task": f"{TASK} {hostile}", "library": library, "algorithm": "ppo", "ml_framework": "torch"}
        rows = [
            {
                **base,
                "key": f"cell-{seed}",
                "run": f"{library}/ppo {hostile}",
                "variant": hostile,
                "seed": seed,
                "status": "completed",
                "env_steps": 4096,
                "iterations": 2,
                "wall_s": 2.0,
                "steps_per_s": 2048.0,
                "final_return": -900.0 - seed,
                "eval_return": None,
                "note": hostile,
            }
            for seed in (0, 1)
        ]
        rows.append({**base, "key": "cell-2", "run": f"{library}/ppo", "seed": 2, "status": "failed", "error": hostile})
        text = "".join(json.dumps(row) + "\n" for row in rows)
        (workspace.out / "results.jsonl").write_text(text, encoding="utf-8")
        return Built(report=workspace.out, payload=hostile)

    return build


# --- a bench's --storage read by a retry, and an earlier bench's rows read by a bench run again ---------------

STORED_ITERATIONS = 2
"""The budget of a retried cell: the genuine run's checkpoint (iteration 1) leaves one iteration to go."""


def stored_folder(library: str, edit: Edit | None = None, retries: int = 1) -> Build:
    """`rlrun bench --retries N --storage <inputs/bucket>` of one cell of `library`, two iterations: the cell's first
    attempt is lost with its node, and meanwhile the genuine run of `library` (its checkpoint listed at iteration
    1), changed by `edit`, appears in the bucket as the run folder that attempt sent; the retry reads it there
    (`rlrun.benching.stored`). Nothing outside (`unread`) may be read, by the retry or the bench."""

    def build(workspace: Workspace, genuine: Any) -> Built:
        bucket = workspace.inputs / "bucket"
        staged = copy_run(genuine.run(library), bucket / ".staged", library)  # not where the retry looks
        if edit is not None:
            edit(workspace, staged)
        spec = write_yaml(workspace.inputs / "bench.yaml", bench_fields(library, iterations=STORED_ITERATIONS))
        return Built(
            spec=spec,
            argv={"bench": ("--retries", str(retries), "--storage", str(bucket))},
            stored=(staged, bucket),
            writes=("inputs/bucket",),
            unread=(workspace.outside,),
        )

    return build


def listed(text: Callable[[str], str] | None = None, **fields: Any) -> Edit:
    """An edit of a run.json: the newest checkpoint's entry updated with `fields`, then `text` applied to the JSON
    written (for what JSON cannot say: Infinity, NaN)."""

    def edit(workspace: Workspace, run: Path) -> None:
        edit_manifest(run, lambda manifest: manifest["checkpoints"][-1].update(fields), text=text)

    return edit


def listed_outside(library: str, absolute: bool) -> Edit:
    """The newest checkpoint, copied to the outside folder, listed by a name that climbs out of the stored run
    folder to it (`../../../../../outside/model_0.pt` from `<bucket>/<library>/<experiment>/<run>`, where the
    retry finds the folder) or by its absolute path."""

    def edit(workspace: Workspace, run: Path) -> None:
        checkpoint = last_checkpoint(run)
        target = workspace.outside / checkpoint.name
        shutil.copyfile(checkpoint, target)
        where = workspace.inputs / "bucket" / LIBRARIES[library]["flags"][1] / workspace.out.name / run.name
        name = str(target) if absolute else os.path.relpath(target, where)
        listed(file=name)(workspace, run)

    return edit


def move_out(part: Callable[[Path], Path]) -> Edit:
    """An edit that moves `part(run)` to the outside folder and leaves a link to it in its place."""
    return lambda workspace, run: _move_out(part(run), workspace) and None


def raw_manifest(content: Callable[[Workspace, Path], str | bytes]) -> Edit:
    """An edit that writes the run.json as exactly these bytes (or text), given the workspace and the run folder."""

    def edit(workspace: Workspace, run: Path) -> None:
        data = content(workspace, run)
        (run / "run.json").write_bytes(data if isinstance(data, bytes) else data.encode())

    return edit


RowEdit = Callable[[Workspace, Path, dict[str, Any]], None]


def earlier_row(
    library: str, edit: RowEdit | None = None, text: Callable[[str], str] | None = None, size: int | None = None
) -> Build:
    """An out folder that holds a genuine earlier bench of one cell of `library` (its results.jsonl and run folder,
    copied from the session's, the row's paths moved with them), whose row and run folder `edit(workspace, run,
    row)` changes (the row is then written as JSON, `text` applied for what JSON cannot say, and the file grown to
    `size` bytes); the same bench runs again over it. Nothing outside (`unread`) may be read."""

    def build(workspace: Workspace, genuine: Any) -> Built:
        fields = bench_fields(library)
        source = genuine.bench(library, fields)
        shutil.copytree(source, workspace.out, symlinks=True)
        results = workspace.out / "results.jsonl"
        (line,) = results.read_text(encoding="utf-8").splitlines()
        row = json.loads(line.replace(json.dumps(str(source))[1:-1], json.dumps(str(workspace.out))[1:-1]))
        if edit is not None:
            edit(workspace, Path(row["run_dir"]), row)
        written = json.dumps(row, sort_keys=True)
        results.write_text((text(written) if text else written) + "\n", encoding="utf-8")
        if size is not None:
            os.truncate(results, size)  # a sparse run of NULs: one line that long, on no disk
        spec = write_yaml(workspace.inputs / "bench.yaml", fields)
        return Built(spec=spec, planted=row["run_dir"], unread=(workspace.outside,))

    return build


def run_moved_out(workspace: Workspace, run: Path, row: dict[str, Any]) -> None:
    """The row's run folder moved outside the log root, the row naming it there (row and folder agree)."""
    target = workspace.outside / run.name
    shutil.move(run, target)
    row["run_dir"] = str(target)
    row["checkpoint"] = str(target / Path(row["checkpoint"]).relative_to(run))


def run_linked_out(workspace: Workspace, run: Path, row: dict[str, Any]) -> None:
    """The row's run folder moved outside, a link to it left in its place under the log root."""
    _move_out(run, workspace)


SENTINEL = 123456.789012
"""A number written into a file's JSON where a text edit then puts what JSON cannot say (`swap`)."""

RESULT_KEYS = {"final_return": "mean_return", "env_steps": "env_steps"}
"""A results row's column -> the key of its run.json's `result` that vouches for it."""


def swap(literal: str) -> Callable[[str], str]:
    """A text edit of JSON: `SENTINEL` replaced by `literal` (Infinity, NaN, 1e999, a string, 5,000 digits)."""
    return lambda text: text.replace(repr(SENTINEL), literal)


def agreeing(key: str, literal: str) -> RowEdit:
    """The row's `key` and its run.json's `result` entry for it both the JSON text `literal` (the row's own text is
    swapped by `earlier_row`'s `text=swap(literal)`): row and run agree, as a forger of both writes them."""

    def edit(workspace: Workspace, run: Path, row: dict[str, Any]) -> None:
        row[key] = SENTINEL
        edit_manifest(run, lambda manifest: manifest["result"].update({RESULT_KEYS[key]: SENTINEL}), text=swap(literal))

    return edit


# --- controls ----------------------------------------------------------------------------------------------


def genuine_lone_zip(workspace: Workspace, genuine: Any) -> Built:
    """The genuine SB3 run's zip alone in the shared inputs (the control of the lone-zip case)."""
    target = workspace.inputs / "model_shared.zip"
    shutil.copyfile(last_checkpoint(genuine.run("sb3")), target)
    fit = ("agent.policy_kwargs.net_arch=[16,16]",)
    return Built(checkpoint=target, argv={"checkpoint": fit, "checkpoint_export": fit}, writes=("inputs/exported",))


# --- small helpers ---------------------------------------------------------------------------------------------


def outside_folder(workspace: Workspace, name: str) -> Path:
    folder = workspace.outside / name
    folder.mkdir()
    return folder


def pad(path: Path, size: int) -> None:
    """Pad a JSON file with trailing whitespace to `size` bytes (still the same JSON)."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text + " " * (size - len(text)), encoding="utf-8")
