"""The security corpus's session fixture: the genuine runs its cases copy and tamper with, trained once."""

from __future__ import annotations

import pytest
from security_harness import GenuineRuns, warm_up


@pytest.fixture(scope="session")
def genuine(tmp_path_factory) -> GenuineRuns:
    """One tiny genuine run per corpus library, trained on first use; everything a call imports, imported."""
    warm_up()
    return GenuineRuns(tmp_path_factory.mktemp("security_genuine"))
