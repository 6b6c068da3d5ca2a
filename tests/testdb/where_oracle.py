"""A deliberately simple second reading of the raw files: which stage families render a test
id, and its verdict. It shares no code with ``testdb``: plain ``yaml.safe_load``, ``re`` and
``fnmatch`` over the files, the rules of trtllm-ci.md sections 2-5 restated as plainly as
possible, no shards (a *family* is a stage name without its trailing ``-<split id>``)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

LISTS = "tests/integration/test_lists"
RANK = ["pre-merge", "gated", "post-merge-only"]
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MARKER = re.compile(r"\s+(?:XFAIL|SKIP|UNSTABLE|TIMEOUT|ISOLATION)\b")


def safe_load(path: Path) -> object:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)


def family(stage: str) -> str:
    return re.sub(r"-\d+$", "", stage)


def line_ids(text: str) -> list[str]:
    """The test ids a list line names: no comment, no marker, no ``full:GPU/`` prefix."""
    head = _MARKER.split(text.split("#", 1)[0])[0].strip()
    head = re.sub(r"^full:[^/]+/", "", head)
    words = head.split()
    if len(words) > 1 and all(("/" in w or ".py" in w) and not w.startswith("-") for w in words):
        return words  # an old-style line naming several paths
    return [head] if head else []


def name_facts(row: dict[str, object]) -> dict[str, list[str]]:
    name = str(row["name"])
    facts = {"stage": ["post_merge" if "Post-Merge" in name else "pre_merge"]}
    for token, backend in (("-PyTorch-", "pytorch"), ("-CPP-", "cpp"), ("-Triton-", "triton"),
                           ("-FMHA-", "fmha"), ("-AutoDeploy-", "autodeploy"),
                           ("-Generic-", "generic"), ("-Verl-", "verl"),
                           ("-TensorRT-", "tensorrt")):
        if token in name:
            facts["backend"] = [backend]
            break
    facts["auto_trigger"] = ["deepseek" if "-DeepSeek-" in name
                             else "gpt_oss" if "-GptOss-" in name else "others"]
    facts["orchestrator"] = ["ray" if "-Ray-" in name else "mpi"]
    arch = str(row.get("arch", "x86_64")).split()[0]
    if name.startswith("CPU-"):
        facts.update(system_gpu_count=["0"], cpu=[arch], linux_distribution_name=["ubuntu"])
    else:
        facts["gpu"] = [name.split("-")[0]]
        if row.get("run_with_sbatch"):
            m = re.search(r"-(\d+)_GPUs", name)
            facts["system_gpu_count"] = [m.group(1) if m else "1"]
        else:
            facts["system_gpu_count"] = [str(row.get("gpu_count", 1))]
        facts["cpu"] = [arch]
    return facts


def holds(cond: dict[str, dict[str, object]] | None, facts: dict[str, list[str]]) -> bool:
    """Every condition holds; a key the stage has no fact for counts as held."""
    cond = cond or {}
    for key, want in (cond.get("terms") or {}).items():
        if key in facts and str(want).lower() not in [f.lower() for f in facts[key]]:
            return False
    for key, bounds in (cond.get("ranges") or {}).items():
        if key in facts:
            value = float(facts[key][0])
            assert isinstance(bounds, dict)
            for op, bound in bounds.items():
                ok = {"gte": value >= bound, "lte": value <= bound, "gt": value > bound,
                      "lt": value < bound}[op]
                if not ok:
                    return False
    for key, patterns in (cond.get("wildcards") or {}).items():
        pats = [patterns] if isinstance(patterns, str) else list(patterns)  # type: ignore[arg-type]
        if key in facts and not any(fnmatch.fnmatchcase(f.lower(), str(p).lower())
                                    for f in facts[key] for p in pats):
            return False
    return True


@dataclass
class Oracle:
    families: dict[str, set[str]] = field(default_factory=dict)  # test id -> families
    family_class: dict[str, str] = field(default_factory=dict)
    family_gpu: dict[str, str] = field(default_factory=dict)
    waives: list[tuple[str, str | None]] = field(default_factory=list)  # (id, GPU prefix)
    qa: set[str] = field(default_factory=set)
    l0_ids: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, root: Path) -> Oracle:
        o = cls()
        contexts: dict[str, list[dict[str, object]]] = {}
        for path in sorted((root / LISTS / "test-db").glob("*.yml")):
            for name, blocks in safe_load(path).items():
                if name != "version":
                    contexts.setdefault(name, blocks)
        o.l0_ids = sorted({i for blocks in contexts.values() for b in blocks
                           for t in b.get("tests") or [] for i in line_ids(t)})
        triggers = safe_load(root / "ci/pr-triggers.yml")
        tags = [t for row in triggers["auto_trigger_tags"]["map"] for t in row["tags"]]
        table = safe_load(root / "ci/stages.yml")
        for row in table["stages"]:
            name = str(row["name"])
            fam = family(name)
            if any(t in name for t in tags) or (re.search(r"\d+_GPUs", name) and \
                    "Post-Merge" not in name):
                o.family_class[fam] = "gated"
            elif "Post-Merge" in name:
                o.family_class[fam] = "post-merge-only"
            else:
                o.family_class[fam] = "pre-merge"
            o.family_gpu[fam] = name.split("-")[0]
            facts = name_facts(row)
            for block in contexts.get(str(row["context"]), []):
                if holds(block.get("condition"), facts):  # type: ignore[arg-type]
                    for t in block.get("tests") or []:
                        for i in line_ids(t):
                            o.families.setdefault(i, set()).add(fam)
        for ln in (root / LISTS / "waives.txt").read_text(encoding="utf-8").splitlines():
            m = re.match(r"full:([^/]+)/", ln.strip())
            for i in line_ids(ln):
                o.waives.append((i, m.group(1) if m else None))
        qa_contexts: set[str] = set()
        for path in sorted((root / LISTS / "qa").glob("**/*")):
            if path.suffix == ".txt":
                o.qa.update(i for ln in path.read_text(encoding="utf-8").splitlines()
                            for i in line_ids(ln))
            elif path.suffix == ".yml":
                data = safe_load(path)
                if not isinstance(data, dict):
                    continue
                for name, blocks in data.items():
                    if name == "version" or name in qa_contexts or not isinstance(blocks, list) \
                            or not all(isinstance(b, dict) and "tests" in b for b in blocks):
                        continue
                    qa_contexts.add(name)  # the first context of a name is the one used
                    o.qa.update(i for b in blocks for t in b["tests"] or [] for i in line_ids(t))
        return o

    def waived(self, test: str, stage: str | None) -> bool:
        """A waive names exactly the id (CI's apply_waives); a ``full:GPU/`` one applies where
        parse_test_name's rewrite with the stage name gives back ``<stage>/<item id>``."""
        item = f"test_unittests.py::test_unittests_v2[{test}]" if test.startswith("unittest/") \
            else test
        for w, prefix in self.waives:
            if w != test:
                continue
            if prefix is None:
                return True
            if stage is not None:
                head = stage.split("-")[0]
                s = ("full:" + prefix + "/" + item).lstrip("full:")  # noqa: B005 - CI's own strip
                if head in s and s.replace(head, stage) == f"{stage}/{item}":
                    return True
        return False

    def verdict(self, test: str) -> str:
        fams = self.families.get(test, set())
        open_classes = [self.family_class[f] for f in fams if not self.waived(test, f)]
        if open_classes:
            return min(open_classes, key=RANK.index)
        if test in self.qa and not self.waived(test, None):
            return "qa-only"
        return "waived" if fams or test in self.qa else "unscheduled"
