#!/usr/bin/env python3
"""Images/s delivered through the Python binding, to set beside
pinload-bench's figure for the same configuration (docs/BENCHMARKS.md).

    python python/examples/throughput.py --data data/generated --format u8

--keep N keeps the last N batches alive, as a loop that holds inputs for
a loss over micro-batches does (the loader adds buffers for them).
"""
import argparse
import collections
import time
from typing import Optional

import numpy as np

import pinload


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="data/generated")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--augment", default="train")
    p.add_argument("--format", default="u8")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--prefetch", type=int, default=2)
    p.add_argument("--batches", type=int, default=60)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--device", default="host")
    p.add_argument("--keep", type=int, default=0,
                   help="batches kept alive besides the current one")
    args = p.parse_args()
    loader = pinload.Loader(args.data, batch_size=args.batch, size=args.size,
                            augment=args.augment, format=args.format,
                            num_workers=args.workers, prefetch=args.prefetch,
                            device=args.device, log=lambda level, msg: None)
    seen, images = 0, 0
    start: Optional[float] = None
    kept: "collections.deque[pinload.Batch]" = collections.deque(
        maxlen=max(args.keep, 1))
    while seen < args.warmup + args.batches:
        for b in loader:
            if args.keep:
                kept.append(b)
            np.from_dlpack(b.images) if b.images.device == "cpu" else None
            seen += 1
            if seen == args.warmup:
                start = time.perf_counter()
            elif seen > args.warmup:
                images += b.count
            if seen == args.warmup + args.batches:
                break
    assert start is not None
    secs = time.perf_counter() - start
    buffers = loader.stats["device_buffers"]
    del b
    kept.clear()
    loader.close()
    print("python: %d images in %.2f s: %.1f images/s (%s, %d workers, "
          "prefetch %d, keep %d, %d device buffers, %s)"
          % (images, secs, images / secs, args.format, args.workers,
             args.prefetch, args.keep, buffers,
             loader.info["backend_name"]))


if __name__ == "__main__":
    main()
