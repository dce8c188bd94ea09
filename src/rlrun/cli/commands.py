"""What each command does once parsed: train, play, export, zero and random through their API calls, bench,
tune, report and list."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlrun.cli.output import json_text, relative, render
from rlrun.cli.parser import COMMAND_HELP
from rlrun.errors import InvalidArgument

if TYPE_CHECKING:
    from rlrun.hermetic import Call


def run_request(call: Call, args: argparse.Namespace, arguments: list[str]) -> int:
    import dataclasses

    from rlrun import api, progress

    display = None if args.json else progress.for_stream(sys.stderr)
    request_type = COMMAND_HELP[args.command][1]
    values = {
        item.name: getattr(args, item.name)
        for item in dataclasses.fields(request_type)
        if item.metadata.get("cli", True)
    }
    request = request_type(**values, overrides=tuple(args.overrides), argv=("rlrun", *arguments))
    result: Any
    if args.command in api.AGENTS:
        result = api.agent_in_call(call, request, args.command, display)
    elif args.command == "export":
        result = api.export_in_call(call, request, None if args.json else progress.StepLines("export"))
    elif args.command == "train":
        result = api.train_in_call(call, request, display)
    else:
        result = api.play_in_call(call, request, display)
    print(render(result, args.json))
    return 0


def bench(call: Call, args: argparse.Namespace, arguments: list[str]) -> int:
    from rlrun import progress
    from rlrun.benching import SPEC_KEYS, BenchRequest, bench_in_call, load_spec

    given = {key: value for key, value in vars(args).items() if key in SPEC_KEYS}
    given["overrides"] = tuple(args.overrides) or None
    if args.spec is not None:
        request = load_spec(args.spec, trust=args.trust_spec, **given)
        if "tasks" not in given:
            _name_modules(request.tasks, args.spec)
    else:
        if ("tasks" not in given and "suite" not in given) or "runs" not in given:
            raise InvalidArgument(
                "rlrun bench needs a spec file or --tasks (or --suite) and --libraries (see 'rlrun bench --help')."
            )
        request = BenchRequest(**{key: value for key, value in given.items() if value is not None})

    def board(cells: list[tuple[str, str]], where: str, results: Path) -> Any:
        return progress.BenchBoard(cells, sys.stderr, intro=f"on {where}, results to {relative(results)}")

    steps = None if args.json else progress.StepLines("bench report")
    result = bench_in_call(call, request, None if args.json else board, steps)
    if request.suite is not None:
        from rlrun.benching.suites import plan_suite

        for note in plan_suite(request.suite).notes():  # checked by the bench's planning already
            print(f"rlrun: {note}", file=sys.stderr)
    if args.json:
        for row in result.rows:
            print(json.dumps(row, sort_keys=True))
        return 0 if result.failed == 0 else 1
    print(
        f"bench: {result.completed} completed, {result.failed} failed, {result.skipped} skipped, "
        f"{result.reused} reused from an earlier run\nresults: {relative(result.results)}"
        + (f"\nreport: {relative(result.report)}" if result.report else "")
    )
    return 0 if result.failed == 0 else 1


def tune(call: Call, args: argparse.Namespace) -> int:
    from rlrun.tuning import SPEC_KEYS, TuneRequest, load_spec, tune_in_call

    given = {key: value for key, value in vars(args).items() if key in SPEC_KEYS}
    given["overrides"] = tuple(args.overrides) or None
    if args.spec is not None:
        request = load_spec(args.spec, trust=args.trust_spec, **given)
        if "task" not in given:
            _name_modules((request.task,), args.spec)
    else:
        if "task" not in given:
            raise InvalidArgument("rlrun tune needs a spec file with a search_space (see 'rlrun tune --help').")
        request = TuneRequest(**{key: value for key, value in given.items() if value is not None})
    result = tune_in_call(call, request, echo=not args.json)
    if args.json:
        print(json_text(result))
        return 0
    best = (
        f"best: trial {result.best_trial}, value {result.best_value:.2f}, config {relative(result.best_config)}"
        if result.best_trial is not None and result.best_value is not None
        else "best: none (no trial completed)"
    )
    print(
        f"tune: {result.n_trials} trials in study {result.study!r} ({result.completed} completed, {result.pruned} "
        f"pruned, {result.failed} failed{f', {result.retried} run again' if result.retried else ''}; "
        f"{result.ran} run now)\n{best}\ntrials: {relative(result.trials)}"
        + (f"\nreport: {relative(result.report)}" if result.report else "")
        + f"\ndashboard: optuna-dashboard {_dashboard(result.storage)}"
    )
    return 0


def _name_modules(tasks: Any, spec: str) -> None:
    """Say on stderr which module a spec's task makes rlrun import, before planning imports it (a spec may name
    one only with --trust_spec)."""
    from rlrun.sweep import task_module

    for task in tasks if isinstance(tasks, tuple | list) else ():
        module = task_module(task) if isinstance(task, str) else None
        if module is not None:
            print(f"rlrun: importing module {module} for task {task} (from spec {spec})", file=sys.stderr)


def _dashboard(storage: str) -> str:
    prefix = "sqlite:///"
    return relative(Path(storage[len(prefix) :])) if storage.startswith(prefix) else storage


def report(call: Call, args: argparse.Namespace) -> int:
    from rlrun import progress
    from rlrun.reports import write_report

    with call.guarded():
        path = write_report(Path(args.out), progress=progress.StepLines("report"))
    print(f"report: {relative(path)}")
    return 0


def listing(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from rlrun.libraries import LIBRARIES

    console = Console()
    if args.what in ("libraries", "all"):
        table = Table(title="libraries", title_justify="left")
        for column in ("library", "installed", "actions", "install with"):
            table.add_column(column, no_wrap=True)
        table.add_column("what")
        for library in LIBRARIES.values():
            version = library.version
            plugin = f" (adapter from the package {library.provider})" if library.provider != "rlrun" else ""
            table.add_row(
                library.name,
                f"yes ({version})" if library.installed else "no",
                ", ".join(library.action_spaces),
                "" if library.installed else escape(library.install_hint),
                escape(library.summary + plugin),
            )
        console.print(table)
        from rlrun.libraries.plugins import BROKEN

        for name, reason in BROKEN.items():
            console.print(escape(f"library plugin {name!r} left out: {reason}"), soft_wrap=True)
    if args.what in ("tasks", "all"):
        import gymnasium

        from rlrun.envs import NATIVE_TASKS, tasks

        table = Table(title="tasks (rlrun's batched torch tasks; any Gymnasium id works too)", title_justify="left")
        for column in ("task", "package", "default library", "time limit"):
            table.add_column(column)
        for task in NATIVE_TASKS.values():
            table.add_row(task.id, escape(tasks.provider(task)), task.default_library, str(task.max_episode_steps))
        lacking: dict[str, int] = {}
        if args.gymnasium:
            from rlrun.envs.requirements import missing_requirement

            for task_id, spec in sorted(gymnasium.registry.items()):
                if task_id in NATIVE_TASKS:
                    continue
                if (needs := missing_requirement(spec)) is not None:
                    lacking[needs] = lacking.get(needs, 0) + 1
                    continue
                table.add_row(task_id, "", "(by action space)", str(spec.max_episode_steps or "-"))
        console.print(table)
        for needs, count in lacking.items():
            console.print(escape(f"and {count} Gymnasium ids that need {needs}, not installed here"), soft_wrap=True)
        for name, reason in tasks.BROKEN.items():
            console.print(escape(f"task plugin {name} left out: {reason}"), soft_wrap=True)
        if not args.gymnasium:
            console.print(
                f"and {len(gymnasium.registry) - len(NATIVE_TASKS)} Gymnasium ids (rlrun list tasks --gymnasium)"
            )
    return 0
