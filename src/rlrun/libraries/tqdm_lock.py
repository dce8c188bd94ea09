"""Importing this module creates tqdm's process-wide write lock, once per process (an import effect).

tqdm creates a `multiprocessing.RLock` the first time any bar is made (even a disabled one, as SKRL's
trainers make) and keeps it for the life of the process. Under the `spawn` or `forkserver` start method
that lock's semaphore is registered with multiprocessing's resource tracker, which starts a tracker process
that lives as long as the caller's. Made inside a hermetic call, the lock would leave that process behind
as the call's; adapters whose library makes tqdm bars list this module in their `IMPORTS`, so that the lock
is made by the import, before the call captures.
"""

from __future__ import annotations

import tqdm

tqdm.tqdm.get_lock()
