"""The figures issue 8 asks for, from the JSON files tools/gpu-session.sh
leaves in a logs folder, against their targets: H2D GB/s from the ring
against cudaMemcpy's ceilings (target: pinned at least 90% of cudaMemcpy
pinned, pageable at least 80% of cudaMemcpy pageable), step time against
max(compute, load) (target: within 2% with pinned memory, and where the
GPU's idle time went), the sweeps' scaling (target: 16 workers at least 12x one),
and pinload against PyTorch's DataLoader (target: at least 2.5x at equal
workers). Each figure of a pinload-bench row is its median over the
bench's rounds (--rounds, default 3; images_per_s_min and _max give the
spread). Usage: python3 tools/gpu-summary.py LOGS_DIR
"""
import glob
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def h2d(logs):
    for name in ("h2d-u8", "h2d-f32"):
        j = load(os.path.join(logs, name + ".json"))
        if not j:
            continue
        ceil = {"on": j.get("memcpy_pinned_gb_per_s", -1),
                "off": j.get("memcpy_pageable_gb_per_s", -1),
                "managed": j.get("memcpy_pinned_gb_per_s", -1)}
        print("%s: cudaMemcpy %.2f GB/s pinned, %.2f GB/s pageable"
              % (name, ceil["on"], ceil["off"]))
        for r in j["rows"]:
            c = ceil.get(r["pin"], -1)
            g = r["h2d_gb_per_s"]
            pct = 100.0 * g / c if c and c > 0 and g and g > 0 else -1
            target = ""
            if r["pin"] == "on":
                target = "  target >= 90%: " + ("met" if pct >= 90 else "MISSED")
            elif r["pin"] == "off":
                target = "  target >= 80%: " + ("met" if pct >= 80 else "MISSED")
            print("  pin %-7s H2D %7.2f GB/s = %5.1f%% of cudaMemcpy's %s%s"
                  % (r["pin"], g if g else -1, pct,
                     "pageable" if r["pin"] == "off" else "pinned", target))


def overlap(logs):
    base = load(os.path.join(logs, "overlap-0.json"))
    if not base:
        return
    load_ms = {r["pin"]: r["load_ms"] for r in base["rows"]}
    for name in sorted(os.path.basename(p)[:-5] for p in
                       glob.glob(os.path.join(logs, "overlap-*x*.json"))):
        j = load(os.path.join(logs, name + ".json"))
        if not j:
            continue
        x = j["compute_ms"]
        for r in j["rows"]:
            # The row's own load pass, as the same loader ran it just before.
            ld = r.get("load_ms") or load_ms.get(r["pin"], 0)
            ideal = max(x, ld)
            step = r["step_ms"]
            over = 100.0 * (step / ideal - 1) if ideal > 0 and step > 0 else -1
            target = ("  target <= 2%: " + ("met" if over <= 2 else "MISSED")
                      if r["pin"] == "on" else "")
            print("%s: pin %-4s prefetch %d compute %.2f ms, load %.2f ms: "
                  "step %.2f ms, %+.1f%% over max(compute, load)%s"
                  % (name, r["pin"], r["prefetch"], x, ld, step, over,
                     target))
            if r.get("gpu_idle_ms", -1) >= 0:
                print("    GPU idle %.2f ms a step: %.2f ms with no batch "
                      "yet, %.2f ms waiting for its copy; a batch: workers "
                      "%.2f ms without a ring slot, prefetcher %.2f ms "
                      "without a device buffer"
                      % (r["gpu_idle_ms"], r["late_ms"],
                         r["gpu_idle_ms"] - r["late_ms"],
                         r.get("slot_wait_ms", -1),
                         r.get("buffer_wait_ms", -1)))


def sweeps(logs):
    for path in sorted(glob.glob(os.path.join(logs, "sweep-*.json"))):
        j = load(path)
        if not j:
            continue
        name = os.path.basename(path)[:-5]
        by = {}
        for r in j["rows"]:
            key = (r["pin"], r["prefetch"])
            by.setdefault(key, {})[r["workers"]] = r["images_per_s"]
        for (pin, pf), w in sorted(by.items()):
            one, top = w.get(1), w.get(max(w))
            scale = top / one if one else -1
            print("%-34s pin %-3s prefetch %d: %s  (%dw/1w %.1fx)"
                  % (name, pin, pf,
                     " ".join("%d:%.0f" % (k, v) for k, v in sorted(w.items())),
                     max(w), scale))


def decode(logs):
    """Issue 38: each decode bench's rows by workers, cpu against gpu and
    auto: images/s and CPU us per image. Target (docs/gpu-results.md): at
    4 workers on the photos, gpu at least 2x cpu's images/s."""
    for path in sorted(glob.glob(os.path.join(logs, "decode-*.json"))):
        j = load(path)
        if not j:
            continue
        name = os.path.basename(path)[:-5]
        by = {}
        for r in j["rows"]:
            by.setdefault(r["workers"], {})[r.get("decode", "?")] = r
        for w in sorted(by):
            cells = []
            for d in ("cpu", "gpu", "auto"):
                r = by[w].get(d)
                if r:
                    cells.append("%s%s %.0f img/s %.0f cpu us/img"
                                 % (d, "" if d != "auto" else
                                    ":" + r.get("decode_used", "?"),
                                    r["images_per_s"], r.get("cpu_us", -1)))
            line = "%s, %d workers: %s" % (name, w, "; ".join(cells))
            cpu, gpu = by[w].get("cpu"), by[w].get("gpu")
            if cpu and gpu and cpu["images_per_s"] > 0:
                x = gpu["images_per_s"] / cpu["images_per_s"]
                line += "  gpu/cpu %.2fx" % x
                if w == 4 and "photos" in name:
                    line += " target >= 2x: %s" % ("met" if x >= 2 else
                                                   "MISSED")
            print(line)


def compare(logs):
    for path in sorted(glob.glob(os.path.join(logs, "compare-*.json"))):
        j = load(path)
        if not j:
            continue
        rows = " ".join("%dw %.0f/%.0f=%.2fx" % (r["workers"],
                                                  r["pinload_images_per_s"],
                                                  r["other_images_per_s"],
                                                  r["ratio"])
                        for r in j["rows"])
        worst = min((r["ratio"] for r in j["rows"]), default=0)
        print("%s (pinload/DataLoader img/s): %s  target >= 2.5x: %s"
              % (os.path.basename(path)[:-5], rows,
                 "met" if worst >= 2.5 else "MISSED"))


def main():
    logs = sys.argv[1] if len(sys.argv) > 1 else "build/gpu-session/logs"
    for part in (h2d, overlap, sweeps, decode, compare):
        part(logs)


if __name__ == "__main__":
    sys.exit(main())
