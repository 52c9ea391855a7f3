"""pinload.Loader through NumPy: bytes against pinload-dump, the epoch and
resume API, errors, the buffer-lifetime rule, threads and memory."""
import gc
import inspect
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import pinload
from pinload import _pinload

from conftest import dump

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def batches(loader):
    """[(images copy, labels, indices)] of one epoch, through NumPy."""
    out = []
    for b in loader:
        out.append((np.from_dlpack(b.images).copy(),
                    np.from_dlpack(b.labels).copy(),
                    np.from_dlpack(b.indices).copy()))
    return out


def threads():
    return len(os.listdir("/proc/self/task"))


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.mark.parametrize("augment", ["train", "eval"])
def test_u8_batches_equal_pinload_dump(dataset, tmp_path, augment):
    ref = dump(dataset, tmp_path / "dump", size=40, augment=augment, seed=7,
               batch=8)
    loader = pinload.Loader(dataset, batch_size=8, size=40, augment=augment,
                            seed=7, num_workers=2, device="host")
    got = batches(loader)
    assert len(got) == len(loader) == 6
    flat = [(img, int(lab), int(idx))
            for images, labels, indices in got
            for img, lab, idx in zip(images, labels, indices)]
    assert len(flat) == len(ref) == 48
    for (img, lab, idx), (path, ref_label, rgb) in zip(flat, ref):
        assert img.shape == (40, 40, 3) and img.dtype == np.uint8
        assert loader.sample(idx) == (path, ref_label)
        assert lab == ref_label
        assert img.tobytes() == rgb, path


def test_f32_is_u8_normalised_exactly(dataset):
    kw = dict(batch_size=8, size=32, seed=3, num_workers=2, device="host")
    u8 = batches(pinload.Loader(dataset, format="u8", **kw))
    f32 = batches(pinload.Loader(dataset, format="f32", **kw))
    assert len(u8) == len(f32)
    for (a, la, ia), (b, lb, ib) in zip(u8, f32):
        assert b.dtype == np.float32 and b.shape == (len(a), 3, 32, 32)
        want = ((a.astype(np.float32) / np.float32(255) - MEAN) / STD)
        np.testing.assert_array_equal(b, want.transpose(0, 3, 1, 2))
        np.testing.assert_array_equal(la, lb)
        np.testing.assert_array_equal(ia, ib)


def test_workers_1_and_4_deliver_the_same_bytes(dataset):
    kw = dict(batch_size=6, size=24, seed=11, device="host", format="f16")
    one = batches(pinload.Loader(dataset, num_workers=1, **kw))
    four = batches(pinload.Loader(dataset, num_workers=4, prefetch=4, **kw))
    assert len(one) == len(four) == 8
    for x, y in zip(one, four):
        assert x[0].dtype == np.float16
        for a, b in zip(x, y):
            assert a.tobytes() == b.tobytes()


def test_workers_auto_delivers_the_bytes_of_one_worker(dataset):
    """num_workers="auto": the default count of threads, all taking samples
    at first (stats' workers_active), and the bytes of a fixed count."""
    kw = dict(batch_size=6, size=24, seed=11, device="host",
              log=lambda level, msg: None)
    auto = pinload.Loader(dataset, num_workers="auto", **kw)
    a = batches(auto)
    one = batches(pinload.Loader(dataset, num_workers=1, **kw))
    assert len(a) == len(one) == 8
    for x, y in zip(a, one):
        for p, q in zip(x, y):
            assert p.tobytes() == q.tobytes()
    default = pinload.Loader(dataset, num_workers=0, **kw)
    assert auto.info["num_workers"] == default.info["num_workers"]
    assert default.stats["workers_active"] == default.info["num_workers"]
    for bad in ("fast", -1, 1.5, True):
        with pytest.raises(ValueError, match="num_workers"):
            pinload.Loader(dataset, num_workers=bad, **kw)


def test_prefetch_auto_starts_at_two_slots_with_the_bytes_of_two(dataset):
    """prefetch="auto": a ring of 2 slots at first (info's prefetch, stats'
    prefetch_active), growing within info's prefetch_max, and the bytes of
    a fixed ring; its notices in Python's words."""
    seen = []
    kw = dict(batch_size=6, size=24, seed=11, device="host", num_workers=2)
    auto = pinload.Loader(dataset, prefetch="auto",
                          log=lambda level, msg: seen.append(msg), **kw)
    assert auto.info["prefetch"] == 2
    assert auto.info["prefetch_max"] == 8
    assert auto.stats["prefetch_active"] == 2
    a = batches(auto)
    two = batches(pinload.Loader(dataset, prefetch=2,
                                 log=lambda level, msg: None, **kw))
    assert len(a) == len(two) == 8
    for x, y in zip(a, two):
        for p, q in zip(x, y):
            assert p.tobytes() == q.tobytes()
    assert 2 <= auto.stats["prefetch_active"] <= 8
    fixed = pinload.Loader(dataset, prefetch=3, log=lambda level, msg: None,
                           **kw)
    assert fixed.info["prefetch"] == fixed.info["prefetch_max"] == 3
    assert fixed.stats["prefetch_active"] == 3
    [created] = [t for t in seen if t.startswith("backend: ")]
    assert "ring 2 x " in created and "up to 8 slots as needed" in created
    assert "PL_AUTO" not in created, created
    for bad in ("big", 0, -1, 1.5, True):
        with pytest.raises(ValueError, match="prefetch"):
            pinload.Loader(dataset, prefetch=bad, **kw)


def test_auto_is_said_in_pythons_words():
    words = pinload._python_words
    assert (words("num_workers PL_AUTO: 2 of 4 workers take samples") ==
            'num_workers="auto": 2 of 4 workers take samples')
    assert (words("prefetch PL_AUTO: 3 slots of at most 8") ==
            'prefetch="auto": 3 slots of at most 8')
    assert (words("config.prefetch: 0 slots: or PL_AUTO for the loader") ==
            'prefetch: 0 slots: or "auto" for the loader')


def test_epochs_follow_and_set_epoch_jumps(dataset):
    kw = dict(batch_size=16, size=16, seed=5, device="host")
    loader = pinload.Loader(dataset, **kw)
    first = batches(loader)
    second = batches(loader)
    assert len(first) == len(second) == 3
    assert loader.epoch == 2
    # The same epoch from a fresh loader, and from set_epoch.
    fresh = batches(pinload.Loader(dataset, first_epoch=1, **kw))
    for a, b in zip(second, fresh):
        assert a[2].tolist() == b[2].tolist()
    loader.set_epoch(1)
    again = batches(loader)
    for a, b in zip(second, again):
        assert a[0].tobytes() == b[0].tobytes()
    # set_epoch to the epoch that comes next anyway keeps the loader.
    c = loader._c
    loader.set_epoch(2)
    assert loader._c is c
    order = loader.epoch_order(2)
    got = [i for _, _, idx in batches(loader) for i in idx.tolist()]
    assert got == order


def test_state_dict_resumes_mid_epoch_with_the_same_batches(dataset):
    kw = dict(batch_size=8, size=24, seed=9, device="host", num_workers=2)
    whole = batches(pinload.Loader(dataset, **kw))
    loader = pinload.Loader(dataset, **kw)
    it = iter(loader)
    for _ in range(2):
        next(it)
    state = loader.state_dict()
    assert (state["epoch"], state["batch"]) == (0, 2)
    del it
    resumed = pinload.Loader(dataset, num_workers=1, resume=state,
                             **{k: v for k, v in kw.items()
                                if k != "num_workers"})
    rest = batches(resumed)
    assert len(rest) == len(whole) - 2
    for a, b in zip(whole[2:], rest):
        assert a[0].tobytes() == b[0].tobytes()
        assert a[2].tolist() == b[2].tolist()
    # load_state_dict on a used loader does the same.
    loader.load_state_dict(state)
    for a, b in zip(whole[2:], batches(loader)):
        assert a[2].tolist() == b[2].tolist()
    assert pinload.state_info(state) == (0, 2, 16)


def test_bad_arguments_raise_value_error_naming_them(dataset):
    cases = [
        (dict(batch_size=0), "batch_size"),
        (dict(format="rgb"), "format"),
        (dict(augment="random"), "augment"),
        (dict(memory="gpu"), "memory"),
        (dict(on_error="ignore"), "on_error"),
        (dict(size="big"), "size"),
        (dict(size=(0, 10)), "size: 0 is outside"),  # not config.height
        (dict(device="gpu0"), "device"),
        (dict(device=-5), "device"),
        (dict(rank=0), "rank and world_size"),
        (dict(rank=3, world_size=2), "rank"),
        (dict(rank=-1, world_size=2), "rank: expected an integer >= 0"),
        (dict(rank=0, world_size=-1), "world_size: expected an integer >= 1"),
        (dict(rank=0, world_size=True), "world_size"),
        (dict(mean="abc"), "mean: expected 3 numbers"),
        (dict(std=(1, 2)), "std: expected 3 numbers"),
        (dict(mean=None, std=[1, "x", 2]), "std: expected 3 numbers"),
        (dict(num_workers=2 ** 40), "num_workers"),
        (dict(std=(0, 1, 1)), "std"),
        (dict(shuffle="yes"), "shuffle"),
        (dict(resume=b"short"), "resume"),
        (dict(resume=bytes(_pinload.STATE_BYTES)), "resume"),
    ]
    for kwargs, name in cases:
        with pytest.raises(ValueError) as e:
            pinload.Loader(dataset, device="host", **kwargs) \
                if "device" not in kwargs else \
                pinload.Loader(dataset, **kwargs)
        assert name in str(e.value), (kwargs, str(e.value))
    with pytest.raises(TypeError):
        pinload.Loader(dataset, batchsize=4)
    with pytest.raises(pinload.InvalidArgument) as e:
        pinload.Loader(dataset, batch_size=100000)
    assert e.value.name == "PL_EINVAL" and e.value.code == -1
    # The library's detail, in Python's words: the keyword, not
    # "pl_loader_create: config.batch_size".
    assert e.value.detail.startswith("batch_size: "), e.value.detail


def test_missing_data_names_the_path(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(pinload.ReadError) as e:
        pinload.Loader(missing)
    assert str(missing) in str(e.value) and e.value.name == "PL_EIO"
    assert isinstance(e.value, OSError)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(pinload.NoDataError) as e:
        pinload.Loader(empty)
    assert str(empty) in str(e.value)


def _tree_with_a_bad_file(dataset, tmp_path):
    root = tmp_path / "bad"
    for cls in sorted(os.listdir(dataset))[:2]:
        (root / cls).mkdir(parents=True)
        for name in sorted(os.listdir(os.path.join(dataset, cls)))[:4]:
            os.symlink(os.path.join(dataset, cls, name), root / cls / name)
    bad = root / sorted(os.listdir(dataset))[0] / "zz_not_a.jpg"
    bad.write_bytes(b"GIF89a" + bytes(64))  # a PNG would be decoded
    return str(root), str(bad)


def test_a_bad_file_under_fail_raises_naming_it(dataset, tmp_path):
    root, bad = _tree_with_a_bad_file(dataset, tmp_path)
    loader = pinload.Loader(root, batch_size=3, size=16, on_error="fail",
                            shuffle=False, num_workers=1, device="host")
    with pytest.raises(pinload.NotImageError) as e:
        batches(loader)
    assert bad in str(e.value) and e.value.name == "PL_ENOTIMAGE"
    # The error stays; its first name is the same class.
    with pytest.raises(pinload.NotJPEGError):
        loader.next()
    assert pinload.NotJPEGError is pinload.NotImageError


def test_a_bad_file_under_skip_is_logged_and_listed(dataset, tmp_path,
                                                    caplog):
    root, bad = _tree_with_a_bad_file(dataset, tmp_path)
    with caplog.at_level(logging.INFO, logger="pinload"), \
            pytest.warns(pinload.PinloadWarning, match="skipped .*%s" %
                         os.path.basename(bad)):
        loader = pinload.Loader(root, batch_size=3, size=16,
                                on_error="skip", num_workers=2,
                                device="host")
        got = batches(loader)
        [f] = loader.failures
        loader.close()
    assert len(got) == len(loader) == 3
    assert sum(len(g[0]) for g in got) == 9
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any(bad in r.getMessage() for r in warnings)
    assert any("backend: host" in r.getMessage() for r in caplog.records
               if r.levelno == logging.INFO)
    assert f.path == bad and f.name == "PL_ENOTIMAGE" and f.count >= 1


def test_a_log_callable_gets_levels_and_may_call_the_loader(dataset,
                                                            tmp_path):
    root, bad = _tree_with_a_bad_file(dataset, tmp_path)
    seen = []
    box = {}

    def log(level, message):
        seen.append((level, message))
        if "loader" in box:  # calling back into the loader is allowed
            box["loader"].stats

    loader = pinload.Loader(root, batch_size=3, size=16, num_workers=2,
                            device="host", log=log)
    box["loader"] = loader
    batches(loader)
    assert any(lv == logging.INFO and "backend" in m for lv, m in seen)
    assert any(lv == logging.WARNING and bad in m for lv, m in seen)


def test_holding_every_buffer_raises_busy_and_dropping_one_frees_it(dataset):
    """With a pool that may not grow (max_device_buffers=0: the C
    library's default)."""
    loader = pinload.Loader(dataset, batch_size=4, size=16, device="host",
                            device_buffers=2, max_device_buffers=0)
    kept = [np.from_dlpack(loader.next().images) for _ in range(2)]
    assert loader.batches_held == 2
    with pytest.raises(pinload.BusyError) as e:
        loader.next()
    assert "held" in str(e.value) and "max_device_buffers" in str(e.value)
    kept.pop(0)
    b = loader.next()
    assert b.index == 2 and loader.batches_held == 2


def test_a_tensor_keeps_its_batch_until_it_is_freed(dataset):
    loader = pinload.Loader(dataset, batch_size=4, size=16, device="host")
    b = loader.next()
    a = np.from_dlpack(b.images)
    before = a.copy()
    assert b.exports == 1
    with pytest.raises(BufferError):
        b.release()  # a view is alive
    del b
    assert loader.batches_held == 1
    assert not a.flags.writeable
    np.testing.assert_array_equal(a, before)
    del a
    gc.collect()
    assert loader.batches_held == 0
    # An explicit release; the batch's views then refuse to export.
    b = loader.next()
    v = b.images
    b.release()
    assert b.released and loader.batches_held == 0
    with pytest.raises(BufferError):
        np.from_dlpack(v)


def test_dlpack_protocol_details(dataset):
    loader = pinload.Loader(dataset, batch_size=4, size=16, device="host",
                            format="f32")
    b = loader.next()
    v = b.images
    assert v.__dlpack_device__() == (1, 0)
    assert v.shape == (4, 3, 16, 16) and v.dtype == "float32"
    assert v.device == "cpu" and v.nbytes == 4 * 3 * 16 * 16 * 4
    assert b.labels.dtype == "int32" and b.indices.dtype == "int64"
    with pytest.raises(BufferError):
        v.__dlpack__(dl_device=(2, 0))
    # copy=True: an independent, writable copy that holds no buffer
    # (asked for directly: numpy.from_dlpack takes copy= from NumPy 2.1).
    class CopyOf:
        def __dlpack_device__(self):
            return v.__dlpack_device__()

        def __dlpack__(self, **kwargs):
            kwargs["copy"] = True
            return v.__dlpack__(**kwargs)

    c = np.from_dlpack(CopyOf())
    assert c.ctypes.data != v.ptr and b.exports == 0
    np.testing.assert_array_equal(c, np.from_dlpack(v))
    if np.lib.NumpyVersion(np.__version__) >= "2.1.0":
        # (older NumPy makes every DLPack import read-only)
        assert c.flags.writeable
        c[:] = 0
        assert np.from_dlpack(v).any()
    # An unconsumed capsule gives its reference back.
    cap = v.__dlpack__()
    assert b.exports == 1
    del cap
    assert b.exports == 0
    assert v.tobytes() == np.from_dlpack(v).tobytes()


def test_close_waits_for_live_tensors(dataset):
    loader = pinload.Loader(dataset, batch_size=4, size=16, device="host")
    a = np.from_dlpack(loader.next().images)
    want = a.copy()
    loader.close()
    assert loader.closed and not loader._c.destroyed
    with pytest.raises(pinload.ClosedError):
        loader.next()
    np.testing.assert_array_equal(a, want)  # still the loader's memory
    del a
    gc.collect()
    assert loader._c.destroyed


def test_ranks_split_the_epoch(dataset):
    kw = dict(batch_size=5, size=16, seed=2, device="host")
    r0 = pinload.Loader(dataset, rank=0, world_size=2, **kw)
    r1 = pinload.Loader(dataset, rank=1, world_size=2, **kw)
    assert len(r0) == len(r1) == 5
    i0 = [i for _, _, idx in batches(r0) for i in idx.tolist()]
    i1 = [i for _, _, idx in batches(r1) for i in idx.tolist()]
    assert len(i0) == len(i1) == 24
    assert sorted(i0 + i1) == list(range(48))


def test_info_says_which_numa_node_the_ring_is_on(dataset):
    info = pinload.Loader(dataset, batch_size=5, size=16,
                          device="host").info
    # No GPU, no node to be near: the ring is not placed.
    assert (info["numa_node"], info["gpu_numa_node"]) == (-1, -1)


def test_every_config_field_has_a_python_name():
    params = set(inspect.signature(pinload.Loader).parameters)
    for field in _pinload.config_defaults():
        name = ("size" if field in ("width", "height") else
                "layout" if field == "channels_last" else
                "views" if field == "num_views" else field)
        assert name in params, field
    assert pinload.Loader.defaults["batch_size"] == 64


def test_a_watchdog_thread_may_close_a_loader_in_use(dataset):
    loader = pinload.Loader(dataset, batch_size=4, size=16, device="host",
                            num_workers=1)
    base = threads()
    errors = []

    def loop():
        try:
            while True:
                for b in loader:
                    del b
        except pinload.ClosedError as e:
            errors.append(e)

    t = threading.Thread(target=loop)
    t.start()
    loader.close()
    t.join(30)
    assert not t.is_alive()
    assert len(errors) == 1
    gc.collect()
    assert loader._c.destroyed
    assert threads() <= base - 1  # the library's threads are gone


def test_create_iterate_destroy_200_times_leaves_threads_and_memory_flat(
        dataset):
    def cycle():
        with pinload.Loader(dataset, batch_size=8, size=16, num_workers=2,
                            device="host", log=lambda lv, m: None) as l:
            for b in l:
                np.from_dlpack(b.images).sum()
    base_threads = threads()
    for _ in range(20):
        cycle()
    gc.collect()
    base_rss = rss_kib()
    for _ in range(180):
        cycle()
    gc.collect()
    assert threads() == base_threads
    grown = rss_kib() - base_rss
    assert grown < 8 * 1024, "RSS grew by %d KiB over 180 cycles" % grown


KEYBOARD_INTERRUPT = textwrap.dedent("""
    import os, signal, sys, time
    import pinload
    # Python's own Ctrl-C handler, whatever this process inherited (a job
    # started with & by a shell without job control ignores SIGINT).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    def threads():
        return len(os.listdir("/proc/self/task"))
    base = threads()
    loader = pinload.Loader(sys.argv[1], batch_size=2, size=64,
                            num_workers=2, device="host")
    print("started", flush=True)
    try:
        while True:
            for b in loader:
                time.sleep(0.01)
    except KeyboardInterrupt:
        pass
    # Out of the handler: inside it the traceback holds the frames the
    # signal came through, pinload's iterator's among them when Ctrl-C
    # landed in its __next__, and through them the loader.
    b = None
    del loader
    # Ctrl-C may land while iter() creates the next epoch's loader: that
    # create goes on off this thread and then destroys what it made (as
    # test_ctrl_c_reaches_python_during_create shows), so its threads end
    # soon after, not at once.
    end = time.monotonic() + 10
    while threads() > base and time.monotonic() < end:
        time.sleep(0.05)
    print("threads", base, threads(), flush=True)
""")


def test_keyboard_interrupt_during_iteration_leaves_no_thread(dataset):
    p = subprocess.Popen([sys.executable, "-c", KEYBOARD_INTERRUPT, dataset],
                         stdout=subprocess.PIPE, universal_newlines=True)
    assert p.stdout.readline().strip() == "started"
    import time
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0
    _, base, after = out.split()
    assert int(after) == int(base)


LOG_INTERRUPT = textwrap.dedent("""
    import signal, sys
    import pinload
    # Python's own Ctrl-C handler, whatever this process inherited (a job
    # started with & by a shell without job control ignores SIGINT).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    calls = []
    def log(level, msg):
        calls.append(msg)
        raise KeyboardInterrupt  # Ctrl-C landing inside the callback
    try:
        loader = pinload.Loader(sys.argv[1], batch_size=2, size=64,
                                num_workers=1, device="host", log=log)
        for b in loader:
            pass
        print("not interrupted", len(calls), flush=True)
    except KeyboardInterrupt:
        print("interrupted", len(calls), flush=True)
""")


def test_ctrl_c_inside_a_log_callback_is_not_lost(dataset):
    """A KeyboardInterrupt raised while the log callback runs (Ctrl-C
    landing in Python's logging as a notice is handed over) reaches the
    caller, as any Ctrl-C does; reported as unraisable it was lost, and a
    `while True: for b in loader` ran on."""
    out = subprocess.run([sys.executable, "-c", LOG_INTERRUPT, dataset],
                         stdout=subprocess.PIPE, universal_newlines=True,
                         timeout=60).stdout
    assert out.split() == ["interrupted", "1"], out


INTERRUPTED_CREATE = textwrap.dedent("""
    import os, signal, sys, time
    import pinload
    def threads():
        return len(os.listdir("/proc/self/task"))
    base = threads()
    kw = dict(device="host", num_workers=1, shuffle=False,
              log=lambda level, msg: None)
    t = time.monotonic()
    pinload.Loader(sys.argv[1], **kw).close()  # the whole create, once
    whole = time.monotonic() - t
    def interrupt(sig, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    t = time.monotonic()
    try:
        pinload.Loader(sys.argv[1], **kw)
        print("created", whole, time.monotonic() - t, flush=True)
    except KeyboardInterrupt:
        after = time.monotonic() - t
        time.sleep(whole + 1.0)  # the abandoned create ends, and cleans up
        print("interrupted", whole, after, threads() - base, flush=True)
""")


def test_ctrl_c_reaches_python_during_create(tmp_path):
    """A create that lists millions of samples runs off the calling thread,
    so a signal handler's KeyboardInterrupt is raised within 100 ms, not
    when the listing ends; the abandoned create finishes, destroys its
    loader and leaves no thread behind."""
    lst = tmp_path / "big.txt"
    with open(lst, "w") as f:
        f.write("a 0\n" * 6000000)
    out = subprocess.run([sys.executable, "-c", INTERRUPTED_CREATE, str(lst)],
                         stdout=subprocess.PIPE, universal_newlines=True,
                         timeout=300).stdout.split()
    assert out[0] == "interrupted", out
    whole, after, threads_left = float(out[1]), float(out[2]), int(out[3])
    if whole < 0.3:
        pytest.skip("create took %.2f s: too fast to interrupt" % whole)
    assert after < 0.05 + 0.1 + 0.1 and after < whole / 2, (whole, after)
    assert threads_left == 0


LOGGING_UNDER_LOAD = textwrap.dedent("""
    import logging, sys, threading, time
    import numpy as np
    import pinload
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(levelname)s %(message)s")
    class Slow(logging.Handler):
        def emit(self, record):
            time.sleep(0.002)  # a handler that takes its time
    logging.getLogger("pinload").addHandler(Slow())
    for _ in range(5):
        loader = pinload.Loader(sys.argv[1], batch_size=2, size=16,
                                num_workers=2, device="host")
        for b in loader:
            np.from_dlpack(b.images).sum()
        loader.close()
    print("done", flush=True)
""")


def test_logging_from_worker_threads_never_deadlocks(dataset, tmp_path):
    root, bad = _tree_with_a_bad_file(dataset, tmp_path)
    for i in range(5):  # more bad files: more warnings from the workers
        (tmp_path / "bad" / os.listdir(root)[0] / ("bad%d.jpg" % i)) \
            .write_bytes(b"BM" + bytes(100))
    out = subprocess.run([sys.executable, "-c", LOGGING_UNDER_LOAD, root],
                         stdout=subprocess.PIPE, universal_newlines=True,
                         timeout=120, check=True).stdout
    assert out.rstrip().endswith("done")
    assert out.count("WARNING") >= 5 and bad in out


def test_every_version_comes_from_the_one_header():
    """include/pinload/version.h is the one source: the extension's C
    library, the package's __version__ and its installed metadata (the
    wheel's version) agree with it (the CMake and pkg-config files are
    checked against it by tests/install/check.sh)."""
    import importlib.metadata
    import re
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    with open(os.path.join(root, "include", "pinload", "version.h")) as f:
        parts = dict(re.findall(r"#define PL_VERSION_(MAJOR|MINOR|PATCH) "
                                r"(\d+)", f.read()))
    want = "%s.%s.%s" % (parts["MAJOR"], parts["MINOR"], parts["PATCH"])
    assert pinload.library_version == want
    assert pinload.__version__ == want
    assert importlib.metadata.version("pinload") == want


def test_decode_names_where_jpegs_are_decoded(dataset, tmp_path,
                                              monkeypatch):
    """decode= takes the header's words; on the host backend "auto" decodes
    on the CPU and says why, "gpu" is an error naming the field, and the
    nvidia-nvjpeg wheel's library is named for the C library (which loads
    it on CUDA alone), never loaded here."""
    monkeypatch.delenv("PINLOAD_NVJPEG", raising=False)
    lib = tmp_path / "site" / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnvjpeg.so.13").write_bytes(b"not a library")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    cpu = pinload.Loader(dataset, batch_size=8, size=32, device="host")
    assert cpu.info["decode"] == "cpu"
    assert cpu.info["decoder_name"] == "cpu"
    assert "PINLOAD_NVJPEG" not in os.environ, "decode cpu looks for none"
    ref = batches(cpu)
    auto = pinload.Loader(dataset, batch_size=8, size=32, device="host",
                          decode="auto")
    assert auto.info["decode"] == "cpu"
    assert "decode auto" in auto.info["decoder_name"], auto.info
    assert "CUDA backend" in auto.info["decoder_name"], auto.info
    assert os.environ["PINLOAD_NVJPEG"] == str(lib / "libnvjpeg.so.13")
    got = batches(auto)
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a[0], b[0])
    assert auto.stats["images_gpu"] == 0
    # pinload's own load would map the nvidia wheel's file; torchvision,
    # imported by other tests of this process, maps the copy it bundles.
    with open("/proc/self/maps") as f:
        ours = [line for line in f if "libnvjpeg" in line and
                "torchvision.libs" not in line]
    assert ours == []
    with pytest.raises(pinload.InvalidArgument,
                       match="decode: gpu: it needs the CUDA backend"):
        pinload.Loader(dataset, batch_size=8, size=32, device="host",
                       decode="gpu")
    with pytest.raises(ValueError, match="decode"):
        pinload.Loader(dataset, batch_size=8, size=32, device="host",
                       decode="fpga")
