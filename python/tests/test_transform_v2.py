"""transform= as a torchvision.transforms.v2 pipeline (issue 37): each
transform translated to its op with every parameter it holds (the
canonical spec the C parser writes back, against a spec written by
hand); the recipes people train with (ResNet-50's, DeiT's, the eval
crop, SimCLR's views' ops) translated whole; a pipeline without random
draws giving torchvision's pixels; each transform pinload does not run
refused by name with what to use instead; and the Loader taking the
pipeline, its format and size from ToDtype and the last crop. Skipped
without torchvision."""
import numpy as np
import pytest

import pinload

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
import pinload._v2  # noqa: E402
import pinload.torch as ptorch  # noqa: E402
import torchvision.transforms.v2 as T  # noqa: E402

from test_transforms_ref import chw, hwc, smooth  # noqa: E402

IM = T.InterpolationMode
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
NORM = "normalize(mean=0.485:0.456:0.406,std=0.229:0.224:0.225)"


def canonical(spec, size, fmt="f32"):
    """The spec with every parameter written out, as the C parser does."""
    return pinload._canonical(spec, size, format=fmt)


def same(pipeline, spec, size=224, fmt="f32"):
    """The pipeline's spec and `spec` are one transform, at the size the
    pipeline ends at."""
    t = pinload._v2.spec_of(pipeline)
    assert t.spec == ptorch.spec_of(pipeline)
    size = t.size or size
    assert canonical(t.spec, size, fmt) == canonical(spec, size, fmt), (
        t.spec, spec)


# ---- one transform at a time -------------------------------------------------

@pytest.mark.parametrize("tv,spec", [
    (T.RandomResizedCrop(224), "rrc(224)"),
    (T.RandomResizedCrop((160, 192), scale=(0.35, 1.0), ratio=(0.5, 2.0),
                         interpolation=IM.BICUBIC, antialias=False),
     "rrc(192x160,scale=0.35:1,ratio=0.5:2,interpolation=bicubic,"
     "antialias=false)"),
    ([T.Resize(256), T.CenterCrop(224)], "resize(256);center_crop(224)"),
    ([T.Resize((240, 320), interpolation=IM.NEAREST)],
     "resize(320x240,interpolation=nearest)"),
    ([T.Resize(200, max_size=300), T.CenterCrop(180)],
     "resize(200,max_size=300);center_crop(180)"),
    ([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
      T.RandomVerticalFlip(0.2), T.RandomGrayscale(0.1)],
     "rrc(224);hflip(0.5);vflip(0.2);grayscale(0.1)"),
    ([T.RandomResizedCrop(224), T.Grayscale(3)], "rrc(224);grayscale(1)"),
    ([T.RandomResizedCrop(224), T.ColorJitter(0.4, 0.4, 0.2, 0.1)],
     "rrc(224);color_jitter(0.4,0.4,0.2,0.1)"),
    ([T.RandomResizedCrop(224), T.ColorJitter(brightness=(0.5, 1.5))],
     "rrc(224);color_jitter(brightness=0.5:1.5)"),
    ([T.RandomResizedCrop(224), T.GaussianBlur(23, sigma=(0.1, 2.0))],
     "rrc(224);gaussian_blur(23,sigma=0.1:2)"),
    ([T.RandomResizedCrop(224), T.RandomSolarize(128, p=0.2),
      T.RandomPosterize(4, p=0.3), T.RandomEqualize(0.4),
      T.RandomAutocontrast(0.6)],
     "rrc(224);solarize(128,p=0.2);posterize(4,p=0.3);equalize(0.4);"
     "autocontrast(0.6)"),
    ([T.RandomResizedCrop(224), T.RandomRotation(15, fill=[1, 2, 3])],
     "rrc(224);rotate(15,fill=1:2:3)"),
    ([T.RandomResizedCrop(224),
      T.RandomRotation((-5, 30), interpolation=IM.BILINEAR, center=(0, 7.5),
                       fill=9)],
     "rrc(224);rotate(-5:30,bilinear,9,center=0:7.5)"),
    ([T.RandomResizedCrop(224),
      T.RandomAffine(10, translate=(0.1, 0.2), scale=(0.9, 1.1),
                     shear=(-5, 5, 1, 2))],
     "rrc(224);affine(10,translate=0.1:0.2,scale=0.9:1.1,shear=5,"
     "shear_y=1:2)"),
    ([T.RandomResizedCrop(224), T.RandAugment()],
     "rrc(224);rand_augment(2,9)"),
    ([T.RandomResizedCrop(224),
      T.RandomApply([T.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
      T.RandomApply([T.GaussianBlur(9, (0.1, 2.0))], p=0.5),
      T.RandomApply([T.RandomGrayscale(0.5)], p=0.4),
      T.RandomApply([T.RandomSolarize(128, p=0.5)], p=0.5)],
     "rrc(224);color_jitter(0.4,0.4,0.4,0.1,p=0.8);gaussian_blur(9,p=0.5);"
     "grayscale(0.2);solarize(128,p=0.25)"),
    ([T.RandomResizedCrop(224),
      T.RandAugment(3, 15, 51, interpolation=IM.BILINEAR, fill=[4, 5, 6])],
     "rrc(224);rand_augment(3,15,51,bilinear,4:5:6)"),
    ([T.RandomResizedCrop(224), T.TrivialAugmentWide(fill=128)],
     "rrc(224);trivial_augment_wide(fill=128)"),
    ([T.RandomResizedCrop(224), T.AutoAugment(T.AutoAugmentPolicy.SVHN)],
     "rrc(224);auto_augment(svhn)"),
])
def test_each_transform_is_its_op(tv, spec):
    same(tv, spec, fmt="u8")


def test_to_dtype_normalize_and_erasing_are_the_float_stages():
    same([T.RandomResizedCrop(224), T.ToImage(),
          T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD),
          T.RandomErasing(0.25)],
         "rrc(224);%s;erase(0.25,value=0)" % NORM)
    same([T.RandomResizedCrop(224), T.ToDtype(torch.float32, scale=True),
          T.Normalize(MEAN, STD), T.RandomErasing(0.25, value="random")],
         "rrc(224);%s;erase(0.25,value=random)" % NORM)
    # ToDtype alone: [0, 1], normalised by nothing.
    same([T.CenterCrop(224), T.ToDtype(torch.float32, scale=True)],
         "center_crop(224);normalize(mean=0,std=1)")
    t = pinload._v2.spec_of([T.CenterCrop(64),
                             T.ToDtype(torch.bfloat16, scale=True)])
    assert (t.format, t.size) == ("bf16", (64, 64))
    t = pinload._v2.spec_of([T.RandomResizedCrop((96, 128))])
    assert (t.format, t.size) == (None, (96, 128))
    assert pinload._v2.spec_of([T.Resize(100)]).size is None


# ---- the recipes ---------------------------------------------------------------

RECIPES = {
    "resnet50 train": (
        T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                   T.ToImage(), T.ToDtype(torch.float32, scale=True),
                   T.Normalize(MEAN, STD)]),
        "rrc(224);hflip;" + NORM),
    "eval": (
        T.Compose([T.Resize(256), T.CenterCrop(224), T.ToImage(),
                   T.ToDtype(torch.float32, scale=True),
                   T.Normalize(MEAN, STD)]),
        "resize(256);center_crop(224);" + NORM),
    "deit train": (
        T.Compose([T.RandomResizedCrop(224, interpolation=IM.BICUBIC),
                   T.RandomHorizontalFlip(), T.RandAugment(2, 9),
                   T.ToImage(), T.ToDtype(torch.float32, scale=True),
                   T.Normalize(MEAN, STD), T.RandomErasing(0.25)]),
        "rrc(224,interpolation=bicubic);hflip;rand_augment(2,9);" + NORM +
        ";erase(0.25)"),
    "simclr view": (
        T.Compose([T.RandomResizedCrop(96), T.RandomHorizontalFlip(),
                   T.RandomApply([T.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
                   T.RandomGrayscale(0.2),
                   T.RandomApply([T.GaussianBlur(9, sigma=(0.1, 2.0))],
                                 p=0.5),
                   T.ToImage(), T.ToDtype(torch.float32, scale=True),
                   T.Normalize(MEAN, STD)]),
        "rrc(96);hflip;color_jitter(0.4,0.4,0.4,0.1,p=0.8);grayscale(0.2);"
        "gaussian_blur(9,p=0.5);" + NORM),
}


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_the_recipes_translate_whole(name):
    tv, spec = RECIPES[name]
    size = 96 if "simclr" in name else 224
    same(tv, spec, size=size)


def test_the_eval_recipe_is_torchvisions_pixels():
    """No draws in it: pinload's floats against torchvision's own pipeline
    on the same image, within the resize's level (1 of 255, over std)."""
    img = smooth(300, 220, 7)
    tv, _ = RECIPES["eval"]
    t = pinload._v2.spec_of(tv)
    ours = np.frombuffer(pinload._apply(t.spec, img, 224, format=t.format),
                         np.float32).reshape(3, 224, 224)
    theirs = tv(chw(img)).numpy()
    assert np.abs(ours - theirs).max() <= 1 / 255 / min(STD) + 1e-5


# ---- refused, by name ---------------------------------------------------------

@pytest.mark.parametrize("tv,words", [
    ([T.RandomResizedCrop(224), T.Lambda(lambda x: x)],
     "Lambda: per-sample Python does not run"),
    ([T.RandomResizedCrop(224),
      T.RandomApply([T.ColorJitter(0.4), T.GaussianBlur(3)], p=0.8)],
     "RandomApply: pinload applies one op with a probability, not several"),
    ([T.RandomResizedCrop(224), T.RandomApply([T.RandomRotation(10)], p=0.5)],
     "RandomApply: of RandomRotation: pinload has no probability for it"),
    ([T.RandomResizedCrop(224), T.MixUp(num_classes=10)],
     "MixUp: a batch op"),
    ([T.RandomResizedCrop(224), T.AugMix()],
     "AugMix: nearest: auto_augment"),
    ([T.RandomResizedCrop(224), T.Normalize(MEAN, STD)],
     "Normalize: before ToDtype(torch.float32, scale=True)"),
    ([T.RandomResizedCrop(224), T.RandomErasing()],
     "RandomErasing: on uint8 images"),
    ([T.RandomResizedCrop(224), T.RandomRotation(10, expand=True)],
     "RandomRotation: expand=True"),
    ([T.RandomResizedCrop(224),
      T.RandomRotation(10, interpolation=IM.BILINEAR, fill=None)],
     "RandomRotation: fill=None"),
    ([T.RandomResizedCrop(224, interpolation=IM.LANCZOS)],
     "RandomResizedCrop: interpolation=lanczos"),
    ([T.RandomResizedCrop(224), T.ToDtype(torch.float32)],
     "ToDtype: scale=False"),
    ([T.RandomResizedCrop(224), T.ElasticTransform()],
     "ElasticTransform: not in pinload's ops"),
    ([T.RandomHorizontalFlip()], "no RandomResizedCrop, Resize or CenterCrop"),
])
def test_what_pinload_does_not_run_is_refused_by_name(tv, words):
    with pytest.raises(ValueError) as e:
        ptorch.spec_of(tv)
    assert words in str(e.value), str(e.value)


# ---- the Loader ---------------------------------------------------------------

def test_the_loader_takes_a_v2_pipeline(dataset):
    tv = T.Compose([T.RandomResizedCrop(40), T.RandomHorizontalFlip(),
                    T.RandAugment(), T.ToImage(),
                    T.ToDtype(torch.float32, scale=True),
                    T.Normalize(MEAN, STD)])
    loader = ptorch.Loader(dataset, batch_size=8, transform=tv, seed=3,
                           num_workers=2, device="host")
    images, labels = next(iter(loader))
    assert images.dtype == torch.float32
    assert tuple(images.shape) == (8, 3, 40, 40)
    loader.close()
    # The same batches as the spec it translates to.
    spec = ptorch.spec_of(tv)
    a = ptorch.Loader(dataset, batch_size=8, transform=tv, seed=3,
                      num_workers=2, device="host")
    b = ptorch.Loader(dataset, batch_size=8, transform=spec, seed=3, size=40,
                      format="f32", num_workers=1, device="host")
    for (x, _), (y, _) in zip(a, b):
        assert torch.equal(x, y)
    a.close()
    b.close()
    # Without ToDtype: uint8, as torchvision's output.
    u8 = ptorch.Loader(dataset, batch_size=8, device="host",
                       transform=[T.RandomResizedCrop(32)])
    images, _ = next(iter(u8))
    assert images.dtype == torch.uint8 and tuple(images.shape) == (8, 32, 32,
                                                                   3)
    u8.close()
    # An explicit size the pipeline does not end at: the C parser says so.
    with pytest.raises(pinload.InvalidArgument) as e:
        ptorch.Loader(dataset, device="host", size=64,
                      transform=[T.RandomResizedCrop(32)])
    assert "64" in str(e.value)


# ---- batch_transform= ----------------------------------------------------------

def test_batch_transforms_become_the_mixup_op():
    v2b = pinload._v2.batch_op_of
    assert v2b(T.MixUp(alpha=0.8, num_classes=4)) == (
        "mixup(mixup_alpha=0.8,cutmix_alpha=0,label_smoothing=0,"
        "num_classes=4)")
    assert v2b(T.CutMix(alpha=1.0, num_classes=4)) == (
        "mixup(mixup_alpha=0,cutmix_alpha=1,label_smoothing=0,num_classes=4)")
    assert v2b(T.RandomChoice([T.MixUp(alpha=0.8, num_classes=4),
                               T.CutMix(alpha=1.0, num_classes=4)],
                              p=[1, 3])) == (
        "mixup(mixup_alpha=0.8,cutmix_alpha=1,switch_prob=0.75,"
        "label_smoothing=0,num_classes=4)")
    assert v2b(lambda x, y: (x, y)) is None
    with pytest.raises(ValueError, match="RandomChoice: of MixUp, MixUp"):
        v2b(T.RandomChoice([T.MixUp(num_classes=4), T.MixUp(num_classes=4)]))


def test_the_loader_takes_batch_transforms(dataset):
    common = dict(batch_size=4, size=32, device="host", seed=2)
    loader = ptorch.Loader(dataset, transform=[T.RandomResizedCrop(32),
                                               T.ToDtype(torch.float32,
                                                         scale=True)],
                           batch_transform=T.MixUp(alpha=0.8, num_classes=4),
                           **common)
    images, targets = next(iter(loader))
    assert images.dtype == torch.float32
    assert tuple(targets.shape) == (4, 4)
    assert torch.allclose(targets.sum(1), torch.ones(4))
    loader.close()
    # On the preset: its spec, then the op; format f32 by default.
    preset = ptorch.Loader(dataset, batch_transform=T.CutMix(num_classes=4),
                           **common)
    images, targets = next(iter(preset))
    assert images.dtype == torch.float32 and targets.shape == (4, 4)
    preset.close()
    # Any other callable runs on each batch.
    seen = []

    def double(x, y):
        seen.append(x.shape[0])
        return x * 2, y + 1

    a = ptorch.Loader(dataset, batch_transform=double, format="f32",
                      shuffle=False, **common)
    b = ptorch.Loader(dataset, format="f32", shuffle=False, **common)
    (x1, y1), (x2, y2) = next(iter(a)), next(iter(b))
    assert torch.equal(x1, x2 * 2) and torch.equal(y1, y2 + 1)
    assert seen == [4]
    a.close()
    b.close()
    with pytest.raises(ValueError, match="format is u8"):
        ptorch.Loader(dataset, format="u8",
                      batch_transform=T.MixUp(num_classes=4), **common)


def test_timms_mixup_keeps_every_parameter():
    mixup = pytest.importorskip("timm.data.mixup")
    m = mixup.Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, prob=0.9,
                    switch_prob=0.4, label_smoothing=0.1, num_classes=1000)
    assert pinload._v2.batch_op_of(m) == (
        "mixup(mixup_alpha=0.8,cutmix_alpha=1,prob=0.9,switch_prob=0.4,"
        "label_smoothing=0.1,correct_lam=true,num_classes=1000)")
    with pytest.raises(ValueError, match="mode='elem'"):
        pinload._v2.batch_op_of(mixup.Mixup(mode="elem", num_classes=10))
