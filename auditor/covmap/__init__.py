"""The measured test-to-code map (issue 24): which functions each test executed, kept per
function fingerprint so an unchanged function keeps its links across commits.

``fingerprint``: a file's functions, their AST fingerprints and the lines of their bodies.
``store``: the SQLite map file. ``ingest``: coverage.py data files. ``cbts``: TensorRT-LLM's
CBTS touch DBs. docs/map.md states the format and the rules."""
