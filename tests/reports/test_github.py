"""Tests for reports.github: the sticky PR comment, against a fake GitHub server."""

from __future__ import annotations

import json
import logging
import socket
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_github import (
    ACTIONS_BOT,
    FakeGitHub,
    Reply,
    applied_then,
    rate_limited,
    retry_after,
    server_error,
    slow,
)

from reports.github import DEFAULT_MARKER, CommentRef, upsert_comment
from testdb.errors import ExternalError, InputError, TestDbError, UsageError

TOKEN = "ghs_SeCrEt0KeN4LeakCheck9x"
REPO, PR = "octo/hello", 7
NOW = 1_700_000_000.0


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy from the environment would swallow requests meant for the local fake.
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN, prs={REPO: (PR,)}) as fake:
        yield fake


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def post(gh: FakeGitHub, sleeps: list[float]) -> Callable[..., Any]:
    def run(
        body: str = "## audit\n\nall guarded", *, repo: str = REPO, pr: int = PR, **kwargs: Any
    ) -> Any:
        options: dict[str, Any] = {
            "token": TOKEN,
            "api_url": gh.url,
            "sleep": sleeps.append,
            "clock": lambda: NOW,
            "timeout": 5.0,
        }
        return upsert_comment(repo, pr, body, **{**options, **kwargs})

    return run


def marker_body(text: str) -> str:
    return f"{DEFAULT_MARKER}\n{text}"


# -- the happy paths ------------------------------------------------------------------------


def test_creates_one_comment_with_the_marker_prepended(gh: FakeGitHub, post: Any) -> None:
    result = post("## audit\n\n3 gaps")
    stored = gh.comments()
    assert len(stored) == 1
    assert stored[0]["body"] == marker_body("## audit\n\n3 gaps")
    assert (result.action, result.id, result.url) == (
        "created",
        stored[0]["id"],
        stored[0]["html_url"],
    )
    assert result.duplicates == ()
    assert gh.methods() == ["GET", "POST"]
    assert {c.auth_scheme for c in gh.calls} == {"Bearer"}


def test_keeps_a_marker_already_in_the_body(gh: FakeGitHub, post: Any) -> None:
    post(f"intro\n{DEFAULT_MARKER}\nrest")
    assert [c["body"] for c in gh.comments()] == [f"intro\n{DEFAULT_MARKER}\nrest"]


def test_updates_the_marker_comment_on_page_two_of_three(gh: FakeGitHub, post: Any) -> None:
    # 100 per page: index 150 sits on page 2 of 3.
    ids = [
        gh.seed(REPO, PR, marker_body("old verdicts") if i == 150 else f"chatter {i}")
        for i in range(250)
    ]
    target = ids[150]
    result = post("new verdicts")
    stored = gh.comments()
    assert len(stored) == 250
    assert stored[150]["body"] == marker_body("new verdicts")
    assert stored[149]["body"] == "chatter 149"
    assert (result.action, result.id) == ("updated", target)
    assert gh.methods() == ["GET", "GET", "GET", "PATCH"]
    assert gh.calls[-1].path == f"/repos/{REPO}/issues/comments/{target}"


def test_unchanged_body_sends_no_patch(gh: FakeGitHub, post: Any) -> None:
    cid = gh.seed(REPO, PR, marker_body("same"), user=ACTIONS_BOT)
    before = gh.comments()[0]["updated_at"]
    result = post("same\n")
    assert (result.action, result.id) == ("unchanged", cid)
    assert "PATCH" not in gh.methods() and "POST" not in gh.methods()
    assert gh.comments()[0]["updated_at"] == before


def test_several_marker_comments_update_the_newest_and_report_the_rest(
    gh: FakeGitHub, post: Any
) -> None:
    old = [gh.seed(REPO, PR, marker_body(f"run {i}")) for i in range(2)]
    gh.seed(REPO, PR, "a human says hi")
    newest = gh.seed(REPO, PR, marker_body("run 2"))
    result = post("run 3")
    bodies = {c["id"]: c["body"] for c in gh.comments()}
    assert len(bodies) == 4
    assert bodies[newest] == marker_body("run 3")
    assert [bodies[i] for i in old] == [marker_body("run 0"), marker_body("run 1")]
    assert result.action == "updated" and result.id == newest
    assert [d.id for d in result.duplicates] == old
    assert all(isinstance(d, CommentRef) and "issuecomment" in d.url for d in result.duplicates)


# -- retries --------------------------------------------------------------------------------


def test_retries_502_with_exponential_backoff(
    gh: FakeGitHub, post: Any, sleeps: list[float]
) -> None:
    gh.inject(server_error(502), server_error(503))
    assert post().action == "created"
    assert sleeps == [1.0, 2.0]
    assert len(gh.comments()) == 1


def test_patch_is_retried_after_5xx(gh: FakeGitHub, post: Any, sleeps: list[float]) -> None:
    gh.seed(REPO, PR, marker_body("old"))
    gh.inject(server_error(500, method="PATCH"))
    assert post("new").action == "updated"
    assert gh.methods() == ["GET", "PATCH", "PATCH"]
    assert [c["body"] for c in gh.comments()] == [marker_body("new")]
    assert sleeps == [1.0]


def test_429_retry_after_is_honoured(gh: FakeGitHub, post: Any, sleeps: list[float]) -> None:
    gh.inject(retry_after(7), retry_after(3, status=403))
    assert post().action == "created"
    assert sleeps == [7.0, 3.0]
    assert len(gh.comments()) == 1


def test_primary_rate_limit_waits_for_the_reset(
    gh: FakeGitHub, post: Any, sleeps: list[float]
) -> None:
    gh.inject(rate_limited(int(NOW) + 30))
    assert post().action == "created"
    assert sleeps == [31.0]  # 30 s to the reset plus a second of slack
    assert len(gh.comments()) == 1


def test_rate_limit_beyond_the_wait_budget_gives_up_at_once(
    gh: FakeGitHub, post: Any, sleeps: list[float]
) -> None:
    gh.inject(rate_limited(int(NOW) + 3600))
    with pytest.raises(ExternalError, match=r"rate limited.*wait 3601s"):
        post(max_wait=600)
    assert sleeps == []
    assert gh.comments() == []


def test_total_wait_is_bounded(gh: FakeGitHub, post: Any, sleeps: list[float]) -> None:
    gh.inject(*[retry_after(40)] * 3)
    with pytest.raises(ExternalError, match="retry budget"):
        post(max_wait=100)
    assert sleeps == [40.0, 40.0]
    assert gh.comments() == []


def test_gives_up_after_max_retries(gh: FakeGitHub, post: Any, sleeps: list[float]) -> None:
    gh.inject(*[server_error(500)] * 4)
    with pytest.raises(ExternalError, match=r"kept failing.*500.*after 4 attempts") as info:
        post(max_retries=3)
    assert "githubstatus" in str(info.value)
    assert sleeps == [1.0, 2.0, 4.0]
    assert gh.pending() == 0 and gh.comments() == []


def test_connection_refused_is_retried_then_reported(sleeps: list[float]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ExternalError, match="no answer"):
        upsert_comment(
            REPO,
            PR,
            "x",
            token=TOKEN,
            api_url=f"http://127.0.0.1:{port}",
            sleep=sleeps.append,
            max_retries=2,
        )
    assert sleeps == [1.0, 2.0]


def test_each_retry_is_one_line_and_the_final_error_names_the_url(sleeps: list[float]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lines: list[str] = []
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(ExternalError) as info:
        upsert_comment(REPO, PR, "x", token=TOKEN, api_url=url, sleep=sleeps.append,
                       max_retries=2, on_retry=lines.append)
    assert [ln.split(" failed:")[0] for ln in lines] == ["attempt 1 of 3", "attempt 2 of 3"]
    assert all("Connection refused" in ln for ln in lines)
    assert lines[0].endswith("retrying in 1s") and lines[1].endswith("retrying in 2s")
    message = str(info.value)
    assert message.startswith(f"{url}/repos/{REPO}/issues/{PR}/comments: ")
    assert "githubstatus" not in message  # nothing answered: not GitHub's outage
    assert f"nothing answered at {url}; check --api-url" in message


def test_comment_post_prints_each_retry_on_stderr(run_cli: Any, tmp_path: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import reports.github as github

    monkeypatch.setattr(github.time, "sleep", lambda s: None)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    audit = tmp_path / "audit.json"
    from tests.conftest import EXAMPLE

    assert run_cli("--root", EXAMPLE, "audit", "--diff", f"{EXAMPLE}/pr.diff", "--format",
                   "json", "-o", str(audit)).code in (0, 1)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    res = run_cli("comment", "--audit", str(audit), "--post", "--repo", REPO, "--pr", str(PR),
                  "--api-url", f"http://127.0.0.1:{port}")
    assert res.code == 2
    retries = [ln for ln in res.err.splitlines() if ln.startswith("comment: attempt ")]
    assert len(retries) == 5  # the default 5 retries, one line each, before the error
    assert f"error: http://127.0.0.1:{port}/repos/{REPO}" in res.err


# -- idempotence: never two comments -------------------------------------------------------


def test_post_applied_but_answered_502_leaves_exactly_one_comment(
    gh: FakeGitHub, post: Any, sleeps: list[float]
) -> None:
    gh.inject(applied_then(502))
    result = post("hello")
    stored = gh.comments()
    assert len(stored) == 1
    assert (result.action, result.id) == ("created", stored[0]["id"])
    assert gh.methods() == ["GET", "POST", "GET"]
    assert sleeps == [1.0]


def test_post_applied_but_timed_out_leaves_exactly_one_comment(gh: FakeGitHub, post: Any) -> None:
    gh.inject(slow(2.0, method="POST"))
    result = post("hello", timeout=0.3)
    assert len(gh.comments()) == 1
    assert result.action == "created"
    assert gh.methods().count("POST") == 1


def test_post_lost_before_applying_is_posted_again(gh: FakeGitHub, post: Any) -> None:
    gh.inject(server_error(502, method="POST"))
    assert post().action == "created"
    assert gh.methods() == ["GET", "POST", "GET", "POST"]
    assert len(gh.comments()) == 1


# -- clear errors ---------------------------------------------------------------------------


def test_401_names_the_token(post: Any) -> None:
    with (
        FakeGitHub(token="ghs_other") as other,
        pytest.raises(ExternalError, match="401 Bad credentials") as info,
    ):
        post(api_url=other.url)
    assert "GITHUB_TOKEN" in str(info.value) and "expired" in str(info.value)


def test_403_names_permissions_and_the_fork_case(sleeps: list[float]) -> None:
    with FakeGitHub(token=TOKEN, read_only=True) as fake:
        with pytest.raises(ExternalError, match="403 Resource not accessible") as info:
            upsert_comment(REPO, PR, "x", token=TOKEN, api_url=fake.url, sleep=sleeps.append)
        assert fake.comments() == []
    text = str(info.value)
    for words in (
        "pull-requests: write",
        "issues: write",
        "fork",
        "pull_request_target",
        "workflow_run",
    ):
        assert words in text
    assert sleeps == []


def test_404_names_repo_and_pr(gh: FakeGitHub, post: Any) -> None:
    with pytest.raises(ExternalError, match="404") as info:
        post(pr=8)
    assert f"{REPO} exists and #8" in str(info.value)
    assert "cannot see" in str(info.value)


def test_422_shows_githubs_reason(gh: FakeGitHub, post: Any) -> None:
    gh.inject(
        Reply(
            422,
            body={
                "message": "Validation Failed",
                "errors": [
                    {
                        "resource": "IssueComment",
                        "code": "custom",
                        "field": "body",
                        "message": "body is too long (maximum is 65536 characters)",
                    }
                ],
            },
            method="POST",
        )
    )
    with pytest.raises(ExternalError, match="422 Validation Failed: body is too long"):
        post()
    assert gh.comments() == []


def test_overlong_body_is_refused_before_any_request(gh: FakeGitHub, post: Any) -> None:
    with pytest.raises(InputError, match="at most 65536"):
        post("x" * 70_000)
    assert gh.calls == []


def test_redirect_is_reported_not_followed(gh: FakeGitHub, post: Any) -> None:
    gh.inject(
        Reply(
            301,
            headers={"Location": f"{gh.url}/repositories/1/issues/7/comments"},
            body={"message": "Moved Permanently"},
        )
    )
    with pytest.raises(ExternalError, match="renamed or transferred"):
        post()
    assert gh.methods() == ["GET"]


def test_pagination_link_to_another_host_is_not_followed(gh: FakeGitHub, post: Any) -> None:
    # Every request carries the token, so a next link elsewhere must not be fetched.
    with FakeGitHub(token=TOKEN) as elsewhere:
        link = f'<{elsewhere.url}/repos/{REPO}/issues/{PR}/comments?page=2>; rel="next"'
        gh.inject(Reply(200, body=[], headers={"Link": link}))
        with pytest.raises(ExternalError, match="another host"):
            post()
        assert elsewhere.calls == []
    assert gh.comments() == []


@pytest.mark.parametrize(
    ("repo", "pr", "error"),
    [
        ("octo", 7, InputError),
        ("a/b/c", 1, InputError),
        ("../..", 1, InputError),
        ("octo/hello\n", 1, InputError),
        ("octo/hello", 0, InputError),
        ("octo/hello", True, InputError),
    ],
)
def test_bad_arguments(repo: str, pr: int, error: type[TestDbError]) -> None:
    with pytest.raises(error):
        upsert_comment(repo, pr, "x", token=TOKEN)


def test_missing_token_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="GITHUB_TOKEN"):
        upsert_comment(REPO, PR, "x", token="  \n")


# -- the token never leaks ------------------------------------------------------------------


def _leak_scenarios() -> dict[str, Callable[[FakeGitHub], dict[str, Any]]]:
    def inject(*replies: Reply) -> Callable[[FakeGitHub], dict[str, Any]]:
        def arrange(fake: FakeGitHub) -> dict[str, Any]:
            fake.inject(*replies)
            return {}

        return arrange

    def closed_port(fake: FakeGitHub) -> dict[str, Any]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return {"api_url": f"http://127.0.0.1:{s.getsockname()[1]}"}

    def read_only(fake: FakeGitHub) -> dict[str, Any]:
        fake.read_only = True
        return {}

    echo = {"message": f"token {TOKEN} is not allowed", "documentation_url": TOKEN}
    return {
        "401": lambda fake: {"token": TOKEN + "-wrong"},
        "403": read_only,
        "404": lambda fake: {"pr": 99},
        "422": inject(Reply(422, body={"message": "Validation Failed"}, method="POST")),
        "5xx exhausted": inject(*[server_error(502)] * 6),
        "rate limit over budget": inject(rate_limited(int(NOW) + 99_999)),
        "connection refused": closed_port,
        "timeout": inject(*[slow(1.0)] * 6),
        "echoed in 500": inject(*[Reply(500, body=echo)] * 6),
        "echoed in 404": inject(Reply(404, body=echo)),
        "echoed in 403": inject(Reply(403, body=echo)),
        "echoed in redirect": inject(Reply(302, headers={"Location": f"http://x/{TOKEN}"})),
        "not json": inject(Reply(200, body=b"<html>login</html>")),
        "foreign next link": inject(
            Reply(
                200, body=[], headers={"Link": f'<http://evil.example/{TOKEN}?page=2>; rel="next"'}
            )
        ),
        "bad token chars": lambda fake: {"token": TOKEN + "\nX-Evil: 1"},
        "non-ascii token": lambda fake: {"token": TOKEN + "\u00e9"},
    }


@pytest.mark.parametrize("scenario", sorted(_leak_scenarios()))
def test_token_never_leaks(
    scenario: str,
    gh: FakeGitHub,
    post: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    kwargs = _leak_scenarios()[scenario](gh)
    kwargs.setdefault("timeout", 0.2)
    with pytest.raises(TestDbError) as info:
        post(**kwargs)
    exc = info.value
    captured = capsys.readouterr()
    seen = [
        str(exc),
        repr(exc),
        exc.hint,
        exc.bare,
        *map(str, exc.args),
        "".join(traceback.format_exception(exc)),
        captured.out,
        captured.err,
        caplog.text,
        *(repr(r.__dict__) for r in caplog.records),
    ]
    secret = TOKEN[4:]  # the distinctive part, in case a prefix gets mangled
    assert not [s for s in seen if secret in s]


def test_token_absent_from_logs_of_a_retried_success(
    gh: FakeGitHub, post: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    gh.inject(Reply(502, body={"message": f"upstream saw {TOKEN}"}), retry_after(1))
    result = post()
    assert "retrying" in caplog.text
    assert TOKEN not in caplog.text and TOKEN not in repr(result)


# -- the fake itself answers like GitHub ----------------------------------------------------


def test_fake_checks_credentials_like_github(gh: FakeGitHub) -> None:
    url = f"{gh.url}/repos/{REPO}/issues/{PR}/comments"
    for header, status in [
        (f"token {TOKEN}", 200),
        (f"Bearer {TOKEN}", 200),
        ("Bearer nope", 401),
        (None, 401),
    ]:
        request = urllib.request.Request(url)
        if header:
            request.add_header("Authorization", header)
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                assert (answer.status, answer.headers["X-RateLimit-Resource"]) == (status, "core")
        except urllib.error.HTTPError as exc:
            assert exc.code == status
            assert json.loads(exc.read())["message"] in (
                "Bad credentials",
                "Requires authentication",
            )
