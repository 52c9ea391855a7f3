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

import collections
import contextlib
import json
import logging
import operator
import os
import re
import sys
import threading
import types
import difflib
import weakref
import inspect
import warnings
from typing import (TYPE_CHECKING, Any, Callable, Deque, Dict, Iterator,
                    List, Mapping, NamedTuple, Optional, Sequence, Set,
                    Tuple, Union, get_type_hints, overload)

from . import _options, _pinload
# The keywords' types (tools/config-fields.py writes them from pinload.h).
from ._options import (ExtraDecoder, LoaderOptions, PathLike, StateLike,
                       TorchDtype)

if sys.version_info >= (3, 11):
    from typing import Unpack
elif TYPE_CHECKING:  # CPython 3.10: only type checkers read **options' type
    from typing_extensions import Unpack

__all__ = [
    "Loader", "Batch", "View", "Failure", "Dataset", "state_info", "Error",
    "InvalidArgument", "NoDataError",
    "NotImageError", "NotJPEGError", "CorruptError", "UnsupportedError",
    "LimitError",
    "CudaError", "ThreadError", "BusyError", "ClosedError", "ReadError",
    "MissingExtraError", "PinloadWarning",
    "OutOfMemory", "library_version", "__version__", "LoaderOptions",
]

library_version = _pinload.library_version
__version__ = library_version

_C = _pinload

# ---------------------------------------------------------------------------
# The library's words as Python's: its messages name pl_config fields
# (config.order) and enum constants (PL_ORDER_GLOBAL); the keywords and
# their values (order="global") are what a Python user wrote. Both tables
# come from _options (tools/config-fields.py, from pinload.h).

#: constant -> keyword="value", for every name-valued keyword, and the
#: device's and the launcher's special values
_WORDS: Dict[str, str] = {
    "PL_" + const: '%s="%s"' % (keyword, name)
    for keyword, names in _options.CHOICES.items()
    for name, const in names.items()}
_WORDS.update({"PL_" + const: 'device="%s"' % name
               for name, const in _options.DEVICES.items()})
_WORDS["PL_FROM_ENV"] = "None"
#: pl_config field -> its keyword (width -> size, channels_last -> layout)
_FIELD_KEYWORDS: Dict[str, str] = {
    field: keyword for keyword, (_, fields, _) in _options.KEYWORDS.items()
    for field in fields}
# "config.order: PL_ORDER_SHARDS", "order is PL_ORDER_GLOBAL", "with
# PL_SHARD_DROP": a constant, and the word before it if it names the
# constant's keyword (said once: order="shards").
_CONSTANT = re.compile(r"\b(?:(?:config\.)?(\w+)(?::| is)? )?(PL_[A-Z0-9_]+)\b")
_FIELD = re.compile(r"\bconfig\.(\w+)")


def _constant_words(m: "re.Match[str]") -> str:
    if m.group(2) == "PL_AUTO":  # num_workers's and prefetch's "auto"
        before = m.group(1)
        if before in ("num_workers", "prefetch"):
            return '%s="auto"' % before
        return m.group(0)[:m.start(2) - m.start(0)] + '"auto"'
    word = _WORDS.get(m.group(2))
    if word is None:
        return m.group(0)  # a status name (PL_ECORRUPT) stays
    before = m.group(1)
    if before is not None and (_FIELD_KEYWORDS.get(before, before) ==
                               word.split("=")[0]):
        return word
    return m.group(0)[:m.start(2) - m.start(0)] + word


def _python_words(text: str) -> str:
    """A message of the C library in Python's words: 'config.order:
    PL_ORDER_SHARDS ...' -> 'order="shards" ...', 'config.width' ->
    'size', without the leading 'pl_loader_create: '."""
    if text.startswith("pl_loader_create: "):
        text = text[len("pl_loader_create: "):]
    if "PL_" in text:
        text = _CONSTANT.sub(_constant_words, text)
    if "config." in text:
        text = _FIELD.sub(lambda m: _FIELD_KEYWORDS.get(m.group(1),
                                                        m.group(1)), text)
    return text


# ---------------------------------------------------------------------------
# Errors: one class per status code, all under pinload.Error.

class Error(Exception):
    """A pinload status code. `code` (negative int), `name` ("PL_ECORRUPT")
    and `detail` (pl_last_error(): the sentence naming what failed, in
    Python's words: the keywords and their values, not pl_config's)."""

    def __init__(self, code: int, name: str, detail: str) -> None:
        detail = _python_words(detail)
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


class NotImageError(Error):
    """PL_ENOTIMAGE: not an image pinload reads (JPEG, PNG, WebP) (under
    on_error="fail")."""


# Its first name (PL_ENOTJPEG's), kept.
NotJPEGError = NotImageError


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
    "PL_ENOTIMAGE": NotImageError, "PL_ECORRUPT": CorruptError,
    "PL_EUNSUPPORTED": UnsupportedError, "PL_ELIMIT": LimitError,
    "PL_ECUDA": CudaError, "PL_ETHREAD": ThreadError, "PL_EBUSY": BusyError,
    "PL_ECLOSED": ClosedError, "PL_ENOEXTRA": MissingExtraError,
}
_pinload.register_errors({
    code: _CLASSES.get(name, Error)
    for name, code in _pinload.codes.items() if code < 0
})


class PinloadWarning(UserWarning):
    """What changes what a loader delivers: files left out of the dataset,
    samples without a label, the host instead of the CUDA device asked for,
    samples delivered again after an elastic restart, a bad file skipped,
    mean and std on the 0-255 scale. Each kind is warned once per loader
    (warnings.warn); every message also goes to the "pinload" logger."""


# ---------------------------------------------------------------------------
# Names for the C enums

# Each name-valued keyword's names (_options.CHOICES), as the C values.
_CHOICES: Dict[str, Dict[str, int]] = {
    k: {name: getattr(_C, const) for name, const in names.items()}
    for k, names in _options.CHOICES.items()}
_FORMATS = _CHOICES["format"]
_MEMORY = _CHOICES["memory"]
_DECODES = _CHOICES["decode"]
_LAYOUTS = {"nchw": 0, "nhwc": 1}


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


#: format= as a torch dtype (by its name: torch need not be imported)
_TORCH_FORMATS = {"torch.uint8": "u8", "torch.float32": "f32",
                  "torch.float16": "f16", "torch.bfloat16": "bf16"}


def _format(value: Union[str, TorchDtype]) -> int:
    """A format's name, or the torch dtype of its images."""
    if not isinstance(value, str) and type(value).__name__ == "dtype":
        value = _TORCH_FORMATS.get(str(value), value)
    if isinstance(value, str) and value in _FORMATS:
        return _FORMATS[value]
    raise ValueError("format: %r is not one of %s, or torch's %s"
                     % (value, ", ".join(repr(k) for k in _FORMATS),
                        ", ".join(_TORCH_FORMATS)))


#: device= by name: the header's words (_options.DEVICES), and torch's
_DEVICES: Dict[str, int] = {
    name: getattr(_C, const) for name, const in _options.DEVICES.items()}
_DEVICES.update({"cuda": _C.DEVICE_AUTO, "cpu": _C.DEVICE_HOST,
                 "local-rank": _C.DEVICE_LOCAL_RANK})


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
        if value in _DEVICES:
            return _DEVICES[value]
        if value.startswith("cuda:") and value[5:].isdigit():
            return int(value[5:])
    raise ValueError("device: %r is not 'auto', 'host', 'local_rank', "
                     "'cuda', 'cuda:N' or an ordinal" % (value,))


def _flag(arg: str, value: object) -> int:
    if isinstance(value, bool) or value in (0, 1):
        return int(value)
    raise ValueError("%s: expected True or False, got %r" % (arg, value))


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


#: How often a change waiting for another thread's epoch looks whether
#: that epoch's iterator or thread is gone (a finished epoch, or one given
#: up by a break, wakes it at once).
_POLL_S = 0.05


class _Run:
    """One epoch as the loader delivers it: the C loader it runs on, its
    batches left (a ticket each, so that no call runs into the next epoch
    however threads interleave), the calls inside the C loader now, and
    what holds it. An iterator's run is held while its iterator and the
    thread that called iter() are alive and batches are left: a change
    another thread asks for (iter(), set_epoch, load_state_dict) waits for
    it. loader.next()'s own stepping holds nothing. The fields are guarded
    by the Loader's _cv."""

    __slots__ = ("c", "left", "out", "end_taken", "over", "thread",
                 "iterator")

    def __init__(self, c: _pinload.Loader, left: int,
                 thread: Optional[threading.Thread],
                 iterator: Optional["weakref.ref[_Epoch]"]) -> None:
        self.c = c
        self.left = left          # batch tickets not yet taken
        self.out = 0              # calls inside c.next() for this run
        self.end_taken = False    # a call is taking the epoch's end
        self.over = False         # no batch more: its end, or a change
        self.thread = thread
        self.iterator = iterator

    def holds(self, me: threading.Thread) -> bool:
        """Whether a change thread `me` asks for must wait for this run."""
        if (self.over or self.left == 0 or self.thread is None or
                self.thread is me):
            return False
        it = self.iterator
        return (it is not None and it() is not None and
                self.thread.is_alive())


class _Epoch:
    """The batches of one epoch (one _Run). A plain iterator, not a
    generator, so that threads may share it: each batch goes to exactly
    one of them, and none runs into the next epoch. It keeps no batch: the
    caller's loop holds what it holds."""

    def __init__(self, loader: "Loader") -> None:
        self._loader = loader
        self._run: Optional[_Run] = None  # set by Loader.__iter__

    def __iter__(self) -> "_Epoch":
        return self

    def __next__(self) -> Batch:
        run = self._run
        b = None if run is None else self._loader._take(run)
        if b is None:
            raise StopIteration
        return b


def _closed() -> "ClosedError":
    return ClosedError(_C.codes["PL_ECLOSED"], "PL_ECLOSED",
                       "the loader is closed")


def _unknown(name: str) -> TypeError:
    near = difflib.get_close_matches(name, _options.KEYWORDS, 1)
    return TypeError("Loader() got an unexpected keyword argument %r%s"
                     % (name, " (did you mean %r?)" % near[0] if near
                        else ""))


def _size(value: Any) -> Tuple[Any, Any]:
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    try:
        h, w = value  # (a bool fails here)
    except (TypeError, ValueError):
        raise ValueError("size: expected an int or (height, width), got %r"
                         % (value,)) from None
    return h, w


def _floats(arg: str, seq: Any) -> Tuple[float, ...]:
    try:
        t = tuple(float(x) for x in seq)
    except (TypeError, ValueError):
        t = ()
    if len(t) != 3 or isinstance(seq, (str, bytes)):
        raise ValueError("%s: expected 3 numbers (one per channel), got %r"
                         % (arg, seq))
    return t


def _ranks(rank: object, world_size: object) -> Dict[str, Any]:
    if (rank is None) != (world_size is None):
        raise ValueError("rank and world_size: give both, or neither "
                         "(then the launcher's are used)")
    if rank is None:
        return {}
    for k, v, lo in (("rank", rank, 0), ("world_size", world_size, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError("%s: expected an integer >= %d, got %r "
                             "(None takes it from the launcher)"
                             % (k, lo, v))
    return {"rank": rank, "world_size": world_size}


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


def _value(name: str, kind: str, value: Any, cfg: Mapping[str, Any]) -> Any:
    """A keyword's value as its pl_config field takes it (_pinload.Loader's
    dict), by the kind _options.KEYWORDS gives it."""
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("%s: expected an integer, got %r"
                             % (name, value))
        return value
    if kind == "flag":
        return _flag(name, value)
    if kind == "choice" and name == "format":
        return _format(value)
    if kind == "choice":
        return _choice(name, value, _CHOICES[name])
    if kind == "floats":
        return _floats(name, value)
    if kind == "str":
        if not isinstance(value, str):
            raise ValueError("%s: expected a string, got %r"
                             % (name, value))
        return value
    if kind == "path":
        return os.fspath(value)
    if kind == "extras":
        return _extras(value)[0]
    if kind == "device":
        return _device(value)
    if kind == "workers":
        if value == "auto":
            return _C.AUTO
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError('%s: expected a count (0: the default) or '
                             '"auto", got %r' % (name, value))
        return value
    if kind == "prefetch":
        if value == "auto":
            return _C.AUTO
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError('%s: expected a count of batch slots (1 or '
                             'more) or "auto", got %r' % (name, value))
        return value
    if kind == "views":
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise ValueError("%s: expected a list of 2 to %d transform "
                             "specs, got %r" % (name, _C.VIEWS_MAX, value))
        specs = list(value)
        for i, spec in enumerate(specs):
            if not isinstance(spec, str):
                raise ValueError("%s: item %d: expected a transform spec "
                                 "(str), got %r (pinload.torch.Loader "
                                 "translates torchvision pipelines)"
                                 % (name, i, spec))
        return specs
    if kind == "state":
        return _state_bytes(value)
    if kind == "layout":
        v = _choice(name, value, _LAYOUTS)
        if (value == "nchw" and cfg.get("format", _DEFAULTS["format"]) ==
                _C.FORMAT_U8_NHWC):
            raise ValueError("layout: 'nchw' needs a float format; u8 is "
                             "NHWC (pinload.torch.to_nchw views it as NCHW)")
        return v
    raise AssertionError("pinload: keyword %s of unknown kind %s"
                         % (name, kind))


def _config(data: PathLike, options: Mapping[str, Any]) -> Dict[str, Any]:
    """Loader's keywords as _pinload.Loader's dict of pl_config fields."""
    for name in options:
        if name not in _options.KEYWORDS:
            raise _unknown(name)
    cfg: Dict[str, Any] = {"data": os.fspath(data)}
    for name, (kind, fields, unset) in _options.KEYWORDS.items():
        value = options.get(name)
        if kind in ("log", "rank"):
            continue
        if value is None:
            if unset is not None:
                cfg[fields[0]] = unset
        elif kind == "size":
            cfg[fields[1]], cfg[fields[0]] = _size(value)
        else:
            cfg[fields[0]] = _value(name, kind, value, cfg)
    cfg.update(_ranks(options.get("rank"), options.get("world_size")))
    return cfg


# The "pinload" logger has a NullHandler, as a library's should: a program
# that set up no logging is not shown every WARNING record by logging's
# last resort, but each kind's first, once, as a PinloadWarning.
_LOGGER = logging.getLogger("pinload")
_LOGGER.addHandler(logging.NullHandler())
_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
# What varies within one kind of message: paths, numbers.
_VARYING = re.compile(r"\S*/\S*|0x[0-9a-fA-F]+|\d+")


def _user_stacklevel() -> int:
    """warnings.warn's stacklevel, from _Log.flush, of the first frame
    outside this package: the warning names the caller's line."""
    level = 2
    f: Optional[types.FrameType] = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_HERE):
        f, level = f.f_back, level + 1
    return level


class _Log:
    """Where one Loader's messages go, the library's (from the C loaders
    it makes, again after set_epoch or load_state_dict too) and its own:
    with log=callable, every message to it (logging's levels); else each
    to the "pinload" logger (INFO, or WARNING for what changes what the
    loader delivers), and the first warning of each kind also to
    warnings.warn, once the call that met it returns (flush), so that a
    warnings filter "error" raises it from that call. A warning a C loader
    made again repeats word for word is INFO. The library's messages the
    extension hands over while this thread is inside one of the Loader's
    changes or batch calls (held()) wait in a queue for that flush: a log
    callable or handler that calls back into the loader must find it
    whole, and not wait for itself."""

    def __init__(self, user: Optional[Callable[[int, str], None]]) -> None:
        if user is not None and not callable(user):
            raise ValueError("log: expected a callable(level, message)")
        self._user = user
        self._said: Set[str] = set()
        self._kinds: Set[str] = set()
        self._pending: List[str] = []
        # A deque: any thread may append while another drains it.
        self._queued: Deque[Tuple[int, str]] = collections.deque()
        self._holding = threading.local()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The library's messages met on this thread meanwhile wait for
        flush()."""
        h = self._holding
        h.depth = getattr(h, "depth", 0) + 1
        try:
            yield
        finally:
            h.depth -= 1

    def __call__(self, level: int, text: str) -> None:
        """The extension's callback: a pl_log_level and the message."""
        self._queued.append((level, text))
        if not getattr(self._holding, "depth", 0):
            self._drain()

    def _drain(self) -> None:
        while True:
            try:
                level, text = self._queued.popleft()
            except IndexError:
                return
            self.say(logging.WARNING if level == _C.LOG_WARNING
                     else logging.INFO, _python_words(text))

    def say(self, level: int, text: str, kind: Optional[str] = None) -> None:
        if self._user is not None:
            self._user(level, text)
        elif level < logging.WARNING or text in self._said:
            _LOGGER.info("%s", text)
        else:
            self._said.add(text)
            _LOGGER.warning("%s", text)
            kind = kind or _VARYING.sub("#", text)
            if kind not in self._kinds:
                self._kinds.add(kind)
                self._pending.append(text)

    def flush(self) -> None:
        """The library's messages held since the last flush, then the
        warnings met, as PinloadWarning."""
        self._drain()
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        level = _user_stacklevel()
        for text in pending:
            warnings.warn(text, PinloadWarning, stacklevel=level)


def _wants_cuda(device: Any) -> bool:
    """device="cuda" (or torch.device("cuda")): CUDA, on the current
    device; the library's AUTO, which falls back to the host."""
    if isinstance(device, str):
        return device == "cuda"
    return (getattr(device, "type", None) == "cuda" and
            getattr(device, "index", 0) is None)


def _scale_check(cfg: Mapping[str, Any], log: _Log) -> None:
    """mean and std are on the 0-1 scale ((x / 255 - mean) / std): values
    above 1 were meant for 0-255 and would scale the images wrongly."""
    if cfg.get("format", _DEFAULTS["format"]) == _C.FORMAT_U8_NHWC:
        return
    given = {k: cfg[k] for k in ("mean", "std") if k in cfg}
    big = {k: v for k, v in given.items() if max(abs(x) for x in v) > 1}
    if not big:
        return
    log.say(logging.WARNING,
            "%s: values on the 0-255 scale, it seems; but pinload "
            "normalises (x / 255 - mean) / std, with mean and std on the "
            "0-1 scale: divide them by 255 (%s)" % (
                ", ".join("%s=%s" % (k, tuple(v)) for k, v in big.items()),
                ", ".join("%s=(%s)" % (k, ", ".join(
                    "%.4g" % (x / 255) for x in v)) for k, v in big.items())),
            kind="mean/std")



def _nvjpeg_from_wheel() -> None:
    """decode="gpu"/"auto": where the library would not find nvJPEG by
    its name (libnvjpeg.so.13 on the loader's search path), the one the
    nvidia-nvjpeg wheel installs beside this package, named in
    PINLOAD_NVJPEG for the library to load at run time (never loaded here:
    only a loader on the CUDA backend loads it). An explicit
    PINLOAD_NVJPEG wins."""
    if os.environ.get("PINLOAD_NVJPEG"):
        return
    for base in sys.path:
        for sub in ("nvidia/cu13/lib", "nvidia/nvjpeg/lib"):
            path = os.path.join(base or ".", sub, "libnvjpeg.so.13")
            if os.path.isfile(path):
                os.environ["PINLOAD_NVJPEG"] = path
                return


class Loader:
    """A pinload loader: `for batch in loader` yields one epoch's batches.

    Every argument but `data` is keyword-only (LoaderOptions) and defaults
    to the C library's default (pl_config_default; see `Loader.defaults`).
    Each is the pl_config field of its name, and its doc that field's
    comment in pinload.h, unless it is one of the binding's own: size for
    width and height, layout for channels_last, names for an enum's values,
    True or False for a flag (docs/python.md has their table).

    Keywords (written from include/pinload.h by tools/config-fields.py):

    data            an ImageFolder root, a flat folder of images, a list
                    file of "path label" lines, or WebDataset tar shards (a
                    .tar, a folder of them, "train-{000..146}.tar", a list
                    of shard paths), local or as http(s)://, s3:// or pipe:
                    URLs; the one positional argument
    batch_size      samples per batch; default 64
    size            the output's height and width in pixels: an int for
                    both, or (height, width); default 224
    format          "u8" (uint8 NHWC, the default), "f32", "f16" or "bf16"
                    (normalised NCHW; bf16 a torch.bfloat16 tensor), or the
                    torch dtype: torch.uint8, torch.float32, torch.float16,
                    torch.bfloat16
    augment         "train" (RandomResizedCrop + flip, the default), "eval"
                    (Resize + CenterCrop) or "none" (resize to size)
    mean            Float formats' normalisation, (x / 255 - mean) / std per
                    channel: mean, default ImageNet's 0.485 0.456 0.406;
                    std, default ImageNet's 0.229 0.224 0.225.
    std             see mean; default 0.229 0.224 0.225
    dct_scaling     True: decode at 1/2, 1/4 or 1/8 scale (libjpeg's DCT
                    scaling, as Pillow's draft mode) whenever the crop still
                    has at least as many pixels as the resize needs: much
                    faster, pixels slightly different. False: decode at full
                    size, pixels within 1 level of Pillow/torchvision.
                    Default True.
    seed            order and augmentation; default 0
    shuffle         True: permute each epoch; False: file order; default
                    True (order="shards": the shards and the windows)
    drop_last       True: no short last batch; default False
    rank            this process's shard: None (default) takes rank and
                    world_size from the launcher (torchrun, SLURM, MPI);
                    give both or neither
    world_size      the number of shards: with rank, or neither
    shard_mode      "pad" (the default) or "drop": DistributedSampler's
                    drop_last
    first_epoch     the first epoch's number; default 0
    resume          None (default): start at first_epoch; else go on from a
                    state of state_dict() or state(), with exactly the
                    batches the saved loader would have delivered next
    num_workers     Decode threads. 0 (default): the CPUs this process may
                    run on (its affinity mask, and a cgroup CPU quota where
                    one is set) shared among the launcher's ranks on this
                    node, at least 1; "auto": as many threads, of which the
                    loader uses the fewest that keep the training loop from
                    waiting (a notice says how many;
                    stats['workers_active']); or N
    pin_workers     True: worker i runs on the i-th CPU the process may use
                    (modulo their number), so a worker's caches stay its
                    own. Default False.
    readahead       N > 0: ask the kernel (posix_fadvise WILLNEED) to start
                    reading the file N samples ahead of the one being
                    claimed, for storage where files are not in the page
                    cache. Default 0 (off).
    prefetch        Batch slots in the host ring; default 2 (prefetch x the
                    batch's bytes of page-locked memory, bounded with the
                    node's other ranks); "auto": 2 at first, one more
                    whenever batches come late while the workers wait for a
                    free slot (a slow sample holding its batch back), up to
                    8 or what the node's pinned bound allows (a notice says
                    where it settled; stats['prefetch_active']); or N
    memory          the host ring's memory: "pinned" (the default),
                    "pageable" or "managed"
    pinned_fallback True: if pinned memory cannot be had (cudaHostAlloc
                    fails, mlock is not permitted), use pageable memory and
                    say why in a notice; False: fail pl_loader_create with
                    the reason. Default True. A ring over the node's bound
                    on pinned memory (pl_loader_create) is refused either
                    way: that is a configuration to change, not memory
                    missing now.
    device          "auto" (the default: the current CUDA device, else the
                    host), "host"/"cpu", "local_rank", "cuda", "cuda:N", N,
                    or a torch.device
    device_buffers  Device buffers, each with its copy stream; default 2.
    keep_host       True: pl_batch.host holds the batch in page-locked host
                    memory too, at the cost of one host copy per batch on
                    the CUDA backend (and device_buffers x
                    pl_info.batch_bytes more page-locked memory, on the
                    GPU's NUMA node, counted in the bound of
                    pl_loader_create). On the host backend pl_batch.host is
                    always set. Default False.
    gpu_normalize   True: on the CUDA backend, float formats cross the bus
                    as uint8 (a quarter of float32's bytes) and are
                    normalised on the GPU, on the copy stream, into exactly
                    the bytes the host path would make. Needs a build with
                    nvcc, and keep_host 0. Default True.
    on_error        what a bad file does: "skip" (the default), "fail" or
                    "substitute" (zeros, with its status)
    strict          True: libjpeg warnings (corrupt data, premature end)
                    anywhere in the file make the sample bad, whatever the
                    crop; default False.
    max_width       an image's width; default 32768
    max_height      an image's height; default 32768
    max_pixels      its width x height; default 178956970, as Pillow's bomb
                    limit
    max_file_bytes  its file's bytes; default 256 MiB
    max_decode_ms   Wall-clock time of one decode, from the header to the
                    last row: default 5000 ms (the slowest real photo of the
                    test data takes 0.2 s); -1: none. It also bounds how
                    long pl_loader_destroy waits for a worker.
    max_scans       Scans of a progressive file: default 256 (real files
                    have about 10; each scan costs a pass over the whole
                    image).
    max_decode_memory  Bytes decoding one image may hold, checked from its
                    header before anything is decoded, whatever the crop.
                    JPEG: libjpeg's memory (a progressive file keeps all of
                    its DCT coefficients, 128 bytes per 8x8 block per
                    component), then enforced as libjpeg's
                    max_memory_to_use; baseline images need a few rows
                    whatever their size. PNG and WebP, decoded at full size:
                    every pixel (3 bytes) and the decoder's buffers (a
                    WebP's decoded rectangle, 3 bytes a pixel more; a
                    lossless one's ARGB image; an interlaced PNG whole), and
                    a PNG's text and ICC profile chunks (at most 1 MiB each
                    and 64 MiB in all, as Pillow). Default 512 MiB: a
                    progressive 4:4:4 JPEG of 85 megapixels, 4:2:0 of 170; a
                    PNG of 178, a lossy WebP of 89, a lossless one of 51. At
                    least 1 MiB.
    log             None (default): the "pinload" logger (notices at INFO,
                    warnings at WARNING), and each kind of warning once per
                    loader as a pinload.PinloadWarning; or a callable(level,
                    message) with logging's levels, which then gets them all
    layout          "nchw" (float formats' default) or "nhwc": float images
                    interleaved, a channels_last tensor of NCHW shape in
                    torch; u8 is always NHWC
    max_device_buffers  None (default): a batch kept alive while the next is
                    asked for adds a device buffer, without bound (memory,
                    never an error); N > device_buffers: at most N buffers,
                    then BusyError; 0: device_buffers
    cache_dir       The node's cache of fetched shards, shared by the ranks
                    of a node (file locks: each shard is fetched once per
                    node). Default None: $PINLOAD_CACHE_DIR, else
                    $XDG_CACHE_HOME/pinload/shards, else
                    ~/.cache/pinload/shards, else /tmp/pinload-UID/shards.
                    Folders it makes are 0700; one another user could change
                    (not yours, writable by others, under another user's
                    folder) is refused, PL_EIO naming it; a group's setgid
                    folder named here is shared on purpose (docs/DATA.md).
                    The library keeps no pointer after create.
    cache_limit     Bytes the cache may hold: 0 (default): no bound. Beyond
                    it the least recently used shards no rank reads are
                    evicted; when the remote dataset is larger than the
                    bound, members are read one by one with ranged requests
                    instead (the exact order needs any member at any time),
                    except in order="shards", where each rank streams its
                    own shards whole, a few at a time, if the bound holds
                    those of the node's ranks (docs/DATA.md).
    remote_timeout_ms  A transfer that moves no byte for this long is cut
                    and retried (also the connect timeout), in ms: 0
                    (default): 30000.
    remote_retries  Attempts after the first on a transport error, a short
                    body, a stall, HTTP 408, 429 or 5xx, with backoff (100
                    ms doubling, at most 5 s); a download resumes where it
                    stopped (Range). 0 (default): 5; -1: none.
    order           "global" (the default: the exact global shuffle) or
                    "shards" (tar shards only: a seeded order of the shards
                    dealt to the ranks in equal ranges, each read in
                    sequence, shuffled within windows of shuffle_window
                    positions)
    shuffle_window  order="shards": the samples of this many consecutive
                    positions of a rank's epoch are shuffled among
                    themselves (with shuffle 1); 1: none, the shards'
                    samples in file order. 0 (default): 4096. Set with
                    order="global" it is refused (PL_EINVAL): it would do
                    nothing.
    extras          side data each batch carries per sample: shard members
                    by extension, a list file's tab-separated columns after
                    the label, or the files beside a folder's images (x.txt
                    beside x.jpg): "txt,json", ("txt", "json"), or {"txt":
                    "str", "json": "json", "npy": callable}; batch.extras
                    gives the bytes, loader.extras_of(batch) them decoded;
                    default None: none
    extras_required What a sample lacking one of them gets. 0 (default): an
                    empty entry (0 bytes). True: the sample is bad,
                    PL_ENOEXTRA naming the member, and on_error decides as
                    for an image that cannot be read.
    label_field     Tar shards: each sample's label from this top-level
                    field of its JSON member (KEY.json), an integer in [0,
                    2^20), instead of its cls member. Every json member is
                    read at create (one read a sample, once a create). A key
                    whose label cannot be had so (no json member, not JSON,
                    no such field, not such an integer) is bad by
                    construction, PL_ECORRUPT saying why. Local shards only:
                    remote ones, folders and list files are PL_EINVAL.
                    Default None: the cls member. The library keeps no
                    pointer after create.
    transform       The ops each sample goes through, as a spec: ops
                    separated by ';', each a name with its values in
                    parentheses, positional then key=value
                    ("rrc(224,scale=0.08:1);hflip(0.5);grayscale(0.1);
                    normalize(mean=0.485:0.456:0.406,std=0.229:0.224:0.225)"):
                    first the geometric ops (random_resized_crop or rrc,
                    resize, center_crop, hflip, vflip: fused into the
                    decode, one resample at most, ending at width x height),
                    then the pixel ops (grayscale, color_jitter,
                    gaussian_blur, solarize, posterize, equalize,
                    autocontrast, rotate, affine, and the policies
                    rand_augment, trivial_augment_wide and auto_augment),
                    then normalize (float formats only; without it they are
                    normalised with mean and std), then random_erasing
                    (erase: on the normalised sample, as timm), each op
                    drawing from its own random stream, keyed by (seed,
                    epoch, dataset index, its place); and last, at most one
                    batch op, mixup (timm's Mixup and CutMix on each
                    delivered batch, soft labels in pl_batch.soft_labels;
                    drawn per batch and rank). Parsed at create: PL_EINVAL
                    names the op and the parameter ("config.transform: rrc:
                    scale=0.08:x: not a number"); pl_transform_check checks
                    one without a loader. Default None: augment's preset
                    (which a spec replaces). The library keeps no pointer
                    after create.
    remote_create_timeout_ms  The most pl_loader_create spends on the remote
                    shards' transfers (their indexes, the shards without one
                    fetched whole, classes.txt), attempts, backoff and waits
                    for another rank's download included, in ms: past it
                    they are cut and create fails, PL_EIO naming the first
                    shard in order and this field. 0 (default): 600000 (10
                    minutes); -1: none.
    decode          where JPEGs are decoded: "cpu" (the default: the
                    workers, with libjpeg-turbo), "gpu" (the loader's GPU,
                    with nvJPEG loaded at run time: an error without it) or
                    "auto" (the GPU where nvJPEG can be had, else the CPU,
                    with a notice); PNG, WebP and the JPEGs nvJPEG cannot
                    decode stay on the CPU
    views           None (default): one view, transform='s; or 2 to 16
                    transform specs, each made from every sample and
                    delivered in the same batch (batch.views, one array
                    each; pinload.torch.Loader yields a list of tensors):
                    SimCLR's two crops, DINO's global and local ones. Each
                    ends the image at its own size (its last crop or resize
                    to WxH, or S); the image is decoded once, at full size,
                    and view v draws from seed + v. transform= and augment=
                    are then not used
    cpu_budget      N > 0: the most worker threads that take samples at
                    once, the cores the workers may keep busy: num_workers 0
                    (the default) and PL_AUTO stay within it, and a
                    num_workers above it is refused. With decode
                    decode="auto" the GPU decodes what the budget's workers
                    do not. Default 0: none.
    """

    defaults = dict(_DEFAULTS)

    def __init__(self, data: PathLike,
                 **options: Unpack[LoaderOptions]) -> None:
        if data is None:
            raise ValueError("data: required (a folder or a list file)")
        cfg = _config(data, options)
        log = _Log(options.get("log"))
        extras = options.get("extras")
        self._decoders = {} if extras is None else _extras(extras)[1]
        self._config = cfg
        self._log = log
        self._pid = os.getpid()
        # Where the loader stands: the C loader (made again by set_epoch,
        # load_state_dict, an epoch after a break), the epoch being
        # delivered, the changes waiting their turn (_turn) and close().
        self._cv = threading.Condition()
        self._run: Optional[_Run] = None
        self._turns: Deque[object] = collections.deque()
        self._closing = False
        try:
            _scale_check(cfg, log)
            if cfg.get("decode", _DECODES["cpu"]) != _DECODES["cpu"]:
                _nvjpeg_from_wheel()
            self._c = _pinload.Loader(cfg, log)
            self._info = self._c.info()
            device = options.get("device")
            if (_wants_cuda(device) and
                    self._info["backend"] != _C.BACKEND_CUDA):
                log.say(logging.WARNING,
                        "device=%r: no CUDA device could be had, so the "
                        "batches are in host memory (backend: %s). Say "
                        "device=\"host\" to mean the host, or a device's "
                        "ordinal (device=0, \"cuda:0\") to fail instead"
                        % (str(device), self._info["backend_name"]),
                        kind="device")
        finally:
            log.flush()  # what create said, even when it failed
        # The first iter() after resume=/load_state_dict goes on mid-epoch.
        self._resuming = options.get("resume") is not None

    # -- changing where the loader stands: iter(), set_epoch,
    # -- load_state_dict, and loader.next() starting to step an epoch --
    @contextlib.contextmanager
    def _turn(self, end: bool, wait: bool = True
              ) -> Iterator[Tuple[Optional[_Run], int, int]]:
        """This call's turn to change where the loader stands. Changes go
        one at a time, in the order they were asked for; with `wait`, a
        change also waits while another thread's iterator holds the epoch
        in progress (_Run.holds), so that epoch is delivered whole. A
        thread's own epoch never makes it wait, and it lets go of it while
        waiting behind another change (which may be waiting for it). With
        `end`, the epoch in progress is ended (its later calls give no
        batch; those inside the C loader are delivered first). Yields that
        run and where the C loader stands, (epoch, batch)."""
        me = threading.current_thread()
        token = object()
        with self._log.held(), self._cv:
            self._turns.append(token)
            try:
                while True:
                    if self._closing:
                        raise _closed()
                    run = self._run
                    first = self._turns[0] is token
                    if first and not (wait and run is not None and
                                      run.holds(me)):
                        break
                    if not first and run is not None and run.thread is me:
                        # A change asked for before may wait for it.
                        run.thread = None
                        self._cv.notify_all()
                    self._cv.wait(_POLL_S if first else None)
                if run is not None:
                    run.over = run.over or end
                    while run.over and run.out > 0:
                        self._cv.wait()
                e, b, _ = _pinload.state_get(self._c.state())
            except BaseException:
                self._turns.remove(token)
                self._cv.notify_all()
                raise
        try:
            with self._log.held():
                yield run, e, b
        finally:
            with self._cv:
                self._turns.remove(token)
                self._cv.notify_all()

    def _rebuild(self, what: str, run: Optional[_Run],
                 **changes: Any) -> None:
        """Make the C loader again with `changes`, in _turn. The new one is
        made before the old one goes: refused (the data unreachable, a
        state of other data), the error names `what` and the loader is as
        it was, its epoch in progress included. Made, it ends `run`."""
        cfg = dict(self._config)
        cfg.pop("resume", None)
        cfg.update(changes)
        try:
            new = _pinload.Loader(cfg, self._log)
        except Error as e:
            raise type(e)(e.code, e.name,
                          "%s: %s (the loader is as it was)"
                          % (what, e.detail)) from None
        with self._cv:
            closing = self._closing
            if not closing:
                if run is not None:
                    run.over = True
                    while run.out > 0:
                        self._cv.wait()
                old, self._c = self._c, new
                self._info = new.info()
        if closing:
            new.close()
            raise _closed()
        # Batches still alive keep the old loader (and its buffers) until
        # they go: close() destroys it only then.
        old.close()

    def _call(self, method: str, *args: Any) -> Any:
        """A call on the C loader; on the new one if a change replaced it
        while the call was on its way (the old one closed under it)."""
        while True:
            c = self._c
            try:
                return getattr(c, method)(*args)
            except ClosedError:
                if self._closing or self._c is c:
                    raise

    def _here(self) -> None:
        """Refuse a forked child (a DataLoader worker, num_workers > 0):
        the loader's threads are not in it."""
        if os.getpid() != self._pid:
            raise RuntimeError(
                "this pinload loader was made in process %d and this is "
                "process %d, a fork of it (a DataLoader worker: num_workers "
                "> 0), which has none of its threads: use num_workers=0: "
                "pinload has its own workers (Loader(num_workers=N), "
                "threads of the loader's process)" % (self._pid, os.getpid()))

    def __reduce__(self) -> Any:
        raise TypeError(
            "a pinload loader cannot be pickled or copied to another process "
            "(a DataLoader with num_workers > 0 under spawn or forkserver "
            "tries to): use num_workers=0: pinload has its own workers "
            "(Loader(num_workers=N), threads of the loader's process)")

    # -- iteration --
    def __iter__(self) -> Iterator[Batch]:
        """One epoch, as DataLoader's iter(): the next epoch from its first
        batch (the one set_epoch pinned, if it was called), or, the first
        time after resume= or load_state_dict, the rest of the saved one.
        An epoch left part-way (a break, islice, limit_train_batches) is
        over: the next iter() starts the epoch after it. From another
        thread while one iterates an epoch, it waits until that one is
        over, then starts the next (docs/python.md, "Threads")."""
        self._here()
        epoch = _Epoch(self)
        try:
            with self._turn(end=True) as (_, e, b):
                n = len(self)
                if not (b == 0 or (self._resuming and b < n)):
                    if b < n or not self._end_taken():
                        self._rebuild("iter(loader): epoch %d (epoch %d was "
                                      "left part-way)" % (e + 1, e), None,
                                      first_epoch=e + 1)
                    e, b, _ = _pinload.state_get(self._c.state())
                self._resuming = False
                run = _Run(self._c, n - b, threading.current_thread(),
                           weakref.ref(epoch))
                with self._cv:
                    self._run = run
        finally:
            self._log.flush()
        epoch._run = run
        return epoch

    def _end_taken(self) -> bool:
        """The end of an epoch whose batches were all delivered, taken from
        the C loader; False when it cannot be had (every buffer still
        held): the next epoch then starts afresh."""
        try:
            b = self._c.next()
        except BusyError:
            return False
        if b is None:
            return True
        b.release()  # not the end: the count was wrong; start afresh
        return False

    def _take(self, run: _Run) -> Optional[Batch]:
        """The next batch of `run`, or None once it is over (its end was
        taken, or a change ended it). A batch's ticket is taken first, and
        given back if the C loader delivers none (BusyError, an error);
        the end is asked for only once the calls in flight are back, or
        the C loader could give one of their batches to it."""
        self._here()  # before any lock: a fork's may be held for ever
        with self._cv:
            if run.over:
                return None
            if self._closing:
                raise _closed()
            end = run.left == 0
            if end:
                if run.end_taken:
                    return None
                run.end_taken = True
                while run.out > 0 and not run.over:
                    self._cv.wait()
                if run.over:
                    return None
            else:
                run.left -= 1
            run.out += 1
        try:
            with self._log.held():
                try:
                    b = self._next_of(run.c)
                except BaseException:
                    with self._cv:
                        run.out -= 1
                        if end:
                            run.end_taken = False
                        else:
                            run.left += 1
                        self._cv.notify_all()
                    raise
                with self._cv:
                    run.out -= 1
                    if b is None or end:
                        run.over = True
                    self._cv.notify_all()
        finally:
            self._log.flush()  # with no call counted: it may call back
        if end and b is not None:
            epoch, index = b.epoch, b.index
            b.release()
            raise RuntimeError("pinload: batch %d of epoch %d came after the "
                               "epoch's last batch (a bug: please report it)"
                               % (index, epoch))
        return b

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
        """The next batch of the epoch in progress, or None at its end (the
        following call starts the next epoch). Shares the epoch an
        iterator is delivering, if one is: its batches go to it or here,
        each once."""
        self._here()
        with self._cv:
            run = self._run
        if run is None or run.over:
            try:
                with self._turn(end=False, wait=False) as (run, _, b):
                    if run is None or run.over:
                        run = _Run(self._c, len(self) - b, None, None)
                        with self._cv:
                            self._run = run
            finally:
                self._log.flush()
        assert run is not None
        return self._take(run)

    def __len__(self) -> int:
        """Batches per epoch (the same on every rank and error policy)."""
        return self._info["batches_per_epoch"]

    def set_epoch(self, epoch: int) -> None:
        """Make `epoch` the one iterated next (as DistributedSampler's):
        free when it is the loader's next epoch, or the resumed one whose
        rest the next iter() gives (the loop `set_epoch(e); for b in
        loader` resumes exactly), else the loader starts again at it. An
        epoch another thread is iterating is delivered whole first."""
        self._here()
        try:
            e = operator.index(epoch)
        except TypeError:
            raise TypeError("set_epoch: expected an integer epoch, got %r"
                            % (epoch,)) from None
        if e < 0:
            raise ValueError("set_epoch(%d): epochs are numbered from 0 (the "
                             "loader is as it was)" % e)
        try:
            with self._turn(end=False) as (run, at, b):
                if at == e and (b == 0 or self._resuming):
                    return
                self._rebuild("set_epoch(%d)" % e, run, first_epoch=e)
                self._resuming = False
        finally:
            self._log.flush()

    @property
    def epoch(self) -> int:
        """The epoch the next iter(loader) gives (its rest, the first time
        after resume= or load_state_dict), as set_epoch sets it; a batch's
        own is batch.epoch."""
        e, b, _ = _pinload.state_get(self._call("state"))
        if b == 0 or (self._resuming and b < len(self)):
            return e
        return e + 1

    @property
    def batch_size(self) -> int:
        """Samples per batch (the last one of an epoch may have fewer), as
        DataLoader.batch_size."""
        return self._info["batch_size"]

    @property
    def dataset(self) -> Dataset:
        """The samples the loader reads, as DataLoader.dataset: len() the
        dataset's size (every rank's), [i] (path, label), classes."""
        return Dataset(self)

    # -- resume --
    def state(self) -> bytes:
        """Where the loader stands, as pl_state's 128 bytes."""
        return self._call("state")

    def state_dict(self) -> Dict[str, Any]:
        """{"state": str, "epoch": e, "batch": i}, ints and strings only
        (the 128 state bytes as hex), so JSON and distributed checkpoints
        take it as it is: load_state_dict() (or Loader(resume=...)) goes on
        with exactly the batches this loader would deliver next."""
        self._here()
        s = self._call("state")
        e, b, _ = _pinload.state_get(s)
        return {"state": s.hex(), "epoch": e, "batch": b}

    def load_state_dict(self, state_dict: StateLike) -> None:
        """Go on from a state_dict() (or state()): the next iter() gives
        the rest of its epoch. Refused (not a state, a state of other
        data), the loader is as it was."""
        self._here()
        state = _state_bytes(state_dict)
        try:
            with self._turn(end=False) as (run, _, _):
                self._rebuild("load_state_dict", run, resume=state)
                self._resuming = True
        finally:
            self._log.flush()

    # -- what the loader is --
    @property
    def info(self) -> Dict[str, Any]:
        """pl_info as a dict (format, memory, backend and decode by
        name)."""
        d = dict(self._info)
        d["format"] = _name_of(_FORMATS, d["format"])
        d["memory"] = _name_of(_MEMORY, d["memory"])
        d["decode"] = _name_of(_DECODES, d["decode"])
        d["backend"] = "cuda" if d["backend"] == _C.BACKEND_CUDA else "host"
        return d

    @property
    def stats(self) -> Dict[str, int]:
        """pl_stats as a dict (counters since create; times in ns)."""
        return self._call("stats")

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
        return [self._call("class_name", i)
                for i in range(self._info["num_classes"])]

    @property
    def failures(self) -> List[Failure]:
        """Bad files met so far (and files decoded with warnings)."""
        return [Failure(i, path, code, name, _python_words(reason), n, w)
                for i, path, code, name, reason, n, w in
                self._call("failures")]

    def sample(self, index: int) -> Tuple[str, int]:
        """(path, label) of dataset index `index`."""
        return self._call("sample", index)

    def epoch_order(self, epoch: int) -> List[int]:
        """This rank's dataset indices for `epoch`, in delivery order."""
        return self._call("epoch_order", epoch)

    @property
    def batches_held(self) -> int:
        """Batches (or tensors made from them) not yet given back."""
        return self._c.held

    # -- the end --
    def close(self) -> None:
        """No further batches; the C loader and its threads go once no
        batch or tensor of it is alive (at once when none is). From any
        thread: one waiting for a batch, or for its turn to start an
        epoch, raises ClosedError."""
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        # A change making a C loader meanwhile closes that one itself: from
        # here on none replaces self._c (_rebuild looks under _cv).
        self._c.close()
        self._log.flush()

    @property
    def closed(self) -> bool:
        return self._closing or self._c.closed

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


def _signature() -> inspect.Signature:
    """Loader.__init__'s keywords one by one, for help() and inspect
    (type checkers read LoaderOptions)."""
    hints = get_type_hints(LoaderOptions)
    pos = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature(
        [inspect.Parameter("self", pos),
         inspect.Parameter("data", pos, annotation="PathLike")] +
        [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None,
                           annotation=hints[k]) for k in _options.KEYWORDS],
        return_annotation=None)


setattr(Loader.__init__, "__signature__", _signature())


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


def _transform_config(transform: Optional[str], size: Any, seed: int,
                      options: Mapping[str, Any]) -> Dict[str, Any]:
    """The config dict a Loader of these keywords would have, for the
    transform entry points below (no data is read)."""
    kw = dict(options, size=size, seed=seed)
    if transform is not None:
        kw["transform"] = transform
    return _config(".", kw)


def _number(text: str) -> Union[int, float, str]:
    """A drawn value as pl_transform_params writes it: a number, or a word
    (a policy's transform: "op0=shear_x")."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _plan(transform: Optional[str], size: Any, image_size: Tuple[int, int],
          epoch: int = 0, index: int = 0, seed: int = 0,
          **options: Any) -> List[Tuple[str, Dict[str, Union[int, float, str]]]]:
    """What `transform` (a spec, docs/transforms.md; None: `augment=`'s
    preset) draws for dataset index `index` of `epoch` on an image of
    image_size = (width, height): [(op, {parameter: value})], as
    pl_transform_params says, e.g. [("random_resized_crop", {"top": 3,
    "left": 10, "height": 200, "width": 150}), ("hflip", {"flip": 1})].
    A batch op (mixup) says what it draws for the batch numbered `index`
    of `epoch` ({"lam": 0.71, "cutmix": 0}, and a cutmix's box). The
    other keywords are Loader's (format=, augment=...). For tests and
    for looking; the drawn values are the loader's exactly."""
    cfg = _transform_config(transform, size, seed, options)
    text = _pinload.transform_params(cfg, image_size[0], image_size[1],
                                     epoch, index)
    out: List[Tuple[str, Dict[str, Union[int, float, str]]]] = []
    for part in text.split(";"):
        name, _, inner = part.partition("(")
        values = {}
        for kv in inner.rstrip(")").split(","):
            if kv:
                k, _, v = kv.partition("=")
                values[k] = _number(v)
        out.append((name, values))
    return out


def _canonical(transform: Optional[str], size: Any = 224,
               **options: Any) -> str:
    """`transform` (a spec; None: `augment=`'s preset) with every
    parameter written out, as pl_transform_check writes it for a Loader
    of these keywords: two specs are the same transform when these are
    equal."""
    return _pinload.transform_check(_transform_config(transform, size, 0,
                                                      options))


def _apply(transform: Optional[str], image: Any, size: Any, epoch: int = 0,
           index: int = 0, seed: int = 0, **options: Any) -> bytes:
    """The sample a Loader with `transform` (and these keywords) makes for
    dataset index `index` of `epoch` from `image`, pixels decoded at full
    size: a (height, width, 3) uint8 array or anything with that
    __array_interface__ (NumPy, a torch tensor's .numpy()), as
    pl_transform_image makes it. The sample's bytes: uint8 HWC for "u8",
    else the format's floats (NCHW, or NHWC with layout="nhwc"). For the
    reference tests (python/tests/test_transforms_ref.py)."""
    shape = tuple(image.shape)
    if len(shape) != 3 or shape[2] != 3 or str(image.dtype) != "uint8":
        raise ValueError("_apply: expected a (height, width, 3) uint8 "
                         "array, got %s %s" % (shape, image.dtype))
    cfg = _transform_config(transform, size, seed, options)
    return _pinload.transform_image(cfg, image.tobytes(), shape[1], shape[0],
                                    epoch, index)


class Dataset(Sequence[Tuple[str, int]]):
    """The samples a Loader reads (loader.dataset), where frameworks look
    for a DataLoader's dataset: len() is the dataset's size, every rank's
    samples (len(loader) is this rank's batches); [i] is (path, label) of
    dataset index i; classes are the class names by label."""

    def __init__(self, loader: Loader) -> None:
        self._loader = loader

    def __len__(self) -> int:
        return int(self._loader._info["dataset_size"])

    @overload
    def __getitem__(self, i: int) -> Tuple[str, int]: ...

    @overload
    def __getitem__(self, i: slice) -> List[Tuple[str, int]]: ...

    def __getitem__(self, i: Union[int, slice]) -> Any:
        n = len(self)
        if isinstance(i, slice):
            return [self._loader.sample(j) for j in range(*i.indices(n))]
        k = i + n if i < 0 else i
        if not 0 <= k < n:
            raise IndexError("dataset index %d out of range (%d samples)"
                             % (i, n))
        return self._loader.sample(k)

    @property
    def classes(self) -> List[str]:
        return self._loader.classes

    def __repr__(self) -> str:
        return "<pinload.Dataset %s: %d samples, %d classes>" % (
            self._loader._config["data"], len(self),
            self._loader.info["num_classes"])


# The extension's types, for isinstance checks and documentation.
Batch = _pinload.Batch
View = _pinload.View
