"""Read the JSON files the renderers take (audit, launch results), checked once at the boundary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from auditor.model import AUDIT_SCHEMA
from testdb.errors import InputError, json_error

_SEVERITIES = ("error", "warning", "info")


class _Shape:
    """Walks a parsed document and raises `error: FILE: where: what` on the first mismatch."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, what: str, hint: str = "") -> InputError:
        return InputError(f"{self.path}: {where}: {what}" if where else f"{self.path}: {what}",
                          hint=hint)

    def obj(self, value: Any, where: str, keys: tuple[str, ...] = ()) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {_kind(value)}")
        missing = [k for k in keys if k not in value]
        if missing:
            raise self.fail(where, f"missing key{'s' if len(missing) > 1 else ''} "
                            + ", ".join(repr(k) for k in missing),
                            "write the file with `testdb audit --format json -o FILE`")
        return value

    def lst(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(where, f"expected a list, got {_kind(value)}")
        return value

    def typed(self, value: Any, where: str, kind: type | tuple[type, ...], name: str,
              optional: bool = False) -> Any:
        if value is None and optional:
            return value
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise self.fail(where, f"expected {name}, got {_kind(value)}")
        return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(value), "a value")


def _load(path: str, what: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: the {what} is not UTF-8 text") from None
    try:
        doc = json.loads(text)
        # A `\ud800` escape decodes to a lone surrogate, which no output stream can encode.
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
        return doc
    except UnicodeEncodeError:
        raise InputError(f"{path}: the {what} holds a lone UTF-16 surrogate escape "
                         "(\\ud800-\\udfff)", hint="write valid Unicode text") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not JSON: {json_error(exc)}",
                         hint=f"expected the {what} written by testdb") from None
    except (RecursionError, ValueError):  # nesting past the stack; a 5,000-digit number
        raise InputError(f"{path}: unreadable JSON: it nests too deeply or holds a number "
                         "with thousands of digits",
                         hint=f"expected the {what} written by testdb") from None


def check_audit(doc: Any, path: str) -> dict[str, Any]:
    """Check the shape every renderer relies on; return the document unchanged."""
    s = _Shape(path)
    top = s.obj(doc, "", ())
    if top.get("schema") != AUDIT_SCHEMA:
        raise s.fail("", f"not an audit file (schema {top.get('schema')!r})",
                     f"expected schema {AUDIT_SCHEMA!r} (`testdb audit --format json`)")
    s.obj(top, "", ("provenance", "summary", "findings", "behaviours"))
    prov = s.obj(top["provenance"], "provenance")
    for key in ("head", "base", "version", "diff"):
        s.typed(prov.get(key), f"provenance.{key}", str, "a string", optional=True)
    s.obj(prov.get("data_files", {}), "provenance.data_files")
    summ = s.obj(top["summary"], "summary", ("behaviours", "unguarded", "errors", "warnings",
                                             "sentence"))
    for key in ("behaviours", "unguarded", "errors", "warnings"):
        s.typed(summ[key], f"summary.{key}", int, "an integer")
    s.typed(summ["sentence"], "summary.sentence", str, "a string")
    for i, f in enumerate(s.lst(top["findings"], "findings")):
        w = f"findings[{i}]"
        s.obj(f, w, ("severity", "path", "line", "message"))
        if f["severity"] not in _SEVERITIES:
            raise s.fail(f"{w}.severity", f"expected one of {', '.join(_SEVERITIES)}, "
                         f"got {f['severity']!r}")
        s.typed(f["path"], f"{w}.path", str, "a string")
        s.typed(f["line"], f"{w}.line", int, "an integer")
        s.typed(f["message"], f"{w}.message", str, "a string")
        for key in ("rule", "function"):
            s.typed(f.get(key), f"{w}.{key}", str, "a string", optional=True)
        for key in ("guards", "stages"):
            for j, g in enumerate(s.lst(f.get(key, []), f"{w}.{key}")):
                s.typed(g, f"{w}.{key}[{j}]", str, "a string")
    for i, b in enumerate(s.lst(top["behaviours"], "behaviours")):
        w = f"behaviours[{i}]"
        s.obj(b, w, ("path", "function", "line", "verdict", "guards"))
        s.typed(b["line"], f"{w}.line", int, "an integer")
        for key in ("path", "function", "verdict"):
            s.typed(b[key], f"{w}.{key}", str, "a string")
        s.typed(b.get("tier"), f"{w}.tier", str, "a string", optional=True)
        s.lst(b.get("tokens") or [], f"{w}.tokens")
        for tier, gs in s.obj(b["guards"], f"{w}.guards").items():
            for j, g in enumerate(s.lst(gs, f"{w}.guards.{tier}")):
                gw = f"{w}.guards.{tier}[{j}]"
                s.obj(g, gw, ("test_id", "effective", "runs"))
                for key in ("test_id", "effective"):
                    s.typed(g[key], f"{gw}.{key}", str, "a string")
                for k, r in enumerate(s.lst(g["runs"], f"{gw}.runs")):
                    rw = f"{gw}.runs[{k}]"
                    s.obj(r, rw, ("stage", "kind", "path", "line", "waived"))
                    for key in ("stage", "kind", "path"):
                        s.typed(r[key], f"{rw}.{key}", str, "a string")
                    s.typed(r["line"], f"{rw}.line", int, "an integer")
    gates = s.obj(top.get("gates") or {}, "gates")
    for j, t in enumerate(s.lst(gates.get("auto_trigger_tags") or [], "gates.auto_trigger_tags")):
        s.typed(t, f"gates.auto_trigger_tags[{j}]", str, "a string")
    for j, st in enumerate(s.lst(top.get("missing_stages", []), "missing_stages")):
        s.typed(st, f"missing_stages[{j}]", str, "a string")
    sug = s.obj(top.get("suggestion") or {}, "suggestion")
    for w, part in (("suggestion", sug), ("suggestion.runner_up",
                                          s.obj(sug.get("runner_up") or {},
                                                "suggestion.runner_up"))):
        if part:
            s.typed(part.get("command"), f"{w}.command", str, "a string")
            for j, row in enumerate(s.lst(part.get("stages", []), f"{w}.stages")):
                s.obj(row, f"{w}.stages[{j}]", ("stage",))
                s.typed(row["stage"], f"{w}.stages[{j}].stage", str, "a string")
    started = s.obj(s.obj(top.get("pipeline") or {}, "pipeline").get("started") or {},
                    "pipeline.started")
    for name, why in started.items():
        s.typed(why, f"pipeline.started.{name}", str, "a string")
    for j, lc in enumerate(s.lst(top.get("list_changes", []), "list_changes")):
        s.obj(lc, f"list_changes[{j}]")
        s.typed(lc.get("line"), f"list_changes[{j}].line", int, "an integer", optional=True)
    for key in ("notes", "changed_tests", "unlinked"):
        s.lst(top.get(key, []), key)
    return top


def read_audit(path: str) -> dict[str, Any]:
    """An audit JSON file (``testdb audit --format json``), or InputError naming the file."""
    return check_audit(_load(path, "audit JSON"), path)


def read_results(path: str) -> list[dict[str, Any]]:
    """The result rows of a launch results file (``testdb-audit/run-results@1``)."""
    from auditor.launch.model import read_results as read_run_results
    from auditor.launch.model import result_to_dict

    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file", hint="give the results.json a launch wrote")
    return [result_to_dict(r) for r in read_run_results(p).results]
