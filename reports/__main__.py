"""``python -m reports``: the ``testdb`` command without an installed console script."""

from reports.cli import main

main()
