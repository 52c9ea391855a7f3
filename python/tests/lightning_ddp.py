"""A 2-rank Lightning DDP run on the CPU (gloo) over pinload.torch.Loader,
for test_frameworks.py: run it as Lightning's own launcher does (plain
`python lightning_ddp.py DATA OUT`, Lightning starts rank 1 by running this
script again) or under torchrun. Each rank writes OUT/rank<R>.json: the
dataset indices of every training step's batch, with its epoch, the step
count, and the rank and world size the loader and Lightning each saw."""
import json
import os
import sys

import lightning
import torch
from lightning.pytorch.strategies import DDPStrategy

import pinload.torch as pt

EPOCHS = 2


class Model(lightning.LightningModule):
    def __init__(self, data: str) -> None:
        super().__init__()
        self.data = data
        self.layer = torch.nn.Linear(3, 4)
        self.seen: list = []
        self.loader = None

    def train_dataloader(self):
        # Made here, once Lightning has set up the process group: this is
        # where pinload learns its rank under every launcher.
        self.loader = pt.Loader(self.data, batch_size=8, size=16, seed=7,
                                num_workers=1, device="host",
                                output_map=("images", "labels", "indices"),
                                log=lambda level, msg: None)
        return self.loader

    def training_step(self, batch, i):
        self.seen.append([self.current_epoch, batch["indices"].tolist()])
        x = batch["images"].float().mean(dim=(1, 2))
        return torch.nn.functional.cross_entropy(self.layer(x),
                                                 batch["labels"])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    data, out = sys.argv[1], sys.argv[2]
    model = Model(data)
    trainer = lightning.Trainer(
        max_epochs=EPOCHS, accelerator="cpu", devices=2,
        strategy=DDPStrategy(process_group_backend="gloo"),
        logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, use_distributed_sampler=True)
    trainer.fit(model)
    info = model.loader.info
    record = {"rank": trainer.global_rank, "world": trainer.world_size,
              "loader_rank": info["rank"],
              "loader_world": info["world_size"],
              "len": len(model.loader), "steps": trainer.global_step,
              "seen": model.seen,
              "env": {k: os.environ.get(k) for k in
                      ("RANK", "WORLD_SIZE", "LOCAL_RANK")}}
    path = os.path.join(out, "rank%d.json" % trainer.global_rank)
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
