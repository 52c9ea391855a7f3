"""The loops of issue 23 on a real GPU (issue 28 runs them): kept batches
as device tensors, bf16 and channels-last made on the GPU, Lightning on
one GPU, two threads sharing an epoch. Each compares with the host
backend's bytes, which the GPU path must equal exactly (the same tables),
read through torch (NumPy has no bfloat16) in the order they are stored.
Skipped without a CUDA device: tools/gpu-session.sh's test phase runs them
where there is one."""
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pinload  # noqa: E402
import pinload.torch as pt  # noqa: E402

# Every loader here but host_batches' is on the default device: the GPU.
pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="no CUDA device"),
              pytest.mark.default_device]

KW = dict(batch_size=4, size=16, seed=7, num_workers=2, augment="train",
          log=lambda level, msg: None)


def stored(images):
    """A batch's bytes in the order it stores them, on the host: NCHW, or
    NHWC for a channels_last tensor (layout="nhwc": NCHW's shape, NHWC's
    strides; its C-order bytes would be NCHW's), u8's NHWC; any dtype,
    bfloat16 included, read as bytes."""
    if images.dim() == 4 and not images.is_contiguous():
        assert images.is_contiguous(memory_format=torch.channels_last)
        images = images.permute(0, 2, 3, 1)  # dense: the stored order
    assert images.is_contiguous()
    return images.cpu().view(torch.uint8).numpy().tobytes()


def host_batches(dataset, epochs=1, **kw):
    """(indices, image bytes) of each batch, on the host backend."""
    loader = pinload.Loader(dataset, device="host", **dict(KW, **kw))
    out = []
    for _ in range(epochs):
        for b in loader:
            out.append((np.from_dlpack(b.indices).tolist(),
                        stored(torch.from_dlpack(b.images))))
    return out


def test_kept_device_tensors_keep_their_bytes(dataset):
    """20 batches kept as CUDA tensors: the pool grows on the device,
    nothing is overwritten, every kept tensor equals the host's bytes."""
    want = host_batches(dataset, epochs=2)
    loader = pt.Loader(dataset, output_map=("images", "indices"), **KW)
    kept = []
    for _ in range(2):
        for batch in loader:
            if len(kept) < 20:
                kept.append(batch)
            torch.cuda._sleep(1_000_000)  # the device is busy meanwhile
    del batch
    torch.cuda.synchronize()
    assert loader.stats["device_buffers"] >= 20
    got = [(b["indices"].tolist(), stored(b["images"])) for b in kept]
    assert got == want[:20]


@pytest.mark.parametrize("fmt,layout", [("f32", "nchw"), ("f16", "nchw"),
                                        ("bf16", "nchw"), ("f32", "nhwc"),
                                        ("f16", "nhwc"), ("bf16", "nhwc")])
def test_float_formats_made_on_the_gpu_equal_the_hosts(dataset, fmt,
                                                       layout):
    """gpu_normalize writes bf16 / channels-last from the same table as the
    host path: byte for byte the same, in the same (stored) order."""
    want = host_batches(dataset, format=fmt, layout=layout)
    loader = pt.Loader(dataset, format=fmt, layout=layout,
                       gpu_normalize=True, output_map=("images", "indices"),
                       **KW)
    assert loader.info["gpu_normalize"] == 1
    got = []
    for b in loader:
        images = b["images"]
        assert images.is_cuda
        assert images.dtype == {"f32": torch.float32, "f16": torch.float16,
                                "bf16": torch.bfloat16}[fmt]
        assert images.is_contiguous(memory_format=(
            torch.channels_last if layout == "nhwc"
            else torch.contiguous_format))
        got.append((b["indices"].tolist(), stored(images)))
    assert got == want


def test_two_threads_share_an_epoch_of_device_batches(dataset):
    loader = pt.Loader(dataset, output_map=("indices",), **KW)
    it = iter(loader)
    got = [[], []]

    def take(k):
        for b in it:
            got[k].append(b["indices"].cpu())

    threads = [threading.Thread(target=take, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    seen = sorted(i for g in got for b in g for i in b.tolist())
    assert seen == list(range(48))


def test_lightning_on_one_gpu_trains_on_the_data_epochs(dataset):
    lightning = pytest.importorskip("lightning")

    class Model(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(3, 4)
            self.seen = []

        def training_step(self, batch, i):
            assert batch["images"].is_cuda
            self.seen.append(batch["indices"].tolist())
            x = batch["images"].float().mean(dim=(2, 3))
            return torch.nn.functional.cross_entropy(self.layer(x),
                                                     batch["labels"])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    loader = pt.Loader(dataset, format="f32",
                       output_map=("images", "labels", "indices"), **KW)
    model = Model()
    trainer = lightning.Trainer(
        max_epochs=2, accelerator="gpu", devices=1, logger=False,
        enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False)
    trainer.fit(model, train_dataloaders=loader)
    assert trainer.global_step == 2 * len(loader)
    want = [idx for idx, _ in host_batches(dataset, epochs=2, format="f32")]
    assert model.seen == want
