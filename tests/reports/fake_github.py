"""A fake GitHub REST API for pull-request comments, with failure injection, for the tests."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

DOCS = "https://docs.github.com/rest"
COMMENT_DOCS = "https://docs.github.com/rest/issues/comments"
ACTIONS_BOT = {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"}
_EPOCH = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Reply:
    """An injected answer for the next request (of `method`, when given).

    status None answers normally; `apply` performs the real action first and then answers
    `status` anyway (a write that landed but whose answer was lost); `delay` holds the answer
    back that many seconds (after applying, so a timed-out write has still landed).
    """

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    delay: float = 0.0
    apply: bool = False
    method: str | None = None


def server_error(status: int = 502, *, method: str | None = None) -> Reply:
    return Reply(status, body={"message": "Server Error"}, method=method)


def applied_then(status: int = 502, *, method: str = "POST") -> Reply:
    return Reply(status, body={"message": "Server Error"}, apply=True, method=method)


def slow(delay: float, *, method: str | None = None) -> Reply:
    return Reply(None, delay=delay, method=method)


def rate_limited(reset: int, *, method: str | None = None) -> Reply:
    """A primary rate limit: 403, remaining 0, reset at epoch second `reset`."""
    return Reply(
        403,
        headers={
            "X-RateLimit-Limit": "5000",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Used": "5000",
            "X-RateLimit-Reset": str(reset),
            "X-RateLimit-Resource": "core",
        },
        body={
            "message": "API rate limit exceeded for installation ID 4242.",
            "documentation_url": f"{DOCS}/overview/rate-limits-for-the-rest-api",
            "status": "403",
        },
        method=method,
    )


def retry_after(seconds: int, *, status: int = 429, method: str | None = None) -> Reply:
    """A secondary rate limit that names its wait in Retry-After."""
    return Reply(
        status,
        headers={"Retry-After": str(seconds)},
        body={
            "message": "You have exceeded a secondary rate limit. Please wait a few minutes "
            "before you try again.",
            "documentation_url": f"{DOCS}/overview/rate-limits-for-the-rest-api",
            "status": str(status),
        },
        method=method,
    )


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    auth_scheme: str  # "Bearer", "token" or "" — never the credential itself


class FakeGitHub:
    """Issue-comment endpoints of one fake GitHub on 127.0.0.1, as a context manager."""

    def __init__(
        self,
        *,
        token: str = "ghs_fake",
        prs: dict[str, tuple[int, ...]] | None = None,
        read_only: bool = False,
    ) -> None:
        self.token = token
        self.read_only = read_only  # the fork-PR token: reads work, writes answer 403
        self.calls: list[Call] = []
        self._issues: dict[tuple[str, int], list[dict[str, Any]]] = {
            (repo, n): []
            for repo, numbers in (prs or {"octo/hello": (7,)}).items()
            for n in numbers
        }
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._next_id = 1_000_001
        self._tick = 0
        self._remaining = 5000
        self._server = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        # A short poll keeps shutdown() (and so each test's teardown) quick.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeGitHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- test-side helpers ----------------------------------------------------------------

    def inject(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def seed(self, repo: str, pr: int, body: str, *, user: dict[str, Any] | None = None) -> int:
        with self._lock:
            return int(self._create(repo, pr, body, user or _human("octocat", 583231))["id"])

    def comments(self, repo: str = "octo/hello", pr: int = 7) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(c) for c in self._issues[(repo, pr)]]

    def methods(self) -> list[str]:
        return [c.method for c in self.calls]

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    # -- request handling (called from server threads) ---------------------------------

    def next_reply(self, method: str) -> Reply | None:
        with self._lock:
            if self._queue and self._queue[0].method in (None, method):
                return self._queue.popleft()
            return None

    def handle(
        self, method: str, target: str, auth: str, raw: bytes
    ) -> tuple[int, dict[str, str], Any]:
        scheme, _, credential = auth.partition(" ")
        if not auth:
            return _error(401, "Requires authentication", DOCS)
        if scheme.lower() not in ("bearer", "token") or credential != self.token:
            return _error(401, "Bad credentials", DOCS)
        with self._lock:
            self._remaining -= 1
            status, headers, body = self._route(method, target, raw)
        headers.update(self._rate_headers())
        return status, headers, body

    def _route(self, method: str, target: str, raw: bytes) -> tuple[int, dict[str, str], Any]:
        parts = urlsplit(target)
        seg = parts.path.strip("/").split("/")
        if len(seg) == 6 and seg[0] == "repos" and seg[3] == "issues" and seg[5] == "comments":
            key = (f"{seg[1]}/{seg[2]}", int(seg[4]) if seg[4].isdigit() else -1)
            if key not in self._issues:
                return _error(404, "Not Found", f"{COMMENT_DOCS}#list-issue-comments")
            if method == "GET":
                return self._list(key, parts.path, parse_qs(parts.query))
            if method == "POST":
                return self._write(key, None, raw)
        is_comment = len(seg) == 6 and seg[0] == "repos" and seg[3:5] == ["issues", "comments"]
        if is_comment and method == "PATCH" and seg[5].isdigit():
            return self._write((f"{seg[1]}/{seg[2]}", 0), int(seg[5]), raw)
        return _error(404, "Not Found", DOCS)

    def _list(
        self, key: tuple[str, int], path: str, query: dict[str, list[str]]
    ) -> tuple[int, dict[str, str], Any]:
        per_page = max(1, min(int(query.get("per_page", ["30"])[0]), 100))
        page = max(1, int(query.get("page", ["1"])[0]))
        items = self._issues[key]
        last = max(1, -(-len(items) // per_page))
        links = []

        def link(n: int, rel: str) -> str:
            return f'<{self.url}{path}?per_page={per_page}&page={n}>; rel="{rel}"'

        if page > 1:
            links.append(link(page - 1, "prev"))
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links.append(link(1, "first"))
        headers = {"Link": ", ".join(links)} if links else {}
        return 200, headers, items[(page - 1) * per_page : page * per_page]

    def _write(
        self, key: tuple[str, int], comment_id: int | None, raw: bytes
    ) -> tuple[int, dict[str, str], Any]:
        docs = f"{COMMENT_DOCS}#{'create' if comment_id is None else 'update'}-an-issue-comment"
        try:
            payload = json.loads(raw)
        except ValueError:
            return _error(400, "Problems parsing JSON", docs)
        body = payload.get("body") if isinstance(payload, dict) else None
        if not isinstance(body, str):
            return _error(422, 'Invalid request.\n\nNo subschema in "anyOf" matched.', docs)
        if len(body) > 65536:
            return _error(
                422,
                "Validation Failed",
                docs,
                errors=[
                    {
                        "resource": "IssueComment",
                        "code": "custom",
                        "field": "body",
                        "message": "body is too long (maximum is 65536 characters)",
                    }
                ],
            )
        if self.read_only:
            return _error(403, "Resource not accessible by integration", docs)
        if comment_id is None:
            return 201, {}, self._create(key[0], key[1], body, ACTIONS_BOT)
        for (repo, _), comments in self._issues.items():
            for comment in comments:
                if comment["id"] == comment_id and repo == key[0]:
                    comment["body"] = body
                    comment["updated_at"] = self._now()
                    return 200, {}, comment
        return _error(404, "Not Found", docs)

    def _create(self, repo: str, pr: int, body: str, user: dict[str, Any]) -> dict[str, Any]:
        cid = self._next_id
        self._next_id += 1
        now = self._now()
        comment = {
            "url": f"{self.url}/repos/{repo}/issues/comments/{cid}",
            "html_url": f"https://github.com/{repo}/pull/{pr}#issuecomment-{cid}",
            "issue_url": f"{self.url}/repos/{repo}/issues/{pr}",
            "id": cid,
            "node_id": "IC_kwDO" + base64.b64encode(f"IssueComment{cid}".encode()).decode(),
            "user": _user(user),
            "created_at": now,
            "updated_at": now,
            "author_association": "NONE" if user.get("type") == "Bot" else "MEMBER",
            "body": body,
            "reactions": {
                "url": f"{self.url}/repos/{repo}/issues/comments/{cid}/reactions",
                "total_count": 0,
                "+1": 0,
                "-1": 0,
                "laugh": 0,
                "hooray": 0,
                "confused": 0,
                "heart": 0,
                "rocket": 0,
                "eyes": 0,
            },
            "performed_via_github_app": None,
        }
        self._issues[(repo, pr)].append(comment)
        return comment

    def _now(self) -> str:
        # A clock that moves a minute per write keeps created_at strictly ordered.
        self._tick += 1
        return (_EPOCH + timedelta(minutes=self._tick)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _rate_headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": "5000",
            "X-RateLimit-Remaining": str(self._remaining),
            "X-RateLimit-Used": str(5000 - self._remaining),
            "X-RateLimit-Reset": str(int(time.time()) + 3600),
            "X-RateLimit-Resource": "core",
        }


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out on purpose would otherwise print tracebacks


def _human(login: str, uid: int) -> dict[str, Any]:
    return {"login": login, "id": uid, "type": "User"}


def _user(user: dict[str, Any]) -> dict[str, Any]:
    login, uid = user["login"], user["id"]
    kind = "Bot" if user.get("type") == "Bot" else "User"
    prefix = "MDM6Qm90" if kind == "Bot" else "MDQ6VXNlcj"
    return {
        "login": login,
        "id": uid,
        "node_id": prefix + base64.b64encode(str(uid).encode()).decode(),
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
        "url": f"https://api.github.com/users/{login}",
        "html_url": f"https://github.com/{login}",
        "type": kind,
        "site_admin": False,
    }


def _error(
    status: int, message: str, docs: str, errors: list[dict[str, str]] | None = None
) -> tuple[int, dict[str, str], Any]:
    body: dict[str, Any] = {"message": message, "documentation_url": docs, "status": str(status)}
    if errors:
        body["errors"] = errors
    return status, {}, body


def _handler_for(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the test output clean

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            auth = self.headers.get("Authorization", "")
            scheme, _, credential = auth.partition(" ")
            fake.calls.append(Call(method, urlsplit(self.path).path, scheme if credential else ""))
            reply = fake.next_reply(method)
            status, headers, body = 0, dict[str, str](), None
            if reply is None or reply.status is None or reply.apply:
                status, headers, body = fake.handle(method, self.path, auth, raw)
            if reply is not None:
                time.sleep(reply.delay)
                if reply.status is not None:
                    status, headers, body = reply.status, dict(reply.headers), reply.body
            self._send(status, headers, body)

        def _send(self, status: int, headers: dict[str, str], body: Any) -> None:
            if isinstance(body, bytes):
                data, kind = body, "text/html; charset=utf-8"
            else:
                data, kind = json.dumps(body).encode(), "application/json; charset=utf-8"
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("X-GitHub-Api-Version-Selected", "2022-11-28")
                self.send_header("X-GitHub-Request-Id", "F00D:1234:5678:9ABC:0")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a timeout test); that is the point

    return Handler
