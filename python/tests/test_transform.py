"""Loader(transform=...): a spec of ops (docs/transforms.md) through the
binding: the batches equal pinload-dump's with --augment SPEC, the same
for any workers; normalize's mean and std are what float batches hold; a
bad spec is an InvalidArgument naming the op and the parameter in
Python's words; _plan and _apply say what a sample drew and make it."""
import numpy as np
import pytest

import pinload

from conftest import dump

SPEC = "rrc(scale=0.3:1,interpolation=bicubic);hflip;vflip(0.2);grayscale(0.3)"


def images(loader):
    out = []
    for b in loader:
        out.append((np.from_dlpack(b.images).copy(),
                    np.from_dlpack(b.indices).copy()))
    return out


def test_a_spec_gives_pinload_dumps_bytes_whatever_the_workers(dataset,
                                                               tmp_path):
    ref = dump(dataset, tmp_path / "dump", size=32, augment=SPEC, seed=9,
               batch=8)
    for workers in (1, 3):
        loader = pinload.Loader(dataset, batch_size=8, size=32, seed=9,
                                transform=SPEC, num_workers=workers,
                                device="host")
        flat = [img for imgs, _ in images(loader) for img in imgs]
        assert len(flat) == len(ref) == 48
        for img, (path, _, rgb) in zip(flat, ref):
            assert img.tobytes() == rgb, (workers, path)
        loader.close()


def test_normalize_sets_what_float_batches_hold(dataset):
    kw = dict(batch_size=8, size=24, seed=2, num_workers=2, device="host",
              shuffle=False)
    u8 = images(pinload.Loader(dataset, transform="resize;hflip", **kw))
    f32 = images(pinload.Loader(
        dataset, format="f32",
        transform="resize;hflip;normalize(mean=0.5:0.25:0,std=0.5:1:2)",
        **kw))
    mean = np.array([0.5, 0.25, 0.0], np.float32)[None, :, None, None]
    std = np.array([0.5, 1.0, 2.0], np.float32)[None, :, None, None]
    for (a, _), (b, _) in zip(u8, f32):
        want = (a.transpose(0, 3, 1, 2).astype(np.float32) / 255 - mean) / std
        assert np.array_equal(b, want.astype(np.float32))


def test_a_bad_spec_names_the_op_and_the_parameter(dataset):
    with pytest.raises(pinload.InvalidArgument) as e:
        pinload.Loader(dataset, transform="rrc(scale=0.08:x);hflip",
                       device="host")
    assert str(e.value).endswith("transform: rrc: scale=0.08:x: not a "
                                 "number")
    with pytest.raises(pinload.InvalidArgument) as e:
        pinload.Loader(dataset, transform="resize(256)", size=224,
                       device="host")
    assert "not the output's 224 x 224" in str(e.value)
    with pytest.raises(ValueError, match="transform: expected a string"):
        pinload.Loader(dataset, transform=3, device="host")


def test_plan_and_apply_say_and_make_a_sample():
    plan = pinload._plan("resize(40);center_crop(32);hflip(1)", 32,
                         (64, 48))
    assert plan == [("resize", {"width": 53, "height": 40}),
                    ("center_crop", {"top": 4, "left": 10}),
                    ("hflip", {"flip": 1})]
    img = np.arange(48 * 64 * 3, dtype=np.uint32).reshape(48, 64, 3)
    img = (img * 2654435761 % 256).astype(np.uint8)
    flipped = np.frombuffer(pinload._apply("resize(64x48);hflip(1)", img,
                                           (48, 64)), np.uint8)
    assert np.array_equal(flipped.reshape(48, 64, 3), img[:, ::-1])
    with pytest.raises(ValueError, match="uint8"):
        pinload._apply("resize", img.astype(np.float32), 32)
