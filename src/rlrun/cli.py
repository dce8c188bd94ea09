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

from rlrun.errors import InvalidArgument, LeakDetected, UserError, did_you_mean

EXAMPLES = """\
examples:
  rlrun train --task rlrun/CartPoleContinuous-v1
  rlrun train --task rlrun/Pendulum-v1 --library rsl_rl --num_envs 256 agent.algorithm.learning_rate=3e-4
  rlrun play --task rlrun/CartPoleContinuous-v1 --checkpoint latest --num_episodes 20
  rlrun random --task HalfCheetah-v5 --num_episodes 4
  rlrun list
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


def _task_flags(parser: argparse.ArgumentParser, num_envs_default: int | None = None) -> None:
    """Flags of every command that runs a task."""
    parser.add_argument("--task", required=True, help="task id: rlrun/CartPole-v1, Pendulum-v1, ... (rlrun list)")
    parser.add_argument("--num_envs", type=int, default=num_envs_default, help="number of parallel environments")
    parser.add_argument("--seed", type=int, default=None, help="random seed (-1: draw one)")
    parser.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available)")
    parser.add_argument("--log_root", default="logs", help="root of the run directories (default: logs)")
    parser.add_argument("--video", action="store_true", help="record mp4 clips of the first environment")
    parser.add_argument("--video_length", type=int, default=200, help="clip length in steps (default 200)")
    parser.add_argument(
        "--vectorization", default="sync", help="sync or async sub-envs for Gymnasium (non-native) tasks"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--check_leaks", action="store_true", default=None, help="fail if the call leaves any global changed"
    )


def _library_flags(parser: argparse.ArgumentParser) -> None:
    """Flags of the commands that drive an RL library."""
    parser.add_argument(
        "--library", "--rl_library", dest="library", default=None, help="RL library (default: the task's own)"
    )
    parser.add_argument("--algorithm", default=None, help="the library's algorithm, e.g. ppo or sac (rlrun list)")
    parser.add_argument("--ml_framework", default=None, help="torch or jax, for libraries that run on both")
    parser.add_argument(
        "--experiment_name",
        "--experiment",
        dest="experiment",
        default=None,
        help="folder under <log_root>/<library>",
    )
    parser.add_argument("--load_run", default=None, help="run directory name (or regex) to take the checkpoint from")
    parser.add_argument("--verbose", action="store_true", help="show the library's own console output")


OVERRIDES_HELP = "trailing agent.KEY=VALUE and env.KEY=VALUE words override the configuration"


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; `rlrun <command> --help` shows each command's flags."""
    parser = _Parser(
        prog="rlrun",
        description="Train, play and compare RL agents with RSL-RL and other libraries, hermetically.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="{train,play,export,zero,random,list}", parser_class=_Parser
    )

    train = commands.add_parser(
        "train",
        help="train an agent",
        description=f"Train an agent; {OVERRIDES_HELP}.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _task_flags(train)
    _library_flags(train)
    train.add_argument("--max_iterations", type=int, default=None, help="training iterations (library units)")
    train.add_argument("--checkpoint", default=None, help="with --resume: latest, best or a path")
    train.add_argument("--resume", action="store_true", help="continue from --checkpoint / --load_run")
    train.add_argument("--run_name", default=None, help="suffix of the run directory name")
    train.add_argument("--deterministic", action="store_true", help="use deterministic torch algorithms")
    train.add_argument("--video_interval", type=int, default=2000, help="steps between two clips (default 2000)")

    play = commands.add_parser(
        "play",
        help="evaluate a trained agent",
        description=f"Evaluate a trained agent; {OVERRIDES_HELP}.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _task_flags(play)
    _library_flags(play)
    play.add_argument("--checkpoint", default="latest", help="latest (default), best, a path, or a file in --load_run")
    play.add_argument("--num_episodes", type=int, default=10, help="episodes to play (default 10)")
    play.add_argument("--max_steps", type=int, default=None, help="stop after this many vector steps")
    play.add_argument("--stochastic", action="store_true", help="sample actions instead of taking the mean")

    export = commands.add_parser(
        "export",
        help="export a trained policy to ONNX and TorchScript",
        description="Write the deterministic policy of a checkpoint (observation normalisation included) to "
        "exported/policy.onnx and exported/policy.pt in its run directory, and check both against the live policy.",
    )
    _task_flags(export, num_envs_default=8)
    _library_flags(export)
    export.add_argument(
        "--checkpoint", default="latest", help="latest (default), best, a path, or a file in --load_run"
    )
    export.add_argument("--format", default="both", help="onnx, torchscript or both (default)")
    export.add_argument("--validation_steps", type=int, default=16, help="steps of observations to check the files on")

    for kind, what in (("zero", "the zero action"), ("random", "uniformly random actions")):
        agent = commands.add_parser(
            kind,
            help=f"run a task with {what}, no library",
            description=f"Run a task with {what} and report episode returns (a smoke test of the task); "
            "trailing env.KEY=VALUE words override the task's configuration.",
        )
        _task_flags(agent, num_envs_default=4)
        agent.add_argument("--num_episodes", type=int, default=None, help="episodes to run (default 10)")
        agent.add_argument("--max_steps", type=int, default=None, help="vector steps to run at most")

    listing = commands.add_parser("list", help="list tasks and libraries")
    listing.add_argument("what", nargs="?", choices=("tasks", "libraries", "all"), default="all")
    listing.add_argument("--gymnasium", action="store_true", help="also list every registered Gymnasium id")
    return parser


def parse(arguments: Sequence[str]) -> argparse.Namespace:
    """Parse a command line; trailing `key=value` words become `args.overrides`."""
    parser = build_parser()
    args, extras = parser.parse_known_args(arguments)
    args.overrides = [word for word in extras if "=" in word and not word.startswith("-")]
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
    """Run the `rlrun` command line in-process and return its exit code."""
    from rlrun.hermetic import hermetic_call

    arguments = list(sys.argv[1:] if argv is None else argv)
    stderr = sys.stderr
    try:
        with hermetic_call(check_leaks=True if "--check_leaks" in arguments else None, name="rlrun") as call:
            try:
                args = parse(arguments)
            except SystemExit as exit:  # --help
                return exit.code if isinstance(exit.code, int) else 0
            if args.command == "list":
                call.import_modules(("gymnasium", "rlrun.envs", "rich.console", "rich.markup", "rich.table"))
                return _list(args)
            return _run(call, args, arguments)
    except UserError as error:
        print(f"rlrun: error: {error}", file=stderr)
        return 2
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


def _run(call: Any, args: argparse.Namespace, arguments: list[str]) -> int:
    from rlrun import api, progress

    display = None if args.json else progress.for_stream(sys.stderr)
    task = dict(
        task=args.task,
        num_envs=args.num_envs,
        seed=args.seed,
        device=args.device,
        overrides=tuple(args.overrides),
        log_root=args.log_root,
        video=args.video,
        video_length=args.video_length,
        vectorization=args.vectorization,
        argv=("rlrun", *arguments),
    )
    if args.command in api.AGENTS:
        request = api.AgentRequest(**task, num_episodes=args.num_episodes, max_steps=args.max_steps)
        print(_render(api.agent_in(call, request, args.command, display), args.json))
        return 0
    common = dict(
        **task,
        library=args.library,
        algorithm=args.algorithm,
        ml_framework=args.ml_framework,
        load_run=args.load_run,
        experiment=args.experiment,
        verbose=args.verbose,
    )
    if args.command == "export":
        request = api.ExportRequest(
            **common,
            checkpoint=args.checkpoint,
            format=args.format,
            validation_steps=args.validation_steps,
        )
        print(_render(api.export_in(call, request), args.json))
        return 0
    if args.command == "train":
        request = api.TrainRequest(
            **common,
            max_iterations=args.max_iterations,
            checkpoint=args.checkpoint,
            resume=args.resume,
            run_name=args.run_name,
            deterministic=args.deterministic,
            video_interval=args.video_interval,
        )
        result: Any = api.train_in(call, request, display)
    else:
        request = api.PlayRequest(
            **common,
            checkpoint=args.checkpoint,
            num_episodes=args.num_episodes,
            max_steps=args.max_steps,
            deterministic=not args.stochastic,
        )
        result = api.play_in(call, request, display)
    print(_render(result, args.json))
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
            f"{returns}\nrun: {_relative(result.run_dir)}\ncheckpoint: {_relative(result.checkpoint)}"
        )
    if isinstance(result, ExportResult):
        lines = [f"exported the {result.library} policy of {_relative(result.checkpoint)}:"]
        for path in result.files:
            error = result.max_abs_error.get(path.name)
            check = "not checked (install onnxruntime)" if error is None else f"max abs difference {error:.2e}"
            lines.append(f"  {_relative(path)}  ({check} from the live policy)")
        return "\n".join(lines)
    played = (
        f"played {len(result.returns)} episodes of {result.task} with {result.library}: "
        if result.checkpoint is not None
        else f"ran {len(result.returns)} episodes of {result.task} with the {result.library} agent: "
    )
    return (
        f"{played}mean return {number(result.mean_return)} ± {number(result.std_return)}, "
        f"mean length {number(result.mean_length)}"
        + (f"\ncheckpoint: {_relative(result.checkpoint)}" if result.checkpoint is not None else "")
    )


def _relative(path: Path | None) -> str:
    if path is None:
        return "-"
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _as_json(result: Any) -> str:
    import dataclasses

    return json.dumps(
        {key: str(value) if isinstance(value, Path) else value for key, value in dataclasses.asdict(result).items()},
        indent=2,
    )


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
            table.add_row(
                library.name,
                f"yes ({version})" if library.installed else "no",
                ", ".join(library.action_spaces),
                "" if library.installed else escape(library.install_hint),
                library.summary,
            )
        console.print(table)
    if args.what in ("tasks", "all"):
        import gymnasium

        from rlrun.envs import NATIVE_TASKS

        table = Table(title="tasks (rlrun's batched torch tasks; any Gymnasium id works too)", title_justify="left")
        for column in ("task", "default library", "time limit"):
            table.add_column(column)
        for task in NATIVE_TASKS.values():
            table.add_row(task.id, task.default_library, str(task.max_episode_steps))
        if args.gymnasium:
            for task_id, spec in sorted(gymnasium.registry.items()):
                if task_id not in NATIVE_TASKS:
                    table.add_row(task_id, "(by action space)", str(spec.max_episode_steps or "-"))
        console.print(table)
        if not args.gymnasium:
            console.print(
                f"and {len(gymnasium.registry) - len(NATIVE_TASKS)} Gymnasium ids (rlrun list tasks --gymnasium)"
            )
    return 0
