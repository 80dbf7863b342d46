#!/bin/bash
# tunables_check.sh LITETX_INFO SRC_DIR BACKEND... - CTest tunables.check: the table of LITETX_*
# variables (src/core/tunables.c and each backend's lite_transport_ops.tunables, printed by
# `litetx-info --names`) is the whole truth:
#   - every "LITETX_..." string literal in the core, the tools and the compiled-in backends'
#     sources is in the table (a variable read but not listed fails here);
#   - every name in the table is read somewhere in those sources (no stale entries);
#   - every name in the table is documented in docs/ (CONFIG.md or the backend's page).
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
[ $fail = 0 ] && echo "ok: $(echo "$table" | wc -l) variables, each read, listed and documented"
exit $fail
