#!/usr/bin/env bash
# The shell steps of the testdb-audit stage in examples/jenkins/Jenkinsfile: audit a merge
# request's range, write the HTML report, and create or update the one sticky comment on its
# GitHub pull request. tests/reports/test_jenkins.py runs it the way the stage does.
#
# Exit: the audit's code: 0 (no finding at TESTDB_FAIL_ON), 1 (findings: the comment is posted,
# the stage marks the build unstable), 2 or 3 (the range or an input could not be read: nothing
# is posted).
#
# Inputs, from the environment only (the stage's withEnv; never interpolated into the script):
#   TESTDB_ROOT           the checkout to audit (default .)
#   TESTDB_HEAD           the merge request's last commit (default the checkout's HEAD)
#   TESTDB_TARGET_BRANCH  the branch it merges into: the base is TESTDB_REMOTE/<it> (the audit
#                         takes base...head, from their merge base), fetched when missing
#   TESTDB_BASE           a base revision instead of the target branch (optional)
#   TESTDB_REMOTE         default origin
#   TESTDB_OUT            audit.json, audit.txt, comment.md and html/ go here (default
#                         ./testdb-audit)
#   TESTDB_PR_API_URL     the pull request's API URL, as the bot passes it (github_pr_api_url:
#                         https://api.github.com/repos/OWNER/NAME/pulls/N): repository, number
#                         and API base; or TESTDB_REPO, TESTDB_PR and GITHUB_API_URL one by one
#   TESTDB_REPORT_URL     where the archived HTML report is served: the comment links it
#   TESTDB_FAIL_ON        error (default), warning or never
#   TESTDB_BOT_COMMAND    the PR's /bot run text, to judge under the stages it starts (optional)
#   GITHUB_TOKEN          posts the comment (never printed); empty: comment.md only
#   TESTDB                the testdb command (default testdb, on PATH)
set -euo pipefail

root="${TESTDB_ROOT:-.}"
out="${TESTDB_OUT:-$PWD/testdb-audit}"
remote="${TESTDB_REMOTE:-origin}"
fail_on="${TESTDB_FAIL_ON:-error}"
tool="${TESTDB:-testdb}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

head="${TESTDB_HEAD:-}"
if [ -z "$head" ]; then
  head="$(git -C "$root" rev-parse HEAD)"
fi

base="${TESTDB_BASE:-}"
if [ -z "$base" ]; then
  target="${TESTDB_TARGET_BRANCH:-}"
  if [ -z "$target" ]; then
    echo "testdb-audit: no base revision: set TESTDB_TARGET_BRANCH (the merge request's" \
         "target branch) or TESTDB_BASE" >&2
    exit 2
  fi
  base="$remote/$target"
  if ! git -C "$root" rev-parse --verify --quiet "$base^{commit}" > /dev/null; then
    echo "testdb-audit: $base is not in the checkout; fetching it"
    git -C "$root" fetch --no-tags --quiet "$remote" \
      "+refs/heads/$target:refs/remotes/$remote/$target" \
      || echo "testdb-audit: could not fetch $base" >&2
  fi
fi

# The pull request: from the bot's API URL (.../repos/OWNER/NAME/pulls/N), or one by one.
repo="${TESTDB_REPO:-}"
pr="${TESTDB_PR:-}"
api="${GITHUB_API_URL:-https://api.github.com}"
if [ -n "${TESTDB_PR_API_URL:-}" ]; then
  case "$TESTDB_PR_API_URL" in
    */repos/*/*/pulls/*)
      api="${TESTDB_PR_API_URL%%/repos/*}"
      rest="${TESTDB_PR_API_URL#*/repos/}"
      repo="${rest%%/pulls/*}"
      pr="${rest##*/pulls/}"
      pr="${pr%%/*}"
      ;;
    *)
      echo "testdb-audit: TESTDB_PR_API_URL is not .../repos/OWNER/NAME/pulls/N:" \
           "$TESTDB_PR_API_URL" >&2
      exit 2
      ;;
  esac
fi

audit=(--root "$root" audit --base "$base" --head "$head" --fail-on "$fail_on"
       -o "$out/audit.json")
if [ -n "${TESTDB_BOT_COMMAND:-}" ]; then
  audit+=(--bot-command "$TESTDB_BOT_COMMAND")
fi
# 1 means findings: the report and the comment still go out; the stage reads the exit code.
rc=0
"$tool" "${audit[@]}" > "$out/audit.txt" || rc=$?
cat "$out/audit.txt"
if [ "$rc" -gt 1 ]; then
  echo "testdb-audit: could not audit $base...$head (exit $rc); see the log above" >&2
  exit "$rc"
fi

"$tool" --root "$root" report --html "$out/html" --audit "$out/audit.json"

comment=(--audit "$out/audit.json")
if [ -n "$repo" ]; then
  comment+=(--repo "$repo" --head-sha "$head")
fi
if [ -n "${TESTDB_REPORT_URL:-}" ]; then
  comment+=(--report-url "$TESTDB_REPORT_URL")
fi
# A comment run may exit 1 on the audit's findings (as audit does): that is no failure here.
crc=0
"$tool" comment "${comment[@]}" > "$out/comment.md" || crc=$?
if [ "$crc" -gt 1 ]; then
  exit "$crc"
fi
if [ -z "$repo" ] || [ -z "$pr" ]; then
  echo "testdb-audit: no pull request (TESTDB_PR_API_URL); the comment is in $out/comment.md"
elif [ -z "${GITHUB_TOKEN:-}" ]; then
  echo "testdb-audit: no GITHUB_TOKEN; the comment is in $out/comment.md"
else
  crc=0
  "$tool" comment "${comment[@]}" --pr "$pr" --post --api-url "$api" || crc=$?
  if [ "$crc" -gt 1 ]; then
    exit "$crc"
  fi
fi
exit "$rc"
