"""The `rlrun` command line: `main(argv) -> int`, hermetic like every other call.

Exit codes: 0 success, 2 usage or user error (one line on stderr, no traceback), 1 runtime
failure (traceback), 130 interrupted. `SystemExit` never escapes `main`, so it can be called
in-process (`rlrun.main([...])`) as safely as the API.

Flags follow Isaac Lab's names (`--rl_library` is an alias of `--library`); trailing
`agent.<key>=<value>` and `env.<key>=<value>` words override the configuration.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from rlrun.api.requests import AgentRequest, ExportRequest, PlayRequest, TrainRequest, field_docs
from rlrun.errors import InvalidArgument, LeakDetected, TrainingStopped, UserError, did_you_mean

EXAMPLES = """\
examples:
  rlrun train --task rlrun/CartPoleContinuous-v1
  rlrun train --task rlrun/Pendulum-v1 --library rsl_rl --num_envs 256 agent.algorithm.learning_rate=3e-4
  rlrun play --task rlrun/CartPoleContinuous-v1 --checkpoint latest --num_episodes 20
  rlrun random --task HalfCheetah-v5 --num_episodes 4
  rlrun list
"""


BENCH_EXAMPLES = """\
examples:
  rlrun bench --tasks rlrun/CartPole-v1,rlrun/Pendulum-v1 --libraries rsl_rl,skrl,sb3,rl_games --seeds 0-4 \\
      --env_steps 200000 --out bench/classic
  rlrun bench spec.yaml --executor process --workers 2
  rlrun report bench/classic
"""


TUNE_EXAMPLES = """\
examples:
  rlrun tune tune.yaml
  rlrun tune tune.yaml --n_trials 40 --executor process --workers 2
  optuna-dashboard tune/study.db
"""


class _Parser(argparse.ArgumentParser):
    """argparse that raises a one-line `InvalidArgument` instead of printing usage and exiting.

    Abbreviated flags are refused (`--num_env` is a typo, not `--num_envs`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise InvalidArgument(f"{self.prog}: {message} (see '{self.prog} --help').")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' line breaks; every flag's help ends with its default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.option_strings and not action.required and action.default is not argparse.SUPPRESS:
            negated = isinstance(action, argparse._StoreFalseAction)  # `--stochastic` is off unless given
            text += f" (default: {'off' if negated else _shown(action.default)})"
        return text


def _shown(default: Any) -> str:
    """A default as `--help` shows it: `-` for none, `on`/`off` for switches."""
    if default is None or default == ():
        return "-"
    if isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, tuple):
        return ",".join(map(str, default))
    return str(default)


CLI_ONLY_FLAGS = (
    ("--json", "print the result as JSON"),
    ("--check_leaks", "fail if the call leaves any global changed (the leak detector)"),
)
"""Flags that are not request fields: how the command line reports, not what the call does."""

COMMAND_HELP = {
    "train": ("train an agent", TrainRequest),
    "play": ("evaluate a trained agent", PlayRequest),
    "export": ("export a trained policy to ONNX and TorchScript", ExportRequest),
    "zero": ("run a task with the zero action, no library", AgentRequest),
    "random": ("run a task with uniformly random actions, no library", AgentRequest),
}


def _request_flags(
    parser: argparse.ArgumentParser, request: type, *, given_only: bool = False, help_texts: bool = True
) -> None:
    """One flag per field of the request dataclass: its name, type, default and docstring (see `rlrun.api.requests`).

    With `given_only`, a flag the user does not give leaves no attribute (the bench's flags override a spec
    file's values only where given); the help still shows the request's default.
    """
    import dataclasses
    import typing

    docs = field_docs(request) if help_texts else {}
    hints = typing.get_type_hints(request)
    for item in dataclasses.fields(request):
        meta = item.metadata
        if not meta.get("cli", True):
            continue
        flag = meta.get("flag", f"--{item.name}")
        names = [flag, *meta.get("aliases", ())]
        text = docs.get(item.name, "").replace("%", "%%")
        if "choices" in meta:
            text += f" One of: {', '.join(meta['choices'])}."
        kind = hints[item.name]
        required = item.default is dataclasses.MISSING and not given_only
        default = None if item.default is dataclasses.MISSING else item.default
        if given_only:
            text += f" (default: {'off' if meta.get('negate') else _shown(default)})"
        extra: dict[str, Any] = {"default": argparse.SUPPRESS} if given_only else {"default": default}
        if kind is bool:
            action = "store_false" if meta.get("negate") else "store_true"
            parser.add_argument(*names, dest=item.name, action=action, help=text, **extra)
            continue
        arguments = typing.get_args(kind)
        value_type = int if kind is int or int in arguments else float if kind is float or float in arguments else str
        if typing.get_origin(kind) is tuple or any(typing.get_origin(argument) is tuple for argument in arguments):
            value_type = str  # comma-separated on the command line; the request parses it
        parser.add_argument(
            *names,
            dest=item.name,
            type=value_type,
            required=required,
            metavar=item.name.upper(),
            help=text,
            **extra,
        )


def build_parser(*, help_texts: bool = True) -> argparse.ArgumentParser:
    """The whole command line, generated from the request dataclasses; `rlrun <command> --help` shows each.

    The flags' help texts are the fields' docstrings, read from the source (about 50 ms); `help_texts=False`
    leaves them out for a command line that asks for no help (see `parse`)."""
    parser = _Parser(
        prog="rlrun",
        description="Train, play and compare RL agents with RSL-RL and other libraries, hermetically.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="{train,play,export,zero,random,bench,tune,report,list}",
        parser_class=_Parser,
    )
    for command, (summary, request) in COMMAND_HELP.items():
        overrides = "env.KEY=VALUE" if request is AgentRequest else "agent.KEY=VALUE and env.KEY=VALUE"
        sub = commands.add_parser(
            command,
            help=summary,
            description=f"{request.__doc__} Trailing {overrides} words override the configuration.",
            epilog=EXAMPLES,
            formatter_class=_HelpFormatter,
        )
        _request_flags(sub, request, help_texts=help_texts)
        for flag, text in CLI_ONLY_FLAGS:
            sub.add_argument(flag, action="store_true", default=None if flag == "--check_leaks" else False, help=text)

    from rlrun.api.bench import BenchRequest

    _spec_command(
        commands,
        "bench",
        BenchRequest,
        help="compare libraries over tasks and seeds",
        description=f"{BenchRequest.__doc__} Give a YAML spec (its keys are the flags' names; see README), "
        "flags, or both (flags override the spec). Trailing agent.KEY=VALUE and env.KEY=VALUE words apply to "
        "every cell.",
        epilog=BENCH_EXAMPLES,
        spec_help="a YAML bench spec (optional)",
        help_texts=help_texts,
    )
    from rlrun.api.tune import TuneRequest

    _spec_command(
        commands,
        "tune",
        TuneRequest,
        help="search hyperparameters with Optuna",
        description=f"{TuneRequest.__doc__} Give a YAML spec (its keys are the flags' names, with search_space and "
        "enqueue; see README) and flags that override it. Trailing agent.KEY=VALUE and env.KEY=VALUE words are fixed "
        "overrides of every trial. Running the same command again resumes the study.",
        epilog=TUNE_EXAMPLES,
        spec_help="a YAML tune spec",
        help_texts=help_texts,
    )
    report = commands.add_parser(
        "report",
        help="write a bench's report.md and plots",
        description="Write <out>/report.md and <out>/plots/ from <out>/results.jsonl (rlrun bench does it at the end).",
        formatter_class=_HelpFormatter,
    )
    report.add_argument("out", help="the bench's --out folder")

    listing = commands.add_parser("list", help="list tasks and libraries")
    listing.add_argument("what", nargs="?", choices=("tasks", "libraries", "all"), default="all")
    listing.add_argument("--gymnasium", action="store_true", help="also list every registered Gymnasium id")
    return parser


def parse(arguments: Sequence[str]) -> argparse.Namespace:
    """Parse a command line; trailing `key=value` words become `args.overrides`."""
    # Help texts only when help may be printed: `-h`, `--help` or an abbreviation argparse accepts (`--he`).
    asks_for_help = any(word == "-h" or (len(word) > 2 and "--help".startswith(word)) for word in arguments)
    parser = build_parser(help_texts=asks_for_help)
    args, extras = parser.parse_known_args(arguments)
    args.overrides = [word for word in extras if "=" in word and not word.startswith("-")]
    if getattr(args, "spec", None) is not None and args.spec.startswith(("agent.", "env.")) and "=" in args.spec:
        args.overrides.insert(0, args.spec)  # `rlrun bench --tasks ... agent.x=1`: an override, not a spec file
        args.spec = None
    unknown = [word for word in extras if word not in args.overrides]
    if unknown or (args.overrides and args.command == "list"):
        command = parser._subparsers._group_actions[0].choices[args.command]  # type: ignore[union-attr]
        flags = [flag for action in command._actions for flag in action.option_strings]
        hint = did_you_mean(unknown[0].split("=")[0], flags) if unknown and unknown[0].startswith("-") else ""
        raise InvalidArgument(
            f"rlrun {args.command}: unrecognized arguments: {' '.join(unknown or args.overrides)}.{hint} "
            f"(see 'rlrun {args.command} --help')"
        )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `rlrun` command line in-process and return its exit code.

    Warnings raised during the call are held back and shown after it, except when the call ends in a
    user error: then the one error line is all that is printed.
    """
    import warnings

    arguments = list(sys.argv[1:] if argv is None else argv)
    stderr = sys.stderr
    code = 130
    try:
        with warnings.catch_warnings(record=True) as caught:
            code = _main(arguments, stderr)
        if code != 2:
            for held in caught:
                warnings.showwarning(held.message, held.category, held.filename, held.lineno, held.file, held.line)
    except KeyboardInterrupt:
        # A further Ctrl-C while the error line is printed or the warnings are replayed: the exit code stands.
        return code if code in (130, 143) else 130
    return code


def _spec_command(
    commands: Any,
    name: str,
    request: type,
    *,
    help: str,
    description: str,
    epilog: str,
    spec_help: str,
    help_texts: bool,
) -> None:
    """A command that takes a YAML spec and the request's flags, which override it (`bench`, `tune`)."""
    parser = commands.add_parser(
        name, help=help, description=description, epilog=epilog, formatter_class=_HelpFormatter
    )
    parser.add_argument("spec", nargs="?", default=None, help=spec_help)
    _request_flags(parser, request, given_only=True, help_texts=help_texts)
    for flag, text in CLI_ONLY_FLAGS:
        parser.add_argument(flag, action="store_true", default=None if flag == "--check_leaks" else False, help=text)


def console() -> NoReturn:
    """The `rlrun` console command and `python -m rlrun`: `main()`, then exit with its code.

    Once the code is decided, SIGINT is ignored for the few steps left to the process: a Ctrl-C that comes
    while it exits (after the run was already stopped and reported) would otherwise escape as an uncaught
    `KeyboardInterrupt`, which Python turns into death by SIGINT instead of the exit code. `main` itself
    leaves every signal handler as it found it (a caller in the same process keeps its own)."""
    import signal

    code = 130
    try:
        code = main()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


def _interrupt_latch(arguments: list[str]) -> Any:
    """For the commands that train, `rlrun.api.iterations.LATCH` around the whole call, so that a Ctrl-C that
    Python drops in a finalizer while the command plans or imports is not lost; the others import nothing."""
    import contextlib

    if not arguments or arguments[0] not in ("train", "bench", "tune"):
        return contextlib.nullcontext()
    from rlrun.api.iterations import LATCH

    return LATCH.installed()


def _main(arguments: list[str], stderr: Any) -> int:
    from rlrun.hermetic import hermetic_call

    try:
        with (
            _interrupt_latch(arguments),
            hermetic_call(check_leaks=True if "--check_leaks" in arguments else None, name="rlrun") as call,
        ):
            try:
                args = parse(arguments)
            except SystemExit as exit:  # --help
                return exit.code if isinstance(exit.code, int) else 0
            if args.command == "report":
                from rlrun.reports import HEAVY_MODULES

                call.import_modules(HEAVY_MODULES)
                return _report(call, args)
            if args.command == "bench":
                return _bench(call, args, arguments)
            if args.command == "tune":
                return _tune(call, args)
            if args.command == "list":
                call.import_modules(
                    ("gymnasium", "rlrun.envs", "rlrun.envs.plugins", "rich.console", "rich.markup", "rich.table")
                )
                return _list(args)
            return _run(call, args, arguments)
    except UserError as error:
        print(f"rlrun: error: {_one_line(error)}", file=stderr)
        return 2
    except TrainingStopped as stop:
        print(f"rlrun: {stop.reason}{_resume_hint(stop)}", file=stderr)
        return stop.exit_code
    except KeyboardInterrupt:
        print("rlrun: interrupted", file=stderr)
        return 130
    except LeakDetected as error:
        print(f"rlrun: the call left global state changed:\n{error}", file=stderr)
        return 1
    except SystemExit as exit:  # a library called sys.exit
        code = exit.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except Exception:
        traceback.print_exc(file=stderr)
        return 1


def _resume_hint(stop: TrainingStopped) -> str:
    """Where a stopped training's run is, and how to continue it."""
    if stop.run_dir is None:
        return ""
    run = Path(str(stop.run_dir))
    if stop.checkpoint is None:
        return f"; run {_relative(run)} (no checkpoint was saved)"
    checkpoint = Path(str(stop.checkpoint))
    return (
        f"; run {_relative(run)}, checkpoint {_relative(checkpoint)}; continue it with the same "
        f"rlrun train command and --resume --load_run {run.name} --checkpoint {checkpoint.relative_to(run)}"
    )


def _one_line(error: UserError) -> str:
    """A user error's message on one line, whatever text (a library's reason, a path) it quotes."""
    return " ".join(str(error).split())


def _run(call: Any, args: argparse.Namespace, arguments: list[str]) -> int:
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
        result = api.export_in_call(call, request)
    elif args.command == "train":
        result = api.train_in_call(call, request, display)
    else:
        result = api.play_in_call(call, request, display)
    print(_render(result, args.json))
    return 0


def _bench(call: Any, args: argparse.Namespace, arguments: list[str]) -> int:
    from rlrun import api, progress
    from rlrun.api.bench_request import SPEC_KEYS, BenchRequest, load_spec

    given = {key: value for key, value in vars(args).items() if key in SPEC_KEYS}
    given["overrides"] = tuple(args.overrides) or None
    if args.spec is not None:
        request = load_spec(args.spec, **given)
    else:
        if "tasks" not in given or "runs" not in given:
            raise InvalidArgument(
                "rlrun bench needs a spec file or --tasks and --libraries (see 'rlrun bench --help')."
            )
        request = BenchRequest(**{key: value for key, value in given.items() if value is not None})

    def board(cells: list[tuple[str, str]]) -> Any:
        return progress.BenchBoard(cells, sys.stderr)

    result = api.bench_in_call(call, request, None if args.json else board)
    if args.json:
        for row in result.rows:
            print(json.dumps(row, sort_keys=True))
        return 0 if result.failed == 0 else 1
    print(
        f"bench: {result.completed} completed, {result.failed} failed, {result.skipped} skipped, "
        f"{result.reused} reused from an earlier run\nresults: {_relative(result.results)}"
        + (f"\nreport: {_relative(result.report)}" if result.report else "")
    )
    return 0 if result.failed == 0 else 1


def _tune(call: Any, args: argparse.Namespace) -> int:
    from rlrun import api
    from rlrun.api.tune import SPEC_KEYS, TuneRequest, load_spec

    given = {key: value for key, value in vars(args).items() if key in SPEC_KEYS}
    given["overrides"] = tuple(args.overrides) or None
    if args.spec is not None:
        request = load_spec(args.spec, **given)
    else:
        if "task" not in given:
            raise InvalidArgument("rlrun tune needs a spec file with a search_space (see 'rlrun tune --help').")
        request = TuneRequest(**{key: value for key, value in given.items() if value is not None})
    result = api.tune_in_call(call, request, echo=not args.json)
    if args.json:
        print(_as_json(result))
        return 0
    best = (
        f"best: trial {result.best_trial}, value {result.best_value:.2f}, config {_relative(result.best_config)}"
        if result.best_trial is not None and result.best_value is not None
        else "best: none (no trial completed)"
    )
    print(
        f"tune: {result.n_trials} trials in study {result.study!r} ({result.completed} completed, {result.pruned} "
        f"pruned, {result.failed} failed; {result.ran} run now)\n{best}\ntrials: {_relative(result.trials)}"
        + (f"\nreport: {_relative(result.report)}" if result.report else "")
        + f"\ndashboard: optuna-dashboard {_dashboard(result.storage)}"
    )
    return 0


def _dashboard(storage: str) -> str:
    prefix = "sqlite:///"
    return _relative(Path(storage[len(prefix) :])) if storage.startswith(prefix) else storage


def _report(call: Any, args: argparse.Namespace) -> int:
    from rlrun.reports import write_report

    with call.guarded():
        path = write_report(Path(args.out))
    print(f"report: {_relative(path)}")
    return 0


def _render(result: Any, as_json: bool) -> str:
    return _as_json(result) if as_json else _summary(result)


def _summary(result: Any) -> str:
    from rlrun.api import ExportResult, TrainResult

    def number(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    if isinstance(result, TrainResult):
        returns = (
            f"mean return {number(result.mean_return)} over the last {min(result.episodes, 100)} episodes"
            if result.episodes
            else "no episode finished yet"
        )
        return (
            f"trained {result.library} on {result.task}: {result.iterations} iterations, "
            f"{result.env_steps:,} env steps in {result.wall_time_s:.1f} s ({result.steps_per_s:,.0f} steps/s), "
            f"{returns}\nrun: {_relative(result.run_dir)}\ncheckpoint: {_relative(result.checkpoint)}\n"
            + _curves_line(result.run_dir)
        )
    if isinstance(result, ExportResult):
        lines = [f"exported the {result.library} policy of {_relative(result.checkpoint)}:"]
        for path in result.files:
            error = result.max_abs_error.get(path.name)
            check = "not checked (install onnxruntime)" if error is None else f"max abs difference {error:.2e}"
            lines.append(f"  {_relative(path)}  ({check} from the live policy)")
        return "\n".join(lines)
    who = f"with {result.library}" if result.checkpoint is not None else f"with the {result.library} agent"
    if not result.returns:
        return (
            f"no episode of {result.task} finished {who} within {result.env_steps:,} env steps; "
            "raise --max_steps (or drop it) to let episodes end"
        )
    played = (
        f"played {len(result.returns)} episodes of {result.task} {who}: "
        if result.checkpoint is not None
        else f"ran {len(result.returns)} episodes of {result.task} {who}: "
    )
    return (
        f"{played}mean return {number(result.mean_return)} ± {number(result.std_return)}, "
        f"mean length {number(result.mean_length)}"
        + (
            f"\ncheckpoint: {_relative(result.checkpoint)}{_saved(result.checkpoint_saved)}"
            if result.checkpoint is not None
            else ""
        )
    )


def _saved(entry: dict[str, Any] | None) -> str:
    """What the run recorded of a checkpoint when it saved it (what `--checkpoint best` chooses by)."""
    if not entry:
        return ""
    parts = [f"iteration {entry['iteration']}"] if isinstance(entry.get("iteration"), int) else []
    score = entry.get("mean_return")
    if isinstance(score, (int, float)) and not isinstance(score, bool) and score == score:
        parts.append(f"training mean return {score:.1f} when saved")
    return f" ({', '.join(parts)})" if parts else ""


def _curves_line(run_dir: Path) -> str:
    """How to view a training's curves: TensorBoard on its library's folder (`<log_root>/<library>`), which
    shows this run beside the library's others; every run has the same `rlrun/*` scalars."""
    library_dir = run_dir.parent.parent
    return f"curves: tensorboard --logdir {_relative(library_dir)}  (this run: {run_dir.relative_to(library_dir)})"


def _relative(path: Path | None) -> str:
    if path is None:
        return "-"
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _as_json(result: Any) -> str:
    from rlrun.runs import jsonable

    return json.dumps(jsonable(result, limit=None), indent=2)


def _list(args: argparse.Namespace) -> int:
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

        from rlrun.envs import NATIVE_TASKS, plugins

        table = Table(title="tasks (rlrun's batched torch tasks; any Gymnasium id works too)", title_justify="left")
        for column in ("task", "package", "default library", "time limit"):
            table.add_column(column)
        for task in NATIVE_TASKS.values():
            table.add_row(task.id, escape(plugins.provider(task)), task.default_library, str(task.max_episode_steps))
        if args.gymnasium:
            for task_id, spec in sorted(gymnasium.registry.items()):
                if task_id not in NATIVE_TASKS:
                    table.add_row(task_id, "", "(by action space)", str(spec.max_episode_steps or "-"))
        console.print(table)
        for name, reason in plugins.BROKEN.items():
            console.print(escape(f"task plugin {name} left out: {reason}"), soft_wrap=True)
        if not args.gymnasium:
            console.print(
                f"and {len(gymnasium.registry) - len(NATIVE_TASKS)} Gymnasium ids (rlrun list tasks --gymnasium)"
            )
    return 0
