"""2 ranks under torchrun (gloo) save their loaders' state_dict() with
torch.distributed.checkpoint beside a model, each under its own key, and
resume fresh loaders from it, for test_frameworks.py. Rank r stops after
r + 1 batches; each writes OUT/rank<R>.json: the batches it delivered after
the resume (the rest of epoch 0, then epoch 1) as (indices, sha256 of the
image bytes)."""
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

import pinload.torch as pt


def main() -> None:
    data, out = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    kw = dict(batch_size=8, size=16, seed=7, device="host", num_workers=1,
              output_map=("images", "labels", "indices"),
              log=lambda level, msg: None)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 4)
    loader = pt.Loader(data, **kw)
    it = iter(loader)
    for _ in range(rank + 1):
        next(it)
    del it
    # Each rank's loader state under a key of its own: DCP keeps one copy
    # of a non-tensor value that every rank saves under the same key.
    ckpt = os.path.join(out, "ckpt")
    dcp.save({"model": model.state_dict(),
              "loaders": {str(rank): loader.state_dict()}},
             checkpoint_id=ckpt)

    fresh_model = torch.nn.Linear(3, 4)
    fresh = pt.Loader(data, **kw)
    state = {"model": fresh_model.state_dict(),
             "loaders": {str(rank): fresh.state_dict()}}
    dcp.load(state, checkpoint_id=ckpt)
    fresh.load_state_dict(state["loaders"][str(rank)])
    rows = [[b["indices"].tolist(),
             hashlib.sha256(b["images"].numpy().tobytes()).hexdigest()]
            for epoch in range(2) for b in fresh]
    record = {"rank": rank, "rows": rows,
              "model": torch.equal(fresh_model.weight, model.weight)}
    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump(record, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
