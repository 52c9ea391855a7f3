"""pinload's ops in a torchvision v2 pipeline, for what torchvision lacks.

A pipeline given to pinload.torch.Loader(transform=v2.Compose([...])) is
translated op by op (pinload.torch.spec_of); these stand in it where
torchvision has no transform for what pinload runs:

    Op("resize(256,interpolation=area)")   any op of docs/transforms.md,
                                           by its spec
    CenterCropPct(224, crop_pct=0.875)     timm's eval crop: the shorter
                                           side to 224 / 0.875, then the
                                           centre 224 x 224
    Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, ..., num_classes=1000)
                                           timm's Mixup (switch_prob,
                                           cutmix_minmax, label
                                           smoothing) for batch_transform=,
                                           without timm installed

Each is checked when it is made: a bad parameter is a ValueError naming
the op and the parameter, as the loader would say it. They run in
pinload's C workers (or, for Mixup, on each batch in the loader), never
in Python: torchvision cannot call them, and calling one says so.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

import pinload

__all__ = ["Op", "CenterCropPct", "Mixup"]

Size = Union[int, Sequence[int]]


def _hw(size: Size) -> Tuple[int, int]:
    """(height, width) of an int or a (height, width) pair, as
    torchvision's transforms take a size."""
    if isinstance(size, bool):
        raise ValueError("size: expected an int or (height, width), got "
                         "%r" % (size,))
    if isinstance(size, int):
        return size, size
    hw = tuple(size)
    if len(hw) == 1:
        return int(hw[0]), int(hw[0])
    if len(hw) != 2:
        raise ValueError("size: expected an int or (height, width), got "
                         "%r" % (size,))
    return int(hw[0]), int(hw[1])


def _num(x: float) -> str:
    x = float(x)
    return str(int(x)) if x == int(x) and abs(x) < 1e15 else repr(x)


class Op:
    """One or more ops of docs/transforms.md by their spec ("hflip(0.3)",
    "resize(256,interpolation=area);center_crop(224)"), to stand in a v2
    pipeline given to pinload. `size`, (height, width) or an int, is the
    output size the spec ends the image at, where it ends with a crop or
    resize to a size (found from the spec when not given; None where it
    leaves the size to a later op)."""

    def __init__(self, spec: str, size: Optional[Size] = None) -> None:
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError("pinload.ops.Op: expected a spec such as "
                             "\"hflip(0.5)\", got %r" % (spec,))
        self.spec = spec.strip()
        self.size: Optional[Tuple[int, int]] = (
            _hw(size) if size is not None else _ends_at(self.spec))
        _check(type(self).__name__, self.spec, self.size)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "pinload.ops.%s runs in pinload's C workers, not in Python: "
            "give the pipeline to pinload.torch.Loader(transform=...)"
            % type(self).__name__)

    def __repr__(self) -> str:
        return "pinload.ops.Op(%r)" % self.spec


def _ends_at(spec: str) -> Optional[Tuple[int, int]]:
    """The size the last crop or resize of `spec` gives, when it names
    one (WxH, or S for a crop: S x S); None otherwise."""
    size = None
    for part in spec.split(";"):
        name, _, inner = part.strip().partition("(")
        if name not in ("random_resized_crop", "rrc", "center_crop", "resize"):
            continue
        first = inner.rstrip(")").split(",")[0].strip()
        if "=" in first or not first:
            continue
        w, x, h = first.partition("x")
        try:
            if x:
                size = (int(h), int(w))
            elif name != "resize":  # resize(S): the shorter side only
                size = (int(w), int(w))
            else:
                size = None
        except ValueError:
            return None
    return size


_SIZING = ("random_resized_crop", "rrc", "resize", "center_crop")


def _check(what: str, spec: str, size: Optional[Tuple[int, int]]) -> None:
    """The spec as the loader checks it (pl_transform_check), with a crop
    to a size of its own put after its last geometric op where it does
    not end the image at one, and float output where an op needs it:
    ValueError naming the op and the parameter."""
    parts = [p.strip() for p in spec.split(";")]
    names = [p.partition("(")[0] for p in parts]
    floats = any(n in ("normalize", "random_erasing", "erase", "mixup")
                 for n in names)
    last = max((i for i, n in enumerate(names) if n in _SIZING), default=-1)
    if size is None:
        parts.insert(last + 1, "center_crop(32)")
    try:
        pinload._canonical(";".join(parts), size or (32, 32),
                           format="f32" if floats else "u8")
    except pinload.InvalidArgument as e:
        text = str(e)
        for lead in ("pl_transform_check: ", "transform: "):
            if text.startswith(lead):
                text = text[len(lead):]
        raise ValueError("pinload.ops.%s: %s" % (what, text)) from None


class CenterCropPct(Op):
    """timm's eval crop (crop_pct): the shorter side resized to
    size / crop_pct, then the centre size; torchvision writes it as two
    transforms with the size worked out by hand. pinload's
    center_crop(size,crop_pct=...)."""

    def __init__(self, size: Size, crop_pct: float = 0.875,
                 interpolation: str = "bilinear",
                 antialias: bool = True) -> None:
        h, w = _hw(size)
        super().__init__(
            "center_crop(%dx%d,crop_pct=%s,interpolation=%s,antialias=%s)" % (
                w, h, _num(crop_pct), interpolation,
                "true" if antialias else "false"), size=(h, w))


class Mixup:
    """timm's Mixup (mode "batch") as pinload's mixup batch op, for
    batch_transform=, without timm: mixup_alpha, cutmix_alpha,
    cutmix_minmax, prob, switch_prob, label_smoothing, correct_lam and
    num_classes as timm.data.Mixup takes them (its defaults). The loader
    mixes each float batch and gives soft labels [batch, num_classes],
    drawn per batch and rank (exact resume)."""

    def __init__(self, mixup_alpha: float = 1.0, cutmix_alpha: float = 0.0,
                 cutmix_minmax: Optional[Sequence[float]] = None,
                 prob: float = 1.0, switch_prob: float = 0.5,
                 label_smoothing: float = 0.1, correct_lam: bool = True,
                 num_classes: int = 1000) -> None:
        mm = ""
        if cutmix_minmax is not None:
            lo, hi = (float(v) for v in cutmix_minmax)
            mm = "cutmix_minmax=%s:%s," % (_num(lo), _num(hi))
        self.spec = (
            "mixup(mixup_alpha=%s,cutmix_alpha=%s,%sprob=%s,switch_prob=%s,"
            "label_smoothing=%s,correct_lam=%s,num_classes=%d)" % (
                _num(mixup_alpha), _num(cutmix_alpha), mm, _num(prob),
                _num(switch_prob), _num(label_smoothing),
                "true" if correct_lam else "false", int(num_classes)))
        self.num_classes = int(num_classes)
        _check("Mixup", "center_crop(32);" + self.spec, (32, 32))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "pinload.ops.Mixup mixes batches inside pinload's loader: give "
            "it as pinload.torch.Loader(batch_transform=...)")

    def __repr__(self) -> str:
        return "pinload.ops.Mixup(%r)" % self.spec
