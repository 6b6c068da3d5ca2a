"""A change as files and hunks, from a git range or a unified diff (parsed with unidiff)."""

from __future__ import annotations

import locale
import os
import subprocess
from dataclasses import dataclass, field

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchedFile, PatchSet

from testdb.errors import ExternalError, InputError, SourceLoc
from testdb.files import confined, read_text


@dataclass(frozen=True)
class FileChange:
    """One file of the change; line sets are 1-based line numbers on each side."""

    old_path: str | None  # None when added
    new_path: str | None  # None when deleted
    added: frozenset[int] = frozenset()  # new-side lines added or changed
    removed: frozenset[int] = frozenset()  # old-side lines removed or changed
    old_text: str | None = None
    new_text: str | None = None

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def status(self) -> str:
        if self.old_path is None:
            return "added"
        if self.new_path is None:
            return "deleted"
        return "renamed" if self.old_path != self.new_path else "modified"


@dataclass
class Change:
    root: str
    base: str | None = None
    head: str | None = None
    files: list[FileChange] = field(default_factory=list)
    source: str = ""  # "git" or the diff file
    checkout_side: str = "head"  # which side of the change the files under root show
    # With --root below the top of a git repository: files the range changes outside root
    # (not part of this checkout's tree, so not audited; the audit says how many).
    outside_root: tuple[str, ...] = ()

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]


def _require_repo(root: str) -> None:
    """git's own answer outside a repository is `git diff --no-index`'s usage text: say it."""
    try:
        proc = subprocess.run(["git", "-C", root, "rev-parse", "--git-dir"], capture_output=True,
                              text=True, timeout=120, check=False)
    except FileNotFoundError:
        raise ExternalError("git is not installed", hint="install git or use --diff FILE") from None
    if proc.returncode != 0 and "not a git repository" in proc.stderr.lower():
        raise InputError(f"{root} is not a git repository", hint="use --diff FILE")


def _git(root: str, *args: str) -> str:
    return run_git(root, *args)


def run_git(root: str, *args: str, input_text: str | None = None, timeout: float = 120,
            missing_hint: str = "install git or use --diff FILE") -> str:
    """``git -C root ARGS``'s output; a failure is an ExternalError naming the command."""
    try:
        proc = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                              input=input_text, timeout=timeout, check=False)
    except FileNotFoundError:
        raise ExternalError("git is not installed", hint=missing_hint) from None
    if proc.returncode != 0:
        raise ExternalError(f"git {' '.join(args[:3])} failed: {proc.stderr.strip()[:500]}",
                            hint="check that --root is a git checkout and the revisions exist")
    return proc.stdout


def _strip(path: str | None) -> str | None:
    if path is None or path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def _parse(text: str, shown: str) -> PatchSet:
    text = _lf(text)
    try:
        patch = PatchSet(text)
    except UnidiffParseError as exc:
        raise InputError(f"not a unified diff: {exc}", SourceLoc(shown, 1),
                         "pass the output of `git diff` or `diff -u`") from None
    if not len(patch) and text.strip():
        # unidiff skips whatever is not a diff, so prose, HTML or JSON parse as "no change".
        raise InputError("not a unified diff: no file header (--- a/PATH, +++ b/PATH) or hunk "
                         "(@@) in it", SourceLoc(shown, 1),
                         "pass the output of `git diff` or `diff -u`")
    return patch


def _lf(text: str) -> str:
    """A diff whose every line ends in CRLF (a Windows editor, a mail client) as its LF form;
    otherwise a ``\r`` ends up in the file names. A diff with LF headers is left alone: its
    CRs belong to the files' own line endings."""
    n = text.count("\n")
    return text.replace("\r\n", "\n") if n and text.count("\r\n") == n else text


def _line_sets(pf: PatchedFile) -> tuple[frozenset[int], frozenset[int]]:
    added = {ln.target_line_no for h in pf for ln in h if ln.is_added}
    removed = {ln.source_line_no for h in pf for ln in h if ln.is_removed}
    return frozenset(x for x in added if x), frozenset(x for x in removed if x)


def from_git(root: str, base: str, head: str | None = None) -> Change:
    """Diff ``base...head`` (merge base, as a PR sees it) or base against the work tree."""
    rng = [f"{base}...{head}"] if head else [base]
    _require_repo(root)
    # --relative: paths relative to --root even when it is a folder inside the repository
    # (git's own paths start at the repository's top), and only the files under it.
    text = _git(root, "diff", "--relative", "--no-color", "--no-ext-diff", "-M", "-U3", *rng,
                "--")
    head_sha = _git(root, "rev-parse", head or "HEAD").strip()
    base_sha = _git(root, "rev-parse", base).strip()
    merge_base = (_git(root, "merge-base", base, head).strip() if head else base_sha)
    prefix = _git(root, "rev-parse", "--show-prefix").strip()
    outside: tuple[str, ...] = ()
    if prefix:
        every = _git(root, "diff", "--name-only", "--no-relative", *rng, "--").splitlines()
        outside = tuple(p for p in every if p and not p.startswith(prefix))
    change = Change(root, base_sha, head_sha, source="git", outside_root=outside)
    files = []
    for pf in _parse(text, "git diff"):
        old, new = _strip(pf.source_file), _strip(pf.target_file)
        if pf.is_added_file:
            old = None
        if pf.is_removed_file:
            new = None
        files.append((old, new, *_line_sets(pf)))
    # Every blob in one `git cat-file --batch` (a `git show` per file cost more than the audit
    # of a warm 20-file change spends judging it).
    wanted = [(merge_base, old) for old, *_ in files if old]
    wanted += [(head, new) for _, new, *_ in files if new and head]
    blobs = dict(zip(wanted, _git_show_many(root, wanted), strict=True))
    for old, new, added, removed in files:
        old_text = blobs[merge_base, old] if old else None
        new_text = (blobs[head, new] if head else _read(root, new)) if new else None
        change.files.append(FileChange(old, new, added, removed, old_text, new_text))
    return change


def _git_show_many(root: str, wanted: list[tuple[str, str]]) -> list[str | None]:
    """``_git_show`` of each ``(rev, path)``, read with one ``git cat-file --batch``: the
    same text (decoded and newline-translated as ``subprocess`` text mode does) or None."""
    if not wanted or any("\n" in rev + path for rev, path in wanted):
        return [_git_show(root, rev, path) for rev, path in wanted]  # the batch is by line
    found = cat_file_batch(root, [f"{rev}:./{path}" for rev, path in wanted])
    if found is None:
        return [_git_show(root, rev, path) for rev, path in wanted]
    encoding = locale.getpreferredencoding(False)
    texts = [data.decode(encoding) if data is not None else None for data in found]
    return [t.replace("\r\n", "\n").replace("\r", "\n") if t else t for t in texts]


def cat_file_batch(root: str, objects: list[str], hint: str = "install git or use --diff FILE"
                   ) -> list[bytes | None] | None:
    """The content of each blob named (``<sha>`` or ``<rev>:<path>``, no newline in it) from
    one ``git cat-file --batch`` (None: not a blob, or missing); None when git fails."""
    try:
        proc = subprocess.run(["git", "-C", root, "cat-file", "--batch"],
                              input="".join(f"{o}\n" for o in objects).encode(),
                              capture_output=True, timeout=300, check=False)
    except FileNotFoundError:
        raise ExternalError("git is not installed", hint=hint) from None
    if proc.returncode != 0:
        return None
    out, at = proc.stdout, 0
    found: list[bytes | None] = []
    for _ in objects:
        end = out.index(b"\n", at)
        line, at = out[at:end], end + 1
        if line.endswith((b" missing", b" ambiguous")):  # "<object> missing"
            found.append(None)
            continue
        _, kind, size = line.rsplit(b" ", 2)  # "<oid> <type> <size>", then the content
        data, at = out[at:at + int(size)], at + int(size) + 1
        found.append(data if kind == b"blob" else None)  # a tree: not a file
    return found


def _git_show(root: str, rev: str, path: str) -> str | None:
    try:
        # `./`: the path is relative to --root, which may be a folder inside the repository.
        return _git(root, "show", f"{rev}:./{path}")
    except ExternalError:
        return None


def _read(root: str, rel: str) -> str | None:
    try:
        return read_text(confined(root, rel), rel)
    except InputError:
        return None


def from_diff_file(root: str, diff_path: str) -> Change:
    """A patch against the checkout at ``root``. The checkout is normally the head side (the
    base is rebuilt by reverse-applying the hunks); when only a forward apply fits, it is taken
    as the base side and the head is built in memory. Either way the diff is proven to apply."""
    patch = _parse(read_text(diff_path), diff_path)
    try:
        return _build(root, patch, diff_path, checkout="head")
    except InputError as as_head:
        try:
            return _build(root, patch, diff_path, checkout="base")
        except InputError:
            raise InputError(as_head.bare, as_head.loc,
                             "the diff applies to neither side of the checkout; run it on the "
                             "checkout it was made from") from None


def _build(root: str, patch: PatchSet, diff_path: str, checkout: str) -> Change:
    change = Change(root, source=diff_path, checkout_side=checkout)
    for pf in patch:
        old, new = _strip(pf.source_file), _strip(pf.target_file)
        if pf.is_added_file:
            old = None
        if pf.is_removed_file:
            new = None
        for p in (old, new):
            if p is not None:
                confined(root, p)  # refuse ../ and absolute paths from the diff
        added, removed = _line_sets(pf)
        if checkout == "head":
            new_text = _read(root, new) if new else None
            if new and new_text is None and not pf.is_binary_file:
                raise InputError(f"the diff changes {new}, which is not in the checkout",
                                 SourceLoc(diff_path))
            old_text = (None if pf.is_added_file or new_text is None
                        else _apply(pf, new_text, reverse=True))
            if pf.is_removed_file:
                old_text = _read(root, old) if old else None
                if old_text is not None:
                    raise InputError(f"the diff deletes {old}, which is still in the checkout",
                                     SourceLoc(diff_path))
                old_text = "".join(ln.value for h in pf for ln in h)
        else:
            old_text = _read(root, old) if old else None
            if old and old_text is None and not pf.is_binary_file:
                raise InputError(f"the diff changes {old}, which is not in the checkout",
                                 SourceLoc(diff_path))
            if pf.is_added_file and new and _read(root, new) is not None:
                raise InputError(f"the diff adds {new}, which is already in the checkout",
                                 SourceLoc(diff_path))
            new_text = (None if pf.is_removed_file
                        else _apply(pf, old_text or "", reverse=False))
        change.files.append(FileChange(old, new, added, removed, old_text, new_text))
    return change


def _apply(pf: PatchedFile, text: str, *, reverse: bool) -> str:
    """Apply (or reverse-apply) the hunks to ``text``, checking every context line."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    pos = 0
    for h in pf:
        start = max((h.target_start if reverse else h.source_start) - 1, 0)
        if start < pos:
            raise InputError("overlapping hunks", SourceLoc(pf.path), "regenerate the diff")
        out.extend(lines[pos:start])
        pos = start
        for ln in h:
            keep, drop = (ln.is_added, ln.is_removed) if reverse else (ln.is_removed,
                                                                         ln.is_added)
            if keep or ln.is_context:
                got = lines[pos] if pos < len(lines) else None
                if got is None or got.rstrip("\r\n") != ln.value.rstrip("\r\n"):
                    raise InputError(f"the diff does not apply to {pf.path}: line {pos + 1} "
                                     "differs", SourceLoc(pf.path, pos + 1),
                                     "the checkout must be one side of the diff")
                pos += 1
                if ln.is_context:
                    out.append(got)
            elif drop:
                out.append(ln.value if ln.value.endswith("\n") else ln.value + "\n")
    out.extend(lines[pos:])
    return "".join(out)


def is_test_path(path: str) -> bool:
    base = os.path.basename(path)
    return (path.startswith("tests/") or "/tests/" in path or base.startswith("test_")
            or base.endswith("_test.py") or base == "conftest.py")
