#!/bin/sh
# launch.sh: start N ranks of a data-parallel program on this machine, as
# `torchrun --standalone --nproc_per_node=N --no-python PROGRAM ARGS` does,
# without Python.
#
#     examples/data_parallel/launch.sh N PROGRAM [ARGS...]
#
# Rank i (0 <= i < N) runs PROGRAM ARGS with RANK=i, LOCAL_RANK=i,
# WORLD_SIZE=N, LOCAL_WORLD_SIZE=N, MASTER_ADDR=127.0.0.1 and MASTER_PORT,
# the variables torchrun sets, and with the job's rendezvous:
# PINLOAD_JOB_ID, an id no other job on this machine has (inherited if set),
# and PINLOAD_RDZV_DIR, a fresh directory the ranks may share files in
# (inherited if set). Their stdout and stderr are the launcher's.
#
# It waits for every rank. When one fails (a nonzero status, or a signal),
# it says which, stops the others (SIGTERM, then SIGKILL 5 s later) and
# exits with that rank's status; 0 once every rank has exited 0. Interrupted
# (SIGINT, SIGTERM, SIGHUP), it stops every rank and exits 130. POSIX sh.

me=${0##*/}

if [ $# -lt 2 ]; then
    echo "usage: $me N PROGRAM [ARGS...]" >&2
    exit 2
fi
n=$1
shift
case $n in
'' | *[!0-9]*)
    echo "$me: N must be a positive integer, not '$n'" >&2
    exit 2
    ;;
esac
if [ "$n" -lt 1 ] || [ "$n" -gt 4096 ]; then
    echo "$me: N must be from 1 to 4096, not $n" >&2
    exit 2
fi

# The launcher's own files: each rank's pid and, once it has exited, a line
# "RANK STATUS" in exits.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pinload-launch.XXXXXX") || exit 1
: >"$tmp/exits"
export PINLOAD_JOB_ID="${PINLOAD_JOB_ID:-launch-$$-$(date +%s)}"
if [ -z "${PINLOAD_RDZV_DIR:-}" ]; then
    PINLOAD_RDZV_DIR=$tmp/rdzv
    mkdir "$PINLOAD_RDZV_DIR" || exit 1
fi
export PINLOAD_RDZV_DIR
export WORLD_SIZE="$n" LOCAL_WORLD_SIZE="$n"
export MASTER_ADDR="${MASTER_ADDR:-127.0.0.1}"
export MASTER_PORT="${MASTER_PORT:-29500}"

# One rank, in a subshell that records how it ended.
rank() {
    i=$1
    shift
    RANK=$i LOCAL_RANK=$i "$@" &
    child=$!
    echo "$child" >"$tmp/pid.$i"
    wait "$child" 2>/dev/null # (no "Terminated": the launcher says why)
    echo "$i $?" >>"$tmp/exits"
}

stop_ranks() { # signal: every rank that has not exited yet
    for f in "$tmp"/pid.*; do
        [ -f "$f" ] || continue
        i=${f##*.}
        grep -q "^$i " "$tmp/exits" || kill "-$1" "$(cat "$f")" 2>/dev/null
    done
}

interrupted=0
trap 'interrupted=1' INT TERM HUP

i=0
while [ "$i" -lt "$n" ]; do
    rank "$i" "$@" &
    i=$((i + 1))
done

# The first rank that failed, said with $1 after it; its status in $status.
status=0
first_failure() {
    failed=$(awk '$2 != 0 { print; exit }' "$tmp/exits")
    [ -n "$failed" ] || return 1
    status=${failed#* }
    if [ "$status" -gt 128 ]; then
        why="was killed by signal $((status - 128))"
    else
        why="exited with status $status"
    fi
    echo "$me: rank ${failed%% *} $why$1" >&2
}

stopping=0 # tenths of a second since the ranks were told to stop
while :; do
    ended=$(awk 'END { print NR }' "$tmp/exits")
    [ "$ended" -ge "$n" ] && break
    if [ "$stopping" -eq 0 ]; then
        if first_failure "; stopping the other ranks"; then
            :
        elif [ "$interrupted" -eq 1 ]; then
            status=130
            echo "$me: interrupted; stopping every rank" >&2
        fi
        if [ "$status" -ne 0 ]; then
            stopping=1
            stop_ranks TERM
        fi
    else # TERM again each second (a rank may have just started), then KILL
        stopping=$((stopping + 1))
        if [ "$stopping" -lt 50 ] && [ $((stopping % 10)) -eq 0 ]; then
            stop_ranks TERM
        elif [ "$stopping" -eq 50 ]; then
            stop_ranks KILL
        elif [ "$stopping" -gt 60 ]; then
            break # a rank's watcher was killed too: nothing more to wait for
        fi
    fi
    sleep 0.1 2>/dev/null || sleep 1
done
wait
[ "$status" -ne 0 ] || first_failure ""

# The ranks' shared-memory segment, if one died before removing it
# (examples/data_parallel/data_parallel names it after the job id).
rm -f "/dev/shm/pinload-dp-$PINLOAD_JOB_ID" 2>/dev/null
rm -rf "$tmp"
exit "$status"
