#!/usr/bin/env bash
# deps_check.sh - keep the core's file dependencies pointing one way.
#
#   tests/deps_check.sh [SOURCE_DIR]      (default: the repository holding this script)
#
# The modules of src/core, bottom up, are the ```layers block of docs/HACKING.md ("Layout"):
# one line per module, "name | its files | what it does". Each module declares what it offers in
# its header, and a file uses another module only through that header (a call into a module
# needs its declarations, so the include graph is the call graph, less the public API of
# include/litetx/ and the pointers lite_init sets in the context). The check derives the graph
# of modules from the #include "..." lines of src/core and src/support, adds the calls the
# includes cannot show (a call of a function declared LITE_API in include/litetx/litetx.h is a
# use of the module whose file defines it: a module below the public calls that calls one is
# listed below a module it uses), and fails:
#   - on a file of src/core or src/support that no module lists, or a listed file that is gone;
#   - on a cycle between modules, printed as a -> b -> ... -> a with the includes that make it;
#   - on a module that includes one listed above it (the list must say the order as it is).
set -u
SRC=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$SRC" || exit 2
[ -f docs/HACKING.md ] || { echo "deps_check: no docs/HACKING.md under $SRC" >&2; exit 2; }

awk '
function fail(msg) { print "deps_check: " msg; bad = 1 }
# Depth-first search for a cycle through the module graph (edge[a, b] set when a includes b).
function dfs(m,    j, n) {
    state[m] = 1
    stack[++depth] = m
    for (j = 1; j <= nmod; j++) {
        n = mods[j]
        if (!((m, n) in edge))
            continue
        if (state[n] == 1 && !((n) in reported))
            report_cycle(n)
        else if (state[n] == 0)
            dfs(n)
    }
    depth--
    state[m] = 2
}
function report_cycle(n,    i, k, s, via) {
    for (i = 1; i <= depth; i++)
        if (stack[i] == n)
            break
    s = ""
    via = ""
    for (k = i; k <= depth; k++) {
        s = s stack[k] " -> "
        nxt = k < depth ? stack[k + 1] : n
        via = via "\n    " stack[k] " -> " nxt ": " why[stack[k], nxt]
        reported[stack[k]] = 1
    }
    fail("cycle: " s n via)
}
# The layer list: the ```layers block of HACKING.md.
FILENAME ~ /HACKING\.md$/ {
    if ($0 ~ /^```layers/) { inblock = 1; next }
    if (inblock && $0 ~ /^```/) { inblock = 0; next }
    if (!inblock)
        next
    split($0, part, "|")
    name = part[1]; gsub(/[ \t]/, "", name)
    if (name == "")
        next
    if (name in rank)
        fail("docs/HACKING.md lists module " name " twice")
    rank[name] = ++nmod
    mods[nmod] = name
    nf = split(part[2], fl, " ")
    for (i = 1; i <= nf; i++) {
        if (fl[i] in owner)
            fail(fl[i] " is listed in modules " owner[fl[i]] " and " name)
        owner[fl[i]] = name
    }
    next
}
# The public API: every function declared LITE_API.
FILENAME ~ /include\/litetx\/litetx\.h$/ {
    if (match($0, /^LITE_API[^(]*[^A-Za-z0-9_]lite_[A-Za-z0-9_]+\(/)) {
        fn = substr($0, RSTART, RLENGTH - 1)
        sub(/.*[^A-Za-z0-9_]/, "", fn)
        public[fn] = 1
    }
    next
}
# Every source file: its module, and its includes of other modules.
FNR == 1 {
    file = FILENAME
    sub(/.*\//, "", file)
}
/^[ \t]*#[ \t]*include[ \t]*"/ {
    inc = $0
    sub(/^[^"]*"/, "", inc)
    sub(/".*/, "", inc)
    if (!(file in owner) || !(inc in owner))
        next    # the public headers (litetx/...), or a file already reported
    a = owner[file]; b = owner[inc]
    if (a == b)
        next
    if (!((a, b) in edge))
        why[a, b] = file " includes " inc
    edge[a, b] = 1
}
# Calls of lite_* functions, outside comments and strings; a LITE_API line defines its name.
(file in owner) && $0 !~ /^[ \t]*(\*|\/\*|\/\/|#)/ {
    line = $0
    gsub(/"([^"\\]|\\.)*"/, "\"\"", line)
    sub(/\/\*.*/, "", line)
    sub(/\/\/.*/, "", line)
    if (line ~ /^LITE_API/ && match(line, /[^A-Za-z0-9_]lite_[A-Za-z0-9_]+\(/)) {
        fn = substr(line, RSTART + 1, RLENGTH - 2)
        defined[fn] = owner[file]
        line = substr(line, RSTART + RLENGTH)
    }
    while (match(line, /(^|[^A-Za-z0-9_])lite_[A-Za-z0-9_]+[ \t]*\(/)) {
        fn = substr(line, RSTART, RLENGTH)
        sub(/^[^l]*/, "", fn)
        sub(/[ \t]*\($/, "", fn)
        if (!((file, fn) in called))
            called[file, fn] = 1
        line = substr(line, RSTART + RLENGTH)
    }
}
END {
    for (k in called) {
        split(k, ff, SUBSEP)
        if (!(ff[2] in public) || !(ff[2] in defined))
            continue
        a = owner[ff[1]]; b = defined[ff[2]]
        if (a == b)
            continue
        if (!((a, b) in edge))
            why[a, b] = ff[1] " calls " ff[2] "() of the public API"
        edge[a, b] = 1
    }
    if (nmod == 0) {
        print "deps_check: no ```layers block in docs/HACKING.md"
        exit 1
    }
    nsrc = split(sources, src, " ")
    for (i = 1; i <= nsrc; i++) {
        g = src[i]
        seen[g] = 1
        if (!(g in owner))
            fail(g " is in no module of docs/HACKING.md (```layers)")
    }
    for (g in owner)
        if (!(g in seen))
            fail("docs/HACKING.md lists " g " (module " owner[g] "), which src/core and src/support do not have")
    for (j = 1; j <= nmod; j++)
        if (state[mods[j]] == 0)
            dfs(mods[j])
    for (k in edge) {
        split(k, ab, SUBSEP)
        if (rank[ab[1]] < rank[ab[2]])
            fail("module " ab[1] " uses " ab[2] ", listed above it (" why[ab[1], ab[2]] ")")
    }
    if (bad)
        exit 1
    n = 0
    for (k in edge)
        n++
    printf "deps_check: %d modules, %d dependencies between them, all pointing down\n", nmod, n
}
' sources="$(cd src && ls core/*.c core/*.h support/*.h | sed 's|.*/||' | tr '\n' ' ')" \
    docs/HACKING.md include/litetx/litetx.h src/core/*.c src/core/*.h src/support/*.h
