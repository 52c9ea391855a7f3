#!/bin/sh
# Remote shards against local ones (docs/BENCHMARKS.md): the shards served
# by tests/remote/httpd.py on 127.0.0.1 at each bandwidth, each run on a
# cold cache, against the same shards read from disk.
#   tools/bench-remote.sh SHARDS_DIR [RATES_MB_S] [BENCH_ARGS...]
# SHARDS_DIR: a pinload-pack output (shard-NNNNNN.tar, classes.txt); its
# .idx files are written first by a local read. RATES_MB_S: comma-separated
# (default 50,200,1000; 0: no limit); BENCH_ARGS go to pinload-bench.
# Prints, per source, pinload-bench's images/s over one epoch on a cold
# cache (--warmup 0: the download included), then on the cache it left,
# then with --cache-limit 1 (every sample a ranged request, nothing
# cached), and the wall time of pinload-dump's first batch on a cold cache (create,
# indexes, the shards its samples lie in, the decode).
set -eu
dir=$1
rates=${2:-50,200,1000}
shift $(($# < 2 ? $# : 2))
extra="$*"
build=${PINLOAD_BUILD:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/pinload-bench-remote-XXXXXX)
trap 'kill $srv 2>/dev/null || true; rm -rf "$work"' EXIT INT TERM
srv=""
n=$(ls "$dir"/shard-*.tar | wc -l)
last=$(printf '%06d' $((n - 1)))
samples=$(awk -F'\t' 'NR > 1 && !/^#/ { s += $2 } END { print s }' \
    "$dir/manifest.tsv")
batches=$((samples / 64))
# One round a measure: a second round would find the cache the first filled.
args="--rounds 1 --workers 2 --prefetch 2 --pin off --warmup 0 --batch 64 --batches $batches"

row() { # $1: label, $2: data; each measure on a cold cache
    rm -rf "$work/cache" "$work/dump"
    rate=$("$build/pinload-bench" --data "$2" $args $extra 2>/dev/null |
        awk '/^(on|off|managed) /{ print $4 }')
    warm=$("$build/pinload-bench" --data "$2" $args $extra 2>/dev/null |
        awk '/^(on|off|managed) /{ print $4 }')
    rm -rf "$work/cache"
    ranged=-
    [ "$1" = local ] ||
        ranged=$("$build/pinload-bench" --data "$2" $args $extra \
            --cache-limit 1 2>/dev/null | awk '/^(on|off|managed) /{ print $4 }')
    rm -rf "$work/cache"
    t0=$(date +%s.%N)
    "$build/pinload-dump" --data "$2" --out "$work/dump" --limit 64 \
        --batch 64 --quiet >/dev/null 2>&1
    t1=$(date +%s.%N)
    printf '%-18s cold %7s   cached %7s   ranged %7s img/s   first batch %.2f s\n' \
        "$1" "$rate" "$warm" "$ranged" "$(echo "$t1 - $t0" | bc)"
    rm -rf "$work/cache" "$work/dump"
}

export PINLOAD_CACHE_DIR="$work/cache"
"$build/pinload-bench" --data "$dir" $args >/dev/null 2>&1 # writes the .idx
echo "local $dir ($samples samples in $n shards)"
row local "$dir"
for r in $(echo "$rates" | tr , ' '); do
    rm -f "$work/port"
    python3 "$root/tests/remote/httpd.py" --root "$dir" \
        --port-file "$work/port" --log "$work/log" --lifetime 3600 \
        --rate $((r * 1000000)) &
    srv=$!
    while [ ! -f "$work/port" ]; do sleep 0.1; done
    url="http://127.0.0.1:$(cat "$work/port")/shard-{000000..$last}.tar"
    rm -rf "$work/cache"
    row "http at $r MB/s" "$url"
    kill $srv
    wait $srv 2>/dev/null || true
    srv=""
done
