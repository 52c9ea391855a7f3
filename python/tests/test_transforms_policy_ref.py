"""The augmentation policies against torchvision (issue 37): rand_augment,
trivial_augment_wide and auto_augment, each sample applied by pinload
(pinload._apply: the workers' own path) beside torchvision.transforms.v2's
own policy applying the transforms pinload drew (pinload._plan) through
its _apply_image_or_video_transform, the transform by transform path
RandAugment.forward takes; the magnitudes' bins against the policies'
tensors for many bin counts; and the draws (which transforms, which bins,
signs, sub-policies) against the policies' own forward, recorded, by
two-sample chi-square tests (fixed seeds: deterministic).
docs/transforms.md quotes the bounds. Skipped without torchvision."""
import collections
import math

import numpy as np
import pytest

import pinload

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
import torchvision.transforms.v2 as T  # noqa: E402

from test_transforms_ref import chw, hwc, noise, smooth, worst  # noqa: E402

# The transforms as pinload's descriptions name them, and torchvision.
NAMES = {"identity": "Identity", "shear_x": "ShearX", "shear_y": "ShearY",
         "translate_x": "TranslateX", "translate_y": "TranslateY",
         "rotate": "Rotate", "brightness": "Brightness", "color": "Color",
         "contrast": "Contrast", "sharpness": "Sharpness",
         "posterize": "Posterize", "solarize": "Solarize",
         "autocontrast": "AutoContrast", "equalize": "Equalize",
         "invert": "Invert"}
TV_NAMES = {v: k for k, v in NAMES.items()}

IMAGES = [("smooth", smooth(224, 224, 30)), ("smooth", smooth(211, 157, 31)),
          ("noise", noise(131, 97, 32))]

BILINEAR = T.InterpolationMode.BILINEAR
POLICIES = {
    "rand_augment": T.RandAugment(),
    "rand_augment(3,15,fill=128:64:0)": T.RandAugment(3, 15,
                                                      fill=[128, 64, 0]),
    "rand_augment(2,27,51)": T.RandAugment(2, 27, 51),
    "trivial_augment_wide": T.TrivialAugmentWide(),
    "trivial_augment_wide(num_magnitude_bins=11,fill=200)":
        T.TrivialAugmentWide(11, fill=200),
    "auto_augment": T.AutoAugment(),
    "auto_augment(cifar10)": T.AutoAugment(T.AutoAugmentPolicy.CIFAR10),
    "auto_augment(svhn)": T.AutoAugment(T.AutoAugmentPolicy.SVHN),
    "rand_augment(3,15,interpolation=bilinear)":
        T.RandAugment(3, 15, interpolation=BILINEAR),
    "auto_augment(svhn,bilinear,9:99:199)":
        T.AutoAugment(T.AutoAugmentPolicy.SVHN, BILINEAR, fill=[9, 99, 199]),
}


def steps(spec, w, h, index, epoch=0, seed=0):
    """[(torchvision's transform name, magnitude)] the policy after an
    identity resize drew for that sample; each magnitude the float32
    pinload holds (its 9 digits read as float32, then widened, as
    float(tensor[i]) hands torchvision's over)."""
    plan = pinload._plan("resize(%dx%d);%s" % (w, h, spec), (h, w), (w, h),
                         epoch, index, seed=seed)[1][1]
    n = sum(1 for k in plan if k.startswith("op"))
    return [(NAMES[plan["op%d" % k]], float(np.float32(plan["m%d" % k])))
            for k in range(n)]


def ours(spec, img, index, epoch=0, seed=0):
    h, w = img.shape[:2]
    out = pinload._apply("resize(%dx%d);%s" % (w, h, spec), img, (h, w),
                         epoch=epoch, index=index, seed=seed)
    return np.frombuffer(out, np.uint8).reshape(h, w, 3).astype(np.int64)


def theirs(policy, img, drawn):
    t = chw(img)
    for name, m in drawn:
        if name != "Identity":
            t = policy._apply_image_or_video_transform(
                t, name, m, interpolation=policy.interpolation,
                fill=policy._fill)
    return hwc(t)


# ---- every sample, pixel for pixel -----------------------------------------

@pytest.mark.parametrize("spec", sorted(POLICIES))
def test_each_policy_is_torchvisions_transforms_exactly(spec):
    """Every byte the same, on photographs' kind of image and on noise,
    120 samples each, for every transform, nearest and bilinear, with and
    without a fill: pinload repeats torchvision's float32 steps (its
    affine grid and grid_sample's fused arithmetic, the colour blends,
    sharpness's convolution), so no transform's difference is there for
    the next to magnify."""
    policy = POLICIES[spec]
    seen = set()
    for kind, img in IMAGES:
        h, w = img.shape[:2]
        for i in range(120):
            drawn = steps(spec, w, h, i)
            seen.update(name for name, _ in drawn)
            d = worst(ours(spec, img, i), theirs(policy, img, drawn))
            assert d == 0, (spec, kind, i, drawn, d)
    every = {TV_NAMES[k] for k in policy._AUGMENTATION_SPACE}
    if spec.startswith(("rand", "trivial")):
        assert every <= {TV_NAMES[n] for n in seen}, sorted(every)


# ---- the bins ----------------------------------------------------------------

SPACES = {"rand_augment": T.RandAugment, "trivial_augment_wide":
          T.TrivialAugmentWide, "auto_augment": T.AutoAugment}


@pytest.mark.parametrize("bins", [2, 3, 5, 10, 11, 17, 31, 48, 64, 101])
def test_the_bins_are_the_policies_tensors(bins):
    """Every transform's magnitude at bins 0, 1, the middle, the last but
    one and the last, bit for bit: torch.linspace's float32 values (one
    fused multiply-add from the nearer end) and Posterize's rounded
    quotient, for 2 to 101 bins, on two image sizes. Read from 16
    transforms a sample until each was seen at each bin."""
    space = T.RandAugment._AUGMENTATION_SPACE
    for w, h in [(224, 224), (37, 91)]:
        for m in sorted({0, 1, bins // 2, bins - 2, bins - 1}):
            spec = "rand_augment(16,%d,%d)" % (m, bins)
            want = {}
            for name, (fn, _) in space.items():
                mags = fn(bins, h, w)
                want[name] = None if mags is None else float(mags[m])
            got = {}
            i = 0
            while len(got) < len(want) and i < 200:
                for name, mag in steps(spec, w, h, i):
                    got.setdefault(name, set()).add(abs(mag))
                i += 1
            assert set(got) == set(want), (bins, m, set(want) - set(got))
            for name, values in got.items():
                expect = abs(want[name]) if want[name] is not None else 0.0
                assert values == {expect}, (bins, m, name, values, expect)


def test_trivial_augments_posterize_bins_are_its_own():
    """TrivialAugmentWide's Posterize divides by (n - 1) / 6 (8 bits down
    to 2); its ranges are the wide ones."""
    space = T.TrivialAugmentWide._AUGMENTATION_SPACE
    seen = collections.defaultdict(set)
    for i in range(6000):  # each bin of each transform some 14 times
        for name, m in steps("trivial_augment_wide", 64, 48, i):
            seen[name].add(abs(m))
    for name, (fn, _) in space.items():
        mags = fn(31, 48, 64)
        want = {0.0} if mags is None else {abs(float(v)) for v in mags}
        assert seen[name] == want, (name, seen[name] ^ want)


# ---- the draws -----------------------------------------------------------------

def chi2_bound(k, alpha=1e-3):
    """The chi-square distribution's upper alpha point with k degrees of
    freedom (Wilson-Hilferty; z = 3.09 for 0.001)."""
    z = {1e-3: 3.090232}[alpha]
    return k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3


def same_counts(a, b, what):
    """Two samples of one categorical distribution, equal sizes: the
    two-sample chi-square statistic over the categories both saw at least
    5 times between them, the rarer ones pooled."""
    a, b = collections.Counter(a), collections.Counter(b)
    keys = sorted(set(a) | set(b), key=str)
    big = [k for k in keys if a[k] + b[k] >= 10]
    rest = [k for k in keys if a[k] + b[k] < 10]
    cells = [(a[k], b[k]) for k in big]
    if rest:
        cells.append((sum(a[k] for k in rest), sum(b[k] for k in rest)))
    stat = sum((x - y) ** 2 / (x + y) for x, y in cells)
    bound = chi2_bound(max(len(cells) - 1, 1))
    assert stat < bound, (what, stat, bound, cells)
    return stat, bound


def recorded(policy, img, n, seed=3):
    """What torchvision's own forward applies, n times: [(name, magnitude)]
    each (Identity included: RandAugment and TrivialAugment apply it)."""
    out, log = [], []
    apply = policy._apply_image_or_video_transform

    def spy(image, transform_id, magnitude, interpolation, fill):
        log.append((transform_id, float(np.float32(magnitude))))
        return image
    policy._apply_image_or_video_transform = spy
    try:
        torch.manual_seed(seed)
        t = chw(img)
        for _ in range(n):
            log.clear()
            policy(t)
            out.append(tuple(log))
    finally:
        policy._apply_image_or_video_transform = apply
    return out


M = 6000


@pytest.mark.parametrize("spec,policy", [
    ("rand_augment(2,9)", T.RandAugment(2, 9)),
    ("trivial_augment_wide", T.TrivialAugmentWide()),
    ("auto_augment", T.AutoAugment()),
    ("auto_augment(svhn)", T.AutoAugment(T.AutoAugmentPolicy.SVHN)),
])
def test_the_draws_are_the_policies_own(spec, policy):
    """Which transforms, at which magnitudes with which signs, against the
    policy's own forward (recorded), 6,000 samples each side: each
    sample's first transform with its signed magnitude, the transforms
    alone (pairs for two), and the signs, by two-sample chi-square tests
    at level 0.001. AutoAugment's skipped steps are absent from
    torchvision's record and named identity in pinload's."""
    img = smooth(64, 48, 40)
    mine = [tuple((n, m) for n, m in steps(spec, 64, 48, i, seed=9)
                  if not (spec.startswith("auto") and n == "Identity"))
            for i in range(M)]
    tv = recorded(policy, img, M)
    same_counts([s[:1] for s in mine], [s[:1] for s in tv], "first")
    same_counts([tuple(n for n, _ in s) for s in mine],
                [tuple(n for n, _ in s) for s in tv], "transforms")
    same_counts([m < 0 for s in mine for _, m in s if m],
                [m < 0 for s in tv for _, m in s if m], "signs")
    # The test can fail: another policy is told apart (RandAugment's 3
    # transforms against 2; TrivialAugment's wide magnitudes against
    # RandAugment's at one bin; AutoAugment's CIFAR10 policy against
    # ImageNet's).
    other = {"rand_augment(2,9)": T.RandAugment(3, 9),
             "trivial_augment_wide": T.RandAugment(1, 15),
             "auto_augment": T.AutoAugment(T.AutoAugmentPolicy.CIFAR10),
             "auto_augment(svhn)": T.AutoAugment()}[spec]
    with pytest.raises(AssertionError):
        same_counts(mine, recorded(other, img, M), "other")


def test_the_draws_depend_on_seed_epoch_and_index_alone():
    """The same sample draws the same transforms whatever came before
    (each op its own stream), and another epoch draws others."""
    a = [steps("rand_augment(4,9)", 64, 48, i, epoch=2) for i in range(50)]
    b = [steps("rand_augment(4,9)", 64, 48, i, epoch=2)
         for i in reversed(range(50))][::-1]
    c = [steps("rand_augment(4,9)", 64, 48, i, epoch=3) for i in range(50)]
    assert a == b
    assert sum(x != y for x, y in zip(a, c)) > 40
