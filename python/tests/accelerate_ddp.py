"""A 2-process Accelerate run on the CPU over pinload.torch.Loader, for
test_frameworks.py: run under torchrun (as `accelerate launch` runs its
processes). prepare(model, optimizer, loader) on each rank; each writes
OUT/rank<R>.json as lightning_ddp.py does, and whether prepare handed the
loader back as it was."""
import json
import os
import sys

import torch
from accelerate import Accelerator

import pinload.torch as pt

EPOCHS = 2


def main() -> None:
    data, out = sys.argv[1], sys.argv[2]
    acc = Accelerator(cpu=True)
    model = torch.nn.Linear(3, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = pt.Loader(data, batch_size=8, size=16, seed=7, num_workers=1,
                       device="host", output_map=("images", "labels",
                                                  "indices"),
                       log=lambda level, msg: None)
    model, optimizer, prepared = acc.prepare(model, optimizer, loader)
    seen = []
    for epoch in range(EPOCHS):
        for batch in prepared:
            seen.append([epoch, batch["indices"].tolist()])
            x = batch["images"].float().mean(dim=(1, 2))
            loss = torch.nn.functional.cross_entropy(model(x),
                                                     batch["labels"])
            acc.backward(loss)  # DDP's all-reduce: both ranks step alike
            optimizer.step()
            optimizer.zero_grad()
    info = loader.info
    record = {"rank": acc.process_index, "world": acc.num_processes,
              "same": prepared is loader,
              "distributed_type": str(acc.distributed_type),
              "loader_rank": info["rank"], "loader_world": info["world_size"],
              "len": len(loader), "steps": len(seen), "seen": seen}
    path = os.path.join(out, "rank%d.json" % acc.process_index)
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)
    acc.end_training()


if __name__ == "__main__":
    main()
