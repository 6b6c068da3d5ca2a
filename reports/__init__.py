"""Everything a person sees: terminal text, markdown, HTML, JSON, the PR comment and the CLI."""
