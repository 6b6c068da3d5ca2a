"""Upsert the one sticky testdb-audit comment on a GitHub pull request, with safe retries."""

from __future__ import annotations

import email.message
import email.utils
import http.client
import json
import logging
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from testdb.errors import ExternalError, InputError, UsageError

__all__ = [
    "DEFAULT_MARKER",
    "MAX_BODY_CHARS",
    "CommentRef",
    "CommentResult",
    "upsert_comment",
]

DEFAULT_MARKER = "<!-- testdb-audit -->"
MAX_BODY_CHARS = 65536  # GitHub answers 422 past this many characters
_API_VERSION = "2022-11-28"
_PER_PAGE = 100  # GitHub's maximum; fewer round trips on busy PRs
_MAX_PAGES = 500  # 50k comments: past this a Link loop is likelier than a real PR
_BACKOFF_BASE = 1.0
_BACKOFF_CAP = 60.0
_SECONDARY_LIMIT_WAIT = 60.0  # GitHub's advice when a rate limit names no wait
_REPO_RE = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_TOKEN_RE = re.compile(r"[\x21-\x7e]+")  # printable ASCII, no spaces: safe in a header
_LINK_RE = re.compile(r'<([^>]*)>\s*;\s*rel="([^"]*)"')
_PERMISSION_HINT = (
    "the token may not write comments: give the job `permissions: pull-requests: write` "
    "(and `issues: write`); workflows triggered by `pull_request` from a fork get a read-only "
    "GITHUB_TOKEN whatever they ask for, so post from a `pull_request_target` job or from a "
    "follow-up `workflow_run` job instead"
)
_OUTAGE_HINT = "GitHub may be having trouble (https://www.githubstatus.com); re-run the job later"

Action = Literal["created", "updated", "unchanged"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommentRef:
    """A comment on GitHub: its numeric id and the address a person opens."""

    id: int
    url: str


@dataclass(frozen=True)
class CommentResult:
    """What upsert_comment did, to which comment, and the older marker comments it left alone."""

    action: Action
    id: int
    url: str
    duplicates: tuple[CommentRef, ...] = ()


@dataclass(frozen=True)
class _Comment:
    id: int
    url: str
    body: str
    created_at: str


@dataclass(frozen=True)
class _Response:
    status: int
    headers: email.message.Message
    data: Any


@dataclass(frozen=True)
class _Transient:
    """A failure worth retrying; `wait` is GitHub's own ask (None: back off exponentially)."""

    what: str
    wait: float | None
    maybe_applied: bool
    url: str = ""
    no_answer: bool = False  # nothing answered at all (refused, timed out, DNS)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # Following a redirect would carry the request (and, for same-host hops, the token) to a
    # place we never named; GitHub only redirects for renamed repositories, which we report.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def upsert_comment(
    repo: str,
    pr: int,
    body: str,
    *,
    token: str,
    api_url: str = "https://api.github.com",
    marker: str = DEFAULT_MARKER,
    sleep: Callable[[float], object] | None = None,
    max_retries: int = 5,
    max_wait: float = 600.0,
    timeout: float = 30.0,
    clock: Callable[[], float] = time.time,
    on_retry: Callable[[str], object] | None = None,
) -> CommentResult:
    """Create or update the one comment on `repo`#`pr` that carries `marker`.

    Retries 5xx answers, connection failures and rate limits with backoff (at most
    `max_retries` retries per step and `max_wait` seconds of sleeping in all). A POST whose
    answer was lost is never repeated blindly: the comments are listed again first, so
    retries cannot leave two comments. Raises ExternalError when GitHub refuses, InputError or
    UsageError for bad arguments; none of them ever contains the token. ``on_retry`` gets one
    line per retry (attempt, reason, wait): the library never prints.
    """
    token = token.strip()
    _check_arguments(repo, pr, token, api_url, marker, max_retries)
    if marker not in body:
        body = f"{marker}\n{body}"
    if len(body) > MAX_BODY_CHARS:
        raise InputError(
            f"the comment is {len(body)} characters long; GitHub accepts at most {MAX_BODY_CHARS}",
            hint="shorten the report (fewer rows, or link to the full HTML report)",
        )
    session = _Session(
        repo, pr, token, api_url.rstrip("/"), sleep or time.sleep, clock, max_retries, max_wait,
        timeout, on_retry,
    )
    posted = False  # a POST may have landed even though its answer never reached us
    attempt = 0
    while True:
        found = session.marker_comments(marker)
        if found:
            newest = max(found, key=lambda c: (c.created_at, c.id))
            others = tuple(CommentRef(c.id, c.url) for c in found if c is not newest)
            if others:
                _log.warning(
                    "%d older comments on %s#%d also carry the marker; left in place",
                    len(others),
                    repo,
                    pr,
                )
            if _same_text(newest.body, body):
                action: Action = "created" if posted else "unchanged"
                return CommentResult(action, newest.id, newest.url, others)
            updated = session.patch(newest.id, body)
            return CommentResult("updated", updated.id, updated.url, others)
        outcome = session.post(body)
        if isinstance(outcome, _Comment):
            return CommentResult("created", outcome.id, outcome.url)
        posted = posted or outcome.maybe_applied
        session.pause(outcome, attempt)
        attempt += 1


def _check_arguments(
    repo: str, pr: int, token: str, api_url: str, marker: str, max_retries: int
) -> None:
    if not _REPO_RE.fullmatch(repo) or any(part.strip(".") == "" for part in repo.split("/")):
        raise InputError(f"repository {repo!r} is not of the form owner/name")
    if isinstance(pr, bool) or not isinstance(pr, int) or pr <= 0:
        raise InputError(f"pull request number {pr!r} is not a positive integer")
    if not token:
        raise UsageError("no GitHub token given", hint="set GITHUB_TOKEN")
    if not _TOKEN_RE.fullmatch(token):
        # Never echo the token, not even a fragment of it.
        raise UsageError(
            "the GitHub token contains spaces or non-ASCII characters",
            hint="check how GITHUB_TOKEN is set",
        )
    parts = urllib.parse.urlsplit(api_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"GitHub API URL {api_url!r} is not an http(s) address")
    if not marker.strip():
        raise UsageError("the comment marker is empty")
    if max_retries < 0:
        raise UsageError(f"max_retries must be 0 or more, not {max_retries}")


def _same_text(a: str, b: str) -> bool:
    # GitHub may hand bodies back with CRLF or without a final newline; neither is worth an edit.
    return a.replace("\r\n", "\n").strip() == b.replace("\r\n", "\n").strip()


class _Session:
    """One upsert's HTTP conversation: requests, retries, the shared wait budget, errors."""

    def __init__(
        self,
        repo: str,
        pr: int,
        token: str,
        api_url: str,
        sleep: Callable[[float], object],
        clock: Callable[[], float],
        max_retries: int,
        max_wait: float,
        timeout: float,
        on_retry: Callable[[str], object] | None = None,
    ) -> None:
        self._on_retry = on_retry
        self._repo = repo
        self._pr = pr
        self._token = token
        self._api_url = api_url
        self._origin = urllib.parse.urlsplit(api_url)[:2]
        self._sleep = sleep
        self._clock = clock
        self._max_retries = max_retries
        self._max_wait = max_wait
        self._timeout = timeout
        self._waited = 0.0
        self._opener = urllib.request.build_opener(_NoRedirect())

    def __repr__(self) -> str:
        return f"_Session({self._repo}#{self._pr} at {self._api_url})"

    # -- the three calls -------------------------------------------------------------------

    def marker_comments(self, marker: str) -> list[_Comment]:
        url: str | None = (
            f"{self._api_url}/repos/{self._repo}/issues/{self._pr}/comments?per_page={_PER_PAGE}"
        )
        what = f"list the comments of {self._repo}#{self._pr}"
        found: list[_Comment] = []
        pages = 0
        while url is not None:
            pages += 1
            if pages > _MAX_PAGES:
                raise self._error(f"GitHub kept paginating past {_MAX_PAGES} pages to {what}")
            response = self._request("GET", url, what)
            if not isinstance(response.data, list):
                raise self._error(f"GitHub answered something other than a list to {what}")
            found.extend(c for c in map(self._comment, response.data) if marker in c.body)
            url = self._next_page(response.headers.get("Link"))
        return found

    def patch(self, comment_id: int, body: str) -> _Comment:
        url = f"{self._api_url}/repos/{self._repo}/issues/comments/{comment_id}"
        what = f"update comment {comment_id} on {self._repo}#{self._pr}"
        return self._comment(self._request("PATCH", url, what, {"body": body}).data)

    def post(self, body: str) -> _Comment | _Transient:
        url = f"{self._api_url}/repos/{self._repo}/issues/{self._pr}/comments"
        what = f"create a comment on {self._repo}#{self._pr}"
        outcome = self._attempt("POST", url, what, {"body": body})
        if isinstance(outcome, _Transient):
            return outcome
        return self._comment(self._ok(outcome, what).data)

    # -- retries ---------------------------------------------------------------------------

    def pause(self, failure: _Transient, attempt: int) -> None:
        """Sleep before retry number `attempt` + 1, or raise when the budget is spent."""
        if attempt >= self._max_retries:
            where = failure.url.split("?", 1)[0] or self._api_url
            if failure.no_answer:
                # Nothing answered: the URL or the network is wrong far more often than GitHub.
                lead = ""
                hint = (f"nothing answered at {self._api_url}; check --api-url and that this "
                        "machine can reach it")
            else:
                lead, hint = "GitHub kept failing: ", _OUTAGE_HINT
            raise self._error(
                f"{where}: {lead}{failure.what} "
                f"(gave up after {attempt + 1} attempts and {self._waited:g}s of waiting)",
                hint,
            )
        if failure.wait is None:
            wait = min(_BACKOFF_BASE * 2**attempt, _BACKOFF_CAP)
        else:
            wait = failure.wait
        left = self._max_wait - self._waited
        if wait > left:
            raise self._error(
                f"{failure.what}: GitHub asks to wait {wait:g}s, more than the {left:g}s left "
                "of the retry budget",
                "re-run the job after the limit resets",
            )
        line = (f"attempt {attempt + 1} of {self._max_retries + 1} failed: "
                f"{self._redact(failure.what)}; retrying in {wait:g}s")
        _log.info("%s", line)
        if self._on_retry is not None:
            self._on_retry(line)
        self._sleep(wait)
        self._waited += wait

    def _request(self, method: str, url: str, what: str, payload: object = None) -> _Response:
        # Only for idempotent calls (GET, PATCH): repeating them cannot do harm.
        attempt = 0
        while True:
            outcome = self._attempt(method, url, what, payload)
            if isinstance(outcome, _Response):
                return self._ok(outcome, what)
            self.pause(outcome, attempt)
            attempt += 1

    def _attempt(self, method: str, url: str, what: str, payload: object) -> _Response | _Transient:
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("X-GitHub-Api-Version", _API_VERSION)
        request.add_header("User-Agent", "testdb-audit")
        if data is not None:
            request.add_header("Content-Type", "application/json; charset=utf-8")
        # Unredirected: urllib copies ordinary headers onto redirects, this one never.
        request.add_unredirected_header("Authorization", f"Bearer {self._token}")
        try:
            with self._opener.open(request, timeout=self._timeout) as answer:
                raw = answer.read()
                return _Response(answer.status, answer.headers, self._decode(raw, what))
        except urllib.error.HTTPError as exc:
            try:
                raw = exc.read()
            except (OSError, http.client.HTTPException):
                raw = b""
            finally:
                exc.close()
            response = _Response(exc.code, exc.headers, _lenient_json(raw))
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            return _Transient(f"{what}: no answer ({type(reason).__name__}: {reason})", None, True,
                              url, no_answer=True)
        return self._classify(response, what, url)

    def _classify(self, response: _Response, what: str, url: str) -> _Response | _Transient:
        status = response.status
        if status >= 500:
            return _Transient(f"{what}: GitHub answered {status} {_message(response)}", None, True,
                              url)
        wait = _rate_limit_wait(response, self._clock())
        if wait is not None:
            return _Transient(f"{what}: rate limited ({status} {_message(response)})", wait, False,
                              url)
        return response

    # -- answers and errors ----------------------------------------------------------------

    def _ok(self, response: _Response, what: str) -> _Response:
        if 200 <= response.status < 300:
            return response
        status, message = response.status, _message(response)
        if status == 401:
            raise self._error(
                f"GitHub rejected the token trying to {what} (401 {message})",
                "check that GITHUB_TOKEN holds a valid token that has not expired or been revoked",
            )
        if status == 403:
            raise self._error(f"GitHub refused to {what} (403 {message})", _PERMISSION_HINT)
        if status == 404:
            raise self._error(
                f"GitHub answered 404 ({message}) trying to {what}",
                f"check that {self._repo} exists and #{self._pr} is a pull request in it; GitHub "
                "also answers 404 when the token cannot see the repository",
            )
        if status == 422:
            raise self._error(
                f"GitHub rejected the comment trying to {what} (422 {message}"
                f"{_validation_details(response)})",
                f"the body may be too long (at most {MAX_BODY_CHARS} characters) or malformed; "
                "shorten the report",
            )
        if 300 <= status < 400:
            raise self._error(
                f"GitHub redirected the request to {what} ({status} to "
                f"{response.headers.get('Location', 'nowhere')})",
                "the repository was probably renamed or transferred; pass its current owner/name",
            )
        raise self._error(f"GitHub answered {status} ({message}) trying to {what}")

    def _comment(self, item: object) -> _Comment:
        if not isinstance(item, dict) or not isinstance(item.get("id"), int):
            raise self._error("GitHub answered with a comment that has no numeric id")
        body = item.get("body")
        return _Comment(
            id=item["id"],
            url=str(item.get("html_url") or item.get("url") or ""),
            body=body if isinstance(body, str) else "",
            created_at=str(item.get("created_at") or ""),
        )

    def _next_page(self, link: str | None) -> str | None:
        for match in _LINK_RE.finditer(link or ""):
            if "next" in match.group(2).split():
                url = match.group(1)
                # The token goes with every request: never to a host we were not given.
                if urllib.parse.urlsplit(url)[:2] != self._origin:
                    raise self._error(
                        "GitHub's pagination link points to another host; refusing to follow it",
                        "check the API URL (--api-url / GITHUB_API_URL)",
                    )
                return url
        return None

    def _decode(self, raw: bytes, what: str) -> Any:
        try:
            return json.loads(raw) if raw.strip() else None
        except ValueError:
            raise self._error(
                f"GitHub answered something that is not JSON trying to {what}",
                "check the API URL; a proxy or captive portal may be answering instead",
            ) from None

    def _error(self, message: str, hint: str = "") -> ExternalError:
        return ExternalError(self._redact(message), hint=self._redact(hint))

    def _redact(self, text: str) -> str:
        # Servers and proxies sometimes echo credentials back; nothing we raise may carry them.
        return text.replace(self._token, "***")


def _rate_limit_wait(response: _Response, now: float) -> float | None:
    """Seconds GitHub asks us to wait, or None when the answer is not a rate limit."""
    if response.status not in (403, 429):
        return None
    headers = response.headers
    retry_after = _retry_after(headers.get("Retry-After"), now)
    if retry_after is not None:
        return retry_after
    if headers.get("X-RateLimit-Remaining", "").strip() == "0":
        reset = _number(headers.get("X-RateLimit-Reset"))
        if reset is not None:
            # A second of slack: the reset time has one-second granularity and clocks drift.
            return max(reset - now, 0.0) + 1.0
    if response.status == 429 or "rate limit" in _message(response).lower():
        return _SECONDARY_LIMIT_WAIT
    return None


def _retry_after(value: str | None, now: float) -> float | None:
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return max(seconds, 0.0)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - now, 0.0)


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _lenient_json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _message(response: _Response) -> str:
    data = response.data
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return str(data["message"])
    return http.client.responses.get(response.status, "")


def _validation_details(response: _Response) -> str:
    data = response.data
    errors = data.get("errors") if isinstance(data, dict) else None
    if not isinstance(errors, list):
        return ""
    parts = [
        str(e.get("message") or e.get("code") or "") if isinstance(e, dict) else str(e)
        for e in errors
    ]
    text = "; ".join(p for p in parts if p)
    return f": {text}" if text else ""
