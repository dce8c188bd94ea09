"""The adapter surface every library module shares: checked checkpoints refuse damaged files the same way."""

from __future__ import annotations

import random

import pytest

from rlrun.errors import CorruptCheckpoint
from rlrun.libraries import LIBRARIES, get_library, load_adapter


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_damaged_files_are_refused_as_corrupt_checkpoints_whatever_the_reader_raises(library, tmp_path):
    """Unpicklers raise anything on random bytes (CI once met an `IndexError`): each must become one user error."""
    check = load_adapter(get_library(library)).check_checkpoint
    generator = random.Random(library)
    damaged = [b"", b"PK\x03\x04", b"\x80\x02", *(generator.randbytes(generator.randint(1, 4096)) for _ in range(200))]
    for index, data in enumerate(damaged):
        path = tmp_path / f"damaged_{index}.pt"
        path.write_bytes(data)
        with pytest.raises(CorruptCheckpoint, match=r"cannot be read as|is not"):
            check(path)
