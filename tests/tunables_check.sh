#!/bin/bash
# tunables_check.sh LITETX_INFO SRC_DIR BACKEND... - CTest tunables.check: the table of LITETX_*
# variables (src/core/tunables.c and each backend's lite_transport_ops.tunables, printed by
# `litetx-info --names` / `--table`) is the whole truth:
#   - every "LITETX_..." string literal in the core, the tools and the compiled-in backends'
#     sources is in the table (a variable read but not listed fails here);
#   - every name in the table is read somewhere in those sources (no stale entries);
#   - every name in the table is documented in docs/ (CONFIG.md or the backend's page);
#   - no backend reads the environment itself (getenv, secure_getenv, lite_env_long under
#     src/transports): the core resolves and checks every variable and hands the values over;
#   - docs/CONFIG.md's "Every variable" table (between the tunables:begin/end markers) has one
#     row per variable of this build, exactly as the table says it (name, owner, type, accepted
#     values, default, doc). UPDATE=1 rewrites those rows from the table instead of checking;
#     rows of backends not compiled into this build are kept and not checked.
set -u
info=$1 src=$2
shift 2
dirs=("$src/src/core" "$src/tools")
for b in "$@"; do dirs+=("$src/src/transports/$b"); done

table=$("$info" --names | sort -u)
[ -n "$table" ] || { echo "FAIL: litetx-info --names printed nothing"; exit 1; }
used=$(grep -rhoE '"LITETX_[A-Z0-9_]+' "${dirs[@]}" --include='*.c' --include='*.h' |
    tr -d '"' | sort -u)
fail=0
for v in $(comm -13 <(echo "$table") <(echo "$used")); do
    echo "FAIL: $v is read in the sources but is not in the tunables table"
    fail=1
done
for v in $(comm -23 <(echo "$table") <(echo "$used")); do
    echo "FAIL: $v is in the tunables table but no source reads it"
    fail=1
done
for v in $table; do
    grep -rqw -- "$v" "$src/docs" || { echo "FAIL: $v is not documented in docs/"; fail=1; }
done

# Backends get their variables from the core (lite_tp_env), never from the environment.
reads=$(grep -rnE '\b(secure_getenv|getenv|lite_env_long)[[:space:]]*\(' "$src/src/transports" \
    --include='*.c' --include='*.h')
if [ -n "$reads" ]; then
    echo "FAIL: a backend reads the environment itself (use lite_tp_env: docs/BACKENDS.md):"
    echo "$reads"
    fail=1
fi

# docs/CONFIG.md's generated table: one markdown row per variable.
doc=$src/docs/CONFIG.md
rows=$("$info" --table | awk -F'\t' '{
    gsub(/\|/, ", ", $4);
    printf "| `%s` | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }')
owners=$(printf 'core\n'; printf '%s\n' "$@")
section=$(sed -n '/<!-- tunables:begin -->/,/<!-- tunables:end -->/p' "$doc")
[ -n "$section" ] || { echo "FAIL: $doc has no tunables:begin/end section"; exit 1; }
if [ "${UPDATE:-0}" = 1 ]; then
    # keep the rows of owners this build does not have, replace the others
    kept=$(echo "$section" | grep '^| `LITETX_' | awk -F' \\| ' -v own="$(echo $owners)" '
        BEGIN { n = split(own, o, " "); for (i = 1; i <= n; i++) have[o[i]] = 1 }
        !($2 in have)')
    new=$( { echo "$rows"; [ -n "$kept" ] && echo "$kept"; } | sort -t'|' -k3,3 -s)
    awk -v rows="$new" '
        /<!-- tunables:begin -->/ { print; print ""; print "| variable | owner | type | accepted | default | what it does |"; print "| --- | --- | --- | --- | --- | --- |"; print rows; print ""; skip = 1; next }
        /<!-- tunables:end -->/ { skip = 0 }
        !skip' "$doc" >"$doc.tmp" && mv "$doc.tmp" "$doc"
    echo "updated $doc"
else
    while IFS= read -r row; do
        grep -qxF -- "$row" <<<"$section" || {
            echo "FAIL: docs/CONFIG.md lacks (or differs from) this row of the table:"
            echo "  $row"
            fail=1
        }
    done <<<"$rows"
    # a row of a compiled-in owner that the table no longer has
    while IFS= read -r row; do
        owner=$(awk -F' \\| ' '{print $2}' <<<"$row")
        grep -qxw -- "$owner" <<<"$owners" || continue
        grep -qxF -- "$row" <<<"$rows" ||
            { echo "FAIL: docs/CONFIG.md has a row the table does not: $row"; fail=1; }
    done < <(echo "$section" | grep '^| `LITETX_')
    [ $fail = 0 ] || echo "(UPDATE=1 $0 $info $src $* rewrites the rows from the table)"
fi
[ $fail = 0 ] && echo "ok: $(echo "$table" | wc -l) variables, each read, listed, documented and in CONFIG.md's table; no backend reads the environment"
exit $fail
