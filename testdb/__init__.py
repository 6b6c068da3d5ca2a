"""The test-list world: grammar, test-db YAML, QA lists, waives, stages, schedule, inventory."""

from __future__ import annotations

__version__ = "0.1.0"
