"""`rlrun.tune`: an Optuna study whose trials are hermetic trainings through `rlrun.api`, on the bench's executors.

- `request`: `TuneRequest`, `TuneResult`, the YAML spec file;
- `planning`: the whole study checked (search space included) before anything runs;
- `space`: the search space's distributions and the trials to enqueue;
- `storage`: the study's database, its lock, which trials count, dead trials failed, samplers and pruners;
- `worker`: the ask, train, tell loop every executor slot runs;
- `run`: the study opened, its slots run, `trials.csv`, `best.yaml` and the report written.
"""

from rlrun.tuning.request import SPEC_KEYS, TuneRequest, TuneResult, load_spec
from rlrun.tuning.run import tune, tune_in_call

__all__ = ["SPEC_KEYS", "TuneRequest", "TuneResult", "load_spec", "tune", "tune_in_call"]
