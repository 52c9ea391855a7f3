"""pinload.ops (issue 37): pinload's ops standing in a torchvision v2
pipeline where torchvision has no transform for them: Op (any op by its
spec), CenterCropPct (timm's crop_pct) and Mixup (timm's, without timm).
Each is checked when made (a bad parameter names the op and the
parameter), translates to its spec inside a v2 pipeline, and gives the
batches its spec gives; calling one outside the loader says where it
runs. The translation and the Loader need torchvision; the rest not."""
import numpy as np
import pytest

import pinload
import pinload.ops as ops

from test_transforms_ref import smooth


def test_op_keeps_its_spec_and_finds_its_size():
    assert ops.Op("hflip(0.3)").spec == "hflip(0.3)"
    assert ops.Op("hflip(0.3)").size is None
    assert ops.Op("resize(256,interpolation=area);center_crop(224)").size == (
        224, 224)
    assert ops.Op("random_resized_crop(64x48)").size == (48, 64)
    assert ops.Op("resize(256)").size is None, "the shorter side only"
    assert ops.Op("resize(40x30)").size == (30, 40)
    assert ops.Op("center_crop(224)", size=(224, 224)).size == (224, 224)


@pytest.mark.parametrize("spec,words", [
    ("hflip(2)", "hflip"),
    ("random_resized_crop(224,scale=0.5:0.1)", "scale"),
    ("resize(256,interpolation=lanczos)", "interpolation"),
    ("center_crop(224,crop_pct=1.5)", "crop_pct"),
    ("wobble(3)", "wobble"),
])
def test_a_bad_op_is_refused_when_made_naming_it(spec, words):
    with pytest.raises(ValueError) as e:
        ops.Op(spec)
    assert words in str(e.value), str(e.value)
    assert "config." not in str(e.value), "Python's words"


def test_ops_run_in_the_loader_not_in_python():
    with pytest.raises(TypeError, match="pinload.torch.Loader"):
        ops.Op("hflip")(np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(TypeError, match="batch_transform="):
        ops.Mixup(num_classes=4)(None, None)
    with pytest.raises(ValueError, match="pinload.ops.Op: expected a spec"):
        ops.Op("")


def test_center_crop_pct_is_timms_eval_crop():
    """crop_pct 0.875 at 224: the shorter side to 256, the centre 224,
    pixel for pixel the preset eval crop (resize(256);center_crop(224))."""
    t = ops.CenterCropPct(224, crop_pct=0.875)
    assert t.size == (224, 224)
    assert t.spec == ("center_crop(224x224,crop_pct=0.875,"
                      "interpolation=bilinear,antialias=true)")
    img = smooth(300, 220, 5)
    ours = pinload._apply(t.spec, img, 224)
    preset = pinload._apply("resize(256);center_crop(224)", img, 224)
    assert ours == preset
    # Another size and pct: resize to floor(160 / 0.9) = 177.
    t = ops.CenterCropPct((160, 128), crop_pct=0.9)
    assert t.size == (160, 128)
    a = pinload._apply(t.spec, img, (160, 128))
    b = pinload._apply("resize(177);center_crop(128x160)", img, (160, 128))
    assert a == b
    with pytest.raises(ValueError, match="crop_pct"):
        ops.CenterCropPct(224, crop_pct=0)


def test_mixup_writes_timms_parameters():
    m = ops.Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, prob=0.9,
                  switch_prob=0.4, label_smoothing=0.1, num_classes=1000)
    assert m.spec == ("mixup(mixup_alpha=0.8,cutmix_alpha=1,prob=0.9,"
                      "switch_prob=0.4,label_smoothing=0.1,correct_lam=true,"
                      "num_classes=1000)")
    mm = ops.Mixup(cutmix_alpha=1.0, cutmix_minmax=(0.2, 0.8),
                   correct_lam=False, num_classes=7)
    assert "cutmix_minmax=0.2:0.8," in mm.spec
    assert "correct_lam=false" in mm.spec
    with pytest.raises(ValueError, match="prob"):
        ops.Mixup(prob=2, num_classes=4)
    with pytest.raises(ValueError, match="num_classes"):
        ops.Mixup(num_classes=0)


def test_mixup_is_timms_own_translation():
    mixup = pytest.importorskip("timm.data.mixup")
    pytest.importorskip("pinload._v2")
    kw = dict(mixup_alpha=0.8, cutmix_alpha=1.0, cutmix_minmax=(0.3, 0.7),
              prob=0.9, switch_prob=0.4, label_smoothing=0.1,
              num_classes=10)
    ours = ops.Mixup(**kw)
    import pinload._v2
    assert ours.spec == pinload._v2.batch_op_of(mixup.Mixup(**kw))


# ---- inside a v2 pipeline, and the Loader -------------------------------------

def _tv():
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    import torchvision.transforms.v2 as T
    return torch, T


def test_an_op_translates_to_its_spec_in_a_v2_pipeline():
    torch, T = _tv()
    import pinload._v2
    t = pinload._v2.spec_of(T.Compose([
        T.RandomResizedCrop(64), ops.Op("resize(48,interpolation=area)"),
        ops.Op("center_crop(40x32)"), T.RandomHorizontalFlip()]))
    assert t.spec == ("random_resized_crop(64,scale=0.08:1,ratio=0.75:"
                      "1.3333333333333333,interpolation=bilinear,"
                      "antialias=true);resize(48,interpolation=area);"
                      "center_crop(40x32);hflip(0.5)")
    assert t.size == (32, 40), "the last crop's"
    # A pipeline that is only pinload's ops.
    t = pinload._v2.spec_of([ops.CenterCropPct(96), T.ToImage(),
                             T.ToDtype(torch.float32, scale=True)])
    assert t.size == (96, 96) and t.format == "f32"
    assert t.spec.startswith("center_crop(96x96,crop_pct=0.875")
    # An op that normalises counts as the pipeline's normalising.
    t = pinload._v2.spec_of([T.RandomResizedCrop(32), T.ToImage(),
                             T.ToDtype(torch.float32, scale=True),
                             ops.Op("normalize(mean=0.5:0.5:0.5,"
                                    "std=0.5:0.5:0.5)")])
    assert t.spec.count("normalize") == 1


def test_the_loader_gives_an_ops_spec_batches(dataset):
    torch, T = _tv()
    import pinload.torch as ptorch
    tv = [T.RandomResizedCrop(40), ops.Op("vflip(0.5)"),
          ops.Op("posterize(3,p=0.5)")]
    spec = ptorch.spec_of(tv)
    a = ptorch.Loader(dataset, batch_size=8, transform=tv, seed=4,
                      device="host")
    b = ptorch.Loader(dataset, batch_size=8, transform=spec, size=40,
                      seed=4, device="host")
    n = 0
    for (x, ya), (y, yb) in zip(a, b):
        assert torch.equal(x, y) and torch.equal(ya, yb)
        n += 1
    assert n == a.info["batches_per_epoch"] > 1
    a.close()
    b.close()
    # pinload.ops.Mixup as batch_transform=: soft targets.
    m = ptorch.Loader(dataset, batch_size=4, size=32, device="host",
                      transform=[T.RandomResizedCrop(32), T.ToImage(),
                                 T.ToDtype(torch.float32, scale=True)],
                      batch_transform=ops.Mixup(mixup_alpha=0.8,
                                                cutmix_alpha=1.0,
                                                num_classes=4))
    images, targets = next(iter(m))
    assert images.dtype == torch.float32 and tuple(targets.shape) == (4, 4)
    assert torch.allclose(targets.sum(1), torch.ones(4))
    # label smoothing 0.1 (timm's default): no target is exactly 0.
    assert float(targets.min()) > 0
    m.close()
