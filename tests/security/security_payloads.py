"""The payloads the corpus plants, each of which creates a marker file if it ever runs.

- `expression(marker)`: a Python expression that creates the marker, for the strings a library `eval`s or pastes
  into source it `exec`s (SKRL's schedulers, preprocessors, model `output`, network `input` and `name`). The path
  is written as hex, so it survives YAML, OmegaConf dotlists and SKRL's token substitutions unchanged.
- `pickled(marker)`: a pickle whose loading creates the marker (a folder, `os.makedirs` through `__reduce__`):
  what a checkpoint or an SB3 zip may hold.
- `hubconf(marker)`: the `hubconf.py` that `torch.hub.load(..., source="local")` imports from a shared folder.

Also the editors that put them in place: YAML files, run.json, torch checkpoints, SB3 zips, SQLite studies.
"""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml


def expression(marker: Path) -> str:
    """A Python expression that creates `marker` and evaluates to None."""
    return f"__import__('pathlib').Path(bytes.fromhex('{bytes(marker).hex()}').decode()).touch()"


class _Plant:
    """Pickles as a call of `os.makedirs` on the marker (one global, `os makedirs`, in any pickle protocol):
    unpickling it creates the marker as a folder."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return os.makedirs, (str(self.marker),)


def pickled(marker: Path) -> bytes:
    """A pickle that creates `marker` when loaded."""
    return pickle.dumps(_Plant(marker), protocol=2)


def hubconf(marker: Path) -> str:
    """A torch hub `hubconf.py` that creates `marker` when imported; its entry point returns a writer that does
    nothing, so that a training that takes it as its logger goes on."""
    return (
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).touch()\n"
        "dependencies = []\n\n\n"
        "class _Writer:\n"
        "    def __getattr__(self, name):\n"
        "        return lambda *args, **kwargs: None\n\n\n"
        "def writer(*args, **kwargs):\n"
        "    return _Writer()\n"
    )


# --- YAML and JSON files ------------------------------------------------------------------------------------


def read_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def write_yaml(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def edit_yaml(path: Path, change: Callable[[Any], Any]) -> Path:
    """Apply `change` to the YAML document at `path` (in place, or its return value if not None)."""
    data = read_yaml(path)
    changed = change(data)
    return write_yaml(path, data if changed is None else changed)


def edit_manifest(
    run: Path, change: Callable[[dict[str, Any]], None], *, text: Callable[[str], str] | None = None
) -> None:
    """Apply `change` to `run`'s run.json, then `text` to the JSON text written (for what JSON cannot say)."""
    manifest = json.loads((run / "run.json").read_text(encoding="utf-8"))
    change(manifest)
    written = json.dumps(manifest, indent=2, sort_keys=True)
    (run / "run.json").write_text(text(written) if text else written, encoding="utf-8")


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """ "Billion laughs": `width ** levels` strings from a file of a few hundred bytes."""
    lines = ["a0: &a0 [lol]"]
    for level in range(1, levels + 1):
        refs = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines) + "\n"


def deep_yaml(depth: int = 20_000) -> str:
    """A YAML document nested `depth` flow lists deep."""
    return "deep: " + "[" * depth + "]" * depth + "\n"


def deep_json(depth: int = 200_000) -> str:
    """A JSON object whose value nests `depth` arrays deep."""
    return '{"library": ' + "[" * depth + "]" * depth + "}"


# --- checkpoints ----------------------------------------------------------------------------------------------


def torch_with_payload(source: Path, target: Path, marker: Path) -> Path:
    """`source`'s torch checkpoint with one more entry whose loading creates `marker` (`source` is a genuine
    checkpoint the session trained, so it is loaded whole)."""
    import torch

    state = torch.load(source, map_location="cpu", weights_only=False)
    state["rlrun_corpus_payload"] = _Plant(marker)
    torch.save(state, target)  # torch's own pickle protocol (2), which its weights-only loader reads
    return target


def pickle_with_payload(source: Path, target: Path, marker: Path) -> Path:
    """`source`'s SKRL JAX checkpoint (a pickled dict of msgpack blobs) with one more entry that creates `marker`."""

    class _Modules(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            raise pickle.UnpicklingError(f"{module}.{name}")

    modules = _Modules(io.BytesIO(source.read_bytes())).load()
    modules["rlrun_corpus_payload"] = _Plant(marker)
    target.write_bytes(pickle.dumps(modules, protocol=4))
    return target


def sb3_with_payload(source: Path, target: Path, marker: Path, key: str) -> Path:
    """`source`'s SB3 model zip whose `data` entry holds, at `key`, a cloudpickled payload that creates `marker`
    (the JSON keys SB3 reads without unpickling, such as `policy_class.__module__`, left as they were)."""
    with zipfile.ZipFile(source) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(entries["data"])
    serialized = base64.b64encode(pickled(marker)).decode()
    entry = data.get(key)
    if isinstance(entry, dict):
        entry[":serialized:"] = serialized
    else:
        data[key] = {":type:": "<class 'function'>", ":serialized:": serialized}
    entries["data"] = json.dumps(data, indent=4).encode()
    with zipfile.ZipFile(target, "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return target
