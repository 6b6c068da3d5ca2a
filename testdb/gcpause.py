"""The cyclic GC paused while many small, acyclic records are built or unpickled.

Scans, the index and the audit's memos make 10^5-10^6 objects that are in no reference cycle;
each collection would walk all that survived so far, which costs more than the work itself.
Reference counting still frees them. One helper for every such place (the index, the
inventory scan, the graph cache, the audit's judgement)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused(*, freeze: bool = False) -> Iterator[None]:
    """Pause the cyclic GC (when it was on, it is on again after). ``freeze``: move what
    survived into the permanent generation, for records that live until the command exits:
    else the first collection after would walk them all once more."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if freeze:
                gc.freeze()
            gc.enable()
