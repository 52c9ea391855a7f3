"""pinload from Python: the C library's loader, batches as DLPack tensors.

    import pinload
    loader = pinload.Loader("data/train", batch_size=256, size=224,
                            augment="train", format="f32")
    for epoch in range(90):
        loader.set_epoch(epoch)
        for batch in loader:
            images = torch.from_dlpack(batch.images)  # no copy
            labels = torch.from_dlpack(batch.labels).long()
            ...

Every iter(loader) is one epoch, as with DataLoader. Every batch views the
loader's own memory (no copy) and is the caller's for as long as it, or a
tensor made from it, is alive: the loader recycles `device_buffers`
buffers (default 2) while batches are dropped in time, and adds one for
each batch kept beyond that (in a list, by autograd), up to
`max_device_buffers` (default: no bound). docs/python.md has the rules.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import (Any, Callable, Dict, Iterator, List, Mapping, NamedTuple,
                    Optional, Sequence, Tuple, Union)

from . import _pinload

#: What a path may be (os.fspath takes it).
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
#: A saved state: a state_dict(), or the 128 bytes (state()).
StateLike = Union[Mapping[str, Any], bytes, bytearray, memoryview, str]

__all__ = [
    "Loader", "Batch", "View", "Failure", "state_info", "Error", "InvalidArgument", "NoDataError",
    "NotJPEGError", "CorruptError", "UnsupportedError", "LimitError",
    "CudaError", "ThreadError", "BusyError", "ClosedError", "ReadError",
    "MissingExtraError",
    "OutOfMemory", "library_version", "__version__",
]

library_version = _pinload.library_version
__version__ = library_version

# ---------------------------------------------------------------------------
# Errors: one class per status code, all under pinload.Error.

class Error(Exception):
    """A pinload status code. `code` (negative int), `name` ("PL_ECORRUPT")
    and `detail` (pl_last_error(): the sentence naming what failed)."""

    def __init__(self, code: int, name: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.name = name
        self.detail = detail

    def __reduce__(self) -> Tuple[type, Tuple[int, str, str]]:
        return (type(self), (self.code, self.name, self.detail))


class InvalidArgument(Error, ValueError):
    """PL_EINVAL: a bad value, named by the message."""


class OutOfMemory(Error, MemoryError):
    """PL_ENOMEM."""


class ReadError(Error, OSError):
    """PL_EIO: the data cannot be read."""

    def __str__(self) -> str:
        return self.detail


class NoDataError(Error):
    """PL_ENODATA: no JPEG found, or no sample of an epoch decodes."""


class NotJPEGError(Error):
    """PL_ENOTJPEG (under on_error="fail")."""


class CorruptError(Error):
    """PL_ECORRUPT (under on_error="fail")."""


class UnsupportedError(Error):
    """PL_EUNSUPPORTED."""


class LimitError(Error):
    """PL_ELIMIT: an image over a configured limit."""


class CudaError(Error):
    """PL_ECUDA."""


class ThreadError(Error):
    """PL_ETHREAD."""


class BusyError(Error):
    """PL_EBUSY: every batch buffer is held (tensors still alive)."""


class ClosedError(Error):
    """PL_ECLOSED: the loader is closed."""


class MissingExtraError(Error):
    """PL_ENOEXTRA: a sample lacks an extra (extras_required, under
    on_error="fail")."""


_CLASSES = {
    "PL_EINVAL": InvalidArgument, "PL_ENOMEM": OutOfMemory,
    "PL_EIO": ReadError, "PL_ENODATA": NoDataError,
    "PL_ENOTJPEG": NotJPEGError, "PL_ECORRUPT": CorruptError,
    "PL_EUNSUPPORTED": UnsupportedError, "PL_ELIMIT": LimitError,
    "PL_ECUDA": CudaError, "PL_ETHREAD": ThreadError, "PL_EBUSY": BusyError,
    "PL_ECLOSED": ClosedError, "PL_ENOEXTRA": MissingExtraError,
}
_pinload.register_errors({
    code: _CLASSES.get(name, Error)
    for name, code in _pinload.codes.items() if code < 0
})


# ---------------------------------------------------------------------------
# Names for the C enums

_C = _pinload
_FORMATS = {"u8": _C.FORMAT_U8_NHWC, "f32": _C.FORMAT_F32_NCHW,
            "f16": _C.FORMAT_F16_NCHW, "bf16": _C.FORMAT_BF16_NCHW}
_AUGMENTS = {"none": _C.AUGMENT_NONE, "eval": _C.AUGMENT_EVAL,
             "train": _C.AUGMENT_TRAIN}
_MEMORY = {"pinned": _C.MEMORY_PINNED, "pageable": _C.MEMORY_PAGEABLE,
           "managed": _C.MEMORY_MANAGED}
_ON_ERROR = {"fail": _C.ON_ERROR_FAIL, "skip": _C.ON_ERROR_SKIP,
             "substitute": _C.ON_ERROR_SUBSTITUTE}
_SHARD = {"pad": _C.SHARD_PAD, "drop": _C.SHARD_DROP}
_ORDER = {"global": _C.ORDER_GLOBAL, "shards": _C.ORDER_SHARDS}

#: How an extra's bytes become what a batch gives (Loader.extras_of).
ExtraDecoder = Union[str, Callable[[bytes], Any]]
_DECODERS: Dict[str, Callable[[bytes], Any]] = {
    "bytes": lambda b: b,
    "str": lambda b: b.decode("utf-8"),
    "json": lambda b: json.loads(b) if b else None,
}


def _extras(value: Any) -> Tuple[str, Dict[str, Callable[[bytes], Any]]]:
    """config.extras and the decoders: from "txt,json", ("txt", "json"), or
    {"txt": "str", "json": "json", "npy": callable}."""
    if isinstance(value, str):
        value = value.split(",") if value else []
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = [(v, "bytes") for v in value]
    else:
        raise ValueError("extras: expected names (\"txt,json\", a list) or "
                         "a dict of name to \"bytes\", \"str\", \"json\" "
                         "or a callable, got %r" % (value,))
    decoders = {}
    for name, how in items:
        if not isinstance(name, str) or "," in name:
            raise ValueError("extras: %r is not an extension name" % (name,))
        if callable(how):
            decoders[name] = how
        elif how in _DECODERS:
            decoders[name] = _DECODERS[how]
        else:
            raise ValueError("extras: %s: expected \"bytes\", \"str\", "
                             "\"json\" or a callable, got %r" % (name, how))
    return ",".join(n for n, _ in items), decoders


def _name_of(table: Mapping[str, int], value: int) -> Union[str, int]:
    for k, v in table.items():
        if v == value:
            return k
    return value


def _choice(arg: str, value: object, table: Mapping[str, int]) -> int:
    if isinstance(value, str) and value in table:
        return table[value]
    raise ValueError("%s: %r is not one of %s"
                     % (arg, value, ", ".join(repr(k) for k in table)))


def _device(value: Any) -> int:
    """'auto', 'host'/'cpu', 'local_rank', 'cuda', 'cuda:N', an int, or a
    torch.device."""
    if hasattr(value, "type") and hasattr(value, "index"):  # torch.device
        if value.type == "cpu":
            return _C.DEVICE_HOST
        if value.type == "cuda":
            return _C.DEVICE_AUTO if value.index is None else int(value.index)
        raise ValueError("device: %r: pinload delivers to CUDA or the host"
                         % (value,))
    if isinstance(value, bool):
        raise ValueError("device: %r is not a device" % (value,))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("device: %d: an ordinal is >= 0 (or say 'auto',"
                             " 'host', 'local_rank')" % value)
        return value
    if isinstance(value, str):
        named = {"auto": _C.DEVICE_AUTO, "cuda": _C.DEVICE_AUTO,
                 "host": _C.DEVICE_HOST, "cpu": _C.DEVICE_HOST,
                 "local_rank": _C.DEVICE_LOCAL_RANK,
                 "local-rank": _C.DEVICE_LOCAL_RANK}
        if value in named:
            return named[value]
        if value.startswith("cuda:") and value[5:].isdigit():
            return int(value[5:])
    raise ValueError("device: %r is not 'auto', 'host', 'local_rank', "
                     "'cuda', 'cuda:N' or an ordinal" % (value,))


def _flag(arg: str, value: object) -> int:
    if isinstance(value, bool) or value in (0, 1):
        return int(value)
    raise ValueError("%s: expected True or False, got %r" % (arg, value))


def _python_log(logger: logging.Logger) -> Callable[[int, str], None]:
    def log(level: int, text: str) -> None:
        logger.log(logging.WARNING if level == _C.LOG_WARNING
                   else logging.INFO, "%s", text)
    return log


_DEFAULTS = _pinload.config_defaults()

class Failure(NamedTuple):
    """A bad file (code < 0) or one decoded despite libjpeg warnings (code
    0), as first met; count: times met."""
    index: int  # type: ignore[assignment]  # (shadows tuple.index)
    path: str
    code: int
    name: str
    reason: str
    count: int  # type: ignore[assignment]  # (shadows tuple.count)
    warnings: int


class _Epoch:
    """The batches of one epoch, from where the loader stands. A plain
    iterator, not a generator, so that threads may share it: each batch
    goes to exactly one of them. Each call takes a ticket first: one per
    batch left, and one for the epoch's end, so no call runs into the next
    epoch however the threads interleave. It keeps no batch: the caller's
    loop holds what it holds."""

    def __init__(self, loader: "Loader", c: _pinload.Loader,
                 left: int) -> None:
        self._loader = loader
        self._c = c
        self._tickets = left + 1  # the batches left, then the end
        self._lock = threading.Lock()

    def __iter__(self) -> "_Epoch":
        return self

    def __next__(self) -> Batch:
        with self._lock:
            if self._tickets == 0:
                raise StopIteration
            self._tickets -= 1
        b = self._loader._next_of(self._c)
        if b is None:
            with self._lock:
                self._tickets = 0
            raise StopIteration
        return b


class Loader:
    """A pinload loader: `for batch in loader` yields one epoch's batches.

    Every argument but `data` is keyword-only and defaults to the C
    library's default (pl_config_default; see `Loader.defaults`):

    data            an ImageFolder root, a flat folder of JPEGs, a list
                    file of "path label" lines, or WebDataset tar shards
                    (a .tar, a folder of them, "train-{000..146}.tar", a
                    list of shard paths), local or as http(s)://, s3://
                    or pipe: URLs
    batch_size      64
    size            224: an int, or (height, width)
    augment         "train" (RandomResizedCrop + flip), "eval" (Resize +
                    CenterCrop), "none" (resize to size)
    format          "u8" (uint8 NHWC), "f32", "f16" or "bf16" (normalised
                    NCHW)
    mean, std       ImageNet's (float formats)
    seed            0: order and augmentation
    shuffle         True
    drop_last       False
    first_epoch     0
    rank, world_size   None: from the launcher (torchrun, SLURM, MPI)
    shard_mode      "pad" or "drop" (DistributedSampler's drop_last)
    order           "global" (the exact global shuffle) or "shards" (tar
                    shards only: a permutation of the shards dealt to the
                    ranks, read in sequence, shuffled within windows)
    shuffle_window  0: 4096 positions ("shards" only)
    num_workers     0: the CPUs this process may use, shared among the
                    node's ranks
    prefetch        2: batch slots in the host ring
    memory          "pinned", "pageable" or "managed"
    pinned_fallback True: pageable memory (with a notice) if pinned fails
    device          "auto" (the current CUDA device, else host), "host",
                    "local_rank", "cuda:N", N, or a torch.device
    device_buffers  2: buffers recycled while batches are dropped in time
    max_device_buffers  None: a batch kept alive while the next is asked for
                    adds a buffer, without bound (memory, never an error);
                    N: at most N buffers, then BusyError; 0: device_buffers
    keep_host       False: batch.host_images on the CUDA backend too
    on_error        "skip", "fail" or "substitute"
    strict          False: libjpeg warnings make a sample bad
    max_width, max_height, max_pixels, max_file_bytes   limits per file
    dct_scaling     True: decode at 1/2, 1/4, 1/8 scale when enough
    gpu_normalize   True: float formats normalised on the GPU
    pin_workers     False: worker i on the i-th allowed CPU
    readahead       0: posix_fadvise N samples ahead
    max_decode_ms   5000: one sample's decode time (-1: none)
    max_scans       256: progressive scans per file
    max_decode_memory  512 MiB: libjpeg's memory for one image
    log             None: the "pinload" logger (notices at INFO, warnings
                    at WARNING); or a callable(level, message) with
                    logging's levels
    resume          None, or a state from state_dict()/state()
    layout          "nchw" (float formats' default) or "nhwc": float
                    images interleaved, a channels_last tensor of NCHW
                    shape in torch; u8 is always NHWC
    cache_dir       None: the node's cache of remote shards (http(s)://,
                    s3://, pipe: data): $PINLOAD_CACHE_DIR or
                    ~/.cache/pinload/shards
    cache_limit     0: bytes the cache may hold (0: no bound)
    remote_timeout_ms  30000: a stalled transfer is cut and retried
    remote_retries  5: attempts after the first (-1: none)
    extras          None: side data per sample in each batch (shards'
                    members by extension, a list file's tab-separated
                    columns): "txt,json", ("txt", "json"), or
                    {"txt": "str", "json": "json", "npy": callable};
                    batch.extras gives bytes, loader.extras_of(batch) them
                    decoded
    extras_required False: a sample lacking one gets an empty entry;
                    True: it is a bad sample (MissingExtraError under
                    on_error="fail")
    """

    defaults = dict(_DEFAULTS)

    def __init__(self, data: PathLike, *,
                 batch_size: Optional[int] = None,
                 size: Union[int, Tuple[int, int], None] = None,
                 augment: Optional[str] = None, format: Optional[str] = None,
                 mean: Optional[Sequence[float]] = None,
                 std: Optional[Sequence[float]] = None,
                 seed: Optional[int] = None, shuffle: Optional[bool] = None,
                 drop_last: Optional[bool] = None,
                 first_epoch: Optional[int] = None,
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 shard_mode: Optional[str] = None,
                 num_workers: Optional[int] = None,
                 prefetch: Optional[int] = None, memory: Optional[str] = None,
                 pinned_fallback: Optional[bool] = None,
                 device: Any = None, device_buffers: Optional[int] = None,
                 max_device_buffers: Optional[int] = None,
                 keep_host: Optional[bool] = None,
                 on_error: Optional[str] = None,
                 strict: Optional[bool] = None,
                 max_width: Optional[int] = None,
                 max_height: Optional[int] = None,
                 max_pixels: Optional[int] = None,
                 max_file_bytes: Optional[int] = None,
                 dct_scaling: Optional[bool] = None,
                 gpu_normalize: Optional[bool] = None,
                 pin_workers: Optional[bool] = None,
                 readahead: Optional[int] = None,
                 max_decode_ms: Optional[int] = None,
                 max_scans: Optional[int] = None,
                 max_decode_memory: Optional[int] = None,
                 log: Optional[Callable[[int, str], None]] = None,
                 resume: Optional[StateLike] = None,
                 layout: Optional[str] = None,
                 cache_dir: Optional[PathLike] = None,
                 cache_limit: Optional[int] = None,
                 remote_timeout_ms: Optional[int] = None,
                 remote_retries: Optional[int] = None,
                 order: Optional[str] = None,
                 shuffle_window: Optional[int] = None,
                 extras: Union[str, Sequence[str],
                               Mapping[str, ExtraDecoder], None] = None,
                 extras_required: Optional[bool] = None) -> None:
        if data is None:
            raise ValueError("data: required (a folder or a list file)")
        cfg: Dict[str, Any] = {"data": os.fspath(data)}
        if cache_dir is not None:
            cfg["cache_dir"] = os.fspath(cache_dir)
        self._decoders: Dict[str, Callable[[bytes], Any]] = {}
        if extras is not None:
            cfg["extras"], self._decoders = _extras(extras)
        ints = dict(batch_size=batch_size, seed=seed,
                    first_epoch=first_epoch, num_workers=num_workers,
                    prefetch=prefetch, device_buffers=device_buffers,
                    max_device_buffers=(-1 if max_device_buffers is None
                                        else max_device_buffers),
                    max_width=max_width, max_height=max_height,
                    max_pixels=max_pixels, max_file_bytes=max_file_bytes,
                    readahead=readahead, max_decode_ms=max_decode_ms,
                    max_scans=max_scans, max_decode_memory=max_decode_memory,
                    cache_limit=cache_limit,
                    remote_timeout_ms=remote_timeout_ms,
                    remote_retries=remote_retries,
                    shuffle_window=shuffle_window)
        for k, v in ints.items():
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, int):
                    raise ValueError("%s: expected an integer, got %r"
                                     % (k, v))
                cfg[k] = v
        flags = dict(shuffle=shuffle, drop_last=drop_last,
                     pinned_fallback=pinned_fallback, keep_host=keep_host,
                     strict=strict, dct_scaling=dct_scaling,
                     gpu_normalize=gpu_normalize, pin_workers=pin_workers,
                     extras_required=extras_required)
        for k, v in flags.items():
            if v is not None:
                cfg[k] = _flag(k, v)
        if size is not None:
            if isinstance(size, int) and not isinstance(size, bool):
                cfg["height"] = cfg["width"] = size
            else:
                try:
                    h, w = size  # type: ignore[misc]  # (a bool fails here)
                except (TypeError, ValueError):
                    raise ValueError("size: expected an int or (height, "
                                     "width), got %r" % (size,)) from None
                cfg["height"], cfg["width"] = h, w
        if augment is not None:
            cfg["augment"] = _choice("augment", augment, _AUGMENTS)
        if format is not None:
            cfg["format"] = _choice("format", format, _FORMATS)
        if memory is not None:
            cfg["memory"] = _choice("memory", memory, _MEMORY)
        if on_error is not None:
            cfg["on_error"] = _choice("on_error", on_error, _ON_ERROR)
        if shard_mode is not None:
            cfg["shard_mode"] = _choice("shard_mode", shard_mode, _SHARD)
        if order is not None:
            cfg["order"] = _choice("order", order, _ORDER)
        if layout is not None:
            cfg["channels_last"] = _choice("layout", layout,
                                           {"nchw": 0, "nhwc": 1})
            if (layout == "nchw" and
                    cfg.get("format", self.defaults["format"]) ==
                    _C.FORMAT_U8_NHWC):
                raise ValueError("layout: 'nchw' needs a float format; u8 "
                                 "is NHWC (pinload.torch.to_nchw views it "
                                 "as NCHW)")
        if device is not None:
            cfg["device"] = _device(device)
        for k, seq in (("mean", mean), ("std", std)):
            if seq is not None:
                try:
                    t = tuple(float(x) for x in seq)
                except (TypeError, ValueError):
                    t = ()
                if len(t) != 3 or isinstance(seq, (str, bytes)):
                    raise ValueError("%s: expected 3 numbers (one per "
                                     "channel), got %r" % (k, seq))
                cfg[k] = t
        if (rank is None) != (world_size is None):
            raise ValueError("rank and world_size: give both, or neither "
                             "(then the launcher's are used)")
        if rank is not None:
            for k, v, lo in (("rank", rank, 0), ("world_size", world_size, 1)):
                if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                    raise ValueError("%s: expected an integer >= %d, got %r "
                                     "(None takes it from the launcher)"
                                     % (k, lo, v))
            cfg["rank"], cfg["world_size"] = rank, world_size
        if resume is not None:
            cfg["resume"] = _state_bytes(resume)
        if log is None:
            log = _python_log(logging.getLogger("pinload"))
        elif not callable(log):
            raise ValueError("log: expected a callable(level, message)")
        else:
            user = log

            def log(level: int, text: str) -> None:
                user(logging.WARNING if level == _C.LOG_WARNING
                     else logging.INFO, text)
        self._config = cfg
        self._log = log
        self._c = _pinload.Loader(cfg, log)
        self._info = self._c.info()
        # The first iter() after resume=/load_state_dict goes on mid-epoch.
        self._resuming = resume is not None

    # -- construction again (set_epoch, load_state_dict) --
    def _recreate(self, **changes: Any) -> None:
        cfg = dict(self._config)
        cfg.pop("resume", None)
        cfg.update(changes)
        # Batches still alive keep the old loader (and its buffers) until
        # they go: close() destroys it only then.
        self._c.close()
        self._c = _pinload.Loader(cfg, self._log)
        self._info = self._c.info()
        self._resuming = "resume" in changes

    # -- iteration --
    def __iter__(self) -> Iterator[Batch]:
        """One epoch, as DataLoader's iter(): the next epoch from its first
        batch (the one set_epoch pinned, if it was called), or, the first
        time after resume= or load_state_dict, the rest of the saved one.
        An epoch left part-way (a break, islice, limit_train_batches) is
        over: the next iter() starts the epoch after it."""
        self._start_epoch()
        return self._epoch_batches(self._c)

    def _start_epoch(self) -> None:
        epoch, batch, _ = _pinload.state_get(self._c.state())
        resuming, self._resuming = self._resuming, False
        if batch == 0 or (resuming and batch < len(self)):
            return
        if batch >= len(self):
            # Every batch was delivered; the end was not taken yet.
            try:
                if self._c.next() is None:
                    return
            except BusyError:
                pass  # every buffer still held: start the next one afresh
        self._recreate(first_epoch=epoch + 1)

    def _epoch_batches(self, c: _pinload.Loader) -> Iterator[Batch]:
        epoch, batch, _ = _pinload.state_get(c.state())
        return _Epoch(self, c, len(self) - batch)

    def _next_of(self, c: _pinload.Loader) -> Optional[Batch]:
        try:
            return c.next()
        except BusyError as e:
            return self._next_after_collect(c, e)

    def _next_after_collect(self, c: _pinload.Loader,
                            error: BusyError) -> Optional[Batch]:
        # A tensor in a reference cycle may be what holds the buffer.
        import gc
        gc.collect()
        try:
            return c.next()
        except BusyError:
            raise BusyError(
                error.code, error.name,
                "%s: every batch buffer is held by batches or tensors still "
                "alive (kept in a list, say), and max_device_buffers allows "
                "no more; pinload never hands out a buffer in use. Drop "
                "them, copy what you keep (tensor.clone()), or raise "
                "max_device_buffers (None: no bound)"
                % error.detail) from None

    def next(self) -> Optional[Batch]:
        """The next batch of the current epoch, or None at its end (the
        following call starts the next epoch)."""
        return self._next_of(self._c)

    def __len__(self) -> int:
        """Batches per epoch (the same on every rank and error policy)."""
        return self._info["batches_per_epoch"]

    def set_epoch(self, epoch: int) -> None:
        """Make `epoch` the one iterated next (as DistributedSampler's):
        free when it is the loader's next epoch, or the resumed one whose
        rest the next iter() gives (the loop `set_epoch(e); for b in
        loader` resumes exactly), else the loader starts again at it."""
        e, b, _ = _pinload.state_get(self._c.state())
        if e == epoch and (b == 0 or self._resuming):
            return
        self._recreate(first_epoch=int(epoch))

    @property
    def epoch(self) -> int:
        """The epoch the next batch belongs to."""
        return _pinload.state_get(self._c.state())[0]

    # -- resume --
    def state(self) -> bytes:
        """Where the loader stands, as pl_state's 128 bytes."""
        return self._c.state()

    def state_dict(self) -> Dict[str, Any]:
        """{"state": str, "epoch": e, "batch": i}, ints and strings only
        (the 128 state bytes as hex), so JSON and distributed checkpoints
        take it as it is: load_state_dict() (or Loader(resume=...)) goes on
        with exactly the batches this loader would deliver next."""
        s = self._c.state()
        e, b, _ = _pinload.state_get(s)
        return {"state": s.hex(), "epoch": e, "batch": b}

    def load_state_dict(self, state_dict: StateLike) -> None:
        self._recreate(resume=_state_bytes(state_dict))

    # -- what the loader is --
    @property
    def info(self) -> Dict[str, Any]:
        """pl_info as a dict (format, memory and backend by name)."""
        d = dict(self._info)
        d["format"] = _name_of(_FORMATS, d["format"])
        d["memory"] = _name_of(_MEMORY, d["memory"])
        d["backend"] = "cuda" if d["backend"] == _C.BACKEND_CUDA else "host"
        return d

    @property
    def stats(self) -> Dict[str, int]:
        """pl_stats as a dict (counters since create; times in ns)."""
        return self._c.stats()

    @property
    def extras(self) -> Tuple[str, ...]:
        """The extras each batch carries (extras=), in order."""
        return tuple(self._decoders)

    def extras_of(self, batch: Batch) -> Dict[str, List[Any]]:
        """batch.extras decoded as extras= asked: {name: [one per
        sample]} (bytes, str, JSON values (None for an empty entry), or
        what the callable returns). Read it before the batch is
        released."""
        raw = batch.extras
        return {name: [dec(b) for b in raw[name]]
                for name, dec in self._decoders.items()}

    @property
    def classes(self) -> List[str]:
        """Class names, by label."""
        return [self._c.class_name(i)
                for i in range(self._info["num_classes"])]

    @property
    def failures(self) -> List[Failure]:
        """Bad files met so far (and files decoded with warnings)."""
        return [Failure(*f) for f in self._c.failures()]

    def sample(self, index: int) -> Tuple[str, int]:
        """(path, label) of dataset index `index`."""
        return self._c.sample(index)

    def epoch_order(self, epoch: int) -> List[int]:
        """This rank's dataset indices for `epoch`, in delivery order."""
        return self._c.epoch_order(epoch)

    @property
    def batches_held(self) -> int:
        """Batches (or tensors made from them) not yet given back."""
        return self._c.held

    # -- the end --
    def close(self) -> None:
        """No further batches; the C loader and its threads go once no
        batch or tensor of it is alive (at once when none is)."""
        self._c.close()

    @property
    def closed(self) -> bool:
        return self._c.closed

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        i = self._info
        return ("<pinload.Loader %s: %d samples, %d batches of %d, %dx%d %s, "
                "%s>" % (self._config["data"], i["dataset_size"],
                         i["batches_per_epoch"], i["batch_size"], i["height"],
                         i["width"], _name_of(_FORMATS, i["format"]),
                         i["backend_name"]))


def _state_bytes(state: object) -> bytes:
    """The 128 bytes of a state_dict() (its "state" as hex, or as bytes
    from pinload 0.1), or of the bytes themselves."""
    if isinstance(state, dict):
        state = state.get("state")
    if isinstance(state, str):
        try:
            state = bytes.fromhex(state)
        except ValueError:
            state = None
    if isinstance(state, (bytes, bytearray, memoryview)):
        state = bytes(state)
        if len(state) == _C.STATE_BYTES:
            return state
    raise ValueError("resume: expected a state_dict() or %d state bytes"
                     % _C.STATE_BYTES)


def state_info(state: StateLike) -> Tuple[int, int, int]:
    """(epoch, batch, position) a saved state stands at."""
    return _pinload.state_get(_state_bytes(state))


# The extension's types, for isinstance checks and documentation.
Batch = _pinload.Batch
View = _pinload.View
