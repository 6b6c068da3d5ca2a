"""``python -m reports``: the ``testdb`` command without an installed console script."""

from reports.entry import console

console()
