"""Which files make up a checkout's test plan: discovery in the TensorRT-LLM layout."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

from testdb.errors import InputError, SourceLoc

TESTDB_DIR = "tests/integration/test_lists/test-db"
QA_DIR = "tests/integration/test_lists/qa"
WAIVES = "tests/integration/test_lists/waives.txt"
DURATIONS = "tests/integration/defs/.test_durations"
GROOVY = "jenkins/L0_Test.groovy"
MERGE_REQUEST = "jenkins/L0_MergeRequest.groovy"  # the PR gates of a real checkout
CBTS_MAIN = "jenkins/scripts/cbts/main.py"  # change-based test selection (testdb/cbts.py)
STAGES_YAML = "ci/stages.yml"
TRIGGERS = "ci/pr-triggers.yml"
PLATFORM_FACTS = "ci/platform-facts.yml"
DEFS_DIR = "tests/integration/defs"


@dataclass(frozen=True)
class Sources:
    """Which files make up the test plan; paths are relative to ``root`` or absolute."""

    root: str
    testdb: tuple[str, ...] = ()
    qa_yaml: tuple[str, ...] = ()
    qa_txt: tuple[str, ...] = ()
    waives: str | None = None
    durations: str | None = None
    stages: str | None = None
    triggers: str | None = None
    platform_facts: str | None = None
    cbts: str | None = None  # CBTS's entry point: its presence means CBTS may narrow a PR
    escaped: tuple[str, ...] = ()  # found under root but symlinked outside it: not read

    @classmethod
    def discover(cls, root: str, *, stages: str | None = None, triggers: str | None = None,
                 platform_facts: str | None = None) -> Sources:
        if not os.path.isdir(root):
            raise InputError("checkout root is not a directory", SourceLoc(root),
                             "pass --root PATH of a TensorRT-LLM checkout")

        base = os.path.realpath(root)
        escaped: list[str] = []

        dirs_inside: dict[str, bool] = {}

        def within(full: str) -> bool:
            return full == base or full.startswith(base + os.sep)

        def inside(path: str) -> bool:
            """Discovered files stay in the checkout: a symlink out of it is reported, not read.
            Directories are resolved once each; a file is resolved only when it is a link."""
            d = os.path.dirname(path)
            if d not in dirs_inside:
                dirs_inside[d] = within(os.path.realpath(os.path.join(root, d)))
            full = os.path.join(root, path)
            if dirs_inside[d] and (not os.path.islink(full) or within(os.path.realpath(full))):
                return True
            escaped.append(path)
            return False

        def rel(pattern: str) -> tuple[str, ...]:
            found = glob.glob(os.path.join(root, pattern), recursive=True)
            # a dangling symlink is kept, so that reading it reports the file instead of
            # silently dropping it
            return tuple(sorted(p for p in (os.path.relpath(f, root) for f in found
                                            if os.path.isfile(f) or os.path.islink(f))
                                if inside(p)))

        def walk(top: str, ext: str) -> tuple[str, ...]:
            """``top/**/*ext`` as glob matches it (hidden names skipped), but without following
            directory symlinks: glob does, so a link to ``/`` or to a parent walks the disk."""
            found = []
            for d, dirs, files in os.walk(os.path.join(root, top)):
                dirs[:] = [n for n in dirs if not n.startswith(".")]
                found += [os.path.relpath(os.path.join(d, n), root) for n in files
                          if n.endswith(ext) and not n.startswith(".")]
            return tuple(sorted(p for p in found if inside(p)))

        def opt(path: str) -> str | None:
            return path if os.path.isfile(os.path.join(root, path)) and inside(path) else None

        def given(path: str | None) -> str | None:
            """An explicit --stages/--triggers/--platform-facts path is relative to the current
            directory, as the user typed it; keep it root-relative when it lies in the root."""
            if path is None:
                return None
            full = os.path.abspath(path)
            inside_root = os.path.relpath(full, os.path.abspath(root))
            return full if inside_root.startswith("..") else inside_root

        stages, triggers, platform_facts = given(stages), given(triggers), given(platform_facts)
        return cls(
            root=root,
            testdb=rel(f"{TESTDB_DIR}/*.yml"),
            qa_yaml=walk(QA_DIR, ".yml"),
            qa_txt=walk(QA_DIR, ".txt"),
            waives=opt(WAIVES),
            durations=opt(DURATIONS),
            stages=stages or opt(GROOVY) or opt(STAGES_YAML),
            # the Groovy is what CI reads; ci/pr-triggers.yml is the same rules as data
            triggers=triggers or opt(MERGE_REQUEST) or opt(TRIGGERS),
            platform_facts=platform_facts or opt(PLATFORM_FACTS),
            cbts=opt(CBTS_MAIN),
            escaped=tuple(escaped),
        )

    def all_files(self) -> list[str]:
        singles = [self.waives, self.durations, self.stages, self.triggers, self.platform_facts,
                   self.cbts]
        return [*self.testdb, *self.qa_yaml, *self.qa_txt, *(s for s in singles if s)]
