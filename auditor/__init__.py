"""Change analysis: diff to linked guards to verdicts, run plans and launch backends."""
