"""The ownership rule, as DataLoader's: a batch is the caller's for as long
as it (or a tensor made from it) is alive, whatever the caller keeps. While
batches are dropped in time they are views of the loader's recycled buffers
(no copy, no growth); each one kept beyond that adds a buffer, so a kept
batch never changes and no loop of issue 23 raises BusyError."""
import threading

import numpy as np
import pytest

import pinload

# 48 images, batches of 4: 12 a epoch.
KW = dict(batch_size=4, size=16, seed=7, device="host", num_workers=2,
          augment="train", log=lambda level, msg: None)


def fresh_batches(dataset, epochs, **kw):
    """[(indices, images bytes)] of each batch of `epochs` epochs, each
    copied out and dropped at once."""
    loader = pinload.Loader(dataset, **dict(KW, **kw))
    out = []
    for _ in range(epochs):
        for b in loader:
            out.append((np.from_dlpack(b.indices).tolist(),
                        np.from_dlpack(b.images).tobytes()))
    assert loader.stats["device_buffers"] == 2
    return out


def test_the_plainest_loops_run_without_growing_the_pool(dataset):
    loader = pinload.Loader(dataset, **KW)
    n = 0
    for images in loader:  # the loop variable holds the last batch
        n += 1
    assert n == len(loader) == 12
    assert loader.stats["device_buffers"] == 2  # zero-copy, recycled
    # `images` still holds epoch 0's last batch: while the generator below
    # holds one batch and asks for the next, that makes three alive.
    assert sum(1 for _ in loader) == 12
    assert loader.stats["device_buffers"] == 3
    del images
    assert sum(1 for _ in loader) == 12
    assert loader.stats["device_buffers"] == 3


def test_twenty_kept_batches_equal_a_fresh_runs_bytes(dataset):
    want = fresh_batches(dataset, 2)
    loader = pinload.Loader(dataset, **KW)
    kept = []
    for _ in range(2):
        for b in loader:
            if len(kept) < 20:
                kept.append((b, np.from_dlpack(b.images)))  # a view
    del b  # epoch 1's last batch, not kept
    assert len(kept) == 20 and loader.batches_held == 20
    # The pool grew to the most ever alive, no further: the 20 kept, the
    # loop variable's batch and the one asked for beside it.
    assert loader.stats["device_buffers"] == 22
    got = [(np.from_dlpack(b.indices).tolist(), a.tobytes())
           for b, a in kept]
    assert got == want[:12] + want[12:20]
    # Dropping them gives the buffers back for good: the next epoch, kept
    # whole, needs no new one.
    del kept, got
    again = list(loader)
    assert len(again) == 12 and loader.stats["device_buffers"] == 22


def test_a_bound_gives_busy_error_naming_it(dataset):
    loader = pinload.Loader(dataset, max_device_buffers=3, **KW)
    kept = [loader.next() for _ in range(3)]
    with pytest.raises(pinload.BusyError) as e:
        loader.next()
    assert "max_device_buffers" in str(e.value), str(e.value)
    kept.pop(0)
    assert loader.next().index == 3
    with pytest.raises(ValueError, match="max_device_buffers"):
        pinload.Loader(dataset, device_buffers=3, max_device_buffers=2, **KW)


def test_two_threads_sharing_one_iterator_see_every_sample_once(dataset):
    loader = pinload.Loader(dataset, **KW)
    for epoch in range(2):
        it = iter(loader)
        got = [[], []]
        start = threading.Barrier(2)

        def take(k):
            start.wait()
            for b in it:  # each keeps what it takes: the pool grows
                got[k].append(b)

        threads = [threading.Thread(target=take, args=(k,)) for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        batches = got[0] + got[1]
        assert sorted(b.index for b in batches) == list(range(12))
        assert all(b.epoch == epoch for b in batches)
        seen = sorted(i for b in batches
                      for i in np.from_dlpack(b.indices).tolist())
        assert seen == list(range(48)), "epoch %d" % epoch
        del got, batches
    assert loader.epoch == 2


torch = pytest.importorskip("torch")


def test_a_loss_summed_over_four_micro_batches_is_exact(dataset):
    """Autograd keeps each micro-batch's images alive until backward: the
    loss and the gradient equal those of copies from a fresh run."""
    import pinload.torch as pt
    kw = dict(KW, format="f32")
    torch.manual_seed(0)
    model = torch.nn.Linear(3 * 16 * 16, 4)

    def loss_and_grad(micro):
        model.zero_grad()
        total = sum(torch.nn.functional.cross_entropy(
            model(x.flatten(1)), y) for x, y in micro)
        total.backward()
        return total.item(), model.weight.grad.clone()

    loader = pt.Loader(dataset, **kw)
    it = iter(loader)
    micro = [next(it) for _ in range(4)]  # four views, all alive
    assert loader.batches_held == 4
    got_loss, got_grad = loss_and_grad(micro)

    ref = pt.Loader(dataset, **kw)
    copies = []
    for x, y in ref:
        copies.append((x.clone(), y.clone()))
        if len(copies) == 4:
            break
    want_loss, want_grad = loss_and_grad(copies)
    assert got_loss == want_loss
    assert torch.equal(got_grad, want_grad)
    for (x, _), (c, _) in zip(micro, copies):
        assert torch.equal(x, c)  # and the views still hold their bytes


def test_eval_outputs_appended_keep_their_values(dataset):
    import pinload.torch as pt
    want = fresh_batches(dataset, 1, augment="eval")
    loader = pt.Loader(dataset, **dict(KW, augment="eval"))
    outputs = []
    for images, labels in loader:
        outputs.append(images)  # as an evaluation loop gathers them
    assert [o.numpy().tobytes() for o in outputs] == [w for _, w in want]
    assert loader.stats["device_buffers"] == 12
