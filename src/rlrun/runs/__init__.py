"""Runs on disk: atomic writes, run directories and run.json, checkpoint lookup, a training's record.

One module per role, each importing only those before it:

- `atomic`: atomic file writes, alone or in batches that must land in order, and sweeping temporaries;
- `manifest`: claiming run directories, checking names and paths, reading and writing run.json;
- `lookup`: finding runs and checkpoints (`--checkpoint latest|best|<file>`, `--load_run`);
- `record`: what a training run writes as it goes (`RunRecord`), library versions, results as JSON.

Callers use the names below through the package (`from rlrun import runs; runs.resolve_checkpoint(...)`);
to replace one in a test, patch it in the module that defines it, where its callers look it up.
"""

from rlrun.runs.atomic import (
    TEMPORARY_SUFFIX,
    atomic_path,
    atomic_paths,
    atomic_save,
    atomic_write_text,
    sweep_temporaries,
)
from rlrun.runs.lookup import SELECTORS, checkpoint_entry, find_runs, resolve_checkpoint
from rlrun.runs.manifest import (
    MANIFEST,
    MANIFEST_VERSION,
    MAX_NAME,
    MAX_PATH_PART,
    MAX_SAME_SECOND,
    TIMESTAMP_FORMAT,
    Run,
    check_log_root,
    check_name,
    check_path,
    corrupt_run,
    experiment_name,
    manifest_problem,
    manifest_text,
    new_run_dir,
    read_manifest,
    read_run,
    utc_now,
    write_manifest,
)
from rlrun.runs.record import RunRecord, jsonable, versions

__all__ = [
    "MANIFEST",
    "MANIFEST_VERSION",
    "MAX_NAME",
    "MAX_PATH_PART",
    "MAX_SAME_SECOND",
    "SELECTORS",
    "TEMPORARY_SUFFIX",
    "TIMESTAMP_FORMAT",
    "Run",
    "RunRecord",
    "atomic_path",
    "atomic_paths",
    "atomic_save",
    "atomic_write_text",
    "check_log_root",
    "check_name",
    "check_path",
    "checkpoint_entry",
    "corrupt_run",
    "experiment_name",
    "find_runs",
    "jsonable",
    "manifest_problem",
    "manifest_text",
    "new_run_dir",
    "read_manifest",
    "read_run",
    "resolve_checkpoint",
    "sweep_temporaries",
    "utc_now",
    "versions",
    "write_manifest",
]
