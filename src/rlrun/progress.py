"""Progress reporting: the hook a call drives from its environment steps, and the CLI's displays.

A call reports progress from rlrun's own episode statistics, whatever the library, so every
library shows the same line: iteration, env steps/s, mean return, time left. The displays write
to stderr and never start a thread (rich's live display is refreshed by hand, at most 10 times a
second), so the hermetic guarantee holds for them too.

Labels and summaries may quote names from files (a task, a bench run's label, an error): they are shown with
their control characters escaped (`_shown`) and, in rich's displays, with rich's markup escaped too.
"""

from __future__ import annotations

import sys
import time
import unicodedata
from typing import Any, Protocol, TextIO


def _shown(text: str) -> str:
    """`text` with control, format and separator characters written as escapes (ESC as `\\x1b`), as
    `rlrun.trust.text.terminal` does; repeated here because this module imports nothing of rlrun."""
    if text.isprintable():
        return text

    def escaped(char: str) -> str:
        if unicodedata.category(char) not in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            return char
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as `os.fsdecode` keeps it
            code -= 0xDC00
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"

    return "".join(map(escaped, text))


class Progress(Protocol):
    """What a call tells a progress display."""

    def start(self, label: str, total_env_steps: int | None, env_steps_per_iteration: int | None) -> None: ...

    def update(self, env_steps: int, mean_return: float | None) -> None: ...

    def stop(self) -> None: ...


class _Meter:
    """Rates, iteration and time left from env-step counts, throttled to `interval` seconds."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.label = ""
        self.total: int | None = None
        self.per_iteration: int | None = None
        self.started = self.last = 0.0
        self.warm: tuple[float, int] | None = None
        """When the first iteration ended, and its env steps: rates and time left are measured from there, so
        that a first iteration that compiles (JAX) or warms up is not taken for the pace of the run."""

    def begin(self, label: str, total: int | None, per_iteration: int | None) -> None:
        self.label, self.total, self.per_iteration = _shown(label), total, per_iteration
        self.started = time.monotonic()
        self.last = 0.0
        self.warm = None

    def due(self, force: bool = False) -> bool:
        now = time.monotonic()
        if force or now - self.last >= self.interval:
            self.last = now
            return True
        return False

    def fields(self, env_steps: int, mean_return: float | None) -> dict[str, str]:
        now = time.monotonic()
        if self.warm is None and self.per_iteration and env_steps >= self.per_iteration:
            self.warm = (now, env_steps)
        since, base = self.warm if self.warm is not None and env_steps > self.warm[1] else (self.started, 0)
        rate = (env_steps - base) / max(now - since, 1e-9)
        iteration = f"{env_steps // self.per_iteration}" if self.per_iteration else "-"
        if self.per_iteration and self.total:
            iteration += f"/{self.total // self.per_iteration}"
        warming = bool(self.per_iteration) and env_steps <= (self.per_iteration or 0)
        left = (self.total - env_steps) / rate if self.total and rate > 0 and not warming else None
        return {
            "iteration": iteration,
            "rate": f"{rate:,.0f} steps/s",
            "return": "-" if mean_return is None else f"{mean_return:.1f}",
            "left": ("warming up" if warming else "-") if left is None else _duration(max(left, 0.0)),
            "done": f"{min(env_steps / self.total, 1.0):.0%}" if self.total else "",
        }


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


class RichProgress:
    """One compact live line on a terminal (rich), refreshed by hand: no refresh thread."""

    def __init__(self, stream: TextIO | None = None, interval: float = 0.1) -> None:
        self.stream = stream or sys.stderr
        self.meter = _Meter(interval)
        self._live: Any = None
        self._task: Any = None

    def start(self, label: str, total_env_steps: int | None, env_steps_per_iteration: int | None) -> None:
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import BarColumn, Progress, TextColumn

        self.meter.begin(label, total_env_steps, env_steps_per_iteration)
        self._live = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=24),
            TextColumn("it {task.fields[iteration]}  {task.fields[rate]}  return {task.fields[return]}"),
            TextColumn("left {task.fields[left]}"),
            console=Console(file=self.stream),
            auto_refresh=False,
            transient=False,
        )
        self._live.start()
        self._task = self._live.add_task(escape(self.meter.label), total=total_env_steps, **self.meter.fields(0, None))

    def update(self, env_steps: int, mean_return: float | None, force: bool = False) -> None:
        if self._live is None or not self.meter.due(force):
            return
        self._live.update(self._task, completed=env_steps, **self.meter.fields(env_steps, mean_return))
        self._live.refresh()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


class LineProgress:
    """Plain lines for logs and pipes: one every `interval` seconds."""

    def __init__(self, stream: TextIO | None = None, interval: float = 10.0) -> None:
        self.stream = stream or sys.stderr
        self.meter = _Meter(interval)
        self._steps = 0
        self._return: float | None = None

    def start(self, label: str, total_env_steps: int | None, env_steps_per_iteration: int | None) -> None:
        self.meter.begin(label, total_env_steps, env_steps_per_iteration)
        self.meter.last = time.monotonic()

    def update(self, env_steps: int, mean_return: float | None, force: bool = False) -> None:
        self._steps, self._return = env_steps, mean_return
        if self.meter.due(force):
            fields = self.meter.fields(env_steps, mean_return)
            print(
                f"{self.meter.label}: {fields['done']} it {fields['iteration']}  {fields['rate']}  "
                f"return {fields['return']}  left {fields['left']}",
                file=self.stream,
                flush=True,
            )

    def stop(self) -> None:
        return


def for_stream(stream: TextIO | None = None) -> Progress:
    """The live display on a terminal, plain periodic lines otherwise."""
    stream = stream or sys.stderr
    return RichProgress(stream) if stream.isatty() else LineProgress(stream)


class StepLines:
    """A job without iterations to count (an export, a report) told step by step: one line on the stream as each
    step starts, with the seconds since the job began, so a long step is never silent."""

    def __init__(self, job: str, stream: TextIO | None = None) -> None:
        self.job = job
        self.stream = stream or sys.stderr
        self.begun = time.monotonic()

    def __call__(self, text: str) -> None:
        elapsed = time.monotonic() - self.begun
        print(f"{self.job}: {_shown(text)}  [{elapsed:.1f} s]", file=self.stream, flush=True)


class BenchBoard:
    """A bench's cells and their states: queued, running (iteration, steps/s, return), done, failed, with the
    bench's ETA. First one line that says how many cells run where (before an executor's start, which may take
    seconds); then, on a terminal, a rich table refreshed by hand (no thread) at events and at most 4 times a
    second; elsewhere one plain line per cell that starts and per cell that ends."""

    def __init__(
        self,
        cells: list[tuple[str, str]],
        stream: TextIO | None = None,
        live: bool | None = None,
        intro: str | None = None,
    ) -> None:
        """`cells`: (key, label) of every cell to run, in order; `intro`: what the first line adds to the count
        (`on ray x2, results to out/results.jsonl`)."""
        self.stream = stream or sys.stderr
        self.labels = {key: _shown(label) for key, label in cells}
        self.state = dict.fromkeys(self.labels, "queued")
        self.detail = dict.fromkeys(self.labels, "")
        self.started: dict[str, float] = {}
        self.durations: list[float] = []
        self.begun = time.monotonic()
        self.live = self.stream.isatty() if live is None else live
        self._live: Any = None
        self._last = 0.0
        count = f"{len(cells)} cell{'s' * (len(cells) != 1)}"
        print(f"bench: {count}{f' {_shown(intro)}' if intro else ''}", file=self.stream, flush=True)

    def start(self, key: str) -> None:
        self.state[key] = "running"
        self.started[key] = time.monotonic()
        if not self.live:
            print(f"[{self._done()}/{len(self.state)}] started {self.labels[key]}", file=self.stream, flush=True)
        self._draw(force=True)

    def iteration(self, key: str, iteration: int, steps_per_s: float, mean_return: float | None) -> None:
        shown = "-" if mean_return is None else f"{mean_return:.1f}"
        self.detail[key] = f"it {iteration}  {steps_per_s:,.0f} steps/s  return {shown}"
        self._draw()

    def finish(self, key: str, status: str, summary: str) -> None:
        self.state[key] = "done" if status == "completed" else status
        self.detail[key] = _shown(summary)
        if key in self.started:
            self.durations.append(time.monotonic() - self.started[key])
        if not self.live:
            print(
                f"[{self._done()}/{len(self.state)}] {_shown(self.state[key])} {self.labels[key]}: {self.detail[key]}  "
                f"eta {self.eta()}",
                file=self.stream,
                flush=True,
            )
        self._draw(force=True)

    def _done(self) -> int:
        return sum(state in ("done", "failed") for state in self.state.values())

    def eta(self) -> str:
        left = sum(state in ("queued", "running", "retrying") for state in self.state.values())
        running = max(1, sum(state == "running" for state in self.state.values()))
        if not self.durations:
            return "-"
        return _duration(left * (sum(self.durations) / len(self.durations)) / running)

    def _draw(self, force: bool = False) -> None:
        if not self.live:
            return
        now = time.monotonic()
        if not force and now - self._last < 0.25:
            return
        self._last = now
        from rich.console import Console
        from rich.live import Live
        from rich.markup import escape
        from rich.table import Table

        table = Table(title=f"bench: {len(self.state)} cells, eta {self.eta()}", title_justify="left")
        for column in ("cell", "state", "progress"):
            table.add_column(column)
        for key, label in self.labels.items():
            table.add_row(escape(label), escape(_shown(self.state[key])), escape(self.detail[key]))
        if self._live is None:
            self._live = Live(table, console=Console(file=self.stream), auto_refresh=False, transient=False)
            self._live.start()
        else:
            self._live.update(table)
        self._live.refresh()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
