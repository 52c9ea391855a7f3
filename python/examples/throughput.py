#!/usr/bin/env python3
"""Images/s delivered through the Python binding, to set beside
pinload-bench's figure for the same configuration (docs/BENCHMARKS.md).

    python python/examples/throughput.py --data data/generated --format u8
"""
import argparse
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
    args = p.parse_args()
    loader = pinload.Loader(args.data, batch_size=args.batch, size=args.size,
                            augment=args.augment, format=args.format,
                            num_workers=args.workers, prefetch=args.prefetch,
                            device=args.device, log=lambda level, msg: None)
    seen, images = 0, 0
    start: Optional[float] = None
    while seen < args.warmup + args.batches:
        for b in loader:
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
    loader.close()
    print("python: %d images in %.2f s: %.1f images/s (%s, %d workers, "
          "prefetch %d, %s)" % (images, secs, images / secs, args.format,
                                args.workers, args.prefetch,
                                loader.info["backend_name"]))


if __name__ == "__main__":
    main()
