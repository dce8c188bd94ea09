"""Compiled CPU steps for native tasks: a task's `dynamics`, compiled once per machine, loaded per env.

On a CPU an eager torch step of a small physics model is dozens of tensor ops, each a dispatch and a pass
over memory; NumPy dispatches faster, so at a few thousand envs the eager step is slower than Gymnasium's
own NumPy vector envs. The same step compiled by AOTInductor is one fused C++ loop (no fast-math, no
fused multiply-add: `-ffp-contract=off`), so the dynamics round as the eager ones do, to the ulp of sin
and cos.

How a kernel comes to be, and what each part costs the caller's process:
- **Build (once per machine and variant):** a child process (`python -m rlrun.envs.kernels build
  module:Class DEST OPTIONS`) builds an example env with the task's `kernel_options()` (the constructor
  arguments that change what the kernel takes: the cart-pole's `continuous`), exports the task's `dynamics`
  (`TaskStep`) with `num_envs` as a dynamic dimension, compiles it with
  AOTInductor, checks it against the eager function at two other batch sizes and keeps the shared library.
  A C++ compiler runs, hence once per machine. The caller's process imports neither dynamo's compiler nor
  inductor; inductor's caches and temporary files go to a folder beside the cache that the build removes.
- **Cache:** `$RLRUN_CACHE_DIR/kernels` (default `$XDG_CACHE_HOME/rlrun`, else `~/.cache/rlrun`), one
  folder per task class and key. The key hashes the source of the task's classes (its `dynamics` and what
  feeds it: `kernel_actions`, `kernel_constants`), the kernel options, `TaskStep`'s source, torch's and
  Python's versions, the machine and its CPU flags (the library is compiled for this CPU's vector
  instructions). A build that fails leaves `FAILED.txt` with the reason: later `auto` envs step eagerly
  without trying again; delete the file to retry.
- **Load (every env):** `torch._C._aoti.AOTIModelContainerRunnerCpu`, cheap. It starts no thread
  and writes no file. Loading a shared library cannot be undone in a process: like an import, it stays
  mapped (once per library, however many envs load it).
- **First step (every env):** one block the size of the step's outputs is allocated and freed, which raises
  glibc's mmap threshold above them (`reuse_freed_memory`).

A task opts in with three members (see `BatchedVectorEnv`): `dynamics(components, actions, constants)`
(pure torch, returns observation, reward, termination and the next state),
`kernel_actions(actions)` and `kernel_constants()`, and a fourth where its constructor changes what the
kernel takes: `kernel_options()`. A task whose actions can be refused may leave their check to the kernel:
`refused_actions(actions)` (pure torch, a 0-d bool) and `check_actions(actions)` (raises, on that path only).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from torch._C._aoti import AOTIModelContainerRunnerCpu

    from rlrun.envs.batched import BatchedVectorEnv

KERNEL_MODES = ("auto", "compiled", "eager")
"""`kernel=` of a native task: `auto` steps compiled on the CPU from `AUTO_ENVS` envs on (building the
kernel on first use) and eagerly below, `compiled` always (on the CPU), `eager` never."""

AUTO_ENVS = 1024
"""From this many envs on, `auto` steps compiled. Below it a step is cheap either way and a short call
should not wait for a compiler. The choice depends on the request only, never on what the cache holds:
compiled and eager steps agree to about 1e-11 in the float64 state, not bit for bit, so a seeded run
must not change with the cache's contents."""

MAX_ENVS = 2**24
"""The largest `num_envs` a kernel is compiled for (the dynamic dimension's bound)."""

CACHE_VARIABLE = "RLRUN_CACHE_DIR"
FAILED = "FAILED.txt"
LIBRARY = "kernel.so"
FORMAT = 3
"""Bumped when the build changes in a way the key does not see."""


MMAP_THRESHOLD_MAX = 32 * 2**20
"""The largest freed block to which glibc's malloc raises its mmap threshold (`DEFAULT_MMAP_THRESHOLD_MAX`, 64-bit)."""


def reuse_freed_memory(outputs: list[torch.Tensor]) -> None:
    """Let a compiled step's outputs, step after step, take the memory the previous step's freed.

    A kernel returns its outputs in new tensors (megabytes a step at tens of thousands of envs) and the
    previous step's are freed. glibc's malloc serves a block above its mmap threshold (128 KiB in a new
    process) with a fresh mapping, and gives the heap's top back to the system when more than twice the
    threshold is free there. Freeing a mapped block of up to 32 MiB raises the threshold to that block's size.
    So in a process that had freed nothing as large as a step's outputs, every step would map or regrow its
    memory and fault in fresh pages, and the step's speed would depend on what the process happened to free
    before. One block the size of a step's outputs, allocated and freed here once per env, raises the
    threshold as freeing any tensor of that size does, so every process steps at the same speed
    (docs/benchmarks.md, "Environment throughput"). The threshold is the allocator's own: every large free in
    the process moves it, nothing reads it back, and it stays raised, like the effects of an import. Where it
    is already higher, or under another allocator, the block is an ordinary allocation that changes nothing.
    """
    size = sum(output.untyped_storage().nbytes() for output in outputs)
    torch.empty(min(size, MMAP_THRESHOLD_MAX - 2**16), dtype=torch.uint8)  # freed at once: never written


class Dynamics(Protocol):
    """The type of a task's `dynamics`: `(components, actions, constants) -> (obs, reward, terminated, next)`."""

    def __call__(
        self, components: torch.Tensor, actions: torch.Tensor, constants: torch.Tensor, /
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]: ...


class RefusedActions(Protocol):
    """The type of a task's `refused_actions`: `(actions) -> 0-d bool tensor`, or None for actions never refused."""

    def __call__(self, actions: torch.Tensor, /) -> torch.Tensor | None: ...


class KernelUnavailable(RuntimeError):
    """`kernel="compiled"` was asked for and no kernel could be built or loaded."""


class TaskStep(torch.nn.Module):
    """What a kernel computes: the task's `dynamics(components, actions, constants)`, as a module to export.

    `components` `[state_size, n]` float64 is read only. The outputs, each in new memory:
    - the observation, the reward;
    - terminated, as int32 (the step makes it bool, one cheap pass): inductor stores a bool or uint8 vector
      one element at a time, which would be much of a small task's kernel;
    - the next state: a kernel that wrote `components` in place would copy a temporary back;
    - the observation once more (the step returns the first as `final_obs` and restarts the ended envs in
      the second), from tracing `dynamics` twice: inductor computes the shared expressions once and stores
      the observation twice in the same loop, where a `clone` of the first would be one more pass over memory;
    - the task's `refused_actions`, if it has one.
    The time limit stays in the base's eager code: folded in here (int32 step counters, two more bool
    outputs) it would slow the kernel down.
    """

    def __init__(self, dynamics: Dynamics, refused_actions: RefusedActions | None = None):
        super().__init__()
        self.dynamics = dynamics
        self.refused_actions = refused_actions

    def forward(
        self, components: torch.Tensor, actions: torch.Tensor, constants: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        obs, reward, terminated, state = self.dynamics(components, actions, constants)
        outputs = (obs, reward, terminated.to(torch.int32), state, self.dynamics(components, actions, constants)[0])
        refused = None if self.refused_actions is None else self.refused_actions(actions)
        return outputs if refused is None else (*outputs, refused)


def cache_root() -> Path:
    """`$RLRUN_CACHE_DIR`, else `$XDG_CACHE_HOME/rlrun`, else `~/.cache/rlrun`."""
    configured = os.environ.get(CACHE_VARIABLE)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "rlrun"


def _cpu_flags() -> str:
    """This CPU's model and instruction-set flags (Linux), else what `platform` tells."""
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        wanted = [line for line in lines if line.startswith(("flags", "model name", "Features", "CPU part"))]
        return "\n".join(dict.fromkeys(wanted))
    return platform.processor()


def kernel_folder(task_class: type, options: dict[str, Any] | None = None) -> Path:
    """The cache folder of `task_class`'s kernel for `options` (its `kernel_options()`) on this machine, with
    this torch and this source."""
    parts = (
        str(FORMAT),
        json.dumps(options or {}, sort_keys=True),
        *(
            inspect.getsource(cls)
            for cls in task_class.__mro__
            if cls.__module__.split(".")[0] not in ("builtins", "abc", "typing", "gymnasium")
        ),
        inspect.getsource(TaskStep),
        torch.__version__,
        sys.version,
        platform.machine(),
        _cpu_flags(),
    )
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]
    return cache_root() / "kernels" / f"{task_class.__module__}.{task_class.__qualname__}-{key}"


def load(
    task_class: type[BatchedVectorEnv], mode: str, num_envs: int, options: dict[str, Any] | None = None
) -> AOTIModelContainerRunnerCpu | None:
    """The kernel runner of `task_class` built with `options` for `mode` ("auto" or "compiled"), building it if
    the mode and `num_envs` call for it; None where an `auto` env steps eagerly. `compiled` raises
    `KernelUnavailable`."""
    if mode == "auto" and num_envs < AUTO_ENVS:
        return None
    folder = kernel_folder(task_class, options)
    library, failed = folder / LIBRARY, folder / FAILED
    if not library.is_file():
        if failed.is_file():
            if mode == "compiled":
                raise KernelUnavailable(f"building the kernel failed earlier; see {failed}")
            sys.stderr.write(f"rlrun: no compiled step (building it failed: {failed}); stepping eagerly\n")
            return None
        build(task_class, folder, options)
        if not library.is_file():
            if mode == "compiled":
                raise KernelUnavailable(f"building the kernel failed; see {failed}")
            return None
    return torch._C._aoti.AOTIModelContainerRunnerCpu(str(library), 1)


def build(task_class: type[BatchedVectorEnv], folder: Path, options: dict[str, Any] | None = None) -> None:
    """Compile `task_class`'s kernel for `options` into `folder` in a child process, under a lock, once.

    A failure is written to `folder/FAILED.txt` (the child's last lines); an interrupt leaves nothing.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _locked(folder.parent / f"{folder.name}.lock"):
        if (folder / LIBRARY).is_file() or (folder / FAILED).is_file():
            return  # another process built it while this one waited
        entry = f"{task_class.__module__}:{task_class.__qualname__}"
        sys.stderr.write(
            f"rlrun: compiling {task_class.__qualname__}'s step for this CPU, once (about 20 s); "
            f"cached in {folder.parent} (env.kernel=eager skips this)\n"
        )
        sys.stderr.flush()
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=f"{folder.name}.", dir=folder.parent) as work:
            # Inductor writes some files under the temporary directory whatever its cache says: both go to `work`.
            environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(Path(work) / "inductor"), "TMPDIR": work,
                           "TORCHINDUCTOR_COMPILE_THREADS": "1", "OMP_NUM_THREADS": "1"}  # fmt: skip
            child = subprocess.run(
                [sys.executable, "-m", __name__, "build", entry, str(Path(work) / "out"), json.dumps(options or {})],
                env=environment,
                capture_output=True,
                text=True,
                check=False,
            )
            if child.returncode == 0 and (Path(work) / "out" / LIBRARY).is_file():
                os.replace(Path(work) / "out", folder)
                sys.stderr.write(f"rlrun: compiled in {time.perf_counter() - started:.0f} s: {folder / LIBRARY}\n")
                return
            folder.mkdir(exist_ok=True)
            tail = "\n".join((child.stderr or child.stdout).strip().splitlines()[-20:])
            (folder / FAILED).write_text(f"exit status {child.returncode}\n{tail}\n")
            sys.stderr.write(f"rlrun: could not compile the kernel (see {folder / FAILED}); stepping eagerly\n")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive `flock` on `path`, so that pool workers build a kernel once between them."""
    import fcntl

    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _compile(entry: str, out: Path, options: dict[str, Any]) -> None:
    """In the build child: export the `TaskStep` of the task built with `options` at a dynamic `num_envs` and
    compile it to `out`."""
    import zipfile

    from gymnasium.envs.registration import load_env_creator

    from rlrun.envs.batched import BatchedVectorEnv

    torch.set_num_threads(1)  # a single-threaded loop: a call steps small batches on one thread (`pick_threads`)
    task_class: object = load_env_creator(entry)
    if not isinstance(task_class, type) or not issubclass(task_class, BatchedVectorEnv):
        raise TypeError(f"{entry} is not a BatchedVectorEnv subclass.")
    dynamics = task_class.dynamics
    if dynamics is None:
        raise TypeError(f"{entry} defines no dynamics to compile.")
    example = task_class(num_envs=64, kernel="eager", **options)
    example.reset(seed=0)
    actions = torch.as_tensor(example.action_space.sample(), device=example.device)
    inputs = (
        example.components,
        example.kernel_actions(actions.reshape(example._action_shape)),
        example.kernel_constants(),
    )
    envs = torch.export.Dim("num_envs", min=2, max=MAX_ENVS)
    dynamic = ({1: envs}, {0: envs}, None)
    step = TaskStep(dynamics, task_class.refused_actions)
    program = torch.export.export(step, inputs, dynamic_shapes=dynamic)
    package = torch._inductor.aoti_compile_and_package(program, package_path=str(out.parent / "kernel.pt2"))
    with zipfile.ZipFile(package) as archive:
        libraries = [name for name in archive.namelist() if name.endswith(".so")]
        if len(libraries) != 1:
            raise RuntimeError(f"expected one shared library in {package}, found {libraries}")
        out.mkdir(parents=True)
        (out / LIBRARY).write_bytes(archive.read(libraries[0]))
    _check(task_class, dynamics, out / LIBRARY, options)
    (out / "build.txt").write_text(f"{entry} {json.dumps(options)}\ntorch {torch.__version__}\n")


def _check(task_class: type[BatchedVectorEnv], dynamics: Dynamics, library: Path, options: dict[str, Any]) -> None:
    """Refuse a kernel that does not step like the eager `dynamics` at other batch sizes than the example's.

    Inductor may specialize the dynamic dimension without a word (a kernel built at 64 envs then steps 64
    of 4,096), so every build is run at 3 and 1,000 envs against the eager function before it is cached. This
    runs in the build's child: a kernel that writes out of bounds takes the child down, never the caller.
    """
    runner = torch._C._aoti.AOTIModelContainerRunnerCpu(str(library), 1)
    for num_envs in (3, 1000):
        env = task_class(num_envs=num_envs, kernel="eager", **options)
        env.reset(seed=num_envs)
        for _ in range(5):
            actions = torch.as_tensor(env.action_space.sample()).reshape(env._action_shape)
            inputs = (env.kernel_actions(actions), env.kernel_constants())
            state = env.components.clone()
            expected = dynamics(env.components, *inputs)
            got = runner.run([state, *inputs])
            got[2] = got[2].bool()  # TaskStep's int32 flags
            tolerances = {"observation": 1e-6, "reward": 1e-6, "terminated": 0, "next state": 1e-12}
            for (name, atol), want, have in zip(tolerances.items(), expected, got[:4], strict=True):
                if want.shape != have.shape or want.dtype != have.dtype:
                    raise RuntimeError(
                        f"the kernel's {name} is {have.dtype} {tuple(have.shape)}, not {want.dtype} {tuple(want.shape)}"
                    )
                torch.testing.assert_close(have, want, rtol=0, atol=atol, msg=f"the kernel's {name} differs")
            if not torch.equal(state, env.components) or got[3].data_ptr() == state.data_ptr():
                raise RuntimeError("the kernel wrote its input state; dynamics must return the next state")
            if not torch.equal(got[4], got[0]) or got[4].data_ptr() == got[0].data_ptr():
                raise RuntimeError("the kernel's second observation is not a copy of its first")
            if len(got) > 5 and got[5].item():
                raise RuntimeError("the kernel's refused_actions refused actions from the action space")
            env.components.copy_(expected[3])


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "build":
        sys.exit(f"usage: python -m {__name__} build module:Class OUT OPTIONS_JSON")
    _compile(sys.argv[2], Path(sys.argv[3]), json.loads(sys.argv[4]))
