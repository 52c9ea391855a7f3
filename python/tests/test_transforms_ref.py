"""config.transform's ops against torchvision (issue 37): each op applied by
pinload to an image (pinload._apply: pl_transform_image, the workers' own
path from decoded pixels) beside torchvision.transforms.v2.functional on
the same image with the same parameters, the ones pinload drew
(pinload._plan: pl_transform_params), the largest pixel difference stated
per op and asserted; and the random parameters' distributions against
torchvision's own samplers, by a two-sample Kolmogorov-Smirnov test (in
NumPy; fixed seeds: the test is deterministic). docs/transforms.md quotes
the bounds. Skipped without torchvision."""
import math

import numpy as np
import pytest

import pinload

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
import torchvision.transforms as T  # noqa: E402
import torchvision.transforms.v2.functional as F  # noqa: E402
from torchvision.transforms import InterpolationMode as IM  # noqa: E402

MODES = {"bilinear": IM.BILINEAR, "bicubic": IM.BICUBIC,
         "nearest": IM.NEAREST, "nearest_exact": IM.NEAREST_EXACT}


def smooth(w, h, seed):
    """A photograph's kind of image: smooth shapes and a little grain."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    chans = []
    for _ in range(3):
        a = rng.uniform(3, 20, 4)
        ph = rng.uniform(0, 6, 4)
        v = (128 + 50 * np.sin(x / a[0] + ph[0]) * np.cos(y / a[1] + ph[1])
             + 40 * np.sin((x + y) / a[2] + ph[2])
             + 20 * np.cos((x - y) / a[3] + ph[3]))
        chans.append(v + rng.normal(0, 6, v.shape))
    return np.clip(np.stack(chans, -1).round(), 0, 255).astype(np.uint8)


def noise(w, h, seed):
    """The worst case for a filter: every pixel independent."""
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3),
                                                dtype=np.uint8)


IMAGES = [("smooth", smooth(211, 157, 0)), ("smooth", smooth(64, 97, 1)),
          ("noise", noise(131, 97, 2))]
SIZES = [(224, 224), (37, 51), (90, 60)]  # (width, height): both ways


def chw(img):
    return torch.from_numpy(img.copy()).permute(2, 0, 1).contiguous()


def hwc(t):
    return t.permute(1, 2, 0).numpy().astype(np.int64)


def ours(spec, img, w, h, **kw):
    out = pinload._apply(spec, img, (h, w), **kw)
    return np.frombuffer(out, np.uint8).reshape(h, w, 3).astype(np.int64)


def worst(a, b):
    return int(np.abs(a - b).max())


# ---- resize: every filter ----------------------------------------------

# The bound per filter against torchvision on the uint8 tensor, for the
# smooth images and for noise. torchvision's uint8 bicubic kernels round
# and clip between their two passes (horizontal, then vertical); pinload's
# keep the first pass in fixed point, so on noise, where the kernel's
# overshoot is clipped, they part by more. Against torchvision on the
# float image, rounded once at the end, every filter is within 1.
BOUND = {("bilinear", True): (1, 1), ("bilinear", False): (1, 1),
         ("bicubic", True): (1, 30), ("bicubic", False): (1, 40),
         ("nearest", True): (0, 0), ("nearest_exact", True): (0, 0)}


@pytest.mark.parametrize("mode,antialias", sorted(BOUND))
def test_resize_matches_torchvision(mode, antialias):
    for kind, img in IMAGES:
        t = chw(img)
        for w, h in SIZES:
            spec = "resize(%dx%d,interpolation=%s,antialias=%s)" % (
                w, h, mode, str(antialias).lower())
            a = ours(spec, img, w, h)
            b = hwc(F.resize(t, [h, w], interpolation=MODES[mode],
                             antialias=antialias))
            bound = BOUND[mode, antialias][kind == "noise"]
            assert worst(a, b) <= bound, (spec, kind, worst(a, b))
            if mode in ("bilinear", "bicubic"):
                exact = F.resize(t.float(), [h, w], interpolation=MODES[mode],
                                 antialias=antialias)
                exact = hwc(exact.round().clamp(0, 255))
                assert worst(a, exact) <= 1, (spec, kind, "float")


def test_area_matches_pytorchs_area():
    for kind, img in IMAGES:
        t = chw(img)[None].float()
        for w, h in SIZES:
            a = ours("resize(%dx%d,interpolation=area)" % (w, h), img, w, h)
            b = torch.nn.functional.interpolate(t, size=(h, w), mode="area")
            assert worst(a, hwc(b[0].round())) <= 1, (kind, w, h)


def test_resize_shorter_side_and_max_size():
    img = smooth(211, 157, 3)
    for spec, size, max_size in [("resize(100);center_crop(90x60)", 100,
                                  None),
                                 ("resize(60,max_size=70);center_crop(90x60)",
                                  60, 70)]:
        a = ours(spec, img, 90, 60)
        r = F.resize(chw(img), size, max_size=max_size, antialias=True)
        b = hwc(F.center_crop(r, [60, 90]))
        assert worst(a, b) <= 1, spec
        (_, got), _ = pinload._plan(spec, (60, 90), (211, 157))
        assert [got["height"], got["width"]] == list(r.shape[1:]), spec


# ---- the crops -----------------------------------------------------------

@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_random_resized_crop_matches_resized_crop(mode):
    for kind, img in IMAGES:
        h0, w0 = img.shape[:2]
        spec = "rrc(48x40,scale=0.2:1,ratio=1/2:2,interpolation=%s)" % mode
        for index in range(6):
            (name, p), = pinload._plan(spec, (40, 48), (w0, h0), 0, index)
            assert name == "random_resized_crop"
            a = ours(spec, img, 48, 40, index=index)
            b = hwc(F.resized_crop(chw(img), p["top"], p["left"],
                                   p["height"], p["width"], [40, 48],
                                   interpolation=MODES[mode], antialias=True))
            bound = BOUND[mode, True][kind == "noise"]
            assert worst(a, b) <= bound, (kind, index, p)


def test_center_crop_pads_and_crops_as_torchvision():
    for _, img in IMAGES:
        for w, h in [(50, 40), (300, 20), (17, 400), (211, 157)]:
            a = ours("center_crop(%dx%d)" % (w, h), img, w, h)
            b = hwc(F.center_crop(chw(img), [h, w]))
            assert worst(a, b) == 0, (w, h)


def test_center_crop_pct_is_timms_eval_crop():
    for kind, img in IMAGES:
        h0, w0 = img.shape[:2]
        spec = "center_crop(56x48,crop_pct=0.875)"
        (_, p), = pinload._plan(spec, (48, 56), (w0, h0))
        # timm: the shorter side to floor(max(56, 48) / 0.875) = 64.
        r = F.resize(chw(img), 64, antialias=True)
        assert [p["resize_height"], p["resize_width"]] == list(r.shape[1:])
        b = hwc(F.center_crop(r, [48, 56]))
        assert worst(ours(spec, img, 56, 48), b) <= 1, kind


def test_flips_and_crops_of_flipped_images():
    img = IMAGES[0][1]
    h0, w0 = img.shape[:2]
    spec = "hflip(1);vflip(1);rrc(64x48,scale=0.3:0.6);hflip(0.5)"
    for index in range(8):
        plan = pinload._plan(spec, (48, 64), (w0, h0), 0, index)
        x = chw(img)
        for name, p in plan:
            if name == "hflip" and p["flip"]:
                x = F.horizontal_flip(x)
            elif name == "vflip" and p["flip"]:
                x = F.vertical_flip(x)
            elif name == "random_resized_crop":
                x = F.resized_crop(x, p["top"], p["left"], p["height"],
                                   p["width"], [48, 64], antialias=True)
        assert worst(ours(spec, img, 64, 48, index=index), hwc(x)) <= 1


# ---- pixels and floats -------------------------------------------------

def test_grayscale_is_rgb_to_grayscale_exactly():
    for _, img in IMAGES:
        h, w = img.shape[:2]
        a = ours("resize(%dx%d);grayscale" % (w, h), img, w, h)
        b = hwc(F.rgb_to_grayscale(chw(img), num_output_channels=3))
        assert worst(a, b) == 0
        assert worst(ours("resize(%dx%d);grayscale(0)" % (w, h), img, w, h),
                     img.astype(np.int64)) == 0


def test_normalize_is_to_dtype_then_normalize():
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    for _, img in IMAGES:
        h, w = img.shape[:2]
        spec = "resize(%dx%d);normalize(mean=%s,std=%s)" % (
            w, h, ":".join(map(str, mean)), ":".join(map(str, std)))
        out = pinload._apply(spec, img, (h, w), format="f32")
        a = np.frombuffer(out, np.float32).reshape(3, h, w)
        b = F.normalize(F.to_dtype(chw(img), torch.float32, scale=True),
                        list(mean), list(std)).numpy()
        # One float32 rounding apart at most: pinload's table divides by
        # 255 where torchvision may multiply by its inverse.
        assert np.abs(a - b).max() <= 1e-6


# ---- the random parameters' distributions ------------------------------

def ks_statistic(a, b):
    """The two-sample Kolmogorov-Smirnov statistic: the largest distance
    between the two empirical distribution functions."""
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    grid = np.concatenate([a, b])
    fa = np.searchsorted(a, grid, side="right") / len(a)
    fb = np.searchsorted(b, grid, side="right") / len(b)
    return float(np.abs(fa - fb).max())


def ks_bound(n, m, alpha=1e-3):
    """The statistic's critical value at level alpha (asymptotic, and
    conservative for discrete values): two samples of one distribution
    exceed it with probability alpha at most."""
    return math.sqrt(-math.log(alpha / 2) / 2) * math.sqrt((n + m) / (n * m))


N = 10000


def rrc_ours(spec, image, epoch=1, seed=11):
    """(top, left, height, width) of N samples, as the loader draws them."""
    return np.array([[p["top"], p["left"], p["height"], p["width"]]
                     for (_, p), in (pinload._plan(spec, 64, image, epoch, i,
                                                   seed=seed)
                                     for i in range(N))])


def rrc_theirs(scale, ratio, image, seed=11):
    """The same from RandomResizedCrop.get_params."""
    torch.manual_seed(seed)
    blank = torch.empty(3, image[1], image[0])
    return np.array([T.RandomResizedCrop.get_params(blank, list(scale),
                                                    list(ratio))
                     for _ in range(N)])


@pytest.mark.parametrize("scale,ratio,image", [
    ((0.08, 1.0), (3 / 4, 4 / 3), (640, 480)),
    ((0.3, 0.9), (0.5, 2.0), (300, 500)),
    ((0.5, 2.0), (3 / 4, 4 / 3), (120, 100)),  # retries, then the fallback
])
def test_random_resized_crop_draws_as_get_params(scale, ratio, image):
    spec = "rrc(64,scale=%r:%r,ratio=%r:%r)" % (scale + ratio)
    w0, h0 = image
    ours_, theirs = rrc_ours(spec, image), rrc_theirs(scale, ratio, image)
    bound = ks_bound(N, N)
    for k, what in enumerate(["top", "left", "height", "width"]):
        d = ks_statistic(ours_[:, k], theirs[:, k])
        assert d < bound, (what, d, bound)
    for what, f in [("area", lambda c: c[:, 2] * c[:, 3]),
                    ("aspect", lambda c: c[:, 3] / c[:, 2])]:
        d = ks_statistic(f(ours_), f(theirs))
        assert d < bound, (what, d, bound)
    assert (ours_[:, 0] + ours_[:, 2] <= h0).all()
    assert (ours_[:, 1] + ours_[:, 3] <= w0).all()
    if image == (640, 480):
        # The test can fail: another ratio range is told apart.
        other = rrc_theirs(scale, (0.7, 1.4), image)
        assert ks_statistic(ours_[:, 3] / ours_[:, 2],
                            other[:, 3] / other[:, 2]) > bound


def test_the_train_preset_draws_as_get_params():
    ours_ = np.array([[p["height"], p["width"]] for (_, p), _ in
                      (pinload._plan(None, 224, (500, 375), 0, i)
                       for i in range(N))])
    theirs = rrc_theirs((0.08, 1.0), (3 / 4, 4 / 3), (500, 375), seed=0)
    for k in range(2):
        assert ks_statistic(ours_[:, k], theirs[:, 2 + k]) < ks_bound(N, N)


@pytest.mark.parametrize("spec,p", [("hflip(0.3)", 0.3), ("vflip(0.5)", 0.5),
                                    ("grayscale(0.1)", 0.1)])
def test_each_probability_is_p(spec, p):
    """Drawn as torch.rand(1) < p: the count is binomial(N, p); within
    4.5 standard deviations (deterministic here: the seed is fixed)."""
    full = "resize;" + spec
    hits = sum(list(pinload._plan(full, 32, (40, 30), 2, i, seed=5)[1][1]
                    .values())[0] for i in range(N))
    assert abs(hits - N * p) < 4.5 * math.sqrt(N * p * (1 - p)), hits


def test_ops_draw_from_their_own_streams():
    """The flip does not depend on how many numbers the crop before it
    drew (ten retries or one)."""
    a = [pinload._plan("rrc(scale=4:8);hflip", 32, (64, 48), 0, i)[1][1]
         for i in range(200)]
    b = [pinload._plan("rrc(scale=0.1:0.2);hflip", 32, (64, 48), 0, i)[1][1]
         for i in range(200)]
    assert a == b
