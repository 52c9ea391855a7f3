"""What changes what a loader delivers is said where Python users look
(issue 39): a pinload.PinloadWarning (warnings.warn) once per loader for
each kind, a WARNING record under the "pinload" logger for each, the rest
INFO; the library's messages in Python's words (order="global", not
PL_ORDER_GLOBAL)."""
import io
import logging
import os
import tarfile
import warnings

import pytest

import pinload


def _folder(dataset, tmp_path, extra=()):
    """A copy of the dataset's tree (links) with `extra` files added."""
    root = tmp_path / "tree"
    for cls in sorted(os.listdir(dataset)):
        (root / cls).mkdir(parents=True)
        for name in sorted(os.listdir(os.path.join(dataset, cls)))[:3]:
            os.symlink(os.path.join(dataset, cls, name), root / cls / name)
    for rel, data in extra:
        (root / rel).write_bytes(data)
    return str(root)


def _pinload_warnings(record):
    return [str(w.message) for w in record
            if issubclass(w.category, pinload.PinloadWarning)]


def test_files_left_out_are_a_warning_once_per_loader(dataset, tmp_path,
                                                      caplog):
    """.bmp and .tif files torchvision would read are left out: a warning
    naming them, said once, however often the loader is made again
    (set_epoch, load_state_dict); the logger gets a WARNING record, then
    INFO for the same words."""
    root = _folder(dataset, tmp_path, [("class_00/a.bmp", b"BM"),
                                       ("class_01/b.tif", b"II*\0")])
    with caplog.at_level(logging.INFO, logger="pinload"), \
            warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        loader = pinload.Loader(root, batch_size=4, size=16, device="host")
        loader.set_epoch(3)  # a C loader made again says it all again
        list(loader)
        loader.close()
    said = _pinload_warnings(record)
    assert sorted(w.split(": ", 1)[1][:24] for w in said) == [
        "1 .bmp file not supporte", "1 .tif file not supporte"], said
    assert any(w.endswith("left out: class_00/a.bmp") for w in said), said
    # The warning names the caller's line, not pinload's.
    assert {os.path.basename(w.filename) for w in record
            if issubclass(w.category, pinload.PinloadWarning)} == \
        {"test_warnings.py"}
    bmp = [r for r in caplog.records if "a.bmp" in r.getMessage()]
    assert [r.levelno for r in bmp] == [logging.WARNING, logging.INFO]


def test_shards_without_cls_members_are_a_warning(dataset, tmp_path):
    """Samples without a label are labelled 0: "1 classes" is not what a
    user meant; the warning says how many, and how to give labels."""
    tar = tmp_path / "s.tar"
    files = sorted(os.listdir(os.path.join(dataset, "class_00")))[:3]
    with tarfile.open(tar, "w") as t:
        for i, name in enumerate(files):
            t.add(os.path.join(dataset, "class_00", name), "k%d.jpg" % i)
            if i == 0:  # one key labelled: the others are not
                info = tarfile.TarInfo("k0.cls")
                info.size = 2
                t.addfile(info, io.BytesIO(b"1\n"))
    with pytest.warns(pinload.PinloadWarning) as record:
        loader = pinload.Loader(str(tar), batch_size=3, size=16,
                                device="host")
    [w] = _pinload_warnings(record)
    assert w.startswith("2 of 3 sample(s) have no cls member"), w
    assert "k1: they are labelled 0" in w and "label_field" in w, w
    assert "config." not in w
    assert [loader.sample(i)[1] for i in range(3)] == [1, 0, 0]


def test_cuda_falling_back_to_the_host_is_a_warning(dataset):
    loader = pinload.Loader(dataset, batch_size=4, size=16, device="host")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        loader = pinload.Loader(dataset, batch_size=4, size=16,
                                device="cuda")
    said = _pinload_warnings(record)
    if loader.info["backend"] == "cuda":
        assert not said  # asked for CUDA and got it
        pytest.skip("CUDA is here: nothing fell back")
    [w] = said
    assert w.startswith("device='cuda': no CUDA device could be had, so "
                        "the batches are in host memory (backend: host ("), w
    # The default, "auto", means "CUDA, else the host": no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", pinload.PinloadWarning)
        pinload.Loader(dataset, batch_size=4, size=16)


def test_an_elastic_restart_that_replays_samples_is_a_warning(dataset):
    kw = dict(batch_size=4, size=16, seed=3, device="host",
              log=lambda level, msg: None)
    saver = pinload.Loader(dataset, rank=0, world_size=2, **kw)
    saver.next()
    state = saver.state_dict()
    kw.pop("log")
    with pytest.warns(pinload.PinloadWarning) as record:
        pinload.Loader(dataset, rank=0, world_size=1, resume=state, **kw)
    [w] = _pinload_warnings(record)
    assert w == ("resume: the state was saved by a job of world_size 2, "
                 "this one has 1: epoch 0 starts again from its beginning, "
                 "so the samples of it delivered before the save are "
                 "delivered again"), w


def test_mean_and_std_on_the_0_255_scale_are_a_warning(dataset):
    kw = dict(batch_size=4, size=16, device="host")
    with pytest.warns(pinload.PinloadWarning) as record:
        pinload.Loader(dataset, format="f32", mean=(123.675, 116.28, 103.53),
                       std=(58.395, 57.12, 57.375), **kw)
    [w] = _pinload_warnings(record)
    assert w == ("mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, "
                 "57.375): values on the 0-255 scale, it seems; but pinload "
                 "normalises (x / 255 - mean) / std, with mean and std on "
                 "the 0-1 scale: divide them by 255 (mean=(0.485, 0.456, "
                 "0.406), std=(0.229, 0.224, 0.225))"), w
    with warnings.catch_warnings():
        warnings.simplefilter("error", pinload.PinloadWarning)
        pinload.Loader(dataset, format="f16", mean=(0.5, 0.5, 0.5),
                       std=(0.5, 0.5, 0.5), **kw)
        # u8 is not normalised: mean and std do nothing there
        pinload.Loader(dataset, format="u8", mean=(128, 128, 128), **kw)


def test_a_skipped_file_warns_once_and_logs_each(dataset, tmp_path, caplog):
    """Two bad files of one kind: one PinloadWarning, two WARNING
    records (loader.failures lists both)."""
    root = _folder(dataset, tmp_path, [
        ("class_00/zz_bad1.jpg", b"GIF89a" + bytes(64)),
        ("class_01/zz_bad2.jpg", b"GIF89a" + bytes(64))])
    with caplog.at_level(logging.INFO, logger="pinload"), \
            warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        loader = pinload.Loader(root, batch_size=4, size=16, device="host",
                                num_workers=1)
        list(loader)
    assert len(loader.failures) == 2
    said = [w for w in _pinload_warnings(record) if w.startswith("skipped")]
    assert len(said) == 1, said
    logged = [r for r in caplog.records if r.levelno == logging.WARNING
              and r.getMessage().startswith("skipped")]
    assert len(logged) == 2


def test_warnings_as_errors_raise_from_the_call_that_met_them(dataset,
                                                             tmp_path):
    root = _folder(dataset, tmp_path, [("class_00/a.bmp", b"BM")])
    with warnings.catch_warnings():
        warnings.simplefilter("error", pinload.PinloadWarning)
        with pytest.raises(pinload.PinloadWarning, match="a.bmp"):
            pinload.Loader(root, batch_size=4, size=16, device="host")


def test_a_log_callable_gets_every_message_and_nothing_is_warned(
        dataset, tmp_path):
    root = _folder(dataset, tmp_path, [("class_00/a.bmp", b"BM")])
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", pinload.PinloadWarning)
        pinload.Loader(root, batch_size=4, size=16, device="host",
                       log=lambda level, text: seen.append((level, text)))
    assert [lv for lv, t in seen if "a.bmp" in t] == [logging.WARNING]
    # Notices in Python's words too.
    [backend] = [t for lv, t in seen if t.startswith("backend: ")]
    assert backend.startswith('backend: host (device="host"); '), backend


def test_the_loggers_notices_stay_info(dataset, caplog):
    with caplog.at_level(logging.INFO, logger="pinload"), \
            warnings.catch_warnings():
        warnings.simplefilter("error", pinload.PinloadWarning)
        pinload.Loader(dataset, batch_size=4, size=16, device="host")
    assert caplog.records
    assert all(r.levelno == logging.INFO for r in caplog.records)
    # A library's logger has a handler of its own (NullHandler), so that
    # logging's last resort does not print each record a second time.
    assert any(isinstance(h, logging.NullHandler)
               for h in logging.getLogger("pinload").handlers)
