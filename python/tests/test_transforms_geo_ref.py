"""The geometric pixel ops and random erasing against torchvision (issue
37): rotate and affine applied by pinload (pinload._apply: the workers'
own path) beside torchvision.transforms.v2.functional's rotate and affine
on the uint8 tensor with the parameters pinload drew (pinload._plan), the
largest difference asserted and how many pixels differ at all; random
erasing on the normalised sample beside F.erase with the same box, exact
for a value, distributional for normal values; and each op's random
parameters against torchvision's own make_params by a two-sample
Kolmogorov-Smirnov test (fixed seeds: deterministic).
docs/transforms.md quotes the bounds. Skipped without torchvision."""
import math

import numpy as np
import pytest

import pinload

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
import torchvision.transforms.v2 as T2  # noqa: E402
import torchvision.transforms.v2.functional as F  # noqa: E402
from torchvision.transforms import InterpolationMode as IM  # noqa: E402

from test_transforms_ref import (chw, hwc, ks_bound, ks_statistic,  # noqa
                                 noise, smooth, worst)

MODES = {"nearest": IM.NEAREST, "bilinear": IM.BILINEAR}
# Odd and even sides, a square (torchvision's exact 90-degree path), and
# noise (every pixel independent: the worst case for bilinear).
IMAGES = [("smooth", smooth(64, 48, 10)), ("smooth", smooth(37, 53, 11)),
          ("smooth", smooth(40, 40, 12)), ("noise", noise(61, 47, 13)),
          ("noise", noise(32, 32, 14))]


def ours(spec, img, **kw):
    """The pixel op on the image as it is: a resize to its own size first
    (exact), which ends the geometric ops at the output's size."""
    h, w = img.shape[:2]
    out = pinload._apply("resize(%dx%d);%s" % (w, h, spec), img, (h, w), **kw)
    return np.frombuffer(out, np.uint8).reshape(h, w, 3).astype(np.int64)


def plan(spec, img, index, **kw):
    """What the spec's last op drew for this sample (after ours' resize)."""
    h, w = img.shape[:2]
    steps = pinload._plan("resize(%dx%d);%s" % (w, h, spec), (h, w), (w, h),
                          0, index, **kw)
    return steps[-1][1]


class Tally:
    """The largest difference and how many channel values differ, per
    interpolation."""

    def __init__(self):
        self.worst = {"nearest": 0, "bilinear": 0}
        self.differ = {"nearest": 0, "bilinear": 0}
        self.total = {"nearest": 0, "bilinear": 0}

    def add(self, mode, a, b, what):
        d = np.abs(a - b)
        self.worst[mode] = max(self.worst[mode], int(d.max()))
        self.differ[mode] += int((d != 0).sum())
        self.total[mode] += d.size
        # Per case: nearest picks torchvision's pixels, and bilinear
        # weighs them as torchvision does, the same bytes (pinload fuses
        # where grid_sample's vectorised kernel fuses: the unnormalising
        # and the weighted sum).
        assert d.max() == 0, (mode, what, d.max())

    def check(self):
        for mode in ("nearest", "bilinear"):
            assert self.differ[mode] == 0, (mode, self.differ[mode],
                                            self.total[mode])


FILLS = [None, (255, 128, 7)]
CENTERS = [None, (0, 0), (10.5, 20)]


# ---- rotate ----------------------------------------------------------------

def test_rotate_is_f_rotate_at_forced_angles():
    """degrees=a:a forces the angle: every multiple of 90 (torchvision's
    exact paths about the centre, the grid elsewhere) and others, both
    ways, with fills and centres."""
    tally = Tally()
    for _, img in IMAGES:
        for angle in [0, 90, 180, 270, -90, 360, 45, 33.3, -123.4, 359.9]:
            for mode in MODES:
                for fill in FILLS:
                    for center in CENTERS:
                        spec = "rotate(degrees=%r:%r,interpolation=%s" % (
                            angle, angle, mode)
                        spec += ",fill=%d:%d:%d" % fill if fill else ""
                        spec += ",center=%r:%r)" % center if center else ")"
                        b = F.rotate(chw(img), angle, interpolation=MODES[mode],
                                     center=list(center) if center else None,
                                     fill=list(fill or (0, 0, 0)))
                        tally.add(mode, ours(spec, img), hwc(b), spec)
    tally.check()


def test_random_rotation_is_f_rotate_with_its_drawn_angle():
    tally = Tally()
    for kind, img in IMAGES:
        for mode in MODES:
            spec = "rotate(180,interpolation=%s,fill=10:20:30)" % mode
            for index in range(8):
                p = plan(spec, img, index)
                assert -180 <= p["angle"] <= 180
                b = F.rotate(chw(img), p["angle"], interpolation=MODES[mode],
                             fill=[10, 20, 30])
                tally.add(mode, ours(spec, img, index=index), hwc(b),
                          (kind, spec, p))
    tally.check()


# ---- affine ----------------------------------------------------------------

AFFINE_SPECS = [
    "affine(degrees=40,translate=0.2:0.1,scale=0.7:1.3,shear=20,shear_y=10",
    "affine(degrees=-10:170,scale=1.5:2,shear=-30:5",
    "affine(degrees=0,translate=0.3",
]


def test_random_affine_is_f_affine_with_its_drawn_parameters():
    tally = Tally()
    for kind, img in IMAGES:
        for base in AFFINE_SPECS:
            for mode in MODES:
                for fill in FILLS:
                    spec = base + ",interpolation=%s" % mode
                    spec += ",fill=%d:%d:%d" % fill if fill else ""
                    for center in CENTERS:
                        full = spec + (",center=%r:%r)" % center if center
                                       else ")")
                        for index in range(2):
                            p = plan(full, img, index)
                            b = F.affine(
                                chw(img), angle=p["angle"],
                                translate=[p["translate_x"],
                                           p["translate_y"]],
                                scale=p["scale"],
                                shear=[p["shear_x"], p["shear_y"]],
                                interpolation=MODES[mode],
                                fill=list(fill or (0, 0, 0)),
                                center=list(center) if center else None)
                            tally.add(mode, ours(full, img, index=index),
                                      hwc(b), (kind, full, p))
    tally.check()


def test_affine_as_the_policies_call_it():
    """AutoAugment's ShearX (shear = degrees(atan(m)) about the corner),
    Rotate and the identity, forced by ranges of one number."""
    img = IMAGES[0][1]
    sx = math.degrees(math.atan(0.3))
    for spec, kw in [
        ("affine(degrees=0:0,shear=%r:%r,center=0:0" % (sx, sx),
         dict(angle=0.0, shear=[sx, 0.0], center=[0, 0])),
        ("affine(degrees=0:0,shear_y=%r:%r,center=0:0" % (-sx, -sx),
         dict(angle=0.0, shear=[0.0, -sx], center=[0, 0])),
        ("affine(degrees=-25:-25", dict(angle=-25.0, shear=[0.0, 0.0])),
        ("affine(degrees=0:0", dict(angle=0.0, shear=[0.0, 0.0])),
    ]:
        for mode in MODES:
            b = F.affine(chw(img), translate=[0, 0], scale=1.0,
                         interpolation=MODES[mode], fill=[0, 0, 0], **kw)
            a = ours(spec + ",interpolation=%s)" % mode, img)
            assert worst(a, hwc(b)) == 0, spec
    assert worst(ours("affine(0)", img), img.astype(np.int64)) == 0


# ---- random erasing --------------------------------------------------------

def floats(spec, img, fmt="f32", layout="nchw", **kw):
    """The float sample as (3, h, w) float32 (f16 and bf16 widened)."""
    h, w = img.shape[:2]
    out = pinload._apply("resize(%dx%d);%s" % (w, h, spec), img, (h, w),
                         format=fmt, layout=layout, **kw)
    if fmt == "f32":
        a = torch.from_numpy(np.frombuffer(out, np.float32).copy())
    else:
        bits = torch.from_numpy(np.frombuffer(out, np.int16).copy())
        a = bits.view(torch.float16 if fmt == "f16" else torch.bfloat16)
        a = a.float()
    if layout == "nhwc":
        return a.reshape(h, w, 3).permute(2, 0, 1).contiguous()
    return a.reshape(3, h, w)


ERASE = "random_erasing(p=1,scale=0.05:0.4,ratio=0.3:3.3"
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.mark.parametrize("fmt", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_erasing_a_value_is_f_erase_on_the_normalised_sample(fmt, layout):
    img = smooth(57, 43, 20)
    value = (0.5, -1.25, 2.0)
    spec = "normalize;" + ERASE + ",value=%r:%r:%r)" % value
    kept = floats("normalize", img, fmt, layout)
    # torchvision's normalised sample: pinload's within a rounding of the
    # format (pinload's table divides by 255, then by std, in float32).
    ref = F.normalize(F.to_dtype(chw(img), torch.float32, scale=True),
                      list(MEAN), list(STD))
    tol = {"f32": 1e-6, "f16": 2e-3, "bf16": 1.6e-2}[fmt]
    assert (kept - ref).abs().max() <= tol * ref.abs().max()
    cast = {"f32": torch.float32, "f16": torch.float16,
            "bf16": torch.bfloat16}[fmt]
    for index in range(6):
        p = plan(spec, img, index, format=fmt)
        assert p["apply"] == 1
        got = floats(spec, img, fmt, layout, index=index)
        # Exactly pinload's sample with F.erase's box of the value, as the
        # format holds it.
        v = torch.tensor(value, dtype=cast).float()[:, None, None]
        want = F.erase(kept, p["top"], p["left"], p["height"], p["width"], v)
        assert torch.equal(got, want), (index, p)
        # And torchvision's normalised tensor erased alike, to a rounding.
        tv = F.erase(ref, p["top"], p["left"], p["height"], p["width"],
                     torch.tensor(value)[:, None, None])
        assert (got - tv).abs().max() <= tol * 2.5


def test_erasing_normal_values_are_standard_normal():
    """value=random (torchvision's value="random", timm's mode="pixel"):
    every erased value a standard normal draw, the rest untouched; held to
    torch.randn's by a two-sample KS test, and mean and std to 4 standard
    errors."""
    img = smooth(48, 40, 21)
    spec = "normalize;" + ERASE + ",value=random)"
    kept = floats("normalize", img)
    values = []
    for index in range(40):
        p = plan(spec, img, index, format="f32")
        got = floats(spec, img, index=index)
        box = got[:, p["top"]:p["top"] + p["height"],
                  p["left"]:p["left"] + p["width"]]
        values.append(box.reshape(-1).clone())
        box[:] = kept[:, p["top"]:p["top"] + p["height"],
                      p["left"]:p["left"] + p["width"]]
        assert torch.equal(got, kept), "outside the box"
    v = torch.cat(values).numpy().astype(np.float64)
    n = len(v)
    assert n > 20000
    assert abs(v.mean()) < 4 / math.sqrt(n), v.mean()
    assert abs(v.std() - 1) < 4 * math.sqrt(0.5 / n), v.std()
    torch.manual_seed(3)
    ref = torch.randn(n).numpy()
    assert ks_statistic(v, ref) < ks_bound(n, n)
    # The layouts hold the same values at the same pixels.
    nhwc = floats(spec, img, layout="nhwc", index=7)
    assert torch.equal(nhwc, floats(spec, img, index=7))


def test_erasing_random_channel_is_one_normal_value_per_channel():
    """value=random_channel (timm's mode="rand")."""
    img = smooth(48, 40, 22)
    spec = "normalize;" + ERASE + ",value=random_channel)"
    firsts = []
    for index in range(300):
        p = plan(spec, img, index, format="f32")
        if p["height"] == 0 or p["width"] == 0:
            continue
        got = floats(spec, img, index=index)
        box = got[:, p["top"]:p["top"] + p["height"],
                  p["left"]:p["left"] + p["width"]]
        assert torch.equal(box, box[:, :1, :1].expand_as(box))
        firsts.append(box[:, 0, 0].numpy())
    v = np.concatenate(firsts).astype(np.float64)
    assert abs(v.mean()) < 4 / math.sqrt(len(v))
    assert abs(v.std() - 1) < 4 * math.sqrt(0.5 / len(v))


def test_erasing_refuses_u8():
    with pytest.raises(Exception, match="random_erasing: erases the "
                       "normalised sample"):
        pinload._plan("resize;random_erasing", 32, (32, 32))


# ---- the random parameters' distributions -----------------------------------

N = 10000


def theirs(transform, size, n=N, seed=17):
    """n draws of torchvision's make_params for an image of size (w, h)."""
    torch.manual_seed(seed)
    blank = [torch.empty(3, size[1], size[0])]
    make = getattr(transform, "make_params", None) or transform._get_params
    return [make(blank) for _ in range(n)]


def drawn(spec, size, n=N, seed=17, **kw):
    w, h = size
    return [pinload._plan("resize(%dx%d);%s" % (w, h, spec), (h, w), (w, h),
                          1, i, seed=seed, **kw)[-1][1] for i in range(n)]


def same_distribution(a, b, what):
    d, bound = ks_statistic(a, b), ks_bound(len(a), len(b))
    assert d < bound, (what, d, bound)


@pytest.mark.parametrize("degrees", [(-30.0, 30.0), (10.0, 170.0)])
def test_rotation_angle_draws_as_random_rotation(degrees):
    ours_ = [p["angle"] for p in drawn("rotate(%r:%r)" % degrees, (64, 48))]
    tv = [p["angle"] for p in theirs(T2.RandomRotation(degrees), (64, 48))]
    same_distribution(ours_, tv, "angle")
    assert min(ours_) >= degrees[0] and max(ours_) <= degrees[1]


@pytest.mark.parametrize("size", [(64, 48), (37, 91)])
def test_affine_draws_as_random_affine(size):
    spec = ("affine(degrees=-20:45,translate=0.25:0.1,scale=0.6:1.4,"
            "shear=-15:30,shear_y=5:10)")
    ours_ = drawn(spec, size)
    tv = theirs(T2.RandomAffine(degrees=(-20, 45), translate=(0.25, 0.1),
                                scale=(0.6, 1.4), shear=(-15, 30, 5, 10)),
                size)
    for what, a, b in [
        ("angle", [p["angle"] for p in ours_], [p["angle"] for p in tv]),
        ("tx", [p["translate_x"] for p in ours_],
         [p["translate"][0] for p in tv]),
        ("ty", [p["translate_y"] for p in ours_],
         [p["translate"][1] for p in tv]),
        ("scale", [p["scale"] for p in ours_], [p["scale"] for p in tv]),
        ("shear_x", [p["shear_x"] for p in ours_], [p["shear"][0] for p in tv]),
        ("shear_y", [p["shear_y"] for p in ours_], [p["shear"][1] for p in tv]),
    ]:
        same_distribution(a, b, what)
    # The translations are whole pixels within the bound, as there.
    assert max(abs(p["translate_x"]) for p in ours_) <= 0.25 * size[0] + 0.5
    # The test can fail: another scale range is told apart.
    other = theirs(T2.RandomAffine(0, scale=(0.65, 1.4)), size)
    assert ks_statistic([p["scale"] for p in ours_],
                        [p["scale"] for p in other]) > ks_bound(N, N)


def test_affine_single_numbers_are_symmetric_ranges():
    ours_ = drawn("affine(30,shear=10)", (64, 48), n=2000)
    tv = theirs(T2.RandomAffine(30, shear=10), (64, 48), n=2000)
    same_distribution([p["angle"] for p in ours_], [p["angle"] for p in tv],
                      "angle")
    same_distribution([p["shear_x"] for p in ours_],
                      [p["shear"][0] for p in tv], "shear")
    assert all(p["shear_y"] == 0 for p in ours_)


@pytest.mark.parametrize("scale,ratio,size", [
    ((0.02, 0.33), (0.3, 3.3), (64, 48)),
    ((0.1, 0.5), (0.5, 2.0), (37, 91)),
    ((0.6, 0.95), (0.3, 3.3), (40, 40)),  # most tries fail: the fallback
])
def test_erasing_draws_as_random_erasing(scale, ratio, size):
    spec = "random_erasing(p=1,scale=%r:%r,ratio=%r:%r)" % (scale + ratio)
    plans = drawn(spec, size, seed=5, format="f32")
    ours_ = np.array([[p["top"], p["left"], p["height"], p["width"]]
                      for p in plans], float)
    applied = np.array([p["apply"] for p in plans])
    tv = theirs(T2.RandomErasing(p=1, scale=scale, ratio=ratio), size)
    tvs = np.array([[p["i"], p["j"], p["h"], p["w"]] for p in tv], float)
    tv_applied = np.array([p["v"] is not None for p in tv])
    for k, what in enumerate(["top", "left", "height", "width"]):
        same_distribution(ours_[:, k], tvs[:, k], what)
    same_distribution(ours_[:, 2] * ours_[:, 3], tvs[:, 2] * tvs[:, 3], "area")
    # How often a try fits: the same proportion, within 4.5 standard
    # deviations of the difference.
    q = (applied.mean() + tv_applied.mean()) / 2
    assert abs(applied.mean() - tv_applied.mean()) <= 4.5 * math.sqrt(
        2 * q * (1 - q) / N), (applied.mean(), tv_applied.mean())
    assert (ours_[applied == 0] == [0, 0, size[1], size[0]]).all()
    if scale == (0.02, 0.33):
        # The test can fail: another scale range is told apart.
        other = theirs(T2.RandomErasing(p=1, scale=(0.02, 0.4), ratio=ratio),
                       size)
        assert ks_statistic(ours_[:, 2] * ours_[:, 3],
                            [p["h"] * p["w"] for p in other]) > ks_bound(N, N)


def test_erasing_probability_is_p():
    hits = sum(p["apply"] for p in drawn("erase(0.3)", (64, 48), seed=9,
                                          format="f32"))
    assert abs(hits - N * 0.3) < 4.5 * math.sqrt(N * 0.3 * 0.7), hits


def test_the_docs_examples_parse_and_draw():
    """docs/transforms.md's example of each op."""
    for spec, fmt, name, keys in [
        ("rotate(15,fill=0)", "u8", "rotate", {"angle"}),
        ("affine(degrees=10,translate=0.1:0.1,scale=0.9:1.1,shear=5)", "u8",
         "affine", {"angle", "translate_x", "translate_y", "scale",
                    "shear_x", "shear_y"}),
        ("normalize;erase(0.25,value=random)", "f32", "random_erasing",
         {"apply", "top", "left", "height", "width"}),
    ]:
        p = drawn(spec, (64, 48), n=1, format=fmt)[0]
        assert set(p) == keys, (spec, p)
        steps = pinload._plan("resize(64x48);" + spec, (48, 64), (64, 48),
                              format=fmt)
        assert steps[-1][0] == name
    with pytest.raises(pinload.InvalidArgument,
                       match="erase: value=rand: not a number, "
                       "R:G:B, random or random_channel"):
        pinload._plan("resize;erase(value=rand)", 32, (32, 32), format="f32")
