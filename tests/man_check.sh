#!/usr/bin/env bash
# man_check.sh - the manual pages under man/ cover the public API and format without warnings.
#
#   tests/man_check.sh [SOURCE_DIR]      (default: the repository holding this script)
#
# Checked, each finding printed on a line of its own, exit 1 if any:
#   - every LITE_API function of include/litetx/litetx.h is listed in the NAME section and shown
#     in the SYNOPSIS of a page of man/man3, and has man/man3/<function>.3 (that page, or a
#     one-line ".so man3/<page>.3" pointing at it, so that `man <function>` finds it);
#   - no page lists a lite_* function the header does not declare (a removed or renamed call);
#   - every LITE_* constant of the header is named in some page, and every lite_config_t field
#     in lite_init.3;
#   - every program of tools/*.c has man/man1/<program>.1 describing each of its options, and
#     litetx-info.1 each capability name the tool prints;
#   - every page's .TH names the version of the header's LITE_VERSION_* macros;
#   - groff formats every page with all warnings on (-ww) and prints nothing.
# The coverage checks need only a shell; the formatting check needs groff (Debian: groff-base)
# and the test exits 77 (skipped) without it, after the coverage checks have passed.
set -u
SRC=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$SRC" || exit 2
HDR=include/litetx/litetx.h
[ -f "$HDR" ] && [ -d man/man3 ] || { echo "man_check: no $HDR or man/man3 under $SRC" >&2; exit 2; }

bad=0
fail() { echo "man_check: $*"; bad=$((bad + 1)); }

# The public functions: the name before the first '(' of each line that starts with LITE_API.
mapfile -t api < <(sed -nE 's/^LITE_API[^(]*[ *](lite_[A-Za-z0-9_]+)[ ]*\(.*/\1/p' "$HDR" | sort -u)
[ ${#api[@]} -gt 0 ] || { echo "man_check: no LITE_API function found in $HDR" >&2; exit 2; }

# A page is a file that is not a .so stub.
is_stub() { head -n 1 "$1" | grep -q '^\.so '; }
# The names a page's NAME section lists: the words before "\-", up to the next .SH.
page_names() {
    awk '/^\.SH NAME/ { f = 1; next } /^\.SH/ { f = 0 } f' "$1" |
        awk '{ if (done) next; i = index($0, "\\-"); if (i) { print substr($0, 1, i - 1); done = 1 }
               else print }' | tr ', ' '\n\n' | grep -E '^lite_[A-Za-z0-9_]+$'
}
# The SYNOPSIS section of a page, roff escapes and quotes removed.
page_synopsis() {
    awk '/^\.SH SYNOPSIS/ { f = 1; next } /^\.SH/ { f = 0 } f' "$1" | sed -e 's/\\f[BIRP]//g' -e 's/"//g'
}

declare -A listed_in=() synopsis=()
pages=()
for p in man/man3/*.3; do
    is_stub "$p" && continue
    pages+=("$p")
    synopsis[$p]=$(page_synopsis "$p")
    while read -r n; do
        [ -n "$n" ] && listed_in[$n]=$p
    done < <(page_names "$p")
done

declare -A in_header=()
for f in "${api[@]}"; do
    in_header[$f]=1
    p=${listed_in[$f]:-}
    if [ -z "$p" ]; then
        fail "$f: declared in $HDR but listed in the NAME section of no page of man/man3"
        continue
    fi
    grep -qE "(^|[ *])$f\(" <<<"${synopsis[$p]}" ||
        fail "$f: listed in $p but not shown in its SYNOPSIS"
    base=$(basename "$p" .3)
    if [ "$base" != "$f" ]; then
        stub=man/man3/$f.3
        if [ ! -f "$stub" ]; then
            fail "$f: no man/man3/$f.3 (a file holding the line '.so man3/$base.3')"
        elif [ "$(cat "$stub")" != ".so man3/$base.3" ]; then
            fail "$stub: expected the one line '.so man3/$base.3'"
        fi
    fi
done
for n in "${!listed_in[@]}"; do
    [ -n "${in_header[$n]:-}" ] || fail "$n: listed in ${listed_in[$n]} but not declared in $HDR"
done
for s in man/man3/*.3; do
    is_stub "$s" || continue
    target=$(sed -n '1s/^\.so //p' "$s")
    [ -f "man/$target" ] && ! is_stub "man/$target" ||
        fail "$s: points at man/$target, which is not a page"
done

# The constants a caller uses (enumerators and #define'd LITE_* names; not the *_COUNT bounds or
# the header's own plumbing) are named in some page, and every lite_config_t field in lite_init.3.
mapfile -t consts < <(sed -nE -e 's/^#define (LITE_[A-Z0-9_]+).*/\1/p' \
    -e 's/^[ ]+(LITE_[A-Z0-9_]+)[ ]*=.*/\1/p' "$HDR" |
    grep -vE '^(LITE_API|LITE_BUILDING_LIBRARY)$|_COUNT$' | sort -u)
every_page=$(cat man/man1/*.1 man/man3/*.3 man/man7/*.7 2>/dev/null)
for c in "${consts[@]}"; do
    grep -qw -- "$c" <<<"$every_page" || fail "$c: defined in $HDR but named in no page"
done
mapfile -t fields < <(sed -n '/^typedef struct lite_config {/,/^} lite_config_t;/p' "$HDR" |
    sed -nE 's/^[ ]+[a-z0-9_ ]+[ *]+([a-z0-9_]+)(\[[0-9]+\])?;.*/\1/p' | grep -vx reserved)
[ ${#fields[@]} -gt 0 ] || fail "no lite_config_t field found in $HDR"
for f in "${fields[@]}"; do
    grep -qw -- "$f" man/man3/lite_init.3 ||
        fail "lite_config_t.$f: not described in man/man3/lite_init.3"
done

for t in tools/*.c; do
    [ -f "$t" ] || continue
    prog=$(basename "$t" .c)
    page=man/man1/$prog.1
    if [ ! -f "$page" ]; then
        fail "tools/$prog.c: no $page"
        continue
    fi
    # Its options (string literals "-x" / "--name" in the source), written \- in roff.
    for o in $(grep -oE '"--?[a-z][a-z-]*"' "$t" | tr -d '"' | sort -u); do
        grep -qF -- "${o//-/\\-}" "$page" || fail "$page: option $o of tools/$prog.c not described"
    done
done
# The capability names litetx-info prints.
if [ -f tools/litetx-info.c ] && [ -f man/man1/litetx-info.1 ]; then
    for c in $(sed -nE 's/.*\{LITE_CAP_[A-Z_]+, "([a-z_]+)"\}.*/\1/p' tools/litetx-info.c); do
        grep -qw -- "$c" man/man1/litetx-info.1 ||
            fail "man/man1/litetx-info.1: capability $c (tools/litetx-info.c) not described"
    done
fi

ver=$(sed -nE 's/^#define LITE_VERSION_(MAJOR|MINOR|PATCH) ([0-9]+).*/\2/p' "$HDR" | paste -sd.)
all=("${pages[@]}")
for p in man/man1/*.1 man/man7/*.7; do
    [ -f "$p" ] && all+=("$p")
done
for p in "${all[@]}"; do
    grep -qE "^\.TH .*\"liblitetx $ver\"" "$p" ||
        fail "$p: .TH does not name \"liblitetx $ver\" (the header's version)"
done

if [ "$bad" -gt 0 ]; then
    echo "man_check: $bad finding(s)"
    exit 1
fi
echo "man_check: ${#api[@]} functions of $HDR documented in ${#pages[@]} pages of man/man3"

if ! command -v groff >/dev/null 2>&1; then
    echo "man_check: SKIP formatting check: groff not installed (Debian: apt-get install groff-base)"
    exit 77
fi
# From man/, so that the .so requests of the stubs resolve as they do in an installed tree.
cd man || exit 2
for p in man1/*.1 man3/*.3 man7/*.7; do
    [ -f "$p" ] || continue
    is_stub "$p" && continue # its .so target was checked above and is formatted itself
    out=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$p" 2>&1)
    if [ $? -ne 0 ] || [ -n "$out" ]; then
        echo "man_check: man/$p: groff warnings:"
        echo "$out" | sed 's/^/    /'
        bad=$((bad + 1))
    fi
done
if [ "$bad" -gt 0 ]; then
    echo "man_check: $bad page(s) with groff warnings"
    exit 1
fi
echo "man_check: every page formats without groff warnings"
