"""CUDA graphs beside a running loader (issue 35): torch.cuda.graph captures
in global mode by default, in which "potentially unsafe" CUDA calls from
any other thread (an event query, a synchronisation, an allocation) fail
and invalidate the capture. On an H200 (2026-11-27) a graph captured while
a loader ran was invalidated at its first launch, and with keep_host the
loader then failed for good. The loader's threads now run in CUDA's
relaxed capture mode; here a training step is captured while the loader
fills its ring, then replayed on every batch, as a CUDA-graphed training
loop does. Skipped without a CUDA device: tools/gpu-session.sh's test
phase runs it where there is one."""
import time

import pytest

torch = pytest.importorskip("torch")

import pinload.torch as pt  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device")

KW = dict(batch_size=4, size=16, seed=5, num_workers=2, augment="train",
          log=lambda level, msg: None)


@pytest.mark.parametrize("opts", [
    dict(),
    dict(keep_host=True),
    dict(memory="pageable"),
    dict(memory="managed"),
    dict(format="f32"),
], ids=["pinned", "keep_host", "pageable", "managed", "f32"])
def test_a_graph_captured_while_the_loader_runs_replays_on_its_batches(
        dataset, opts):
    host = pt.Loader(dataset, device="host", **dict(KW, **opts))
    want = [images.clone() for images, _ in host]
    loader = pt.Loader(dataset, device=torch.cuda.current_device(),
                       **dict(KW, **opts))
    batches = iter(loader)
    images, _ = next(batches)  # the pipeline runs from here on
    static_in = torch.zeros(images.shape, dtype=torch.float32,
                            device=images.device)
    static_in.copy_(images)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up, as torch.cuda.graph asks
        static_out = static_in * 2 + 1
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # capture_error_mode="global"
        static_out = static_in * 2 + 1
        time.sleep(0.3)  # the loader's threads copy batches meanwhile
    got = [images.cpu()]
    for images, _ in batches:
        static_in.copy_(images)
        graph.replay()
        assert torch.equal(static_out, images.float() * 2 + 1)
        got.append(images.cpu())
    torch.cuda.synchronize()
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g, w), "batch %d differs from the host's" % k
