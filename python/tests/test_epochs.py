"""The epoch rule, as DataLoader's: every iter(loader) is one epoch. After an
epoch completed or left part-way, the next iter() starts the next epoch;
set_epoch pins it; the first iter() after resume goes on mid-epoch. The
loops of issue 23 that used to yield nothing, or half an epoch."""
import itertools

import numpy as np
import pytest

import pinload

KW = dict(batch_size=8, size=16, seed=7, device="host", num_workers=2,
          log=lambda level, msg: None)


def indices(b):
    return np.from_dlpack(b.indices).tolist()


def epoch_indices(dataset, epoch):
    """Dataset indices of each batch of `epoch`, from a fresh loader."""
    loader = pinload.Loader(dataset, first_epoch=epoch, **KW)
    return [indices(b) for b in loader]


def test_three_for_loops_in_a_row_are_three_epochs(dataset):
    loader = pinload.Loader(dataset, **KW)
    n = len(loader)
    seen = []
    for epoch in range(3):
        got = [indices(b) for b in loader]
        assert len(got) == n, "epoch %d gave %d batches" % (epoch, len(got))
        assert got == epoch_indices(dataset, epoch)
        seen.append(got)
    assert seen[0] != seen[1]  # shuffled anew


def test_islice_of_len_batches_three_times_advances_the_epoch(dataset):
    """islice(loader, len(loader)) takes every batch but never the end:
    the next islice must be the next epoch, not an empty one."""
    loader = pinload.Loader(dataset, **KW)
    n = len(loader)
    for epoch in range(3):
        got = [indices(b) for b in itertools.islice(loader, n)]
        assert got == epoch_indices(dataset, epoch), epoch


def test_break_then_for_starts_the_next_epoch(dataset):
    loader = pinload.Loader(dataset, **KW)
    for b in loader:
        first = indices(b)
        break  # b (a batch) is still alive here
    assert first == epoch_indices(dataset, 0)[0]
    got = [indices(x) for x in loader]
    assert got == epoch_indices(dataset, 1)
    assert loader.epoch == 2
    del b


def test_epoch_is_the_one_the_next_iter_gives(dataset):
    """loader.epoch reads the epoch the next iter() gives (issue 39): after
    a break, an islice of a whole epoch (its end not taken), a resume, a
    set_epoch; the batch's own epoch is batch.epoch."""
    loader = pinload.Loader(dataset, **KW)
    assert loader.epoch == 0
    for b in loader:
        assert b.epoch == 0
        break
    assert loader.epoch == 1
    assert [b.epoch for b in loader][0] == 1
    assert loader.epoch == 2
    n = len(loader)
    list(itertools.islice(loader, n))  # every batch, not the end
    assert loader.epoch == 3
    assert {b.epoch for b in loader} == {3}
    loader.set_epoch(7)
    assert loader.epoch == 7
    b = loader.next()
    state = loader.state_dict()
    assert loader.epoch == 8  # iter() would start epoch 8
    resumed = pinload.Loader(dataset, resume=state, **KW)
    assert resumed.epoch == 7  # its first iter() is the rest of epoch 7
    assert {x.epoch for x in resumed} == {7}
    assert resumed.epoch == 8
    del b


def test_limit_batches_per_pass_advances_data_epochs(dataset):
    """As Lightning's limit_train_batches=k: k batches per pass, each pass
    the next data epoch's first k."""
    loader = pinload.Loader(dataset, **KW)
    for epoch in range(3):
        got = [indices(b) for b in itertools.islice(loader, 2)]
        assert got == epoch_indices(dataset, epoch)[:2], epoch


def test_set_epoch_pins_the_epoch_iterated_next(dataset):
    loader = pinload.Loader(dataset, **KW)
    for b in itertools.islice(loader, 1):
        pass
    loader.set_epoch(5)
    assert [indices(b) for b in loader] == epoch_indices(dataset, 5)
    loader.set_epoch(5)  # again: the same epoch once more
    assert [indices(b) for b in loader] == epoch_indices(dataset, 5)


def test_the_first_iter_after_resume_goes_on_mid_epoch(dataset):
    whole = epoch_indices(dataset, 0)
    loader = pinload.Loader(dataset, **KW)
    it = iter(loader)
    for _ in range(2):
        next(it)
    state = loader.state_dict()
    del it
    resumed = pinload.Loader(dataset, resume=state, **KW)
    assert [indices(b) for b in resumed] == whole[2:]
    # and then the next epoch, whole
    assert [indices(b) for b in resumed] == epoch_indices(dataset, 1)
    # load_state_dict on a used loader: the same
    loader.load_state_dict(state)
    assert [indices(b) for b in loader] == whole[2:]


def test_set_epoch_of_the_resumed_epoch_keeps_the_resume(dataset):
    """The README's loop calls set_epoch(epoch) before each epoch; after a
    resume mid-epoch e, set_epoch(e) must not start e over."""
    whole = epoch_indices(dataset, 0)
    loader = pinload.Loader(dataset, **KW)
    it = iter(loader)
    for _ in range(2):
        next(it)
    state = loader.state_dict()
    del it
    loaded = pinload.Loader(dataset, **KW)
    loaded.load_state_dict(state)
    for resumed in (pinload.Loader(dataset, resume=state, **KW), loaded):
        got = []
        for epoch in (0, 1):
            resumed.set_epoch(epoch)
            got.append([indices(b) for b in resumed])
        assert got == [whole[2:], epoch_indices(dataset, 1)]


def test_a_kept_batch_stays_valid_when_a_new_epoch_starts(dataset):
    """Starting the next epoch while the user still holds a batch of the
    abandoned one keeps that batch's bytes (the old buffers live on until
    it goes)."""
    loader = pinload.Loader(dataset, **KW)
    it = iter(loader)
    kept = next(it)
    want = np.from_dlpack(kept.images).copy()
    del it
    assert len([indices(b) for b in loader]) == len(loader)
    assert np.from_dlpack(kept.images).tobytes() == want.tobytes()


def test_state_dict_is_json_and_round_trips_to_the_same_batches(dataset):
    import json
    loader = pinload.Loader(dataset, **KW)
    it = iter(loader)
    for _ in range(3):
        next(it)  # each batch dropped at once
    d = loader.state_dict()
    text = json.dumps(d)
    assert all(isinstance(v, (int, str)) for v in d.values()), d
    assert json.loads(text) == d and (d["epoch"], d["batch"]) == (0, 3)
    rest = [indices(b) for b in it]
    again = pinload.Loader(dataset, resume=json.loads(text), **KW)
    assert [indices(b) for b in again] == rest
    # The state bytes as pinload 0.1's state_dict gave them still load.
    old = dict(d, state=bytes.fromhex(d["state"]))
    again.load_state_dict(old)
    assert [indices(b) for b in again] == rest
    with pytest.raises(ValueError):
        again.load_state_dict(dict(d, state="zz" + d["state"][2:]))


torch = pytest.importorskip("torch")


def test_torch_loops_in_a_row_each_give_len_batches(dataset):
    import pinload.torch as pt
    loader = pt.Loader(dataset, **KW)
    for _ in range(3):
        n = 0
        for images, labels in loader:
            n += 1
        assert n == len(loader)
    for _ in range(2):  # islice of len batches, twice: two whole epochs
        n = 0
        for images, labels in itertools.islice(loader, len(loader)):
            n += 1
        assert n == len(loader)


def test_dict_batches_hold_what_output_map_names(dataset):
    import pinload.torch as pt
    kw = dict(KW)
    ref = [(i.clone(), la.clone()) for i, la in pt.Loader(dataset, **kw)]
    loader = pt.Loader(dataset, output_map=("images", "labels", "indices"),
                       **kw)
    got = 0
    for b, (images, labels) in zip(loader, ref):
        assert list(b) == ["images", "labels", "indices"]
        assert torch.equal(b["images"], images)
        assert torch.equal(b["labels"], labels)
        assert b["indices"].dtype == torch.int64 and len(b["indices"]) == len(labels)
        got += 1
    assert got == len(ref) == len(loader)
    only = next(iter(pt.Loader(dataset, output_map=["labels"], **kw)))
    assert list(only) == ["labels"]
    for bad in (("images", "images"), ("pixels",), ()):
        with pytest.raises(ValueError):
            pt.Loader(dataset, output_map=bad, **kw)


def test_the_package_ships_its_types():
    """py.typed and the extension's stub are installed with the package,
    so type checkers see the annotations (PEP 561)."""
    import os
    here = os.path.dirname(pinload.__file__)
    assert os.path.isfile(os.path.join(here, "py.typed"))
    assert os.path.isfile(os.path.join(here, "_pinload.pyi"))
    import inspect
    sig = inspect.signature(pinload.Loader.__init__)
    assert "int" in str(sig.parameters["batch_size"].annotation)


def test_a_torch_dataloader_takes_it_as_an_iterable_dataset(dataset):
    import pinload.torch as pt
    loader = pt.Loader(dataset, **KW)
    assert isinstance(loader, torch.utils.data.IterableDataset)
    dl = torch.utils.data.DataLoader(loader, batch_size=None)
    assert len(dl) == len(loader)
    for epoch in range(2):
        got = [labels.tolist() for images, labels in dl]
        want = [np.from_dlpack(b.labels).tolist()
                for b in pinload.Loader(dataset, first_epoch=epoch, **KW)]
        assert got == want, epoch


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_a_dataloader_with_worker_processes_is_told_num_workers_0(dataset,
                                                                  start):
    """DataLoader(loader, num_workers > 0), whatever the start method: a
    spawned worker would need the loader pickled (refused), a forked one
    has none of its threads (refused there, and the DataLoader raises it
    here); both say what to do (issue 39)."""
    import multiprocessing
    if start not in multiprocessing.get_all_start_methods():
        pytest.skip("no %s here" % start)
    import pinload.torch as pt
    loader = pt.Loader(dataset, **KW)
    dl = torch.utils.data.DataLoader(loader, batch_size=None, num_workers=1,
                                     multiprocessing_context=start)
    with pytest.raises((TypeError, RuntimeError)) as e:
        list(dl)
    assert "use num_workers=0: pinload has its own workers" in str(e.value)
    # The loader itself is unharmed.
    assert sum(1 for _ in loader) == len(loader)


def _lightning_run(dataset, limit, epochs):
    """Trainer.fit on pinload.torch.Loader: the dataset indices of each
    training step's batch."""
    lightning = pytest.importorskip("lightning")
    import pinload.torch as pt

    class Model(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(3, 4)
            self.seen = []

        def training_step(self, batch, i):
            self.seen.append(batch["indices"].tolist())
            x = batch["images"].float().mean(dim=(1, 2))
            return torch.nn.functional.cross_entropy(self.layer(x),
                                                     batch["labels"])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    loader = pt.Loader(dataset, output_map=("images", "labels", "indices"),
                       **KW)
    model = Model()
    trainer = lightning.Trainer(
        max_epochs=epochs, limit_train_batches=limit, accelerator="cpu",
        devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, train_dataloaders=loader)
    return trainer, model.seen, len(loader)


def test_lightning_epochs_are_data_epochs(dataset):
    trainer, seen, n = _lightning_run(dataset, limit=None, epochs=3)
    assert trainer.global_step == 3 * n
    want = [idx for e in range(3) for idx in epoch_indices(dataset, e)]
    assert seen == want


def test_lightning_limit_train_batches_advances_the_data_epochs(dataset):
    trainer, seen, n = _lightning_run(dataset, limit=2, epochs=3)
    assert trainer.global_step == 6
    want = [idx for e in range(3) for idx in epoch_indices(dataset, e)[:2]]
    assert seen == want


def test_bf16_is_the_f32_output_rounded(dataset):
    """format="bf16": a real torch.bfloat16 tensor, each value the f32
    path's rounded to nearest even (torch's own conversion)."""
    import pinload.torch as pt
    kw = dict(KW, shuffle=False, augment="eval")
    f32 = [i.clone() for i, _ in pt.Loader(dataset, format="f32", **kw)]
    bf = [i.clone() for i, _ in pt.Loader(dataset, format="bf16", **kw)]
    assert len(bf) == len(f32)
    for a, b in zip(f32, bf):
        assert b.dtype == torch.bfloat16 and b.shape == a.shape
        assert torch.equal(b, a.to(torch.bfloat16))


def test_layout_nhwc_is_a_channels_last_tensor_of_the_same_values(dataset):
    import pinload.torch as pt
    kw = dict(KW, shuffle=False, augment="eval")
    for fmt in ("f32", "f16", "bf16"):
        planar = [i.clone() for i, _ in pt.Loader(dataset, format=fmt, **kw)]
        last = pt.Loader(dataset, format=fmt, layout="nhwc", **kw)
        assert last.info["channels_last"] == 1
        n = 0
        for (images, _), want in zip(last, planar):
            assert images.shape == want.shape  # NCHW's
            assert images.is_contiguous(memory_format=torch.channels_last)
            assert torch.equal(images, want), fmt
            n += 1
        assert n == len(planar)
    with pytest.raises(ValueError) as e:
        pinload.Loader(dataset, layout="nchw", **KW)  # u8
    assert "layout" in str(e.value)
    with pytest.raises(ValueError):
        pinload.Loader(dataset, layout="chw", **KW)
