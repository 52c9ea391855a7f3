"""pinload against what users would pick instead, on the same data, the same
transforms and the same number of worker processes or threads:

  * PyTorch's DataLoader over torchvision's ImageFolder, pin_memory=True,
    transforms RandomResizedCrop + RandomHorizontalFlip (train) or
    Resize + CenterCrop (eval), to uint8 tensors (PILToTensor) as pinload's
    uint8 output, or with --format f32 to float32 normalised with
    ImageNet's mean and std (ToTensor + Normalize, torchvision's recipe);
    with --device cuda each batch goes on to the GPU with
    .to('cuda', non_blocking=True), and the clock stops once the last copy
    is done;
  * if torch cannot be imported, a Pillow-only loader doing the same with a
    multiprocessing pool (host only, uint8).

With --recipe NAME both sides run one of the recipes people train with,
written once as a torchvision.transforms.v2 pipeline (below): the
DataLoader applies it to each PIL image as torchvision's ImageFolder
loads it, and pinload runs the spec it translates to
(pinload.torch.spec_of, python/pinload/_v2.py): eval (Resize 256,
CenterCrop 224), resnet50 (RandomResizedCrop, flip) and deit
(RandomResizedCrop bicubic, flip, RandAugment(2, 9), RandomErasing 0.25,
and on each batch RandomChoice of MixUp 0.8 and CutMix 1.0: pinload's
mixup op, torchvision's v2 transforms on the DataLoader's batch in the
loop, as its users run them; with --device cuda on the GPU after the
copy, where pinload mixes too), each to normalised float32; simclr is two
views a sample of RandomResizedCrop, flip, RandomApply(ColorJitter 0.4,
0.4, 0.4, 0.1; p 0.8), RandomGrayscale 0.2 and RandomApply(GaussianBlur,
a tenth of the size; p 0.5): the DataLoader's dataset transform returns
both, pinload's views= makes both from one decode (through the Python
package: pinload-bench has no views). Images/s count samples, each with
its two views.

pinload's figure comes from build/pinload-bench with the same settings (on
CUDA its batches are copied to the GPU by the loader's own streams; f32 is
normalised on the GPU unless --gpu-normalize off), or with --via python
through the Python package (pinload.torch.Loader, each batch a tensor on
the device, as a PyTorch training loop takes it). Prints images/s side by
side and the ratio; --json FILE keeps every figure. Run through
`make compare`.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


RECIPES = ("eval", "resnet50", "deit", "simclr")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def recipe(name, size):
    """The recipe as torchvision.transforms.v2 code, as its users write
    it."""
    import torch
    from torchvision.transforms import v2

    tail = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD)]
    if name == "eval":
        return v2.Compose([v2.Resize(size * 256 // 224), v2.CenterCrop(size)]
                          + tail)
    if name == "resnet50":
        return v2.Compose([v2.RandomResizedCrop(size),
                           v2.RandomHorizontalFlip()] + tail)
    if name == "simclr":  # one view; the recipe takes two of it
        return v2.Compose([
            v2.RandomResizedCrop(size), v2.RandomHorizontalFlip(),
            v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
            v2.RandomGrayscale(0.2),
            v2.RandomApply([v2.GaussianBlur(size // 10 | 1, (0.1, 2.0))],
                           p=0.5)] + tail)
    return v2.Compose([
        v2.RandomResizedCrop(size,
                             interpolation=v2.InterpolationMode.BICUBIC),
        v2.RandomHorizontalFlip(), v2.RandAugment(2, 9)] + tail +
        [v2.RandomErasing(0.25)])


class TwoViews:
    """SimCLR's dataset transform: two draws of one pipeline a sample
    (a class, so that spawned workers can pickle it)."""

    def __init__(self, tf):
        self.tf = tf

    def __call__(self, img):
        return [self.tf(img), self.tf(img)]


def classes_of(data):
    return len([d for d in os.listdir(data)
                if os.path.isdir(os.path.join(data, d))])


def recipe_batch(name, classes):
    """The recipe's batch transform (deit's MixUp/CutMix), or None."""
    if name != "deit":
        return None
    from torchvision.transforms import v2

    return v2.RandomChoice([v2.MixUp(alpha=0.8, num_classes=classes),
                            v2.CutMix(alpha=1.0, num_classes=classes)])


def recipe_spec(args):
    """The recipe's pinload spec and format, by python/pinload/_v2.py
    loaded from the checkout (it needs no built extension)."""
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "..", "..", "python",
                        "pinload", "_v2.py")
    spec = importlib.util.spec_from_file_location("pinload_v2", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    t = mod.spec_of(recipe(args.recipe, args.size))
    if args.recipe == "simclr":
        return "views=[%s] x 2" % t.spec, t.format or "u8"
    batch = recipe_batch(args.recipe, classes_of(args.data))
    text = t.spec + (";" + mod.batch_op_of(batch) if batch else "")
    return text, t.format or "u8"


def torch_rate(args, workers):
    import torch
    import torchvision
    from torchvision import transforms as T

    torch.set_num_threads(1)
    if args.recipe:
        tf = recipe(args.recipe, args.size)
        if args.recipe == "simclr":
            tf = TwoViews(tf)
        ds = torchvision.datasets.ImageFolder(args.data, transform=tf)
        dl = torch.utils.data.DataLoader(
            ds, batch_size=args.batch, shuffle=True, num_workers=workers,
            pin_memory=True, drop_last=True,
            persistent_workers=workers > 0)
        batch = recipe_batch(args.recipe, len(ds.classes))
        cuda = args.device == "cuda"

        def take(b):
            """The batch where the step has it (the GPU with --device
            cuda), its batch transform applied there, as users run
            MixUp/CutMix in the loop: the images counted."""
            images, labels = b
            views = images if isinstance(images, list) else [images]
            if cuda:
                views = [v.to("cuda", non_blocking=True) for v in views]
                labels = labels.to("cuda", non_blocking=True)
            if batch is not None:
                views[0], labels = batch(views[0], labels)
            return views[0].shape[0]

        return measure(lambda: iter(dl), args, take,
                       torch.cuda.synchronize if cuda else None)
    if args.format == "u8":
        last = [T.PILToTensor()]
    else:
        last = [T.ToTensor(), T.Normalize([0.485, 0.456, 0.406],
                                          [0.229, 0.224, 0.225])]
    if args.augment == "train":
        tf = T.Compose([T.RandomResizedCrop(args.size), T.RandomHorizontalFlip()]
                       + last)
    else:
        tf = T.Compose([T.Resize(args.size * 256 // 224), T.CenterCrop(args.size)]
                       + last)
    ds = torchvision.datasets.ImageFolder(args.data, transform=tf)
    dl = torch.utils.data.DataLoader(
        ds, batch_size=args.batch, shuffle=True, num_workers=workers,
        pin_memory=True, drop_last=True, persistent_workers=workers > 0)
    if args.device != "cuda":
        return measure(lambda: iter(dl), args, lambda b: b[0].shape[0])

    def to_gpu(b):
        images = b[0].to("cuda", non_blocking=True)
        b[1].to("cuda", non_blocking=True)
        return images.shape[0]

    return measure(lambda: iter(dl), args, to_gpu, torch.cuda.synchronize)


def pillow_load(job):
    """One sample with Pillow alone: decode, crop, resize, flip, to bytes."""
    import random

    from PIL import Image

    path, size, augment, seed = job
    rng = random.Random(seed)
    img = Image.open(path).convert("RGB")
    w, h = img.size
    if augment == "train":
        import math
        for _ in range(10):
            area = w * h * rng.uniform(0.08, 1.0)
            ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
            cw, ch = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
            if 0 < cw <= w and 0 < ch <= h:
                x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
                break
        else:
            cw, ch, x, y = w, h, 0, 0
        img = img.resize((size, size), Image.BILINEAR, box=(x, y, x + cw, y + ch))
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
    else:
        s = size * 256 // 224
        if w <= h:
            nw, nh = s, int(s * h / w)
        else:
            nw, nh = int(s * w / h), s
        img = img.resize((nw, nh), Image.BILINEAR)
        left, top = round((nw - size) / 2), round((nh - size) / 2)
        img = img.crop((left, top, left + size, top + size))
    return img.tobytes()


def pillow_rate(args, workers):
    import multiprocessing

    paths = []
    for root, _, files in sorted(os.walk(args.data, followlinks=True)):
        paths += [os.path.join(root, f) for f in sorted(files)
                  if f.lower().endswith((".jpg", ".jpeg"))]
    pool = multiprocessing.Pool(workers)

    def batches():
        i = 0
        while True:
            jobs = [(paths[(i + k) % len(paths)], args.size, args.augment, i + k)
                    for k in range(args.batch)]
            i += args.batch
            yield pool.map(pillow_load, jobs)

    try:
        return measure(batches, args, len)
    finally:
        pool.terminate()


def measure(make_iter, args, count, finish=None):
    """Images per second over args.batches batches (or args.seconds, at
    least two batches) after args.warmup; finish() ends the timed part
    (the GPU's copies)."""
    it = make_iter()

    def take():
        nonlocal it
        try:
            return next(it)
        except StopIteration:
            it = make_iter()
            return next(it)

    for _ in range(args.warmup):
        count(take())
    if finish:
        finish()
    t0, images, n = time.perf_counter(), 0, 0
    while True:
        images += count(take())
        n += 1
        if args.seconds:
            if n >= 2 and time.perf_counter() - t0 >= args.seconds:
                break
        elif n >= args.batches:
            break
    if finish:
        finish()
    return images / (time.perf_counter() - t0)


def pinload_python_rate(args, workers):
    # The library's defaults where pinload-bench keeps them (drop_last off:
    # under SKIP a dropped tail is still decoded, as the first stand-ins for
    # skipped samples, which on a set of a few batches is a real share).
    import torch

    import pinload.torch

    count = lambda b: b[0].shape[0]  # noqa: E731
    if args.recipe == "simclr":
        tf = recipe(args.recipe, args.size)
        kw = dict(views=[tf, tf])
        count = lambda b: b[0][0].shape[0]  # noqa: E731
    elif args.recipe:
        kw = dict(transform=recipe(args.recipe, args.size),
                  batch_transform=recipe_batch(args.recipe,
                                               classes_of(args.data)))
    else:
        kw = dict(size=args.size, augment=args.augment, format=args.format)
    loader = pinload.torch.Loader(
        args.data, batch_size=args.batch, **kw,
        num_workers=workers, prefetch=args.prefetch,
        gpu_normalize=args.gpu_normalize == "on",
        device=0 if args.device == "cuda" else "host",
        log=lambda level, msg: None)
    finish = torch.cuda.synchronize if args.device == "cuda" else None
    try:
        return measure(lambda: iter(loader), args, count, finish)
    finally:
        loader.close()


def pinload_rate(args, workers):
    if args.via == "python" or args.recipe == "simclr":
        return pinload_python_rate(args, workers)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "bench.json")
        span = (["--seconds", str(args.seconds)] if args.seconds
                else ["--batches", str(args.batches)])
        augment, fmt = ((args.augment, args.format) if not args.recipe
                        else recipe_spec(args))
        subprocess.run(
            [args.bench, "--data", args.data, "--workers", str(workers),
             "--prefetch", str(args.prefetch), "--pin", "on",
             "--batch", str(args.batch), "--size", str(args.size),
             "--augment", augment, "--format", fmt,
             "--gpu-normalize", args.gpu_normalize, "--warmup",
             str(args.warmup), "--device", args.device, "--json", out,
             "--rounds", "1", "--quiet"] + span,  # one run, as the other's
            check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)["rows"][0]["images_per_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True)
    p.add_argument("--bench", default="build/pinload-bench")
    p.add_argument("--workers", default="1,2")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--augment", choices=["train", "eval"], default="train")
    p.add_argument("--recipe", choices=RECIPES,
                   help="a v2 recipe on both sides instead of --augment "
                   "(float32 output)")
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--seconds", type=float, default=0,
                   help="measure for this long instead of --batches")
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--prefetch", type=int, default=2)
    p.add_argument("--format", choices=["u8", "f32"], default="u8")
    p.add_argument("--device", choices=["host", "cuda"], default="host")
    p.add_argument("--gpu-normalize", choices=["on", "off"], default="on")
    p.add_argument("--via", choices=["bench", "python"], default="bench",
                   help="pinload measured by pinload-bench or through its "
                   "Python package")
    p.add_argument("--json", help="write every figure to this file")
    args = p.parse_args()

    try:
        import torch  # noqa: F401
        import torchvision
        other, rate = ("PyTorch DataLoader (torchvision %s, pin_memory)"
                       % torchvision.__version__, torch_rate)
        if args.device == "cuda" and not torch.cuda.is_available():
            p.error("--device cuda: PyTorch sees no CUDA device")
    except ImportError as e:
        if args.device == "cuda" or args.format != "u8":
            p.error("--device cuda and --format f32 need PyTorch (%s)" % e)
        print("torch is not available (%s): comparing with Pillow alone" % e)
        import PIL
        other, rate = "Pillow %s, multiprocessing" % PIL.__version__, pillow_rate

    span = ("%g s" % args.seconds if args.seconds
            else "%d batches" % args.batches)
    what = ("recipe %s: %s" % (args.recipe, recipe_spec(args)[0])
            if args.recipe else "%s %s" % (
                args.augment, "uint8" if args.format == "u8" else "float32"))
    print("data %s, %dx%d %s, batch %d, %s after %d warm-up, to %s"
          % (args.data, args.size, args.size, what, args.batch, span,
             args.warmup, args.device), flush=True)
    print("%-8s %14s %14s %8s" % ("workers", "pinload img/s", "other img/s", "ratio"))
    rows = []
    for w in [int(x) for x in args.workers.split(",")]:
        mine, theirs = pinload_rate(args, w), rate(args, w)
        print("%-8d %14.1f %14.1f %7.2fx" % (w, mine, theirs, mine / theirs),
              flush=True)
        rows.append({"workers": w, "pinload_images_per_s": round(mine, 2),
                     "other_images_per_s": round(theirs, 2),
                     "ratio": round(mine / theirs, 4)})
    print("other: %s; pinload via %s" % (
        other, "python" if args.recipe == "simclr" else args.via))
    if args.json:
        conf = {k: v for k, v in vars(args).items() if k != "json"}
        with open(args.json, "w") as f:
            json.dump({"config": conf, "other": other, "rows": rows,
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                             time.gmtime())}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
