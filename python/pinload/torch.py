"""pinload for PyTorch: an iterable of (images, labels) tensors.

    from pinload.torch import Loader
    loader = Loader("data/train", batch_size=256, format="f32")
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:   # NCHW float on the current device
            loss = criterion(model(images), labels)

`images` views the loader's own buffer (no copy): float32/float16 NCHW for
"f32"/"f16", uint8 NHWC for "u8" (`to_nchw(images)` permutes it, without a
copy). `labels` are int64, a copy, on the images' device. On CUDA the batch
is made ready on `torch.cuda.current_stream()` without blocking the host,
and its buffer goes back to the loader after the work queued on that stream
when `images` is freed. Keeping batches (in a list, for a loss over
micro-batches) is allowed: each one kept adds a buffer (max_device_buffers
bounds them; default none), and its bytes never change.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch

import pinload

#: What one step yields: (images, labels), or a dict (output_map; an
#: extra's value is a list, one entry per sample).
TensorBatch = Union[Tuple[Any, torch.Tensor], Dict[str, Any]]

__all__ = ["Loader", "spec_of", "to_nchw"]


def to_nchw(images: torch.Tensor) -> torch.Tensor:
    """uint8 NHWC images as NCHW, without a copy (a strided view; call
    .contiguous() or .float() for a dense tensor)."""
    return images.permute(0, 3, 1, 2)


class _Tensors:
    """An epoch's batches as tensors: a plain iterator over pinload's
    (which threads may share), holding no batch between calls."""

    def __init__(self, loader: "Loader",
                 batches: Iterator[pinload.Batch]) -> None:
        self._loader = loader
        self._batches = batches

    def __iter__(self) -> "_Tensors":
        return self

    def __next__(self) -> TensorBatch:
        return self._loader._tensors_of(next(self._batches))


def _translated(transform: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """transform= given as a torchvision.transforms.v2 pipeline: the spec
    it translates to (pinload._v2.spec_of), and the format and size it
    fixes where the caller did not pass them (ToDtype's dtype, else
    uint8, as torchvision's output; the last crop's size). An explicit
    format= or size= is kept: the spec is then checked against it."""
    from pinload._v2 import spec_of
    t = spec_of(transform)
    out: Dict[str, Any] = {"transform": t.spec}
    if kwargs.get("format") is None:
        out["format"] = t.format or "u8"
    if kwargs.get("size") is None and t.size is not None:
        out["size"] = t.size
    return out


def _views_translated(views: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """views= given as specs or torchvision.transforms.v2 pipelines (each
    one view): the specs, and the format the pipelines' ToDtype fixes
    where the caller did not pass one (every pipeline's must agree)."""
    from pinload._v2 import spec_of
    if isinstance(views, (str, bytes)) or not hasattr(views, "__iter__"):
        return {}  # pinload.Loader says what it expects
    specs: List[Any] = []
    formats = set()
    for v in views:
        if isinstance(v, str):
            specs.append(v)
            continue
        t = spec_of(v)
        specs.append(t.spec)
        formats.add(t.format or "u8")
    out: Dict[str, Any] = {"views": specs}
    if len(formats) > 1:
        raise ValueError("views: the pipelines make %s images: a batch's "
                         "views share one format (give each the same "
                         "ToDtype)" % " and ".join(sorted(formats)))
    if kwargs.get("format") is None and formats:
        out["format"] = formats.pop()
    return out


def _batch_translated(fn: Any, kwargs: Dict[str, Any]) -> Optional[Any]:
    """batch_transform=: a batch op appended to kwargs' transform (None
    returned), or the callable to run on each batch."""
    from pinload._v2 import batch_op_of
    op = batch_op_of(fn)
    if op is None:
        if not callable(fn):
            raise TypeError("batch_transform: expected MixUp, CutMix, "
                            "RandomChoice of them, timm's Mixup or a "
                            "callable, got %r" % (fn,))
        return fn
    spec = kwargs.get("transform")
    if spec is None:
        # The preset as the spec it is (its draws are then the spec's).
        spec = pinload._canonical(None, kwargs.get("size") or 224,
                                  augment=kwargs.get("augment"),
                                  format=kwargs.get("format") or "f32")
    kwargs["transform"] = "%s;%s" % (spec, op)
    if kwargs.get("format") in (None, "u8"):
        if kwargs.get("format") == "u8":
            raise ValueError("batch_transform: %s mixes the normalised "
                             "floats, and format is u8: use f32, f16 or "
                             "bf16" % type(fn).__name__)
        kwargs["format"] = "f32"
    return None


def spec_of(transform: Any) -> str:
    """The pinload transform spec (docs/transforms.md) a
    torchvision.transforms.v2 pipeline translates to, as
    Loader(transform=pipeline) runs it; ValueError names a transform
    pinload does not run and what to use instead."""
    from pinload._v2 import spec_of as translate
    return translate(transform).spec


def _default_device() -> Any:
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return "host"


# The launchers' (rank, world size) variables, in the order the C library
# looks for them (loader/launcher.c): the first family with either set is
# the one it reads.
_LAUNCHER_PAIRS = (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"),
                   ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                   ("PMI_RANK", "PMI_SIZE"))


def _env_int(name: str) -> Optional[int]:
    try:
        return int(os.environ.get(name, ""))
    except ValueError:
        return None


def _process_group_ranks() -> Optional[Tuple[int, int]]:
    """torch.distributed's (rank, world size) when a process group is up
    and the launcher's environment does not say the same, as under
    Lightning's own launcher (WORLD_SIZE and LOCAL_RANK, no RANK); None
    leaves them to the environment, which also tells the C library how
    many ranks share this node's CPUs."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return None
    rank, world = dist.get_rank(), dist.get_world_size()
    for r, w in _LAUNCHER_PAIRS:
        if os.environ.get(r) or os.environ.get(w):
            if (_env_int(r), _env_int(w)) == (rank, world):
                return None
            break
    return rank, world


class Loader(pinload.Loader, torch.utils.data.IterableDataset):
    """pinload.Loader yielding (images, labels) tensors; the same arguments
    (see pinload.Loader), but device defaults to torch's current CUDA device
    (torch.cuda.set_device, as DistributedDataParallel scripts set it), or
    the host without CUDA; rank and world_size default to the launcher's,
    or to torch.distributed's process group where one is up and the
    environment does not name the same pair (Lightning's launcher).

    It is also a torch IterableDataset whose items are whole batches, so it
    goes where one is expected: `DataLoader(loader, batch_size=None)` (with
    num_workers=0: pinload's workers are threads inside it; a worker
    process, forked or spawned, is refused saying so), a training
    framework's train_dataloader(). Every iteration is one epoch. format=
    also takes the images' torch dtype (torch.float32 for "f32")."""

    #: What a batch may hold, for output_map.
    OUTPUTS = ("images", "labels", "indices")

    def __init__(self, data: pinload.PathLike, *, device: Any = None,
                 output_map: Optional[Sequence[str]] = None,
                 batch_transform: Any = None,
                 **kwargs: Any) -> None:
        """output_map: None for (images, labels) tuples, or a sequence of
        names from OUTPUTS and the extras for dict batches with those keys,
        as DALI's iterators give ({"images": ..., "labels": ...,
        "indices": ..., "txt": [...]}). With extras= and no output_map,
        dict batches of images, labels and every extra (decoded as extras=
        says: lists, one entry per sample).

        batch_transform: torchvision v2's MixUp, CutMix or RandomChoice of
        them, or timm's Mixup (mode "batch"), become pinload's mixup op at
        the end of the transform (docs/transforms.md: labels are then soft,
        [batch, classes]); any other callable(images, labels) -> (images,
        labels) runs on each batch on its device."""
        if device is None:
            device = _default_device()
        transform = kwargs.get("transform")
        if transform is not None and not isinstance(transform, str):
            kwargs.update(_translated(transform, kwargs))
        if kwargs.get("views") is not None:
            kwargs.update(_views_translated(kwargs["views"], kwargs))
        self._batch_fn: Optional[Any] = None
        if batch_transform is not None:
            self._batch_fn = _batch_translated(batch_transform, kwargs)
        if kwargs.get("rank") is None and kwargs.get("world_size") is None:
            ranks = _process_group_ranks()
            if ranks is not None:
                kwargs["rank"], kwargs["world_size"] = ranks
        try:
            super().__init__(data, device=device, **kwargs)
        except pinload.InvalidArgument as e:
            # Lightning's launcher sets WORLD_SIZE and LOCAL_RANK, never
            # RANK: the C library refuses half a pair; say where to go.
            if "not RANK" not in e.detail or "LOCAL_RANK" not in os.environ:
                raise
            raise pinload.InvalidArgument(
                e.code, e.name,
                "%s. Under Lightning's launcher make the loader in "
                "train_dataloader() (the process group is up by then and "
                "gives the rank), or pass rank= and world_size="
                % e.detail) from None
        names = self.OUTPUTS + self.extras
        if output_map is not None:
            output_map = tuple(output_map)
            bad = [n for n in output_map if n not in names]
            if bad or not output_map or len(set(output_map)) != len(output_map):
                self.close()
                raise ValueError("output_map: expected distinct names from "
                                 "%s, got %r" % (names, output_map))
        elif self.extras:
            output_map = ("images", "labels") + self.extras
        self._output_map: Optional[Tuple[str, ...]] = output_map

    def __iter__(self) -> Iterator[TensorBatch]:  # type: ignore[override]
        """One epoch of (images, labels), as pinload.Loader.__iter__;
        threads may share the iterator (each batch goes to one of them)."""
        return _Tensors(self, super().__iter__())

    def _tensors_of(self, batch: pinload.Batch) -> TensorBatch:
        names = self._output_map
        extras = self.extras_of(batch) if names and self.extras else {}
        images, labels = self.tensors(batch)
        if self._batch_fn is not None:
            images, labels = self._batch_fn(images, labels)
        if names is None:
            return images, labels  # only `images` holds the buffer now
        got: Dict[str, Any] = {"images": images, "labels": labels, **extras}
        if "indices" in names:
            got["indices"] = torch.from_dlpack(batch.indices).to(
                labels.device, non_blocking=True)
        return {n: got[n] for n in names}

    @staticmethod
    def tensors(batch: pinload.Batch) -> Tuple[Any, torch.Tensor]:
        """(images, labels) of a pinload.Batch, as torch tensors: labels
        int64 [count], or with a mixup op in the transform its soft labels,
        float32 [count, classes] (timm's Mixup's targets), a copy on the
        images' device either way. With views=, images is a list of each
        view's tensor."""
        if batch.views is not None:
            views = [torch.from_dlpack(v) for v in batch.views]
            labels = torch.from_dlpack(batch.labels).long()
            if views[0].is_cuda:
                labels = labels.to(views[0].device, non_blocking=True)
            return views, labels
        images = torch.from_dlpack(batch.images)
        if batch.soft_labels is not None:
            soft = torch.from_dlpack(batch.soft_labels)
            # The loader's memory until release: copied, as labels are.
            labels = (soft.to(images.device) if images.is_cuda
                      else soft.clone())
            return images, labels
        labels = torch.from_dlpack(batch.labels).long()
        if images.is_cuda:
            labels = labels.to(images.device, non_blocking=True)
        return images, labels
