"""SKRL (JAX, CPU) row of `adapter_overhead.py`: SKRL's own `Runner` alone against `rlrun.train`, same env and config.

Both sides compile their agent's JAX functions anew (SKRL jits per agent), so the timings include that: a fixed
cost of several seconds a side, the reason this row runs fewer iterations than the PyTorch one.
"""

from __future__ import annotations

from functools import partial

import overhead_skrl

FRAMEWORK = "jax"
NUM_ENVS, ITERATIONS = overhead_skrl.NUM_ENVS, 5
LABEL = overhead_skrl.LABEL.replace("(torch)", f"({FRAMEWORK})")

direct = partial(overhead_skrl.direct, framework=FRAMEWORK)
through_rlrun = partial(overhead_skrl.through_rlrun, framework=FRAMEWORK)
