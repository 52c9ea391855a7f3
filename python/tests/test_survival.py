"""Loaders that survive their users (issue 34, item 5). Two threads each
running `for b in loader` get two whole epochs, one after the other, never
ClosedError nor a loop spanning two epochs; a refused call (set_epoch(-1),
a state of other data, the data folder away when an epoch needs the loader
made again) leaves the loader as it was, and it goes on once the cause is
gone; the thread rules of docs/python.md hold under a stress test. Real
threads, real files."""
import os
import random
import shutil
import threading
import time

import numpy as np
import pytest

import pinload

# 48 images, batches of 4: 12 a epoch.
KW = dict(batch_size=4, size=16, seed=7, device="host", num_workers=2,
          log=lambda level, msg: None)
JOIN_S = 60  # a thread still alive after this is a deadlock


def indices(b):
    return np.from_dlpack(b.indices).tolist()


def batches_of(loader, epoch):
    """The dataset indices of each batch of `epoch`, from its order."""
    order = loader.epoch_order(epoch)
    bs = loader.batch_size
    return [order[i:i + bs] for i in range(0, len(order), bs)]


def run_threads(targets):
    """Run each target in a thread of its own; fail on a deadlock, or on
    what a target raised."""
    raised = []

    def guarded(target):
        try:
            target()
        except BaseException as e:  # noqa: BLE001 (raised below)
            raised.append(e)

    threads = [threading.Thread(target=guarded, args=(t,), daemon=True)
               for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in threads), "deadlock"
    if raised:
        raise raised[0]


@pytest.fixture
def own_data(dataset, tmp_path):
    """A copy of the dataset this test may rename away and back."""
    path = str(tmp_path / "train")
    shutil.copytree(dataset, path)
    return path


# ---------------------------------------------------------------------------
# Two threads, two epochs

def test_two_threads_each_iterating_get_whole_epochs_one_after_other(
        dataset):
    """The documented rule, 20 times in a row (it failed 14 of 14 with
    ClosedError before): each thread's loop is one whole epoch, in order,
    the two epochs are the next two, and the loader goes on after them."""
    loader = pinload.Loader(dataset, **KW)
    n = len(loader)
    for r in range(20):
        got, errors = {}, []
        start = threading.Barrier(2)

        def loop(k):
            start.wait()
            seen = []
            try:
                for b in loader:
                    seen.append((b.epoch, b.index, indices(b)))
                    del b
            except Exception as e:  # noqa: BLE001 (recorded, asserted)
                errors.append(e)
            got[k] = seen

        run_threads([lambda: loop(0), lambda: loop(1)])
        assert errors == [], "round %d: %r" % (r, errors)
        for seen in got.values():
            e = seen[0][0]
            assert [(x, i) for x, i, _ in seen] == [(e, i) for i in
                                                    range(n)], "round %d" % r
            assert [x for _, _, x in seen] == batches_of(loader, e)
        assert sorted(s[0][0] for s in got.values()) == [2 * r, 2 * r + 1]
    assert loader.epoch == 40
    assert sum(1 for _ in loader) == n


def test_a_second_thread_waits_for_the_epoch_in_progress(dataset):
    """Started while another thread is mid-epoch, a loop begins with the
    next epoch once that one is delivered whole; before, it cut the first
    one short (ClosedError in the other thread)."""
    loader = pinload.Loader(dataset, **KW)
    n = len(loader)
    it = iter(loader)
    first = [indices(next(it)) for _ in range(3)]
    second, errors = [], []

    def other():
        try:
            second.extend((b.epoch, indices(b)) for b in loader)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=other, daemon=True)
    t.start()
    time.sleep(0.3)
    assert second == [] and t.is_alive()  # waiting for epoch 0
    first += [indices(b) for b in it]
    t.join(JOIN_S)
    assert not t.is_alive() and errors == []
    assert first == batches_of(loader, 0)
    assert [e for e, _ in second] == [1] * n
    assert [x for _, x in second] == batches_of(loader, 1)


def test_a_loop_that_took_every_batch_never_runs_into_the_next_epoch(
        dataset):
    """A thread has taken an epoch's every batch but not yet its end when
    another starts the next: the first thread's next call ends its loop;
    it used to get a batch of the other thread's epoch."""
    loader = pinload.Loader(dataset, **KW)
    n = len(loader)
    it = iter(loader)
    mine = [next(it).epoch for _ in range(n)]
    theirs = []
    run_threads([lambda: theirs.extend(b.epoch for b in loader)])
    with pytest.raises(StopIteration):
        next(it)
    assert mine == [0] * n and theirs == [1] * n


def test_two_threads_each_waiting_for_the_other_never_deadlock(dataset):
    """Thread A keeps an iterator mid-epoch; B's loop waits for it; then A
    starts another loop without dropping its iterator. A's new iter() lets
    go of A's epoch (it is A's to end), so B gets the next epoch whole,
    then A the one after; A's old iterator stops."""
    loader = pinload.Loader(dataset, **KW)
    n = len(loader)
    a_epochs, b_epochs, left = [], [], []
    holding = threading.Event()

    def a():
        it = midway(loader)
        holding.set()
        time.sleep(0.3)
        assert b_epochs == []  # B waits for epoch 0
        a_epochs.extend(x.epoch for x in loader)
        left.append(next(it, None))

    def b():
        holding.wait()
        b_epochs.extend(x.epoch for x in loader)

    run_threads([a, b])
    assert b_epochs == [1] * n and a_epochs == [2] * n
    assert left == [None]


def test_the_next_thread_goes_on_when_the_first_breaks_or_ends(dataset):
    """An epoch given up (a break drops its iterator, or its thread ends
    with the iterator still referenced) holds nobody up."""
    loader = pinload.Loader(dataset, **KW)
    n = len(loader)
    kept = []

    def partial(keep):
        it = iter(loader)
        next(it)
        if keep:
            kept.append(it)  # alive after the thread is gone

    for keep in (False, True):
        t0 = time.monotonic()
        run_threads([lambda: partial(keep)])
        got = []
        run_threads([lambda: got.extend(b.index for b in loader)])
        assert got == list(range(n))
        assert time.monotonic() - t0 < 10


# ---------------------------------------------------------------------------
# Refused calls leave the loader as it was

def midway(loader, k=3):
    """An iterator of the loader's epoch with k batches taken."""
    it = iter(loader)
    for _ in range(k):
        next(it)
    return it


def test_set_epoch_minus_one_is_a_value_error_and_changes_nothing(dataset):
    loader = pinload.Loader(dataset, **KW)
    it = midway(loader)
    before = loader.state_dict()
    for bad in (-1, -10**20, "3"):
        with pytest.raises((ValueError, TypeError)) as e:
            loader.set_epoch(bad)
        assert not loader.closed and loader.state_dict() == before
    # The epoch in progress goes on, then the next one.
    assert [indices(b) for b in it] == batches_of(loader, 0)[3:]
    assert [indices(b) for b in loader] == batches_of(loader, 1)
    # Refused by the binding, in its words, not the library's first_epoch.
    with pytest.raises(ValueError, match=r"set_epoch\(-1\): epochs are "
                       r"numbered from 0"):
        loader.set_epoch(-1)
    assert type(e.value) is TypeError  # "3"


@pytest.mark.parametrize("which", ["other data", "not a state", "short"])
def test_a_refused_load_state_dict_leaves_the_loader_as_it_was(dataset,
                                                                 which):
    other = pinload.Loader(dataset, **dict(KW, batch_size=5))
    state = other.state_dict()
    other.close()
    if which == "not a state":
        state["state"] = "00" * 128
    elif which == "short":
        state["state"] = state["state"][:20]
    loader = pinload.Loader(dataset, **KW)
    it = midway(loader)
    before = loader.state_dict()
    with pytest.raises(ValueError) as e:
        loader.load_state_dict(state)
    assert not loader.closed and loader.state_dict() == before
    assert [indices(b) for b in it] == batches_of(loader, 0)[3:]
    # A good state still loads.
    loader.load_state_dict(before)
    assert [indices(b) for b in loader] == batches_of(loader, 0)[3:]
    if which != "short":  # the library's refusal, said so
        assert isinstance(e.value, pinload.InvalidArgument)
        assert str(e.value).startswith("load_state_dict: resume: ")
        assert str(e.value).endswith("(the loader is as it was)")


def test_an_epoch_after_a_break_with_the_data_away_fails_then_goes_on(
        own_data):
    """The data folder is away when an epoch after a break needs the loader
    made again: that iter() fails saying so, as often as it is tried, and
    the first one after the folder is back gives the next epoch whole."""
    loader = pinload.Loader(own_data, **KW)
    for b in loader:
        break
    del b
    os.rename(own_data, own_data + ".away")
    try:
        for _ in range(2):
            with pytest.raises(pinload.ReadError) as e:
                iter(loader)
            assert not loader.closed
    finally:
        os.rename(own_data + ".away", own_data)
    assert [indices(b) for b in loader] == batches_of(loader, 1)
    assert loader.epoch == 2
    assert str(e.value) == (
        "iter(loader): epoch 1 (epoch 0 was left part-way): data: %s: No "
        "such file or directory (the loader is as it was)" % own_data)


def test_set_epoch_with_the_data_away_fails_and_changes_nothing(own_data):
    loader = pinload.Loader(own_data, **KW)
    it = midway(loader)
    before = loader.state_dict()
    os.rename(own_data, own_data + ".away")
    try:
        with pytest.raises(pinload.ReadError) as e:
            loader.set_epoch(5)
    finally:
        os.rename(own_data + ".away", own_data)
    assert not loader.closed and loader.state_dict() == before
    assert [indices(b) for b in it] == batches_of(loader, 0)[3:]
    loader.set_epoch(5)
    assert [indices(b) for b in loader] == batches_of(loader, 5)
    assert str(e.value).startswith("set_epoch(5): data: %s: " % own_data)


def test_a_log_callable_finds_the_loader_whole_while_it_changes(dataset):
    """The notices of a C loader made again (set_epoch, load_state_dict)
    reach the log callable once the change is done, so one that reads the
    loader finds it whole; before, they came inside the change, and
    state_dict() there was ClosedError (the old C loader closed, the new
    one not yet in place)."""
    box, seen, errors = {}, [], []

    def log(level, message):
        loader = box.get("loader")
        if loader is None:
            return
        seen.append(message)
        try:
            loader.state_dict()
            loader.stats
            assert loader.epoch >= 0 and not loader.closed
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def body():
        loader = pinload.Loader(dataset, **dict(KW, log=log))
        box["loader"] = loader
        it = midway(loader)
        saved = loader.state_dict()
        loader.set_epoch(7)
        assert next(it, None) is None  # its own thread's change ended it
        loader.load_state_dict(saved)
        assert [indices(b) for b in loader] == batches_of(loader, 0)[3:]

    run_threads([body])
    assert errors == [] and len(seen) >= 2


# ---------------------------------------------------------------------------
# The thread rules under stress

def test_the_thread_rules_hold_under_a_stress_test(dataset):
    """For about 3 s: two threads each looping `for b in loader`, one
    breaking out of its loops at random, one stepping with loader.next(),
    one calling set_epoch (sometimes -1) and one reading stats, epoch,
    state_dict and failures; then close() from the main thread while they
    run. No deadlock, no error but ClosedError after close() (and the
    ValueError of set_epoch(-1)); no batch twice; every loop within one
    epoch and in order; every batch the one its epoch's order says; and an
    epoch a loop finished was delivered whole, between the loops and the
    stepper."""
    loader = pinload.Loader(dataset, **KW)
    ref = pinload.Loader(dataset, **KW)  # the orders, after close()
    n = len(loader)
    lock = threading.Lock()
    delivered = []   # (epoch, index, dataset indices)
    loops = []       # (thread, how it ended, [(epoch, index)])
    errors = []
    stop = threading.Event()
    closed = threading.Event()
    done = {"next": 0, "set_epoch": 0}

    def record(b):
        with lock:
            delivered.append((b.epoch, b.index, indices(b)))

    def unexpected(e):
        if not (isinstance(e, pinload.ClosedError) and closed.is_set()):
            errors.append(e)

    def looper(name, breaks):
        rng = random.Random(name)
        while not stop.is_set():
            seen, how = [], "end"
            try:
                for b in loader:
                    seen.append((b.epoch, b.index))
                    record(b)
                    del b
                    if breaks and rng.random() < 0.15:
                        how = "break"
                        break
            except Exception as e:  # noqa: BLE001
                how = "error"
                unexpected(e)
                if closed.is_set():
                    return
            with lock:
                loops.append((name, how, seen))

    def stepper():
        rng = random.Random(3)
        while not stop.is_set():
            try:
                b = loader.next()
                if b is not None:
                    record(b)
                    del b
                    done["next"] += 1
            except Exception as e:  # noqa: BLE001
                unexpected(e)
                if closed.is_set():
                    return
            time.sleep(rng.random() * 0.01)

    def setter():
        rng = random.Random(4)
        k = 1
        while not stop.is_set():
            try:
                if rng.random() < 0.3:
                    try:
                        loader.set_epoch(-1)
                        errors.append("set_epoch(-1) was taken")
                    except ValueError:
                        pass
                else:
                    loader.set_epoch(10000 * k)  # epochs never met twice
                    k += 1
                    done["set_epoch"] += 1
            except Exception as e:  # noqa: BLE001
                unexpected(e)
                if closed.is_set():
                    return
            time.sleep(0.05)

    def reader():
        while not stop.is_set():
            try:
                s = loader.stats
                assert all(v >= 0 for v in s.values())
                assert 0 <= loader.state_dict()["batch"] <= n
                assert loader.epoch >= 0 and len(loader) == n
                assert loader.failures == []
            except Exception as e:  # noqa: BLE001
                unexpected(e)
                if closed.is_set():
                    return
            time.sleep(0.002)

    def main():
        time.sleep(3)
        closed.set()
        loader.close()
        stop.set()

    run_threads([lambda: looper("a", False), lambda: looper("b", False),
                 lambda: looper("c", True), stepper, setter, reader, main])
    assert errors == [], errors[:3]
    keys = [(e, i) for e, i, _ in delivered]
    assert len(keys) == len(set(keys)), "a batch delivered twice"
    for e, i, got in delivered:
        assert got == batches_of(ref, e)[i], (e, i)
    by_epoch = {}
    for e, i in keys:
        by_epoch.setdefault(e, set()).add(i)
    finished = 0
    for name, how, seen in loops:
        assert len({e for e, _ in seen}) <= 1, (name, seen)
        assert [i for _, i in seen] == sorted(i for _, i in seen)
        if how == "end" and name != "c" and seen:
            finished += 1
            assert by_epoch[seen[0][0]] == set(range(n)), (name, seen)
    print("stress:", len(delivered), "batches,", len(loops), "loops,", finished,
          "finished whole,", len(by_epoch), "epochs,", done)
    # Each kind of call had its turn.
    assert finished >= 5 and done["next"] >= 5 and done["set_epoch"] >= 5
    assert loader.closed


# ---------------------------------------------------------------------------
# A Batch object outlives its release, and its loader

def test_a_released_batch_says_what_it_was_after_its_buffer_is_reused(
        dataset):
    """A released batch's epoch, index and count, and the errors naming it,
    come from the Batch itself: its pl_batch is the loader's again, refilled
    by the prefetcher (they read the next batches' numbers, a data race
    ThreadSanitizer reported) or freed once the loader is closed."""
    loader = pinload.Loader(dataset, **dict(KW, batch_size=5))
    b = loader.next()
    images = b.images
    b.release()
    for _ in range(4):  # every buffer refilled since
        loader.next().release()
    assert (b.epoch, b.index, b.count) == (0, 0, 5)
    with pytest.raises(BufferError, match="batch 0 of epoch 0 was released"):
        images.__dlpack__()
    with pytest.raises(ValueError, match="batch 0 of epoch 0 was released"):
        b.extras
    assert images.shape == (5, 16, 16, 3) and images.ptr == 0
    loader.close()
    assert loader._c.destroyed  # the pl_batch is freed memory now
    assert (b.epoch, b.index, b.count) == (0, 0, 5)
    assert b.host_images is not None  # the host backend's, as it was
    assert images.nbytes == 5 * 16 * 16 * 3
