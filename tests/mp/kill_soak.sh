#!/bin/bash
# kill_soak.sh LITETX_RUN KILL_SOAK TRIALS [RANKS]: the kill-a-peer soak. Each trial runs RANKS
# (default 3) ranks of kill_soak under litetx-run on the transport the environment names
# (LITETX_TRANSPORT, LITETX_EFA_PROVIDER, ...); one rank, chosen at random (rank 0 included),
# SIGKILLs itself at a random 0.2-2 s into mixed traffic. Every survivor must end its ops, learn
# the loss and exit within KILL_SOAK_BOUND_MS of the kill (default: LITETX_OP_TIMEOUT_MS, 5000
# unless set, + 3000) and print its "ok" line (kill_soak.c checks the details).
#
# A survivor still running a second past the bound is a HANG: its stacks are written with
# gdb (when installed) to KILL_SOAK_OUT/hang.<trial>.rank<R>.txt, then it is killed.
# A trial whose lite_init failed (a host too loaded to connect in time) had no kill: it is
# counted apart. KILL_SOAK_SEED makes the choice of victims and delays repeatable;
# KILL_SOAK_ROOT_HOST=ADDR bootstraps on ADDR (port KILL_SOAK_PORT0, default 29400, + trial)
# instead of litetx-run's loopback default (the rdma VM suite: rxe's address). Exits 0 when
# no trial failed or hung, 1 otherwise; prints one line per such trial and a summary.
set -u
run=$1 prog=$2 trials=$3 np=${4:-3}
export LITETX_OP_TIMEOUT_MS=${LITETX_OP_TIMEOUT_MS:-5000}
export LITETX_INIT_TIMEOUT_MS=${LITETX_INIT_TIMEOUT_MS:-20000}
bound_ms=${KILL_SOAK_BOUND_MS:-$((LITETX_OP_TIMEOUT_MS + 3000))}
export KILL_SOAK_BOUND_MS=$bound_ms
out=${KILL_SOAK_OUT:-$(mktemp -d /tmp/kill_soak.XXXXXX)}
mkdir -p "$out"
RANDOM=${KILL_SOAK_SEED:-$$}

# bash's own clock where it has one (busybox's date, in the rdma VM, has no %N)
now_ms() {
    if [ -n "${EPOCHREALTIME:-}" ]; then
        local us=${EPOCHREALTIME//[!0-9]/}
        echo $((10#$us / 1000))
    else
        echo $(($(date +%s%N) / 1000000))
    fi
}

pass=0 fail=0 hang=0 released=0 noinit=0
for ((t = 1; t <= trials; t++)); do
    victim=$((RANDOM % np))
    delay=$((200 + RANDOM % 1801))
    dir=$(mktemp -d "$out/trial.XXXXXX")
    root=()
    [ -n "${KILL_SOAK_ROOT_HOST:-}" ] && root=(--root "$KILL_SOAK_ROOT_HOST:$((${KILL_SOAK_PORT0:-29400} + t))")
    KILL_SOAK_VICTIM=$victim KILL_SOAK_DELAY_MS=$delay KILL_SOAK_PIDDIR=$dir \
        "$run" -n "$np" -t 120 -g 60 ${root[@]+"${root[@]}"} "$prog" >"$dir/out" 2>&1 &
    lpid=$!
    start=$(now_ms) death=0 hung=0
    # Bounded: 1200 polls of 0.1 s; the launcher's own -t 120 ends it before.
    for ((i = 0; i < 1200; i++)); do
        kill -0 "$lpid" 2>/dev/null || break
        now=$(now_ms)
        if ((death == 0)) && [ -s "$dir/rank.$victim.pid" ] &&
            ! kill -0 "$(cat "$dir/rank.$victim.pid")" 2>/dev/null; then
            death=$now
        fi
        if ((death == 0 && now - start > delay + 60000)); then
            echo "trial $t: the victim (rank $victim) did not die within 60 s of its delay"
            break
        fi
        if ((death && now - death > bound_ms + 1000)); then
            for ((r = 0; r < np; r++)); do
                [ "$r" = "$victim" ] && continue
                pid=$(cat "$dir/rank.$r.pid" 2>/dev/null) || continue
                kill -0 "$pid" 2>/dev/null || continue
                hung=1
                if command -v gdb >/dev/null; then
                    timeout 60 gdb -batch -p "$pid" -ex "thread apply all bt" \
                        >"$out/hang.$t.rank$r.txt" 2>&1
                fi
                kill -9 "$pid" 2>/dev/null
            done
            break
        fi
        sleep 0.1
    done
    if kill -0 "$lpid" 2>/dev/null; then # given up on: nothing of the trial outlives it
        for ((r = 0; r < np; r++)); do
            pid=$(cat "$dir/rank.$r.pid" 2>/dev/null) && kill -9 "$pid" 2>/dev/null
        done
        kill -9 "$lpid" 2>/dev/null
    fi
    wait "$lpid" 2>/dev/null
    oks=$(grep -c "^kill_soak: rank [0-9]* ok" "$dir/out")
    # the efa backend's note that a lock left held by the dead process was released (shm)
    released=$((released + $(grep -c "released it" "$dir/out")))
    if ((hung)); then
        hang=$((hang + 1))
        echo "trial $t: HANG (victim rank $victim at +$delay ms): stacks in $out/hang.$t.rank*.txt"
        cp "$dir/out" "$out/hang.$t.out"
    elif ((oks == np - 1)); then
        pass=$((pass + 1))
        grep -h "^kill_soak: rank [0-9]* ok" "$dir/out" >>"$out/ok.txt"
        rm -rf "$dir"
        continue
    elif grep -q "check failed: rc == 0: lite_init" "$dir/out" && ! grep -q "^kill_soak:" "$dir/out"; then
        # no kill trial: lite_init itself failed (a host too loaded to connect in time); the
        # init tests cover that, and the summary counts it
        noinit=$((noinit + 1))
        echo "trial $t: lite_init failed before the kill; not counted"
    else
        fail=$((fail + 1))
        echo "trial $t: FAIL (victim rank $victim at +$delay ms): $oks of $((np - 1)) survivors ok"
        sed 's/^/    /' "$dir/out" | tail -n 30
        cp "$dir/out" "$out/fail.$t.out"
    fi
    rm -rf "$dir"
done
echo "kill_soak: ${LITETX_TRANSPORT:-auto}${LITETX_EFA_PROVIDER:+/$LITETX_EFA_PROVIDER}:" \
    "$trials trials, $pass passed, $fail failed, $hang hung, $noinit without init," \
    "$released lock(s) of dead processes released (bound ${bound_ms} ms; output in $out)"
((fail == 0 && hang == 0 && pass > 0))
