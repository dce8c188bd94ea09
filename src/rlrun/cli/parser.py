"""The argparse front of `rlrun`, generated from the request dataclasses: one flag per field (its name, type,
default and docstring), the bench and tune spec commands, `report` and `list`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from rlrun.api.requests import AgentRequest, ExportRequest, PlayRequest, TrainRequest, field_docs
from rlrun.errors import InvalidArgument, did_you_mean

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
  rlrun bench --suite mujoco --libraries sb3:sac,skrl:sac --seeds 0-4 --out bench/mujoco   # tasks and budgets
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

SPEC_HELP = {"bench": "compare libraries over tasks and seeds", "tune": "search hyperparameters with Optuna"}
"""The commands that take a YAML spec and their summaries (`rlrun --help`)."""

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
        listed = typing.get_origin(kind) is tuple or any(typing.get_origin(argument) is tuple for argument in arguments)
        if listed:
            value_type = str  # comma-separated on the command line; the request parses it
        added = parser.add_argument(
            *names,
            dest=item.name,
            type=value_type,
            required=required,
            metavar=item.name.upper(),
            help=text,
            **extra,
        )
        added.comma_separated = listed  # type: ignore[attr-defined]  # read by `_words_after_a_list`


def build_parser(*, help_texts: bool = True, only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, generated from the request dataclasses; `rlrun <command> --help` shows each.

    The flags' help texts are the fields' docstrings, read from the source, which costs more than the rest of
    the parser; `help_texts=False` leaves them out for a command line that asks for no help (see `parse`).
    With `only`, the other commands are named with their summaries but get no flags: parsing `rlrun train ...`
    need not import the bench's and the tune's packages for flags it cannot be given."""
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
        if only not in (None, command):
            commands.add_parser(command, help=summary)
            continue
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

    for command, summary in SPEC_HELP.items():
        if only not in (None, command):
            commands.add_parser(command, help=summary)
        else:
            (_bench_command if command == "bench" else _tune_command)(commands, help_texts)
    _report_and_list(commands)
    return parser


def _bench_command(commands: Any, help_texts: bool) -> None:
    from rlrun.benching import BenchRequest

    _spec_command(
        commands,
        "bench",
        BenchRequest,
        help=SPEC_HELP["bench"],
        description=f"{BenchRequest.__doc__} Give a YAML spec (its keys are the flags' names; see README), "
        "flags, or both (flags override the spec). Trailing agent.KEY=VALUE and env.KEY=VALUE words apply to "
        "every cell.",
        epilog=BENCH_EXAMPLES,
        spec_help="a YAML bench spec (optional)",
        help_texts=help_texts,
    )


def _tune_command(commands: Any, help_texts: bool) -> None:
    from rlrun.tuning import TuneRequest

    _spec_command(
        commands,
        "tune",
        TuneRequest,
        help=SPEC_HELP["tune"],
        description=f"{TuneRequest.__doc__} Give a YAML spec (its keys are the flags' names, with search_space and "
        "enqueue; see README) and flags that override it. Trailing agent.KEY=VALUE and env.KEY=VALUE words are fixed "
        "overrides of every trial. Running the same command again resumes the study.",
        epilog=TUNE_EXAMPLES,
        spec_help="a YAML tune spec",
        help_texts=help_texts,
    )


def _report_and_list(commands: Any) -> None:
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


def parse(arguments: Sequence[str]) -> argparse.Namespace:
    """Parse a command line; trailing `key=value` words become `args.overrides`."""
    # Help texts only when help may be printed: `-h`, `--help` or an abbreviation argparse accepts (`--he`).
    asks_for_help = any(word == "-h" or (len(word) > 2 and "--help".startswith(word)) for word in arguments)
    command = arguments[0] if arguments and arguments[0] in (*COMMAND_HELP, *SPEC_HELP) else None
    parser = build_parser(help_texts=asks_for_help, only=command)
    args, extras = parser.parse_known_args(arguments)
    args.overrides = [word for word in extras if "=" in word and not word.startswith("-")]
    if getattr(args, "spec", None) is not None and args.spec.startswith(("agent.", "env.")) and "=" in args.spec:
        args.overrides.insert(0, args.spec)  # `rlrun bench --tasks ... agent.x=1`: an override, not a spec file
        args.spec = None
    unknown = [word for word in extras if word not in args.overrides]
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    _words_after_a_list(args, arguments, unknown, commands.choices[args.command])
    if unknown or (args.overrides and args.command == "list"):
        command = commands.choices[args.command]
        flags = [flag for action in command._actions for flag in action.option_strings]
        hint = did_you_mean(unknown[0].split("=")[0], flags) if unknown and unknown[0].startswith("-") else ""
        raise InvalidArgument(
            f"rlrun {args.command}: unrecognized arguments: {' '.join(unknown or args.overrides)}.{hint} "
            f"(see 'rlrun {args.command} --help')"
        )
    return args


def _words_after_a_list(
    args: argparse.Namespace, arguments: Sequence[str], unknown: list[str], command: argparse.ArgumentParser
) -> None:
    """`rlrun bench --seeds 0 1`: argparse reads `1` as the spec file (and a third word as unrecognized). Where
    the spec (not a file here) or the first unrecognized word follows the value of a comma-separated flag, say
    so and give the list joined."""
    listed = [action for action in command._actions if getattr(action, "comma_separated", False)]
    lists = {flag for action in listed for flag in action.option_strings}
    spec = getattr(args, "spec", None)
    stray = [spec] if spec is not None and not spec.endswith((".yaml", ".yml")) else []
    stray += [word for word in unknown[:1] if not word.startswith("-")]
    for word in stray:
        index = list(arguments).index(word)
        start = index
        while start > 0 and not arguments[start - 1].startswith("-"):
            start -= 1
        if start < 2 or arguments[start - 1] not in lists or (word == spec and _is_file(word)):
            continue
        flag = arguments[start - 1]
        values = []
        for value in arguments[start:]:
            if value.startswith("-") or "=" in value:
                break
            values.append(value)
        raise InvalidArgument(
            f"rlrun {args.command}: {word!r} after {flag} {arguments[start]!r} is not a spec file: {flag} takes one "
            f"comma-separated list; use {flag} {','.join(values)}."
        )


def _is_file(path: str) -> bool:
    try:
        return Path(path).is_file()
    except (OSError, ValueError):  # a name too long for the system, a NUL byte: no file, and planning says why
        return False


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
    parser.add_argument(
        "--trust_spec",
        action="store_true",
        help="run the spec as written even where it reaches beyond its folder or this machine: an out, log_root or "
        "SQLite storage file outside the spec's folder, a database server's storage URL, a Ray address, a task "
        "whose module: part rlrun imports (without it, give such a value as its flag)",
    )
    _request_flags(parser, request, given_only=True, help_texts=help_texts)
    for flag, text in CLI_ONLY_FLAGS:
        parser.add_argument(flag, action="store_true", default=None if flag == "--check_leaks" else False, help=text)
