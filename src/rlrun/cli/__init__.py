"""The `rlrun` command line: `main(argv) -> int`, hermetic like every other call.

One module per role: `parser` (the argparse front, generated from the request dataclasses), `commands`
(what each command does with its parsed arguments), `output` (results as text or JSON, the lines that say
where a run went); this module holds the entry points and the exit codes.

Exit codes: 0 success, 2 usage or user error (one line on stderr, no traceback), 1 runtime
failure (traceback), 130 interrupted. `SystemExit` never escapes `main`, so it can be called
in-process (`rlrun.main([...])`) as safely as the API.

Flags follow Isaac Lab's names (`--rl_library` is an alias of `--library`); trailing
`agent.<key>=<value>` and `env.<key>=<value>` words override the configuration.
"""

from __future__ import annotations

import contextvars
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from rlrun.cli import commands
from rlrun.cli.output import one_line, resume_hint
from rlrun.cli.parser import build_parser, parse
from rlrun.errors import Failure, LeakDetected, TrainingStopped, UserError

__all__ = ["build_parser", "console", "main", "parse"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `rlrun` command line in-process and return its exit code.

    Warnings raised during the call are held back and shown after it, except when the call ends in a
    user error: then the one error line is all that is printed. A SIGTERM that stopped the command reaches the
    caller's own disposition once everything is restored (by default the process ends with it, as a script
    running `rlrun` as a program would); the console command exits 143 instead.
    """
    import signal

    code = _exit_code(argv)
    if code == TrainingStopped.EXIT_CODES["terminated"] and not _CONSOLE.get():
        signal.raise_signal(signal.SIGTERM)
    return code


_CONSOLE: contextvars.ContextVar[bool] = contextvars.ContextVar("rlrun_console", default=False)
"""Set by `console`: the process is rlrun's own, and a SIGTERM is its exit status 143."""


def _exit_code(argv: Sequence[str] | None) -> int:
    import warnings

    from rlrun.signals import inner

    arguments = list(sys.argv[1:] if argv is None else argv)
    stderr = sys.stderr
    code = 130
    try:
        with warnings.catch_warnings(record=True) as caught, inner():  # `main` delivers a SIGTERM itself
            code = _main(arguments, stderr)
        if code != 2:
            for held in caught:
                warnings.showwarning(held.message, held.category, held.filename, held.lineno, held.file, held.line)
    except KeyboardInterrupt:
        # A further Ctrl-C while the error line is printed or the warnings are replayed: the exit code stands.
        return code if code in (130, 143) else 130
    return code


def console() -> NoReturn:
    """The `rlrun` console command and `python -m rlrun`: `main()`, then exit with its code.

    Once the code is decided, SIGINT is ignored for the few steps left to the process: a Ctrl-C that comes
    while it exits (after the run was already stopped and reported) would otherwise escape as an uncaught
    `KeyboardInterrupt`, which Python turns into death by SIGINT instead of the exit code. `main` itself
    leaves every signal handler as it found it (a caller in the same process keeps its own)."""
    import signal

    code = 130
    _CONSOLE.set(True)
    try:
        code = main()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


def _interrupt_latch(arguments: list[str]) -> Any:
    """For the commands that train, `rlrun.signals.LATCH` around the whole call, so that a Ctrl-C that
    Python drops in a finalizer while the command plans or imports is not lost; the others import nothing."""
    import contextlib

    if not arguments or arguments[0] not in ("train", "bench", "tune"):
        return contextlib.nullcontext()
    from rlrun.signals import LATCH

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
                return commands.report(call, args)
            if args.command == "bench":
                return commands.bench(call, args, arguments)
            if args.command == "tune":
                return commands.tune(call, args)
            if args.command == "list":
                call.import_modules(("gymnasium", "rlrun.envs", "rich.console", "rich.markup", "rich.table"))
                from rlrun.envs.tasks import load_task_plugins

                load_task_plugins(call.import_modules)
                return commands.listing(args)
            return commands.run_request(call, args, arguments)
    except UserError as error:
        print(f"rlrun: error: {one_line(error)}", file=stderr)
        return 2
    except TrainingStopped as stop:
        print(f"rlrun: {stop.reason}{resume_hint(stop)}", file=stderr)
        return stop.exit_code
    except KeyboardInterrupt:
        print("rlrun: interrupted", file=stderr)
        return 130
    except Failure as error:
        print(f"rlrun: error: {one_line(error)}", file=stderr)
        return 1
    except LeakDetected as error:
        print(f"rlrun: the call left global state changed:\n{error}", file=stderr)
        return 1
    except SystemExit as exit:  # a library called sys.exit
        code = exit.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except Exception:
        traceback.print_exc(file=stderr)
        return 1
