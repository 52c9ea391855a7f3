#!/usr/bin/env python3
"""Train a small torchvision model with pinload, or with torch's DataLoader
for a side by side, and print the loss and images/s.

    build/pinload-mkdata --out data/generated          # the default data
    python python/examples/train.py --steps 300        # pinload
    python python/examples/train.py --loader torch     # DataLoader

On a GPU the batches are made on the CPU and copied by pinload on its own
streams; without one everything runs on the CPU. Under torchrun
(WORLD_SIZE > 1) the model is wrapped in DistributedDataParallel and each
rank reads its own shard (pinload takes rank and world size from the
launcher, as DistributedSampler would be given them).
"""
import argparse
from typing import Any, Tuple
import os
import time

import torch
import torch.nn.functional as F

import pinload.torch


def model_for(name: str, classes: int) -> Any:
    try:
        import torchvision
    except ImportError:
        if name != "tiny":
            raise SystemExit("train.py: --model %s needs torchvision "
                             "(pip install torchvision), or use "
                             "--model tiny" % name)
        torchvision = None
    if name == "tiny":
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, stride=2, padding=1),
            torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 64, 3, stride=2, padding=1),
            torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
            torch.nn.Linear(64, classes))
    return getattr(torchvision.models, name)(num_classes=classes)


def pinload_batches(args: argparse.Namespace,
                    device: Any) -> Tuple[Any, int]:
    loader = pinload.torch.Loader(
        args.data, batch_size=args.batch, size=args.size, augment="train",
        format="f32", num_workers=args.workers, seed=args.seed,
        device="host" if device.type == "cpu" else device)
    return loader, len(loader.classes)


def torch_batches(args: argparse.Namespace,
                  device: Any) -> Tuple[Any, int]:
    import torchvision
    from torchvision import transforms as T
    tf = T.Compose([T.RandomResizedCrop(args.size), T.RandomHorizontalFlip(),
                    T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406],
                                [0.229, 0.224, 0.225])])
    ds = torchvision.datasets.ImageFolder(args.data, tf)
    sampler = None
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        sampler = torch.utils.data.distributed.DistributedSampler(ds)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=args.batch, shuffle=sampler is None, sampler=sampler,
        num_workers=args.workers, pin_memory=device.type == "cuda",
        persistent_workers=args.workers > 0)
    return loader, len(ds.classes)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="data/generated")
    p.add_argument("--loader", choices=["pinload", "torch"],
                   default="pinload")
    p.add_argument("--model", default="resnet18",
                   help="a torchvision model name, or 'tiny'")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    args = p.parse_args()
    if not os.path.isdir(args.data):
        raise SystemExit("train.py: %s: no such folder (make it with "
                         "build/pinload-mkdata --out %s)"
                         % (args.data, args.data))

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    if distributed:
        torch.distributed.init_process_group(
            "nccl" if device.type == "cuda" else "gloo")
    torch.manual_seed(args.seed)

    make = pinload_batches if args.loader == "pinload" else torch_batches
    loader, classes = make(args, device)
    model = model_for(args.model, classes).to(device)
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    step, images_seen, epoch = 0, 0, 0
    start = time.perf_counter()
    while step < args.steps:
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        elif getattr(loader, "sampler", None) is not None and \
                hasattr(loader.sampler, "set_epoch"):
            loader.sampler.set_epoch(epoch)
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = F.cross_entropy(model(images), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            images_seen += len(labels)
            if step % 20 == 0 or step == args.steps:
                secs = time.perf_counter() - start
                print("step %4d  epoch %d  loss %.3f  %.0f images/s"
                      % (step, epoch, loss.item(), images_seen / secs),
                      flush=True)
            if step == args.steps:
                break
        epoch += 1
    secs = time.perf_counter() - start
    print("%s: %d steps, %d images in %.1f s: %.0f images/s on %s"
          % (args.loader, step, images_seen, secs, images_seen / secs,
             device))
    if distributed:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
