"""A 2-rank Lightning DDP run on the CPU (gloo) over pinload.torch.Loader,
for test_frameworks.py: run it as Lightning's own launcher does (plain
`python lightning_ddp.py DATA OUT`, Lightning starts rank 1 by running this
script again) or under torchrun; `python lightning_ddp.py DATA OUT spawn`
for strategy="ddp_spawn". Each rank writes OUT/rank<R>.json: the dataset
indices of every training step's batch, with its epoch, the step count,
and the rank and world size the loader and Lightning each saw."""
import json
import os
import sys

import lightning
import torch
from lightning.pytorch.strategies import DDPStrategy

import pinload.torch as pt

EPOCHS = 2


class Model(lightning.LightningModule):
    def __init__(self, data: str, out: str) -> None:
        super().__init__()
        self.data, self.out = data, out
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

    def on_train_end(self) -> None:
        # Here, in the process that trained (ddp_spawn's too).
        trainer = self.trainer
        info = self.loader.info
        record = {"rank": trainer.global_rank, "world": trainer.world_size,
                  "loader_rank": info["rank"],
                  "loader_world": info["world_size"],
                  "len": len(self.loader), "steps": trainer.global_step,
                  "seen": self.seen}
        path = os.path.join(self.out, "rank%d.json" % trainer.global_rank)
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(path + ".tmp", path)


def main() -> None:
    data, out = sys.argv[1], sys.argv[2]
    start = sys.argv[3] if len(sys.argv) > 3 else "popen"
    # use_distributed_sampler stays on (its default): Lightning gives a
    # DistributedSampler only to DataLoaders of map-style datasets and
    # hands any other iterable to the loop as it is.
    trainer = lightning.Trainer(
        max_epochs=EPOCHS, accelerator="cpu", devices=2,
        strategy=DDPStrategy(process_group_backend="gloo",
                             start_method=start),
        logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False)
    trainer.fit(Model(data, out))


if __name__ == "__main__":
    main()
