"""pinload against NVIDIA DALI's and FFCV's CPU pipelines, on the same data,
the same transforms and the same number of threads, all on the host:

  * DALI: a CPU-only pipeline (device_id=None and only "cpu" operators:
    no GPU nor CUDA is touched), num_threads = workers, prefetch_queue_depth = --prefetch:
    fn.readers.file(file_root=DATA, random_shuffle=True), then for train
    fn.decoders.image_random_crop (RGB, random_area [0.08, 1],
    random_aspect_ratio [0.75, 1.333]), fn.resize to size x size
    (antialias, DALI's default) and fn.crop_mirror_normalize to uint8 HWC
    with mirror=fn.random.coin_flip(); for eval fn.decoders.image,
    fn.resize(resize_shorter=size*256/224) and crop_mirror_normalize's
    center crop to size x size (uint8 HWC);
  * FFCV: the folder written once to a .beton with ffcv.writer.DatasetWriter
    (RGBImageField write_mode='jpg', max_resolution None: FFCV decodes each
    JPEG and re-encodes it with OpenCV at --ffcv-quality, default 90, its
    own default; it has no mode that keeps the original bytes), cached in
    build/compare-others-ffcv/ keyed by the data's path, files and quality;
    then ffcv.loader.Loader(order=RANDOM, num_workers=workers, os_cache=True,
    drop_last=True, batches_ahead FFCV's default 3) with
    [RandomResizedCropRGBImageDecoder((size, size)), RandomHorizontalFlip(),
    ToTensor()] (train) or [CenterCropRGBImageDecoder((size, size),
    ratio=224/256), ToTensor()] (eval) for images, [IntDecoder(),
    ToTensor()] for labels: uint8 NHWC batches on the host. A set smaller
    than one batch is read with drop_last off (one short batch an epoch).

Each loader x workers runs in a process of its own (so that no thread pool
lingers into the next), and its first batch is checked once (shape, dtype,
mean pixel, labels) so that a loader that silently delivers zeros shows.
pinload's figure comes from build/pinload-bench with the same settings
(train or eval, uint8, pinned, host), as tools/compare/compare.py takes it.
Prints images/s side by side and the ratio; --json FILE keeps every figure.
Run through tools/compare/others.sh, which sets up DALI and FFCV.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (its measure; it imports only the standard library)


LOADERS = ("dali", "ffcv")
MODULES = {"dali": "nvidia.dali", "ffcv": "ffcv"}
BETON_DIR = os.path.relpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
    "compare-others-ffcv"))


def image_folder(data):
    """(paths, labels, classes) of an ImageFolder tree: classes are the
    sorted subfolders, as torchvision's ImageFolder and DALI's file reader
    number them."""
    classes = sorted(d for d in os.listdir(data)
                     if os.path.isdir(os.path.join(data, d)))
    paths, labels = [], []
    for i, c in enumerate(classes):
        for root, _, files in sorted(os.walk(os.path.join(data, c),
                                             followlinks=True)):
            for f in sorted(files):
                if f.lower().endswith((".jpg", ".jpeg")):
                    paths.append(os.path.join(root, f))
                    labels.append(i)
    return paths, labels, classes


def measure(make_iter, args, count, first):
    """compare.py's measure (images per second after args.warmup >= 1
    batches), first(batch) looking at the first batch, in the warm-up."""
    seen = []

    def counted(b):
        if not seen:
            seen.append(True)
            first(b)
        return count(b)

    return compare.measure(make_iter, args, counted)


def check_of(images, labels):
    """What the first batch holds: numpy arrays in, a dict out."""
    import numpy as np

    images, labels = np.asarray(images), np.asarray(labels).reshape(-1)
    return {"shape": list(images.shape), "dtype": str(images.dtype),
            "mean": round(float(images.mean()), 2),
            "std": round(float(images.std()), 2),
            "labels": [int(labels.min()), int(labels.max())],
            "distinct_labels": int(len(np.unique(labels)))}


def dali_rate(args, workers, out):
    import numpy as np
    from nvidia import dali
    from nvidia.dali import fn, types

    s = args.size

    @dali.pipeline_def(batch_size=args.batch, num_threads=workers,
                       device_id=None,
                       prefetch_queue_depth=args.prefetch)
    def pipe():
        files, labels = fn.readers.file(file_root=args.data,
                                        random_shuffle=True, name="reader")
        if args.augment == "train":
            images = fn.decoders.image_random_crop(
                files, device="cpu", output_type=types.RGB,
                random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 1.333])
            images = fn.resize(images, resize_x=s, resize_y=s)
            images = fn.crop_mirror_normalize(
                images, dtype=types.UINT8, output_layout="HWC",
                mirror=fn.random.coin_flip())
        else:
            images = fn.decoders.image(files, device="cpu",
                                       output_type=types.RGB)
            images = fn.resize(images, resize_shorter=s * 256 // 224)
            images = fn.crop_mirror_normalize(
                images, dtype=types.UINT8, output_layout="HWC",
                crop=(s, s))
        return images, labels

    p = pipe()
    p.build()

    def batches():
        while True:
            images, labels = p.run()
            # the batch as one host array (a view where DALI's is dense)
            yield np.asarray(images.as_tensor()), np.asarray(labels.as_tensor())

    def first(b):
        out["check"] = check_of(*b)

    out["images_per_s"] = measure(batches, args, lambda b: b[0].shape[0],
                                  first)
    out["other"] = ("NVIDIA DALI %s, CPU-only pipeline, num_threads %d, "
                    "prefetch_queue_depth %d"
                    % (dali.__version__, workers, args.prefetch))


def beton_path(args):
    """The .beton of args.data at args.ffcv_quality: keyed by the data's
    real path, its files' names, sizes and times, and the quality."""
    paths, _, _ = image_folder(args.data)
    h = hashlib.sha1(os.path.realpath(args.data).encode())
    for f in paths:
        st = os.stat(f)
        h.update(("%s %d %d\n" % (f, st.st_size, st.st_mtime_ns)).encode())
    h.update(("q%d" % args.ffcv_quality).encode())
    name = os.path.basename(os.path.normpath(os.path.realpath(args.data)))
    return os.path.join(BETON_DIR, "%s-%s.beton" % (name, h.hexdigest()[:12]))


class Folder:
    """The ImageFolder tree as FFCV's writer takes it: (PIL image, label)."""

    def __init__(self, data):
        self.paths, self.labels, _ = image_folder(data)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        from PIL import Image

        with Image.open(self.paths[i]) as img:
            return img.convert("RGB"), self.labels[i]


def ffcv_write(args, out):
    """Writes the .beton unless it is there; out gets what was done."""
    import cv2
    from ffcv.fields import IntField, RGBImageField
    from ffcv.reader import Reader
    from ffcv.writer import DatasetWriter

    path = beton_path(args)
    ds = Folder(args.data)
    src = sum(os.path.getsize(f) for f in ds.paths)
    cached = os.path.exists(path)
    if not cached:
        os.makedirs(BETON_DIR, exist_ok=True)
        tmp = path + ".tmp%d" % os.getpid()
        w = max(int(x) for x in args.workers.split(","))
        DatasetWriter(tmp, {
            "image": RGBImageField(write_mode="jpg", max_resolution=None,
                                   jpeg_quality=args.ffcv_quality),
            "label": IntField()}, num_workers=w).from_indexed_dataset(ds)
        os.replace(tmp, path)
    out.update({"path": path, "cached": cached, "images": len(ds),
                "beton_bytes": os.path.getsize(path),
                # the re-encoded JPEGs: the only allocations (labels are
                # kept in the metadata)
                "jpeg_bytes": int(Reader(path).alloc_table["size"].sum()),
                "source_bytes": src,
                "jpeg_quality": args.ffcv_quality,
                "encoder": "OpenCV %s" % cv2.__version__})


def ffcv_version():
    """FFCV's release (its ffcv.__version__ is stale: 0.0.3rc1 in 1.0.2)."""
    from importlib import metadata

    try:
        return metadata.version("ffcv")
    except metadata.PackageNotFoundError:
        import ffcv
        return ffcv.__version__


def ffcv_rate(args, workers, out):
    from ffcv.fields.decoders import (CenterCropRGBImageDecoder, IntDecoder,
                                      RandomResizedCropRGBImageDecoder)
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import RandomHorizontalFlip, ToTensor

    s = args.size
    if args.augment == "train":
        image = [RandomResizedCropRGBImageDecoder((s, s)),
                 RandomHorizontalFlip(), ToTensor()]
    else:
        image = [CenterCropRGBImageDecoder((s, s), ratio=224 / 256),
                 ToTensor()]
    path = beton_path(args)
    n = len(image_folder(args.data)[0])
    loader = Loader(path, batch_size=args.batch, num_workers=workers,
                    order=OrderOption.RANDOM, os_cache=True,
                    drop_last=n >= args.batch,
                    pipelines={"image": image,
                               "label": [IntDecoder(), ToTensor()]})

    def first(b):
        out["check"] = check_of(b[0].numpy(), b[1].numpy())

    out["images_per_s"] = measure(lambda: iter(loader), args,
                                  lambda b: b[0].shape[0], first)
    out["other"] = ("FFCV %s, num_workers %d, os_cache, batches_ahead 3, "
                    ".beton JPEG quality %d%s"
                    % (ffcv_version(), workers, args.ffcv_quality,
                       "" if n >= args.batch else ", drop_last off"))


def child(args):
    """One loader (or the .beton's writing) in this process: its result as
    JSON in args.json."""
    out = {}
    if args.child == "ffcv-write":
        ffcv_write(args, out)
    else:
        {"dali": dali_rate, "ffcv": ffcv_rate}[args.child](
            args, int(args.workers), out)
    with open(args.json, "w") as f:
        json.dump(out, f)


def run_child(args, what, workers):
    """`what` in a subprocess of its own: its JSON, or None (then its
    output's tail is printed)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--child", what,
               "--data", args.data, "--workers", str(workers),
               "--batch", str(args.batch), "--size", str(args.size),
               "--augment", args.augment, "--batches", str(args.batches),
               "--seconds", str(args.seconds), "--warmup", str(args.warmup),
               "--prefetch", str(args.prefetch),
               "--ffcv-quality", str(args.ffcv_quality), "--json", out]
        r = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if r.returncode == 0 and os.path.exists(out):
            with open(out) as f:
                return json.load(f)
        tail = r.stdout.strip().splitlines()[-8:]
        print("%s (workers %s) failed, exit %d:\n  %s"
              % (what, workers, r.returncode, "\n  ".join(tail)), flush=True)
        return None


def pinload_rate(args, workers):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "bench.json")
        span = (["--seconds", str(args.seconds)] if args.seconds
                else ["--batches", str(args.batches)])
        subprocess.run(
            [args.bench, "--data", args.data, "--workers", str(workers),
             "--prefetch", str(args.prefetch), "--pin", "on",
             "--batch", str(args.batch), "--size", str(args.size),
             "--augment", args.augment, "--format", "u8", "--warmup",
             str(args.warmup), "--device", "host", "--json", out,
             "--rounds", "1", "--quiet"] + span,  # one run, as the others'
            check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)["rows"][0]["images_per_s"]


def missing(loader):
    """Why `loader` cannot run here, or None."""
    import importlib.util

    try:
        if importlib.util.find_spec(MODULES[loader]) is None:
            raise ImportError("no module %s" % MODULES[loader])
    except ImportError as e:
        return "%s is not installed (%s): run tools/compare/others.sh" % (
            loader, e)
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True)
    p.add_argument("--bench", default="build/pinload-bench")
    p.add_argument("--pinload", choices=["on", "off"], default="on",
                   help="off: the others alone, without pinload-bench")
    p.add_argument("--loader", default=",".join(LOADERS),
                   help="comma-separated: dali, ffcv")
    p.add_argument("--workers", default="1,2")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--augment", choices=["train", "eval"], default="train")
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--seconds", type=float, default=0,
                   help="measure for this long instead of --batches")
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--prefetch", type=int, default=2,
                   help="pinload's prefetch and DALI's prefetch_queue_depth")
    p.add_argument("--ffcv-quality", type=int, default=90,
                   help="JPEG quality FFCV's writer re-encodes at")
    p.add_argument("--json", help="write every figure to this file")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.warmup = max(args.warmup, 1)
    if args.child:
        return child(args)

    loaders = [x for x in args.loader.split(",") if x]
    for x in loaders:
        if x not in LOADERS:
            p.error("--loader: %s is not one of %s" % (x, ", ".join(LOADERS)))
    workers = [int(x) for x in args.workers.split(",")]
    if not image_folder(args.data)[0]:
        p.error("--data %s: no class folder with JPEGs" % args.data)

    span = ("%g s" % args.seconds if args.seconds
            else "%d batches" % args.batches)
    print("data %s, %dx%d %s uint8, batch %d, %s after %d warm-up, to host"
          % (args.data, args.size, args.size, args.augment, args.batch, span,
             args.warmup), flush=True)
    skipped, beton, run = {}, None, []
    for x in loaders:
        why = missing(x)
        if why:
            skipped[x] = why
            print("%s: skipped: %s" % (x, why), flush=True)
            continue
        if x == "ffcv":
            beton = run_child(args, "ffcv-write", args.workers)
            if beton is None:
                skipped[x] = "the .beton could not be written"
                print("ffcv: skipped: the .beton could not be written",
                      flush=True)
                continue
            print("ffcv: %s %s: %d images re-encoded as JPEG quality %d by "
                  "%s (%.1f MB of JPEGs from %.1f MB of originals)"
                  % ("using" if beton["cached"] else "wrote", beton["path"],
                     beton["images"], beton["jpeg_quality"], beton["encoder"],
                     beton["jpeg_bytes"] / 1e6, beton["source_bytes"] / 1e6),
                  flush=True)
        run.append(x)

    print("%-6s %-8s %14s %14s %8s" % ("loader", "workers", "pinload img/s",
                                      "other img/s", "ratio"), flush=True)
    rows, others, checked = [], {}, set()
    for w in workers:
        mine = pinload_rate(args, w) if args.pinload == "on" else None
        for x in run:
            r = run_child(args, x, w)
            theirs = r and r["images_per_s"]
            if r:
                others[x] = r["other"]
            if r and x not in checked:
                checked.add(x)
                c = r["check"]
                bad = c["mean"] < 5 or c["std"] < 1
                print("check %s: batch %s %s, mean pixel %.1f (std %.1f), "
                      "labels %d..%d (%d distinct)%s"
                      % (x, tuple(c["shape"]), c["dtype"], c["mean"],
                         c["std"], c["labels"][0], c["labels"][1],
                         c["distinct_labels"],
                         ": SUSPECT, near-constant pixels" if bad else ""),
                      flush=True)
            ratio = mine / theirs if mine and theirs else None
            print("%-6s %-8d %14s %14s %8s" % (
                x, w, "%.1f" % mine if mine else "-",
                "%.1f" % theirs if theirs else "failed",
                "%.2fx" % ratio if ratio else "-"), flush=True)
            rows.append({
                "loader": x, "workers": w,
                "pinload_images_per_s": round(mine, 2) if mine else None,
                "other_images_per_s": round(theirs, 2) if theirs else None,
                "ratio": round(ratio, 4) if ratio else None,
                "check": r and r["check"]})
        if not run and mine:
            print("%-6s %-8d %14.1f %14s %8s" % ("-", w, mine, "-", "-"))
            rows.append({"loader": None, "workers": w,
                         "pinload_images_per_s": round(mine, 2)})
    for x, what in others.items():
        print("%s: %s" % (x, what))
    if args.json:
        conf = {k: v for k, v in vars(args).items()
                if k not in ("json", "child")}
        with open(args.json, "w") as f:
            json.dump({"config": conf, "others": others, "skipped": skipped,
                       "ffcv_beton": beton, "rows": rows,
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                             time.gmtime())}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
