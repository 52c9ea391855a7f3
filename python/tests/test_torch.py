"""pinload.torch and torch.from_dlpack: tensors that view the loader's
buffers, their lifetime, a training step; on a GPU, stream ordering."""
import gc

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pinload  # noqa: E402
import pinload.torch as pt  # noqa: E402

from conftest import default_backend, dump  # noqa: E402

cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                          reason="no CUDA device")


def device_of(loader):
    """The torch.device a pinload.torch loader's batches arrive on."""
    info = loader.info
    if info["backend"] == "cuda":
        return torch.device("cuda", info["device"])
    return torch.device("cpu")


def test_from_dlpack_views_the_batch_without_a_copy(dataset):
    loader = pinload.Loader(dataset, batch_size=4, size=16, device="host",
                            format="f32")
    b = loader.next()
    t = torch.from_dlpack(b.images)
    assert t.shape == (4, 3, 16, 16) and t.dtype == torch.float32
    assert t.data_ptr() == b.images.ptr
    labels = torch.from_dlpack(b.labels)
    assert labels.dtype == torch.int32
    assert labels.tolist() == np.from_dlpack(b.labels).tolist()
    del b
    assert loader.batches_held == 1  # t holds it
    del t, labels
    gc.collect()
    assert loader.batches_held == 0


@pytest.mark.default_device
def test_the_default_device_is_torchs_current_gpu_else_the_host(
        monkeypatch):
    """Without device=, pinload.torch.Loader takes torch's current CUDA
    device where torch sees a GPU (as torch.cuda.set_device left it), the
    host where it sees none."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    assert pt._default_device() == torch.device("cuda", 3)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pt._default_device() == "host"


def test_a_test_naming_no_device_meets_a_gpu_like_default(dataset):
    """conftest's guard, for the tests not marked default_device: where
    torch sees no GPU, a loader made without device= fails as the nine
    tests of issue 35 failed on a GPU machine, where the default is the
    GPU; a loader that names the host is made. With a GPU, the default is
    that GPU."""
    kw = dict(batch_size=4, size=8, seed=1)
    if torch.cuda.is_available():
        assert pt.Loader(dataset, **kw).info["backend"] == "cuda"
    else:
        with pytest.raises(pytest.fail.Exception) as e:
            pt.Loader(dataset, **kw)
        assert "not the host" in str(e.value)
    assert pt.Loader(dataset, device="host", **kw).info["backend"] == "host"


@pytest.mark.default_device
def test_torch_loader_u8_equals_pinload_dump(dataset, tmp_path):
    """Without device=, batches arrive on torch's current CUDA device where
    torch sees one, else on the host; either way their u8 pixels are
    pinload-dump's (host) bytes: a u8 batch only crosses the bus."""
    ref = dump(dataset, tmp_path / "dump", size=32, augment="eval", seed=4,
               batch=8)
    loader = pt.Loader(dataset, batch_size=8, size=32, augment="eval",
                       seed=4, num_workers=2)
    assert loader.info["backend"] == default_backend()
    if torch.cuda.is_available():
        assert loader.info["device"] == torch.cuda.current_device()
    got = []
    for images, labels in loader:
        assert images.device == device_of(loader)
        assert images.dtype == torch.uint8 and images.shape[1:] == (32, 32, 3)
        assert labels.dtype == torch.int64 and labels.device == images.device
        nchw = pt.to_nchw(images)
        assert nchw.shape[1:] == (3, 32, 32)
        assert torch.equal(nchw.permute(0, 2, 3, 1), images)
        for img, lab in zip(images.cpu(), labels.tolist()):
            got.append((img.numpy().tobytes(), lab))
    assert [(rgb, lab) for _, lab, rgb in ref] == got


def test_torch_loader_f32_equals_numpy_and_releases_each_batch(dataset):
    """On the host backend, named: pinload.torch's tensors are
    pinload.Loader's NumPy arrays, and each batch goes back when its
    tensors die."""
    kw = dict(batch_size=8, size=24, seed=6, num_workers=2, format="f32",
              device="host")
    want = [np.from_dlpack(b.images).copy()
            for b in pinload.Loader(dataset, **kw)]
    loader = pt.Loader(dataset, **kw)
    n = 0
    for (images, labels), ref in zip(loader, want):
        assert images.shape == (8, 3, 24, 24)
        np.testing.assert_array_equal(images.numpy(), ref)
        assert loader.batches_held <= 2
        n += 1
    assert n == len(loader) == 6
    del images, labels
    gc.collect()
    assert loader.batches_held == 0


def test_an_in_place_op_on_a_held_batch_reaches_no_other_batch(dataset):
    """torch ignores DLPack's read-only flag, so `images.add_(1)` writes into
    the loader's buffer. The decision (docs/python.md): that buffer is the
    caller's until release, the loader neither reads it again nor shares it
    (the ring is never exposed), so the write changes that batch alone;
    every later batch, and the next epoch, are byte for byte a clean run's."""
    kw = dict(batch_size=4, size=16, seed=3, num_workers=2, device="host")

    def epochs(write):
        loader = pt.Loader(dataset, **kw)
        seen = []
        for _ in range(2):
            for images, labels in loader:
                seen.append(images.numpy().tobytes())
                if write:
                    images.add_(1)  # in place, u8 wraps
                    images[0].zero_()
        return seen

    assert epochs(write=True) == epochs(write=False)


@pytest.mark.default_device
def test_a_bytes_path_reads_as_its_str(dataset):
    """Loader(b"/path") is the path, as os.fspath takes it."""
    import os
    a = [np.from_dlpack(b.labels).tolist()
         for b in pinload.Loader(os.fsencode(dataset), batch_size=4, size=8,
                                 device="host", seed=1)]
    b = [np.from_dlpack(x.labels).tolist()
         for x in pinload.Loader(str(dataset), batch_size=4, size=8,
                                 device="host", seed=1)]
    assert a == b and len(a) > 1
    images, labels = next(iter(pt.Loader(os.fsencode(dataset), batch_size=4,
                                         size=8, seed=1)))
    assert labels.tolist() == b[0]


@pytest.mark.default_device
def test_keeping_tensors_past_a_bound_raises_busy_not_a_reused_buffer(
        dataset):
    """Kept tensors grow the pool (test_ownership.py); past the bound the
    user sets, BusyError, never a buffer reused under a live tensor. On the
    default device: CUDA buffers where there is a GPU, host ones else."""
    loader = pt.Loader(dataset, batch_size=4, size=16, device_buffers=2,
                       max_device_buffers=2)
    kept = []
    with pytest.raises(pinload.BusyError) as e:
        for images, _ in loader:
            kept.append(images)
    assert len(kept) == 2
    assert "clone()" in str(e.value)
    # The kept tensors are intact: not overwritten by later batches.
    again = pinload.Loader(dataset, batch_size=4, size=16, device="host")
    for t, b in zip(kept, again):
        assert t.device == device_of(loader)
        assert t.cpu().numpy().tobytes() == np.from_dlpack(b.images).tobytes()


@pytest.mark.default_device
def test_a_few_training_steps_on_pinload_batches(dataset):
    """Training as a user writes it: the loader on its default device (the
    GPU where there is one) and the model on the batches' device."""
    loader = pt.Loader(dataset, batch_size=8, size=32, format="f32",
                       num_workers=2)
    assert loader.info["backend"] == default_backend()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(8, 4)).to(device_of(loader))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    losses = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        for images, labels in loader:
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert len(losses) == 2 * len(loader)
    assert all(np.isfinite(losses))
    assert any(not torch.equal(a, p) for a, p in
               zip(before, model.parameters()))
    del images, labels, loss
    gc.collect()
    assert loader.batches_held == 0


@cuda
@pytest.mark.default_device
def test_cuda_batches_arrive_on_the_current_device_and_stream(dataset):
    loader = pt.Loader(dataset, batch_size=8, size=32, format="f32",
                       keep_host=False, gpu_normalize=True)
    host = pinload.Loader(dataset, batch_size=8, size=32, format="f32",
                          device="host")
    for (images, labels), ref in zip(loader, host):
        assert images.is_cuda and labels.is_cuda
        np.testing.assert_array_equal(images.cpu().numpy(),
                                      np.from_dlpack(ref.images))


@cuda
def test_cuda_buffer_is_not_reused_before_the_consumer_stream_is_done(
        dataset):
    """A slow kernel on the consumer's stream reads each batch; the loader
    may not overwrite the buffer until it has run."""
    loader = pinload.Loader(dataset, batch_size=8, size=64, format="f32",
                            device=torch.cuda.current_device(),
                            device_buffers=2, keep_host=True)
    stream = torch.cuda.Stream()
    sums, want = [], []
    with torch.cuda.stream(stream):
        for b in loader:
            want.append(float(np.from_dlpack(b.host_images).astype(
                np.float64).sum()))
            t = torch.from_dlpack(b.images)  # waits on `stream`
            torch.cuda._sleep(50_000_000)    # the consumer is slow
            sums.append(t.double().sum())
            del t, b                         # released on `stream`
    torch.cuda.synchronize()
    got = [float(s) for s in sums]
    np.testing.assert_allclose(got, want, rtol=1e-9)


@cuda
def test_cuda_buffer_waits_for_every_consumer_stream(dataset):
    """Two consumers read each batch on two streams; the first one's
    kernel is the slow one. The buffer goes back after both (it used to go
    back after the last consumer's stream alone)."""
    loader = pinload.Loader(dataset, batch_size=8, size=64, format="f32",
                            device=torch.cuda.current_device(),
                            device_buffers=1, keep_host=True)
    slow, fast = torch.cuda.Stream(), torch.cuda.Stream()
    sums, want = [], []
    for b in loader:
        want.append(float(np.from_dlpack(b.host_images).astype(
            np.float64).sum()))
        with torch.cuda.stream(slow):
            t1 = torch.from_dlpack(b.images)
            torch.cuda._sleep(50_000_000)
            sums.append(t1.double().sum())
        with torch.cuda.stream(fast):
            t2 = torch.from_dlpack(b.images)
            t2.double().sum()
        del t1, t2, b
    torch.cuda.synchronize()
    np.testing.assert_allclose([float(s) for s in sums], want, rtol=1e-9)


@cuda
def test_cuda_per_thread_stream_consumer_released_from_another_thread(
        dataset):
    """A consumer thread reads each batch on its per-thread default stream
    (handle 2, which torch passes to __dlpack__ as stream=2) with a slow
    kernel; the tensor dies on the main thread, which cannot name that
    stream. The buffer must still wait for the kernel (it used to be
    released on the main thread's per-thread stream, unordered with it)."""
    import threading
    loader = pinload.Loader(dataset, batch_size=8, size=64, format="f32",
                            device=torch.cuda.current_device(),
                            device_buffers=1, keep_host=True)
    per_thread = torch.cuda.ExternalStream(2)
    sums, want = [], []
    for b in loader:
        want.append(float(np.from_dlpack(b.host_images).astype(
            np.float64).sum()))
        held = []

        def consume():
            with torch.cuda.stream(per_thread):
                t = torch.from_dlpack(b.images)
                torch.cuda._sleep(50_000_000)
                sums.append(t.double().sum())
                held.append(t)

        th = threading.Thread(target=consume)
        th.start()
        th.join()
        del held[:], b  # the release runs here, on the main thread
    torch.cuda.synchronize()
    np.testing.assert_allclose([float(s) for s in sums], want, rtol=1e-9)


DDP_RANK = """
import json, os, sys
import torch, torch.distributed as dist
import pinload.torch as pt
dist.init_process_group("gloo")
if torch.cuda.is_available():  # as DDP scripts do: a GPU per local rank
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) %
                          torch.cuda.device_count())
# The default device: the one just set where there is a GPU, else the host;
# the model goes where the batches arrive (gloo reduces CUDA tensors too).
loader = pt.Loader(sys.argv[1], batch_size=5, size=16, seed=3)
info = loader.info
device = (torch.device("cuda", info["device"]) if info["backend"] == "cuda"
          else torch.device("cpu"))
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Flatten(),
                        torch.nn.Linear(16 * 16 * 3, 4)).to(device))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
seen, steps = [], 0
for epoch in range(2):
    loader.set_epoch(epoch)
    for images, labels in loader:
        assert images.device == labels.device == device
        loss = torch.nn.functional.cross_entropy(
            model(images.float() / 255), labels)
        opt.zero_grad(); loss.backward(); opt.step()  # all-reduce: in step
        steps += 1
    seen.append(sorted(int(i) for i in loader.epoch_order(epoch)))
with open(os.path.join(sys.argv[2], "rank%d.json" % dist.get_rank()), "w") as f:
    json.dump({"rank": info["rank"], "world": info["world_size"],
               "backend": info["backend"], "steps": steps,
               "len": len(loader), "seen": seen}, f)
loader.close()
dist.barrier()
dist.destroy_process_group()
# PyTorch 2.15's gloo aborts the interpreter's exit ("terminate called without
# an active exception") in about 4 runs of 10 on a loaded 2-core machine, with
# or without pinload (11 of 25 runs of this script with random tensors in
# place of the loader): leave without that teardown, all said and written.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


@pytest.mark.default_device
def test_torchrun_ranks_shard_and_take_equal_steps(dataset, tmp_path):
    """Two real processes under torchrun with DDP (gloo): each loader takes
    rank and world size from torchrun's variables, and the device from
    torch (a GPU where there is one: the model trains on it)."""
    import json
    import subprocess
    import sys
    import socket
    with socket.socket() as sock:  # a free port for the rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = tmp_path / "ddp.py"
    script.write_text(DDP_RANK)
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run",
                          "--nproc_per_node", "2", "--master_port",
                          str(port), str(script), dataset, str(tmp_path)],
                         timeout=300, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True)
    assert run.returncode == 0, run.stdout[-4000:]
    r = [json.loads((tmp_path / ("rank%d.json" % i)).read_text())
         for i in range(2)]
    assert [x["rank"] for x in r] == [0, 1]
    assert all(x["world"] == 2 for x in r)
    assert all(x["backend"] == default_backend() for x in r)
    assert r[0]["steps"] == r[1]["steps"] == 2 * r[0]["len"] == 10
    for epoch in range(2):
        assert sorted(r[0]["seen"][epoch] + r[1]["seen"][epoch]) == \
            list(range(48))


@pytest.mark.parametrize("dtype,name", [
    (torch.uint8, "u8"), (torch.float32, "f32"), (torch.float16, "f16"),
    (torch.bfloat16, "bf16")])
def test_format_takes_the_images_torch_dtype(dataset, dtype, name):
    """format=torch.float32 is format="f32" (issue 39), for pinload.torch
    and pinload alike."""
    kw = dict(batch_size=4, size=16, device="host", seed=2)
    images, _ = next(iter(pt.Loader(dataset, format=dtype, **kw)))
    assert images.dtype == dtype
    assert pinload.Loader(dataset, format=dtype, **kw).info["format"] == name
    want = next(iter(pt.Loader(dataset, format=name, **kw)))[0]
    assert torch.equal(images, want)


def test_format_refuses_another_torch_dtype(dataset):
    with pytest.raises(ValueError) as e:
        pt.Loader(dataset, format=torch.int64, device="host")
    assert str(e.value) == (
        "format: torch.int64 is not one of 'u8', 'f32', 'f16', 'bf16', or "
        "torch's torch.uint8, torch.float32, torch.float16, torch.bfloat16")
