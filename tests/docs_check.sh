#!/usr/bin/env bash
# docs_check.sh - keep the reference pages free of lab-notebook text: what was done when, by
# whom, in which work session, under which tracker number, belongs in git history.
#
#   tests/docs_check.sh [SOURCE_DIR]      (default: the repository holding this script)
#
# Checked: README.md and docs/*.md (whole text), bench/*.sh (comments only: lines whose first
# non-blank character is '#', and the part of a line after a '#' that follows a blank).
# A finding prints FILE:LINE: what: the line, and the script exits 1. Matching ignores case.
#
#   "session"             anywhere ("TLS session" is allowed: it names a protocol object)
#   "issue N", "issue #N" anywhere: readers cannot see the tracker
#   "../shared"           anywhere: a folder outside the repository
#   "/tmp/"               outside fenced code blocks (``` or ~~~) of a .md file, where a
#                         temporary path can be a legitimate example; everywhere in comments
#   a date (2026-11-22)   except on a line that says "measured at", where a table may give when
#                         its figures were taken
set -u
SRC=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$SRC" || exit 2
files=()
for f in README.md docs/*.md bench/*.sh; do
    [ -f "$f" ] && files+=("$f")
done
[ ${#files[@]} -gt 0 ] || { echo "docs_check: no files under $SRC" >&2; exit 2; }
awk '
FNR == 1 { fence = 0; md = FILENAME ~ /\.md$/ }
{
    line = $0
    text = line
    code = 0
    if (md) {
        if (line ~ /^[ \t]*(```|~~~)/) { fence = !fence; code = 1 }
        else code = fence
    } else {
        # shell: the comment part only
        if (line ~ /^[ \t]*#/) text = line
        else if (match(line, /[ \t]#/)) text = substr(line, RSTART + 1)
        else next
    }
    low = tolower(text)
    gsub(/tls session/, "", low)
    what = ""
    if (low ~ /session/) what = "\"session\""
    else if (low ~ /issue #?[0-9]/) what = "an issue number"
    else if (index(low, "../shared")) what = "a path outside the repository (../shared)"
    else if (index(low, "/tmp/") && !(md && code)) what = "a scratch path (/tmp/)"
    else if (low ~ /(^|[^0-9])[12][0-9][0-9][0-9]-[01][0-9]-[0-3][0-9]([^0-9]|$)/ && low !~ /measured at/)
        what = "a date"
    if (what != "") { printf "%s:%d: %s: %s\n", FILENAME, FNR, what, line; bad++ }
}
END {
    if (bad) {
        printf "docs_check: %d finding(s); history belongs in git, see tests/docs_check.sh\n", bad
        exit 1
    }
}' "${files[@]}" || exit 1
echo "docs_check: ${#files[@]} files clean"
