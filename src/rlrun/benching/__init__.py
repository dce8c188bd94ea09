"""`rlrun.bench`: tasks x runs x seeds, each cell a hermetic training through `rlrun.api`, one result row each.

- `request`: `BenchRequest` (made of `BenchRun`s), `BenchResult`, the YAML spec file;
- `planning`: the whole bench checked and every cell resolved before anything runs;
- `cell`: one cell, what every executor runs (`run_cell`), and its row;
- `run`: the cells on an executor, `results.jsonl` as they finish, the report at the end.
"""

from rlrun.benching.request import RUN_KEYS, SPEC_KEYS, BenchRequest, BenchResult, BenchRun, load_spec
from rlrun.benching.run import bench, bench_in_call

__all__ = ["RUN_KEYS", "SPEC_KEYS", "BenchRequest", "BenchResult", "BenchRun", "bench", "bench_in_call", "load_spec"]
