"""A change as files and hunks, from a git range or a unified diff (parsed with unidiff)."""

from __future__ import annotations

import locale
import os
import re
import subprocess
from dataclasses import dataclass, field

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchedFile, PatchSet

from auditor.gitearly import from_git_commands, take
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
    """``git -C root ARGS``'s output; a failure is an ExternalError naming the command. The
    answer of the same command started early (``auditor.gitearly``) is taken where there is
    one."""
    early = take(root, args) if input_text is None else None
    if early is not None:
        stdout, stderr = early.communicate(timeout=timeout)
        code = early.returncode
    else:
        try:
            proc = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                                  input=input_text, timeout=timeout, check=False)
        except FileNotFoundError:
            raise ExternalError("git is not installed", hint=missing_hint) from None
        stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
    if code != 0:
        raise ExternalError(f"git {' '.join(args[:3])} failed: {stderr.strip()[:500]}",
                            hint="check that --root is a git checkout and the revisions exist")
    return stdout


_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote_path(path: str) -> str:
    """A path as git writes it (``core.quotePath``): one holding a byte outside printable
    ASCII, a quote, a backslash or a control character comes between double quotes with C
    escapes, each non-ASCII byte as ``\\ooo`` (``"a/\\303\\274.py"`` is ``a/ü.py``); any
    other path is as it is. The bytes are UTF-8 (git's own encoding of the names it was given);
    one that is not stays as a surrogate escape, as ``os.fsdecode`` keeps it. Hand-written:
    neither unidiff nor the standard library reads git's quoting (``ast.literal_eval`` of a
    bytes literal would, but it also accepts ``\\x``, which git never writes)."""
    if len(path) < 2 or path[0] != '"' or path[-1] != '"':
        return path
    out = bytearray()
    body, i = path[1:-1], 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 == len(body):
            out += c.encode("utf-8", "surrogateescape")
            i += 1
        elif body[i + 1] in _C_ESCAPES:
            out.append(_C_ESCAPES[body[i + 1]])
            i += 2
        elif re.fullmatch(r"[0-7]{3}", body[i + 1:i + 4]):
            out.append(int(body[i + 1:i + 4], 8) & 0xFF)
            i += 4
        else:  # not an escape git writes: kept as it stands
            out += b"\\"
            i += 1
    return out.decode("utf-8", "surrogateescape")


def _sides(pf: PatchedFile) -> tuple[str | None, str | None]:
    """(old path, new path) of a file of the diff; None on the side where it does not exist:
    ``/dev/null``, as git writes it (and git's "new file" / "deleted file" headers, which
    unidiff reads as ``/dev/null``). Not unidiff's ``is_removed_file``, which also calls a file
    *emptied* by its one hunk (``+0,0``) removed: an emptied module is still a module, an
    emptied test file still a file, and neither is a deletion."""
    return _strip(pf.source_file), _strip(pf.target_file)


def _strip(path: str | None) -> str | None:
    if path is None:
        return None
    path = unquote_path(path)
    if path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def _parse(text: str, shown: str) -> PatchSet:
    text = _lf(text)
    try:
        patch = PatchSet(text)
    except UnidiffParseError as exc:
        at, why = _bad_hunk(text) or (1, f"not a unified diff: {exc}")
        raise InputError(why, SourceLoc(shown, at),
                         "pass the output of `git diff` or `diff -u`") from None
    if not len(patch) and text.strip():
        # unidiff skips whatever is not a diff, so prose, HTML or JSON parse as "no change".
        raise InputError("not a unified diff: no file header (--- a/PATH, +++ b/PATH) or hunk "
                         "(@@) in it", SourceLoc(shown, 1),
                         "pass the output of `git diff` or `diff -u`")
    return patch


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def _bad_hunk(text: str) -> tuple[int, str] | None:
    """(line, why) of the first hunk that holds fewer lines than its header counts (a diff
    cut short, a hunk edited by hand): unidiff says only "Hunk is shorter than expected".
    Hand-written for the line number alone; unidiff stays the parser. None: no such hunk."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    at, old, new, header = 0, 0, 0, ""
    for n, line in enumerate([*lines, None], 1):
        if old > 0 or new > 0:
            kind = "" if line is None else (line[:1] or " ")
            if kind in (" ", "-", "+"):
                old -= kind in (" ", "-")
                new -= kind in (" ", "+")
                continue
            if kind == "\\":  # "\ No newline at end of file"
                continue
            end = "the diff ends" if line is None else f"line {n} ({line[:40]!r}) ends it"
            return at, (f"the hunk {header} is cut short: {max(old, 0)} old and "
                        f"{max(new, 0)} new line(s) are missing where {end}")
        m = _HUNK.match(line or "")
        if m:
            at, header = n, line.split(" @@", 1)[0] + " @@" if line else ""
            old = int(m.group(1)) if m.group(1) is not None else 1
            new = int(m.group(2)) if m.group(2) is not None else 1
    return None


def _lf(text: str) -> str:
    """A diff whose every line ends in CRLF (a Windows editor, a mail client), or in a lone CR
    (classic Mac OS), as its LF form; otherwise a ``\r`` ends up in the file names. A diff
    with LF headers is left alone: its CRs belong to the files' own line endings."""
    n = text.count("\n")
    if n and text.count("\r\n") == n:
        return text.replace("\r\n", "\n")
    return text.replace("\r", "\n") if not n and "\r" in text else text


def _line_sets(pf: PatchedFile) -> tuple[frozenset[int], frozenset[int]]:
    added = {ln.target_line_no for h in pf for ln in h if ln.is_added}
    removed = {ln.source_line_no for h in pf for ln in h if ln.is_removed}
    return frozenset(x for x in added if x), frozenset(x for x in removed if x)


def from_git(root: str, base: str, head: str | None = None) -> Change:
    """Diff ``base...head`` (merge base, as a PR sees it) or base against the work tree."""
    rng = [f"{base}...{head}"] if head else [base]
    facts = _rev_facts(root, base, head)
    if facts is None:  # one by one, as git says what is wrong
        _require_repo(root)
    # --relative: paths relative to --root even when it is a folder inside the repository
    # (git's own paths start at the repository's top), and only the files under it.
    text = _git(root, *from_git_commands(base, head)[1])
    if facts is None:
        head_sha = _git(root, "rev-parse", head or "HEAD").strip()
        base_sha = _git(root, "rev-parse", base).strip()
        merge_base = (_git(root, "merge-base", base, head).strip() if head else base_sha)
        prefix = _git(root, "rev-parse", "--show-prefix").strip()
    else:
        prefix, head_sha, base_sha, merge_base = facts
    outside: tuple[str, ...] = ()
    if prefix:
        # -z: each name as it is (without it git quotes a name that is not plain ASCII)
        every = _git(root, "diff", "--name-only", "-z", "--no-relative", *rng, "--").split("\0")
        outside = tuple(p for p in every if p and not p.startswith(prefix))
    change = Change(root, base_sha, head_sha, source="git", outside_root=outside)
    files = []
    for pf in _parse(text, "git diff"):
        old, new = _sides(pf)
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


def _rev_facts(root: str, base: str, head: str | None) -> tuple[str, str, str, str] | None:
    """(prefix, head sha, base sha, merge base) from one ``git rev-parse``, where four calls
    answered them (~3 ms a process); None when git fails or its answer is not the shape
    asked for (a revision that names several, more than one merge base): asked one by one.
    ``rev-parse B...H`` lists H, B and ``^`` each merge base, as ``git merge-base`` finds."""
    try:
        out = run_git(root, *from_git_commands(base, head)[0])
    except ExternalError:
        return None
    lines = out.split("\n")
    prefix, shas = lines[0].strip(), [x.strip() for x in lines[1:] if x.strip()]
    if head is None:
        return (prefix, shas[0], shas[1], shas[1]) if len(shas) == 2 else None
    if len(shas) != 5 or not shas[4].startswith("^"):
        return None
    return prefix, shas[0], shas[1], shas[4][1:]


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
    names = "".join(f"{o}\n" for o in objects).encode("utf-8", "surrogateescape")
    try:
        proc = subprocess.run(["git", "-C", root, "cat-file", "--batch"], input=names,
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
    as the base side and the head is built in memory. Either way the diff is proven to apply,
    as ``git apply --check`` (or ``-R --check``) would: every context and removed (or added)
    line, and the whole of a file the diff adds or deletes."""
    patch = _parse(read_text(diff_path), diff_path)
    try:
        return _build(root, patch, diff_path, checkout="head")
    except InputError as as_head:
        try:
            return _build(root, patch, diff_path, checkout="base")
        except InputError as as_base:
            # Said from the side that fits further: a checkout of the base side fails the
            # head-side try at its first changed line, long before the context line that is
            # really wrong.
            told = as_base if _fit(as_base) > _fit(as_head) else as_head
            raise InputError(told.bare, told.loc,
                             "the diff applies to neither side of the checkout; run it on the "
                             "checkout it was made from") from None


class _Mismatch(InputError):
    """A diff that does not apply, with how many lines of it matched first (``fit``)."""

    def __init__(self, message: str, loc: SourceLoc, hint: str, fit: int) -> None:
        super().__init__(message, loc, hint)
        self.fit = fit


def _fit(err: InputError) -> int:
    return err.fit if isinstance(err, _Mismatch) else -1


def _build(root: str, patch: PatchSet, diff_path: str, checkout: str) -> Change:
    change = Change(root, source=diff_path, checkout_side=checkout)
    fit = 0  # lines of the diff proven so far, over all its files (which side fits further)
    for pf in patch:
        old, new = _sides(pf)
        added_file, removed_file = old is None, new is None
        for p in (old, new):
            if p is not None:
                confined(root, p)  # refuse ../ and absolute paths from the diff
        added, removed = _line_sets(pf)
        shown = new or old or ""
        if checkout == "head":
            new_text = _read(root, new) if new else None
            if new and new_text is None and not pf.is_binary_file:
                raise _Mismatch(f"the diff changes {new}, which is not in the checkout",
                                SourceLoc(diff_path), "", fit)
            old_text = (None if new_text is None
                        else _apply(pf, new_text, shown, diff_path, fit, reverse=True))
            if added_file and old_text is not None and not pf.is_binary_file:
                _whole(old_text, shown, diff_path, fit + sum(len(h) for h in pf), "adds")
            if added_file:
                old_text = None
            if removed_file:
                old_text = _read(root, old) if old else None
                if old_text is not None:
                    raise _Mismatch(f"the diff deletes {old}, which is still in the checkout",
                                    SourceLoc(diff_path), "", fit)
                old_text = "".join(ln.value for h in pf for ln in h)
        else:
            old_text = _read(root, old) if old else None
            if old and old_text is None and not pf.is_binary_file:
                raise _Mismatch(f"the diff changes {old}, which is not in the checkout",
                                SourceLoc(diff_path), "", fit)
            if added_file and new and _read(root, new) is not None:
                raise _Mismatch(f"the diff adds {new}, which is already in the checkout",
                                SourceLoc(diff_path), "", fit)
            new_text = (None if pf.is_binary_file and old_text is None
                        else _apply(pf, old_text or "", shown, diff_path, fit, reverse=False))
            if removed_file and not pf.is_binary_file:
                # Every line of the deleted file is the diff's: checked like context lines.
                _whole(new_text or "", shown, diff_path, fit + sum(len(h) for h in pf),
                       "deletes")
            if removed_file:
                new_text = None
        fit += sum(len(h) for h in pf)
        change.files.append(FileChange(old, new, added, removed, old_text, new_text))
    return change


def _whole(rest: str, path: str, diff_path: str, fit: int, verb: str) -> None:
    """A file the diff adds (checkout: head) or deletes (checkout: base) must be the diff's
    text and no more: ``rest`` is what is left of it once the diff's lines are taken away."""
    if rest:
        n = len(rest.splitlines())
        raise _Mismatch(f"the diff {verb} {path}, but the checkout's {path} has {n} line(s) "
                        "more than the diff's text of it", SourceLoc(path), "", fit)


def _apply(pf: PatchedFile, text: str, path: str, diff_path: str, fit: int, *,
           reverse: bool) -> str:
    """Apply (or reverse-apply) the hunks to ``text``, checking every context line (and every
    line the apply takes away). ``path``: the file as the messages name it; ``fit``: the lines
    of the diff proven before this file."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    pos = 0
    for h in pf:
        start = max((h.target_start if reverse else h.source_start) - 1, 0)
        if start < pos:
            raise _Mismatch("overlapping hunks", SourceLoc(path), "regenerate the diff", fit)
        out.extend(lines[pos:start])
        pos = start
        for ln in h:
            keep, drop = (ln.is_added, ln.is_removed) if reverse else (ln.is_removed,
                                                                         ln.is_added)
            if keep or ln.is_context:
                got = lines[pos] if pos < len(lines) else None
                if got is None or got.rstrip("\r\n") != ln.value.rstrip("\r\n"):
                    holds = ("ends before it" if got is None
                             else f"holds {got.rstrip(chr(13) + chr(10))[:60]!r}")
                    raise _Mismatch(
                        f"the diff does not apply to {path}: line {pos + 1} {holds}, where "
                        f"the diff ({diff_path}:{ln.diff_line_no}) has "
                        f"{ln.value.rstrip(chr(13) + chr(10))[:60]!r}",
                        SourceLoc(path, pos + 1), "the checkout must be one side of the diff",
                        fit)
                pos += 1
                fit += 1
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
