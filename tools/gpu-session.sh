#!/bin/bash
# Everything issue 8 asks of a lent GPU, in few calls of at most 10 minutes
# (docs/gpu-results.md, "A GPU session"). Two halves:
#
#   tools/gpu-session.sh kit
#       here, before the first call: what the GPU machine cannot fetch, in
#       ignored folders that travel with `carry`: build/gpu-kit (Debian's
#       packages of libjpeg-turbo, libspng, libwebp, libcurl and json-c
#       with every library they load, used there where the image lacks a
#       header the build needs: see use_kit) and data/photos (a copy of
#       ../shared/data/photos). Prints the carry list.
#
#   tools/gpu-session.sh PHASE...        (on the GPU machine; $OUT set)
#       env      the machine: GPU, driver, CUDA, compilers, Python, torch
#       test     make test-gpu; the loader suites on the real CUDA backend;
#                compute-sanitizer memcheck and racecheck over tests/gpu;
#                the Python package's tests (CUDA ones included)
#       h2d      H2D GB/s from the ring (pinned, pageable, managed) against
#                cudaMemcpy's pinned and pageable ceilings
#       overlap  step time with a GPU "training step" of X ms, X = one
#                batch's load time and twice it, pinned and pageable
#       sweep-generated, sweep-photos
#                workers 1..16, pin on/off, prefetch 2/4 (train u8), then
#                train/eval x u8/f32 (GPU normalisation on and off), batch 256
#       decode   GPU decoding (issue 38): --decode cpu,gpu,auto at 4 and 16
#                workers, u8 and f32, both sets: images/s and the process's
#                CPU time per image (getrusage), nvJPEG found as above
#       compare  PyTorch's DataLoader delivering to the GPU beside pinload,
#                equal workers, batch 256, u8 and f32, both datasets
#       train    examples/train_classifier, samples/train_loop and
#                python/examples/train.py on CUDA
#       contexts the CUDA rules of issue 29 only a real GPU shows: with two
#                GPUs or more, nvidia-smi's per-process memory while a
#                loader runs on GPU 1 (nothing may be on GPU 0); then
#                compute-sanitizer initcheck and memcheck over the Python
#                package's CUDA tests (the DLPack paths: every consumer
#                stream, stream=2 released on another thread). On the
#                simulated runtime: the suite of the same rules there,
#                test_cuda_context. (The second device's bytes and GPU 0's
#                primary context are in tests/gpu, the test phase.)
#       all      every phase above, in that order (longer than one call)
#
# Each call sets itself up (a machine comes back bare once idle): the kit
# if needed, `make` for the GPU's architecture only, the generated set (5,000
# images) and the photo set (143 photos, each linked 20 times in class
# folders, so that batches of 256 exist). A phase that fails is recorded
# and the next one runs. Logs, JSON and CSV go to $OUT/gpu-results.tar.gz
# (refreshed after every phase, so a call cut short keeps what finished)
# and a summary to $OUT/summary.txt, printed last.
#
# GPU_SESSION_DIR (default build/gpu-session) holds the sets and logs;
# GPU_SESSION_PER_CLASS (500), GPU_SESSION_SECONDS and GPU_SESSION_BATCH
# (each bench row's) and GPU_SESSION_WORKERS (the sweeps') shrink a run, as
# `make test CUDA=sim` does to check this script.
# GPU_SESSION_KIT=1 uses build/gpu-kit even where the system has
# libjpeg-turbo. GPU_SESSION_SIM=1 runs the same phases against the simulated CUDA
# runtime (make CUDA=sim), on any machine: it checks this script, not a GPU.
set -u
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)

# What the build, the tools' tests and the Python package need beyond a
# CUDA image (which has none of them: 2026-11-27), with every library they
# load in turn, from Debian's packages: the closure of KIT_PACKAGES'
# dependencies less the C library's own (KIT_SKIP), which every image has.
KIT_PACKAGES="libjpeg62-turbo libjpeg62-turbo-dev libturbojpeg0 \
    libturbojpeg0-dev libjpeg-turbo-progs libspng0 libspng-dev libwebp7 \
    libwebp-dev libwebpdemux2 libwebpmux3 libsharpyuv0 libsharpyuv-dev \
    libcurl4 libcurl4-openssl-dev libjson-c5 libjson-c-dev zlib1g-dev"
KIT_SKIP='^(libc6|libc6-dev|libc-dev-bin|gcc-[0-9]+-base|libgcc-s1|libcrypt1|libcrypt-dev|libnsl2|libnsl-dev|libtirpc.*|linux-libc-dev|rpcsvc-proto)$'

if [ "${1:-}" = kit ]; then
    set -e
    mkdir -p build/gpu-kit data
    # shellcheck disable=SC2086
    pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests \
        --no-conflicts --no-breaks --no-replaces --no-enhances \
        $KIT_PACKAGES | grep -v '^[ <]' | sort -u | grep -Ev "$KIT_SKIP")
    # shellcheck disable=SC2086
    (cd build/gpu-kit && rm -f ./*.deb && apt-get download $pkgs)
    if [ -d ../shared/data/photos ]; then
        rm -rf data/photos
        cp -r ../shared/data/photos data/photos
    else
        echo "gpu-session: ../shared/data/photos is absent: no photo set" >&2
    fi
    echo "gpu-session: $(ls build/gpu-kit/*.deb | wc -l) packages"
    du -sh build/gpu-kit data/photos 2>/dev/null
    echo 'carry: ["build/gpu-kit", "data/photos"]'
    exit 0
fi

out=${OUT:-$root/build/gpu-out}
mkdir -p "$out"
work=${GPU_SESSION_DIR:-$root/build/gpu-session}
logs=$work/logs
mkdir -p "$logs"
summary=$work/summary.txt
: >>"$summary"
sim=${GPU_SESSION_SIM:-0}
py=${PYTHON:-python3} # the one with torch (the GPU image's python3)
if [ "$sim" = 1 ]; then
    B=${GPU_SESSION_BUILD:-build/sim}
    MAKEVARS="CUDA=sim BUILD=$B"
else
    B=${GPU_SESSION_BUILD:-build}
    MAKEVARS="NVCC_ARCHS=90"
    if command -v nvidia-smi >/dev/null 2>&1; then
        cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader \
            2>/dev/null | head -1 | tr -d '.')
        [ -n "$cc" ] && MAKEVARS="NVCC_ARCHS=$cc"
    fi
fi
# nvJPEG for GPU decoding (issue 38): the toolkit's where the image has
# it, else the nvidia-nvjpeg wheel's unpacked here by tools/install-deps.sh
# nvjpeg (carry build/nvjpeg); the library loads it at run time.
# On the simulated runtime, the fake one (tests/cudasim/nvjpegsim.c).
if [ -z "${PINLOAD_NVJPEG:-}" ] && [ "$sim" != 1 ]; then
    nvj=$(ls build/nvjpeg/nvidia/cu*/lib/libnvjpeg.so.13 2>/dev/null | head -1)
    [ -n "$nvj" ] && export PINLOAD_NVJPEG=$PWD/$nvj
elif [ -z "${PINLOAD_NVJPEG:-}" ]; then
    export PINLOAD_NVJPEG=$PWD/$B/libnvjpegsim.so
fi
BENCH=$B/pinload-bench
GEN=$work/generated
PHOTOS=$work/photos

say() { echo "$*" | tee -a "$summary"; }
# The figures against their targets (tools/gpu-summary.py), then everything
# into $OUT.
pack() {
    python3 tools/gpu-summary.py "$logs" >"$work/figures.txt" 2>&1
    tar -C "$work" -czf "$out/gpu-results.tar.gz" logs summary.txt \
        figures.txt 2>/dev/null
    cp "$summary" "$out/summary.txt"
    cp "$work/figures.txt" "$out/figures.txt"
}
# step NAME COMMAND...: run, log to logs/NAME.log, note the result. A
# step that hangs (on a GPU nothing has run on before, it may) is stopped
# after GPU_SESSION_STEP_TIMEOUT seconds (240), exit 124, and the next runs.
step() {
    local name=$1
    shift
    local t0=$SECONDS
    echo "== $name: $*" >"$logs/$name.log"
    timeout --kill-after=10 "${GPU_SESSION_STEP_TIMEOUT:-240}" "$@" \
        >>"$logs/$name.log" 2>&1
    local rc=$?
    say "$(printf '%-28s rc=%-3d %4d s' "$name" "$rc" $((SECONDS - t0)))"
    return $rc
}

have_header() {
    printf '#include <stdio.h>\n#include <%s>\n' "$1" |
        cc -E -x c - >/dev/null 2>&1
}

# The kit (tools/gpu-session.sh kit) unpacked in /tmp/gpu-kit, used where
# the image lacks a header the build needs (or GPU_SESSION_KIT=1): its
# headers and link-time libraries first, and at run time only the
# libraries the image does not have (rt/), so that the image's own libssl,
# libz or libcurl stay in use wherever it has them.
use_kit() {
    local k=/tmp/gpu-kit a=x86_64-linux-gnu f so
    if [ ! -d $k/rt ]; then
        mkdir -p $k/rt
        for f in build/gpu-kit/*.deb; do dpkg -x "$f" $k; done
        # Shared libraries only: an archive (zlib1g-dev's libz.a) is not
        # PIC and cannot go into the Python extension, and a -dev link that
        # names its library by an absolute path (/lib/.../libz.so.1.2.13)
        # would point out of the kit: both seen on 2026-11-27.
        rm -f $k/usr/lib/$a/*.a $k/lib/$a/*.a
        for f in $k/usr/lib/$a/*.so $k/lib/$a/*.so; do
            [ -L "$f" ] || continue
            case $(readlink "$f") in
            /*) [ -e "$k$(readlink "$f")" ] && ln -sf "$k$(readlink "$f")" "$f" ;;
            esac
        done
        for f in $k/usr/lib/$a/lib*.so.* $k/lib/$a/lib*.so.*; do
            [ -e "$f" ] || continue
            so=$(basename "$f")
            case ${so#*.so.} in *.*) continue ;; esac # sonames only
            ldconfig -p | grep -q "^[[:space:]]*$so " && continue
            ln -sf "$f" $k/rt/"$so"
        done
    fi
    export CPATH=$k/usr/include:$k/usr/include/$a${CPATH:+:$CPATH}
    export LIBRARY_PATH=$k/usr/lib/$a:$k/lib/$a${LIBRARY_PATH:+:$LIBRARY_PATH}
    # -L as well: the image's gcc searched its own libjpeg.so (libjpeg-turbo
    # 8's ABI) before LIBRARY_PATH's, against the kit's jpeglib.h (ABI 62):
    # "Wrong JPEG library version: library is 80, caller expects 62"
    # (2026-11-27). The headers and the libraries must be the kit's both.
    export LDFLAGS="-L$k/usr/lib/$a -L$k/lib/$a${LDFLAGS:+ $LDFLAGS}"
    export LD_LIBRARY_PATH=$k/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PATH=$PATH:$k/usr/bin
    say "libraries from build/gpu-kit (the image lacks them): $(ls $k/rt | tr '\n' ' ')"
}

setup() {
    local h missing=
    for h in jpeglib.h turbojpeg.h spng.h webp/decode.h zlib.h curl/curl.h \
        json-c/json.h; do
        have_header "$h" || missing="$missing $h"
    done
    command -v djpeg >/dev/null 2>&1 || missing="$missing djpeg"
    if ! ls build/gpu-kit/*.deb >/dev/null 2>&1; then
        [ -z "$missing" ] ||
            say "missing$missing and no build/gpu-kit (tools/gpu-session.sh kit)"
    elif [ "${GPU_SESSION_KIT:-0}" = 1 ] || [ -n "$missing" ]; then
        use_kit
    fi
    # shellcheck disable=SC2086
    step build make -j"$jobs" $MAKEVARS all || return 1
    local per=${GPU_SESSION_PER_CLASS:-500}
    if [ "$(cat "$GEN/.done" 2>/dev/null)" != "$per" ]; then
        rm -rf "$GEN"
        step mkdata "$B/pinload-mkdata" --out "$GEN" --per-class "$per" \
            --quiet && echo "$per" >"$GEN/.done"
    fi
    if [ ! -f "$PHOTOS/.done" ] && [ -d data/photos ]; then
        rm -rf "$PHOTOS"
        local c i f n
        for c in data/photos/imagefolder/* data/photos/coco data/photos/mixed; do
            n=$(basename "$c")
            for i in $(seq -w 1 20); do
                mkdir -p "$PHOTOS/${n}_$i"
                for f in "$c"/*.jpg; do
                    ln -s "$root/$f" "$PHOTOS/${n}_$i/$(basename "$f")"
                done
            done
        done
        touch "$PHOTOS/.done"
    fi
    return 0
}

phase_env() {
    {
        date -u
        uname -a
        nproc
        nvidia-smi || true
        nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current,clocks.sm,clocks.max.sm --format=csv || true
        nvcc --version || true
        cc --version | head -1
        "$py" -c 'import sys, torch, torchvision; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""); print("torchvision", torchvision.__version__)' || true
        command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer || true
        "$py" -c 'import sysconfig, os; p = sysconfig.get_paths()["include"]; print(p, os.path.exists(os.path.join(p, "Python.h")))' || true
        # Where pinned memory should live (issue 35, item 7): the GPU's NUMA
        # node, the machine's nodes, its memory and the cgroup's limit.
        local bus
        for bus in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null); do
            bus=$(echo "$bus" | tr 'A-Z' 'a-z' | sed 's/^0000\(....\)/\1/')
            echo "GPU $bus numa_node: $(cat /sys/bus/pci/devices/*"${bus#*:}"/numa_node 2>/dev/null | head -1)"
        done
        ls -d /sys/devices/system/node/node* 2>/dev/null
        grep -E 'MemTotal|MemAvailable|Mlocked' /proc/meminfo
        cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null
        ulimit -l
    } >"$logs/env.log" 2>&1
    say "$(nvidia-smi --query-gpu=name,driver_version,memory.total \
        --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi'), $(nproc) CPUs"
}

# The Python package, built once per machine into $work/py (no network:
# the image's setuptools, no build isolation).
python_package() {
    [ -f "$work/py/.done" ] && return 0
    rm -rf "$work/py" python/build
    step python-build env PINLOAD_MAKE_ARGS="$MAKEVARS" "$py" -m pip \
        install -q --no-build-isolation --no-deps --target "$work/py" \
        ./python && touch "$work/py/.done"
}

phase_test() {
    [ "$sim" = 1 ] || step test-gpu make $MAKEVARS test-gpu
    # The loader suites need none of the test tools (valgrind, gnuplot) a
    # CUDA image lacks: the test dependencies' check is skipped for them.
    [ "$sim" = 1 ] || { mkdir -p "$B" && touch "$B/.deps-test"; }
    # shellcheck disable=SC2086
    step build-tests make -j"$jobs" $MAKEVARS \
        $(ls tests/api/test_loader_*.c | sed "s|tests/api/\(.*\)\.c|$B/tests/\1|") \
        $B/tests/test_resume
    local t
    for t in $B/tests/test_loader_* $B/tests/test_resume; do
        [ -x "$t" ] || continue
        step "cuda-$(basename "$t")" env PINLOAD_TEST_DEVICE=cuda \
            PINLOAD_BUILD=$B "$t" --jobs 4
    done
    local cs
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    if [ -x "$cs" ] && [ -x $B/tests/gpu/test_cuda ]; then
        step memcheck "$cs" --tool memcheck --error-exitcode 9 \
            $B/tests/gpu/test_cuda
        # racecheck gave no answer in 60 s over the whole suite (2026-11-27):
        # bounded, so the phase goes on; rc 124 says it ran out of time.
        GPU_SESSION_STEP_TIMEOUT=${GPU_SESSION_RACECHECK_TIMEOUT:-75} \
            step racecheck "$cs" --tool racecheck --error-exitcode 9 \
            $B/tests/gpu/test_cuda
    fi
    python_package &&
        step python-tests env PYTHONPATH="$work/py" PINLOAD_BUILD=$B \
            PINLOAD_TEST_TORCH=1 "$py" -m pytest -q -rs -p no:cacheprovider \
            python/tests
}

bench() { # bench NAME ARGS...: pinload-bench with CSV and JSON kept
    local name=$1
    shift
    # shellcheck disable=SC2046
    # One round a row (GPU_SESSION_ROUNDS): a lent GPU's minutes are few;
    # the figures that compare rows run them side by side in one call.
    step "$name" "$BENCH" --device cuda --csv "$logs/$name.csv" \
        --json "$logs/$name.json" --quiet --rounds "${GPU_SESSION_ROUNDS:-1}" "$@" \
        ${GPU_SESSION_SECONDS:+--seconds "$GPU_SESSION_SECONDS"} \
        ${GPU_SESSION_BATCH:+--batch "$GPU_SESSION_BATCH"}
}

phase_h2d() {
    bench h2d-u8 --data "$GEN" --batch 256 --workers 16 --prefetch 4 \
        --pin on,off,managed --seconds 2 --warmup 2
    bench h2d-f32 --data "$GEN" --batch 256 --workers 16 --prefetch 4 \
        --pin on,off,managed --seconds 2 --warmup 2 --format f32 \
        --gpu-normalize off
}

# Each step is set against the same loader's load passes just before and
# after it (the figure of 2026-11-27 compared it with another loader's),
# and --timeline says where the GPU's idle time between steps went.
phase_overlap() {
    bench overlap-0 --data "$GEN" --batch 256 --workers 16 --prefetch 4 \
        --pin on,off --seconds 2 --warmup 2
    # One batch's load time, from the pinned row: X and 2X.
    local x
    x=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["rows"]; print(round(r[0]["load_ms"], 2))' "$logs/overlap-0.json" 2>/dev/null || echo 0)
    if [ "$x" != 0 ]; then
        bench overlap-1x --data "$GEN" --batch 256 --workers 16 \
            --prefetch 2,4,8 --pin on --seconds 2 --warmup 2 \
            --compute-ms "$x" --timeline "$logs/overlap-1x-timeline.csv"
        bench overlap-1x-off --data "$GEN" --batch 256 --workers 16 \
            --prefetch 4 --pin off --seconds 2 --warmup 2 --compute-ms "$x"
        bench overlap-2x --data "$GEN" --batch 256 --workers 16 --prefetch 4 \
            --pin on,off --seconds 2 --warmup 2 \
            --compute-ms "$(python3 -c "print(2 * $x)")"
    fi
}

sweep() { # sweep NAME DATA
    local n=$1 d=$2 w=${GPU_SESSION_WORKERS:-1,2,4,8,12,16}
    bench "sweep-$n-pin" --data "$d" --batch 256 --workers $w --prefetch 2,4 \
        --pin on,off --seconds 2 --warmup 1
    local a f
    for a in train eval; do
        for f in "u8 on" "f32 on" "f32 off"; do
            set -- $f
            bench "sweep-$n-$a-$1-gpunorm-$2" --data "$d" --batch 256 \
                --workers $w --prefetch 2 --pin on --seconds 2 --warmup 1 \
                --augment $a --format "$1" --gpu-normalize "$2"
        done
    done
}

# GPU decoding (issue 38): the same rows with JPEGs decoded by the workers,
# by nvJPEG on the GPU and by auto, side by side in one bench (the rounds
# interleave them): images/s, and the process's CPU time per image (the
# JSON's cpu_us, getrusage over the pass: every thread's), which is what
# the GPU frees for the rest of a training job. pl_info's decoder name is
# in the bench's log line; a gpu row without nvJPEG fails create, naming
# why, and the step's rc says so.
phase_decode() {
    local w=${GPU_SESSION_WORKERS:-4,16} n d f
    for n in generated photos; do
        d=$GEN
        [ $n = photos ] && d=$PHOTOS
        [ -d "$d" ] || continue
        for f in u8 f32; do
            bench "decode-$n-$f" --data "$d" --batch 256 --workers "$w" \
                --prefetch 4 --pin on --decode cpu,gpu,auto --format "$f" \
                --seconds 3 --warmup 2
        done
    done
}

# compare NAME DATA FORMAT [compare.py options]
compare() {
    local n=$1 d=$2 f=$3
    shift 3
    step "compare-$n" env COMPARE_PYTHON="$py" PYTHONPATH="$work/py" \
        tools/compare/run.sh "$d" --bench "$BENCH" --device cuda \
        --batch "${GPU_SESSION_BATCH:-256}" \
        --workers "${GPU_SESSION_WORKERS:-1,2,4,8,16}" --format "$f" \
        --seconds "${GPU_SESSION_SECONDS:-3}" --warmup 2 \
        --json "$logs/compare-$n.json" "$@"
}

# The first call's short compare: one row, 16 workers, u8.
phase_compare_short() {
    GPU_SESSION_WORKERS=${GPU_SESSION_WORKERS:-16} \
        GPU_SESSION_SECONDS=${GPU_SESSION_SECONDS:-2} \
        compare generated-u8-short "$GEN" u8
}

phase_compare() {
    local d f
    for d in "generated $GEN" "photos $PHOTOS"; do
        set -- $d
        [ -d "$2" ] || continue
        for f in u8 f32; do
            compare "$1-$f" "$2" $f
        done
    done
    # pinload from PyTorch (pinload.torch.Loader), as a training loop has it
    python_package && compare generated-u8-python "$GEN" u8 --via python
    # The recipes people train with (issue 37), float32, on the GPU: the
    # DataLoader's v2 pipeline and its MixUp/CutMix in the loop against
    # pinload's spec (its mixing kernel on the copy stream; simclr's two
    # views through the Python package).
    local r
    for r in resnet50 deit simclr; do
        python_package && compare "generated-recipe-$r" "$GEN" f32 \
            --recipe "$r"
    done
}

phase_train() {
    step train-c $B/examples/train_classifier --data "$GEN" --device cuda \
        --epochs 3 --batch 256 --size 32 --workers 16
    step train-loop $B/samples/train_loop "$GEN" --epochs 1
    if ! "$py" -c 'import sys, torch
sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
        say "train-py: skipped, $py has no PyTorch with CUDA"
    elif python_package; then
        step train-py env PYTHONPATH="$work/py" "$py" \
            python/examples/train.py --data "$GEN" --steps 150 --batch 256 \
            --size 224 --workers 16 --device cuda
        step train-py-torch env PYTHONPATH="$work/py" "$py" \
            python/examples/train.py --data "$GEN" --steps 150 --batch 256 \
            --size 224 --workers 16 --device cuda --loader torch
    fi
}

# A loader on GPU 1 for a few seconds; then this process's memory on each
# GPU from nvidia-smi: GPU 1's and not GPU 0's. argv: the dataset.
GPU0_CHECK='
import os, subprocess, sys, time
import pinload
loader = pinload.Loader(sys.argv[1], batch_size=64, size=64, device=1,
                        num_workers=4)
end, n = time.time() + 5, 0
while time.time() < end:
    for b in loader:
        n += 1
        del b
        if time.time() > end:
            break
def smi(*q):
    return subprocess.run(["nvidia-smi", *q, "--format=csv,noheader,nounits"],
                          capture_output=True, text=True).stdout
uuid = dict(l.split(", ")[::-1] for l in smi("--query-gpu=index,uuid").split(chr(10)) if l)
apps = [l.split(", ") for l in smi("--query-compute-apps=pid,gpu_uuid,used_memory").split(chr(10)) if l]
mine = {uuid.get(u, u): mib for pid, u, mib in apps if int(pid) == os.getpid()}
print("batches", n, "this process, GPU index: MiB", mine)
if not mine:
    sys.exit("nvidia-smi lists no memory of this process (PID namespace?)")
sys.exit(0 if "1" in mine and "0" not in mine else "memory on GPU 0: " + str(mine))
'

phase_contexts() {
    if [ "$sim" = 1 ]; then
        # shellcheck disable=SC2086
        step build-context make -j"$jobs" $MAKEVARS $B/tests/test_cuda_context &&
            step cuda-context $B/tests/test_cuda_context --jobs 2
        return
    fi
    if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ]; then
        python_package && step gpu0-memory env PYTHONPATH="$work/py" \
            "$py" -c "$GPU0_CHECK" "$GEN"
    else
        say "gpu0-memory: skipped, one GPU"
    fi
    local cs
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    [ -x "$cs" ] || { say "dlpack-sanitizer: no compute-sanitizer"; return; }
    python_package || return
    local tool
    for tool in initcheck memcheck; do
        step "dlpack-$tool" env PYTHONPATH="$work/py" PINLOAD_BUILD=$B \
            "$cs" --tool $tool --error-exitcode 9 "$py" -m pytest -q \
            -p no:cacheprovider python/tests/test_torch.py -k cuda
    done
}

# The first call (at most 8 minutes): the checks and the figures that
# matter most; the second: the sweeps, the full compare, training.
[ $# -gt 0 ] || set -- env test h2d overlap contexts compare-short
[ "$1" = second ] && set -- decode sweep-generated sweep-photos compare train
[ "$1" = all ] && set -- env test h2d overlap contexts compare-short \
    decode sweep-generated sweep-photos compare train
say "== $(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null) phases: $*"
setup || {
    pack
    tail -30 "$logs/build.log"
    exit 1
}
for p in "$@"; do
    case $p in
    env) phase_env ;;
    test) phase_test ;;
    h2d) phase_h2d ;;
    overlap) phase_overlap ;;
    decode) phase_decode ;;
    sweep-generated) sweep generated "$GEN" ;;
    sweep-photos) [ -d "$PHOTOS" ] && sweep photos "$PHOTOS" ;;
    compare) phase_compare ;;
    compare-short) phase_compare_short ;;
    train) phase_train ;;
    contexts) phase_contexts ;;
    *) say "unknown phase $p" ;;
    esac
    pack
done
pack
echo "== figures (also in \$OUT/figures.txt; logs in \$OUT/gpu-results.tar.gz)"
cat "$work/figures.txt"
