"""torchvision.transforms.v2 pipelines as pinload transform specs.

`spec_of(v2.Compose([...]))` writes the pipeline as the spec the C library
parses (docs/transforms.md), one op per transform, every parameter the
transform holds written out; a transform pinload does not run is refused
by name with what to use instead. pinload.torch.Loader(transform=...)
calls it. torchvision is imported only by the caller: this module reads
the transforms' attributes and class names, so that pinload itself does
not depend on torchvision.

Why no per-sample Python: pinload's workers are C threads that never take
the GIL. A Python callable per sample would serialise them on it, and its
randomness would be Python's, not the sample's own stream, so a resumed
or re-sharded run would not see the same images. What the ops lack is a
new op (workers/ops/op.h says how), or Python on the whole batch on the
device, after the loader.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

__all__ = ["spec_of", "Translation"]


class Translation:
    """What a v2 pipeline becomes: the spec, the output format its ToDtype
    asks for (None: uint8, pinload's "u8"), and the output size its last
    crop or resize fixes ((height, width), or None where it does not say:
    a Resize of the shorter side)."""

    def __init__(self, spec: str, format: Optional[str],
                 size: Optional[Tuple[int, int]]) -> None:
        self.spec = spec
        self.format = format
        self.size = size

    def __repr__(self) -> str:
        return "Translation(spec=%r, format=%r, size=%r)" % (
            self.spec, self.format, self.size)


class _Refused(ValueError):
    pass


def _refuse(t: Any, why: str) -> _Refused:
    return _Refused("transform: %s: %s" % (type(t).__name__, why))


def _num(x: Any) -> str:
    """A number as the spec reads it back exactly (repr: the shortest
    decimal of the double)."""
    x = float(x)
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def _range(pair: Sequence[Any]) -> str:
    lo, hi = float(pair[0]), float(pair[1])
    return "%s:%s" % (_num(lo), _num(hi))


_MODES = {"nearest": "nearest", "nearest-exact": "nearest_exact",
          "bilinear": "bilinear", "bicubic": "bicubic"}


def _interp(t: Any, mode: Any, allowed: Sequence[str]) -> str:
    """An InterpolationMode, its string, or Pillow's int, as the spec's
    word."""
    value = getattr(mode, "value", mode)
    if isinstance(value, int):
        value = {0: "nearest", 2: "bilinear", 3: "bicubic"}.get(value, value)
    word = _MODES.get(str(value))
    if word is None or word not in allowed:
        raise _refuse(t, "interpolation=%s: pinload has %s here" % (
            value, ", ".join(allowed)))
    return word


def _size_hw(size: Any) -> Tuple[int, int]:
    """torchvision's size (an int, [s], or [h, w]) as (height, width)."""
    if isinstance(size, int):
        return size, size
    size = list(size)
    return (size[0], size[0]) if len(size) == 1 else (size[0], size[1])


def _wxh(hw: Tuple[int, int], crop: bool = True) -> str:
    """W x H as a spec writes a size: S alone for a crop's square (a
    resize's S alone is its shorter side, so it keeps WxH)."""
    if crop and hw[0] == hw[1]:
        return "%d" % hw[0]
    return "%dx%d" % (hw[1], hw[0])


def _fill(t: Any, fill: Any, none_ok: bool) -> Optional[str]:
    """A transform's fill as R:G:B; None for torchvision's fill=None where
    the op takes it (none_ok), else refused."""
    if isinstance(fill, dict):
        picked = None
        for key, value in fill.items():
            name = getattr(key, "__name__", str(key))
            if name in ("Image", "Tensor", "torch.Tensor", "others"):
                picked = value
                break
        fill = picked if picked is not None else next(iter(fill.values()))
    if fill is None:
        if none_ok:
            return None
        raise _refuse(t, "fill=None (no fill blended in at the edges): "
                         "pinload's warps here fill with a colour; give one "
                         "(fill=0 is torchvision's default)")
    if isinstance(fill, (int, float)):
        return "%s:%s:%s" % ((_num(fill),) * 3)
    values = [float(v) for v in fill]
    if len(values) == 1:
        values *= 3
    if len(values) != 3:
        raise _refuse(t, "fill=%r: pinload takes one value or R, G, B"
                      % (fill,))
    return ":".join(_num(v) for v in values)


def _p(t: Any) -> str:
    return _num(getattr(t, "p", 1.0))


def _flatten(t: Any, out: List[Any]) -> None:
    name = type(t).__name__
    if name == "Compose":
        for inner in t.transforms:
            _flatten(inner, out)
    elif isinstance(t, (list, tuple)):
        for inner in t:
            _flatten(inner, out)
    else:
        out.append(t)


# Transforms that change nothing pinload delivers: its input is the
# decoded RGB image, and its output tensor is made by the format.
_NO_OPS = {"ToImage", "PILToTensor", "ToPureTensor", "Identity",
           "ConvertImageDtype"}

# What to use instead, for what pinload does not run per sample.
_INSTEAD = {
    "Lambda": "per-sample Python does not run on pinload's C workers "
              "(pinload._v2 says why); run it on the batch after the "
              "loader, or use an op of docs/transforms.md",
    "RandomApply": "pinload applies one op with a probability, not several "
                   "under one coin: give each its own p (RandomApply of one "
                   "ColorJitter, GaussianBlur, or op with a p translates)",
    "RandomChoice": "pick one op",
    "RandomOrder": "list the ops in one order",
    "MixUp": "a batch op: pass it as batch_transform= (pinload's mixup "
             "op), not in transform=",
    "CutMix": "a batch op: pass it as batch_transform= (pinload's mixup "
              "op), not in transform=",
    "AugMix": "nearest: auto_augment, rand_augment or trivial_augment_wide",
    "RandomCrop": "nearest: center_crop after resize, or "
                  "random_resized_crop",
    "Pad": "nearest: center_crop larger than the image pads with zeros",
    "ElasticTransform": "not in pinload's ops",
    "RandomPerspective": "nearest: affine",
    "RandomZoomOut": "nearest: affine with scale below 1",
    "RandomIoUCrop": "detection crops are not in pinload's ops",
    "RandomAdjustSharpness": "nearest: the policies' Sharpness "
                             "(rand_augment)",
    "RandomInvert": "nearest: solarize(threshold=0) inverts every value",
    "RandomChannelPermutation": "not in pinload's ops",
    "RandomPhotometricDistort": "nearest: color_jitter",
    "FiveCrop": "one crop per sample: center_crop",
    "TenCrop": "one crop per sample: center_crop",
}

_FLOATS = {"torch.float32": "f32", "torch.float16": "f16",
           "torch.bfloat16": "bf16", "torch.float": "f32",
           "torch.half": "f16"}


def _dtype_format(t: Any) -> str:
    dtype = t.dtype
    if isinstance(dtype, dict):
        for key, value in dtype.items():
            if getattr(key, "__name__", str(key)) in ("Image", "Tensor",
                                                      "others"):
                dtype = value
                break
        else:
            dtype = next(iter(dtype.values()))
    name = str(dtype)
    if name == "torch.uint8":
        return "u8"
    fmt = _FLOATS.get(name)
    if fmt is None:
        raise _refuse(t, "dtype=%s: pinload delivers uint8, float32, "
                         "float16 or bfloat16" % name)
    if not getattr(t, "scale", False):
        raise _refuse(t, "scale=False: pinload's floats are the image "
                         "scaled to [0, 1] (then normalised): "
                         "ToDtype(%s, scale=True)" % name)
    return fmt


def _color_jitter(t: Any, p: Optional[float] = None) -> str:
    parts = []
    for key, ident in (("brightness", (1.0, 1.0)), ("contrast", (1.0, 1.0)),
                       ("saturation", (1.0, 1.0)), ("hue", (0.0, 0.0))):
        value = getattr(t, key)
        parts.append("%s=%s" % (key, _range(value if value is not None
                                            else ident)))
    if p is not None:
        parts.append("p=%s" % _num(p))
    return "color_jitter(%s)" % ",".join(parts)


def _gaussian_blur(t: Any, p: Optional[float] = None) -> str:
    k = list(t.kernel_size)
    sigma = list(t.sigma)
    return "gaussian_blur(%s,sigma=%s%s)" % (
        "%dx%d" % (k[0], k[1]) if k[0] != k[1] else "%d" % k[0],
        _range(sigma if len(sigma) == 2 else sigma * 2),
        ",p=%s" % _num(p) if p is not None else "")


# Ops with a p of their own: RandomApply's multiplies it (one coin of
# p1 * p2: the same in distribution).
_WITH_P = {"RandomHorizontalFlip": "hflip(%s)",
           "RandomVerticalFlip": "vflip(%s)",
           "RandomGrayscale": "grayscale(%s)",
           "RandomEqualize": "equalize(%s)",
           "RandomAutocontrast": "autocontrast(%s)"}


def _random_apply(t: Any) -> str:
    """RandomApply([one op], p) as that op with the probability."""
    inner: List[Any] = []
    _flatten(list(t.transforms), inner)
    if len(inner) != 1:
        raise _refuse(t, _INSTEAD["RandomApply"] + " (here %d ops)"
                      % len(inner))
    op, p = inner[0], float(t.p)
    name = type(op).__name__
    if name == "ColorJitter":
        return _color_jitter(op, p)
    if name == "GaussianBlur":
        return _gaussian_blur(op, p)
    if name in _WITH_P:
        return _WITH_P[name] % _num(float(op.p) * p)
    if name == "RandomSolarize":
        return "solarize(%s,p=%s)" % (_num(op.threshold), _num(op.p * p))
    if name == "RandomPosterize":
        return "posterize(%d,p=%s)" % (op.bits, _num(op.p * p))
    raise _refuse(t, "of %s: pinload has no probability for it" % name)


def _op_names(spec: str) -> List[str]:
    return [part.strip().partition("(")[0] for part in spec.split(";")]


def _resizes(spec: str) -> bool:
    """Whether the spec has an op that sets the image's size."""
    return any(n in ("random_resized_crop", "rrc", "resize", "center_crop")
               for n in _op_names(spec))


def spec_of(transform: Any) -> Translation:
    """The pinload spec of a torchvision.transforms.v2 pipeline (a
    Compose, a list, or one transform). ValueError names the first
    transform pinload does not run and what to use instead."""
    items: List[Any] = []
    _flatten(transform, items)
    ops: List[str] = []
    fmt: Optional[str] = None
    size: Optional[Tuple[int, int]] = None
    normalized = False
    from pinload.ops import Op
    for t in items:
        name = type(t).__name__
        if isinstance(t, Op):  # pinload's own, as its spec says
            ops.append(t.spec)
            if t.size is not None or _resizes(t.spec):
                size = t.size
            if any(n in ("normalize", "random_erasing", "erase")
                   for n in _op_names(t.spec)):
                normalized = True
            continue
        if name in _NO_OPS:
            continue
        if name == "RandomApply":
            ops.append(_random_apply(t))
            continue
        if name == "ToTensor":  # v1's, in a v2 pipeline: ToImage + scale
            fmt = "f32"
            continue
        if name == "ToDtype":
            fmt = _dtype_format(t)
            continue
        if name == "RandomResizedCrop":
            size = _size_hw(t.size)
            ops.append("random_resized_crop(%s,scale=%s,ratio=%s,"
                       "interpolation=%s,antialias=%s)" % (
                           _wxh(size), _range(t.scale), _range(t.ratio),
                           _interp(t, t.interpolation, list(_MODES.values())),
                           "true" if t.antialias in (True, None) else "false"))
        elif name == "Resize":
            if t.size is None:
                raise _refuse(t, "size=None (max_size alone): give a size")
            mode = _interp(t, t.interpolation, list(_MODES.values()))
            aa = "true" if t.antialias in (True, None) else "false"
            extra = (",max_size=%d" % t.max_size) if t.max_size else ""
            if isinstance(t.size, int) or len(t.size) == 1:
                s = t.size if isinstance(t.size, int) else t.size[0]
                ops.append("resize(%d,interpolation=%s,antialias=%s%s)"
                           % (s, mode, aa, extra))
                size = None
            else:
                size = _size_hw(t.size)
                ops.append("resize(%s,interpolation=%s,antialias=%s%s)"
                           % (_wxh(size, crop=False), mode, aa, extra))
        elif name == "CenterCrop":
            size = _size_hw(t.size)
            ops.append("center_crop(%s)" % _wxh(size))
        elif name == "RandomHorizontalFlip":
            ops.append("hflip(%s)" % _p(t))
        elif name == "RandomVerticalFlip":
            ops.append("vflip(%s)" % _p(t))
        elif name == "RandomGrayscale":
            ops.append("grayscale(%s)" % _p(t))
        elif name == "Grayscale":
            if t.num_output_channels != 3:
                raise _refuse(t, "num_output_channels=%d: pinload's images "
                                 "are RGB (num_output_channels=3 makes the "
                                 "three channels gray)"
                              % t.num_output_channels)
            ops.append("grayscale(1)")
        elif name == "ColorJitter":
            ops.append(_color_jitter(t))
        elif name == "GaussianBlur":
            ops.append(_gaussian_blur(t))
        elif name == "RandomSolarize":
            ops.append("solarize(%s,p=%s)" % (_num(t.threshold), _p(t)))
        elif name == "RandomPosterize":
            ops.append("posterize(%d,p=%s)" % (t.bits, _p(t)))
        elif name == "RandomEqualize":
            ops.append("equalize(%s)" % _p(t))
        elif name == "RandomAutocontrast":
            ops.append("autocontrast(%s)" % _p(t))
        elif name == "RandomRotation":
            if t.expand:
                raise _refuse(t, "expand=True: pinload keeps the image's "
                                 "size (expand=False)")
            mode = _interp(t, t.interpolation, ["nearest", "bilinear"])
            fill = _fill(t, t.fill, none_ok=mode == "nearest")
            ops.append("rotate(degrees=%s,interpolation=%s,fill=%s%s)" % (
                _range(t.degrees), mode, fill or "0",
                ",center=%s:%s" % (_num(t.center[0]), _num(t.center[1]))
                if t.center is not None else ""))
        elif name == "RandomAffine":
            mode = _interp(t, t.interpolation, ["nearest", "bilinear"])
            fill = _fill(t, t.fill, none_ok=mode == "nearest")
            shear = list(t.shear) if t.shear is not None else [0.0, 0.0]
            if len(shear) == 2:
                shear += [0.0, 0.0]
            ops.append("affine(degrees=%s,translate=%s,scale=%s,shear=%s,"
                       "shear_y=%s,interpolation=%s,fill=%s%s)" % (
                           _range(t.degrees),
                           _range(t.translate) if t.translate is not None
                           else "0:0",
                           _range(t.scale) if t.scale is not None else "1:1",
                           _range(shear[:2]), _range(shear[2:]), mode,
                           fill or "0",
                           ",center=%s:%s" % (_num(t.center[0]),
                                              _num(t.center[1]))
                           if t.center is not None else ""))
        elif name in ("RandAugment", "TrivialAugmentWide", "AutoAugment"):
            mode = _interp(t, t.interpolation, ["nearest", "bilinear"])
            fill = _fill(t, t.fill, none_ok=True)
            tail = ",interpolation=%s%s" % (mode, ",fill=" + fill if fill
                                             else "")
            if name == "RandAugment":
                ops.append("rand_augment(num_ops=%d,magnitude=%d,"
                           "num_magnitude_bins=%d%s)" % (
                               t.num_ops, t.magnitude, t.num_magnitude_bins,
                               tail))
            elif name == "TrivialAugmentWide":
                ops.append("trivial_augment_wide(num_magnitude_bins=%d%s)"
                           % (t.num_magnitude_bins, tail))
            else:
                policy = str(getattr(t.policy, "value", t.policy)).lower()
                ops.append("auto_augment(policy=%s%s)" % (policy, tail))
        elif name == "Normalize":
            if fmt in (None, "u8"):
                raise _refuse(t, "before ToDtype(torch.float32, scale=True): "
                                 "torchvision normalises floats, and so "
                                 "does pinload (format f32, f16 or bf16)")
            if len(t.mean) not in (1, 3) or len(t.std) not in (1, 3):
                raise _refuse(t, "pinload's images have 3 channels")
            mean = [float(v) for v in t.mean] * (3 // len(t.mean))
            std = [float(v) for v in t.std] * (3 // len(t.std))
            ops.append("normalize(mean=%s,std=%s)" % (
                ":".join(_num(v) for v in mean),
                ":".join(_num(v) for v in std)))
            normalized = True
        elif name == "RandomErasing":
            if fmt in (None, "u8"):
                raise _refuse(t, "on uint8 images: pinload erases the "
                                 "normalised sample, as timm does (put it "
                                 "after ToDtype and Normalize)")
            if not normalized:
                ops.append("normalize(mean=0:0:0,std=1:1:1)")
                normalized = True
            value = t.value
            if value is None:
                text = "random"
            else:
                vals = [float(v) for v in value]
                text = ":".join(_num(v) for v in (vals * 3 if len(vals) == 1
                                                  else vals))
            ops.append("random_erasing(p=%s,scale=%s,ratio=%s,value=%s)" % (
                _p(t), _range(t.scale), _range(t.ratio), text))
        elif name in _INSTEAD:
            raise _refuse(t, _INSTEAD[name])
        else:
            raise _refuse(t, "not one pinload runs per sample (its ops: "
                             "docs/transforms.md)")
    if fmt not in (None, "u8") and not normalized:
        # ToDtype(scale=True) alone: values in [0, 1], no normalising.
        ops.append("normalize(mean=0:0:0,std=1:1:1)")
    if not ops:
        raise _Refused("transform: no op pinload runs (an empty pipeline: "
                       "leave transform=None for augment='none')")
    if not any(_resizes(o) for o in ops):
        raise _Refused("transform: no RandomResizedCrop, Resize or "
                       "CenterCrop: pinload's batches are one size, so the "
                       "pipeline must end the images at it")
    return Translation(";".join(ops), fmt, size)


def _batch_one(t: Any) -> Tuple[float, float]:
    """(mixup_alpha, cutmix_alpha) of a v2 MixUp or CutMix."""
    name = type(t).__name__
    if name == "MixUp":
        return float(t.alpha), 0.0
    if name == "CutMix":
        return 0.0, float(t.alpha)
    raise _refuse(t, "batch_transform= translates MixUp, CutMix, "
                     "RandomChoice of them, and timm's Mixup; another "
                     "callable runs on the batch as given")


def batch_op_of(t: Any) -> Optional[str]:
    """The mixup op (docs/transforms.md) a batch transform translates to:
    torchvision v2's MixUp, CutMix and RandomChoice([MixUp, CutMix]) (no
    label smoothing, every batch mixed, as torchvision's; pinload pairs
    each sample with its mirror in the batch, as timm does, where
    torchvision rolls the batch by one: the same lambdas and labels, in
    distribution), or timm.data.Mixup in mode "batch" (its parameters
    exactly). None: not one of them (the caller runs it on the batch)."""
    from pinload.ops import Mixup
    if isinstance(t, Mixup):  # pinload's own
        return t.spec
    name = type(t).__name__
    num = getattr(t, "num_classes", None)
    tail = ",num_classes=%d" % num if num else ""
    if name in ("MixUp", "CutMix"):
        ma, ca = _batch_one(t)
        return "mixup(mixup_alpha=%s,cutmix_alpha=%s,label_smoothing=0%s)" % (
            _num(ma), _num(ca), tail)
    if name == "RandomChoice":
        kinds = [type(x).__name__ for x in t.transforms]
        if sorted(kinds) != ["CutMix", "MixUp"]:
            raise _refuse(t, "of %s: pinload's batch op chooses between one "
                             "MixUp and one CutMix" % ", ".join(kinds))
        alphas = dict(zip(kinds, (_batch_one(x) for x in t.transforms)))
        ps = list(t.p) if t.p is not None else [1.0, 1.0]
        p_cut = ps[kinds.index("CutMix")] / float(sum(ps))
        nums = {getattr(x, "num_classes", None) for x in t.transforms}
        num = next(iter(nums)) if len(nums) == 1 else None
        tail = ",num_classes=%d" % num if num else ""
        return ("mixup(mixup_alpha=%s,cutmix_alpha=%s,switch_prob=%s,"
                "label_smoothing=0%s)" % (
                    _num(alphas["MixUp"][0]), _num(alphas["CutMix"][1]),
                    _num(p_cut), tail))
    if name == "Mixup" and hasattr(t, "mixup_alpha"):  # timm's
        if getattr(t, "mode", "batch") != "batch":
            raise _refuse(t, "mode=%r: pinload mixes whole batches (mode "
                             "'batch')" % t.mode)
        if getattr(t, "multi_label", False):
            raise _refuse(t, "multi_label=True: pinload's labels are one "
                             "class a sample")
        mm = ("cutmix_minmax=%s," % _range(t.cutmix_minmax)
              if t.cutmix_minmax is not None else "")
        return ("mixup(mixup_alpha=%s,cutmix_alpha=%s,%sprob=%s,"
                "switch_prob=%s,label_smoothing=%s,correct_lam=%s,"
                "num_classes=%d)" % (
                    _num(t.mixup_alpha), _num(t.cutmix_alpha), mm,
                    _num(t.mix_prob), _num(t.switch_prob),
                    _num(t.label_smoothing),
                    "true" if t.correct_lam else "false", t.num_classes))
    return None

