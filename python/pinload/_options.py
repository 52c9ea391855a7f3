"""pinload.Loader's keywords. tools/config-fields.py wrote this file
from include/pinload.h's pl_config (the docs are its comments) and
its own table of the keywords that are not a field as it is: do not
edit (`make config-fields`)."""

import os
from typing import (Any, Callable, Dict, Mapping, Optional, Sequence, Tuple,
                    TypedDict, Union)

#: What a path may be (os.fspath takes it).
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
#: A saved state: a state_dict(), or the 128 bytes (state()).
StateLike = Union[Mapping[str, Any], bytes, bytearray, memoryview, str]
#: How an extra's bytes become what extras_of gives: "bytes", "str",
#: "json", or a callable.
ExtraDecoder = Union[str, Callable[[bytes], Any]]
#: A torch dtype (torch.float32...): format= takes the images' own. Any:
#: pinload does not import torch.
TorchDtype = Any


class LoaderOptions(TypedDict, total=False):
    """pinload.Loader's keywords, each optional (None: the default,
    pinload.Loader.defaults)."""

    batch_size: Optional[int]
    """samples per batch; default 64"""
    size: Optional[Union[int, Tuple[int, int]]]
    """the output's height and width in pixels: an int for both, or
    (height, width); default 224"""
    format: Optional[Union[str, TorchDtype]]
    """"u8" (uint8 NHWC, the default), "f32", "f16" or "bf16" (normalised
    NCHW; bf16 a torch.bfloat16 tensor), or the torch dtype:
    torch.uint8, torch.float32, torch.float16, torch.bfloat16"""
    augment: Optional[str]
    """"train" (RandomResizedCrop + flip, the default), "eval" (Resize +
    CenterCrop) or "none" (resize to size)"""
    mean: Optional[Sequence[float]]
    """Float formats' normalisation, (x / 255 - mean) / std per channel:
    mean, default ImageNet's 0.485 0.456 0.406; std, default ImageNet's
    0.229 0.224 0.225."""
    std: Optional[Sequence[float]]
    """see mean; default 0.229 0.224 0.225"""
    dct_scaling: Optional[bool]
    """True: decode at 1/2, 1/4 or 1/8 scale (libjpeg's DCT scaling, as
    Pillow's draft mode) whenever the crop still has at least as many
    pixels as the resize needs: much faster, pixels slightly different.
    False: decode at full size, pixels within 1 level of
    Pillow/torchvision. Default True."""
    seed: Optional[int]
    """order and augmentation; default 0"""
    shuffle: Optional[bool]
    """True: permute each epoch; False: file order; default True
    (order="shards": the shards and the windows)"""
    drop_last: Optional[bool]
    """True: no short last batch; default False"""
    rank: Optional[int]
    """this process's shard: None (default) takes rank and world_size from
    the launcher (torchrun, SLURM, MPI); give both or neither"""
    world_size: Optional[int]
    """the number of shards: with rank, or neither"""
    shard_mode: Optional[str]
    """"pad" (the default) or "drop": DistributedSampler's drop_last"""
    first_epoch: Optional[int]
    """the first epoch's number; default 0"""
    resume: Optional[StateLike]
    """None (default): start at first_epoch; else go on from a state of
    state_dict() or state(), with exactly the batches the saved loader
    would have delivered next"""
    num_workers: Optional[Union[int, str]]
    """Decode threads. 0 (default): the CPUs this process may run on (its
    affinity mask, and a cgroup CPU quota where one is set) shared among
    the launcher's ranks on this node, at least 1; "auto": as many
    threads, of which the loader uses the fewest that keep the training
    loop from waiting (a notice says how many; stats['workers_active']);
    or N"""
    pin_workers: Optional[bool]
    """True: worker i runs on the i-th CPU the process may use (modulo
    their number), so a worker's caches stay its own. Default False."""
    readahead: Optional[int]
    """N > 0: ask the kernel (posix_fadvise WILLNEED) to start reading the
    file N samples ahead of the one being claimed, for storage where
    files are not in the page cache. Default 0 (off)."""
    prefetch: Optional[Union[int, str]]
    """Batch slots in the host ring; default 2 (prefetch x the batch's
    bytes of page-locked memory, bounded with the node's other ranks);
    "auto": 2 at first, one more whenever batches come late while the
    workers wait for a free slot (a slow sample holding its batch back),
    up to 8 or what the node's pinned bound allows (a notice says where
    it settled; stats['prefetch_active']); or N"""
    memory: Optional[str]
    """the host ring's memory: "pinned" (the default), "pageable" or
    "managed\""""
    pinned_fallback: Optional[bool]
    """True: if pinned memory cannot be had (cudaHostAlloc fails, mlock is
    not permitted), use pageable memory and say why in a notice; False:
    fail pl_loader_create with the reason. Default True. A ring over the
    node's bound on pinned memory (pl_loader_create) is refused either
    way: that is a configuration to change, not memory missing now."""
    device: Any
    """"auto" (the default: the current CUDA device, else the host),
    "host"/"cpu", "local_rank", "cuda", "cuda:N", N, or a torch.device"""
    device_buffers: Optional[int]
    """Device buffers, each with its copy stream; default 2."""
    keep_host: Optional[bool]
    """True: pl_batch.host holds the batch in page-locked host memory too,
    at the cost of one host copy per batch on the CUDA backend (and
    device_buffers x pl_info.batch_bytes more page-locked memory, on the
    GPU's NUMA node, counted in the bound of pl_loader_create). On the
    host backend pl_batch.host is always set. Default False."""
    gpu_normalize: Optional[bool]
    """True: on the CUDA backend, float formats cross the bus as uint8 (a
    quarter of float32's bytes) and are normalised on the GPU, on the
    copy stream, into exactly the bytes the host path would make. Needs
    a build with nvcc, and keep_host 0. Default True."""
    on_error: Optional[str]
    """what a bad file does: "skip" (the default), "fail" or "substitute"
    (zeros, with its status)"""
    strict: Optional[bool]
    """True: libjpeg warnings (corrupt data, premature end) anywhere in the
    file make the sample bad, whatever the crop; default False."""
    max_width: Optional[int]
    """an image's width; default 32768"""
    max_height: Optional[int]
    """an image's height; default 32768"""
    max_pixels: Optional[int]
    """its width x height; default 178956970, as Pillow's bomb limit"""
    max_file_bytes: Optional[int]
    """its file's bytes; default 256 MiB"""
    max_decode_ms: Optional[int]
    """Wall-clock time of one decode, from the header to the last row:
    default 5000 ms (the slowest real photo of the test data takes 0.2
    s); -1: none. It also bounds how long pl_loader_destroy waits for a
    worker."""
    max_scans: Optional[int]
    """Scans of a progressive file: default 256 (real files have about 10;
    each scan costs a pass over the whole image)."""
    max_decode_memory: Optional[int]
    """Bytes decoding one image may hold, checked from its header before
    anything is decoded, whatever the crop. JPEG: libjpeg's memory (a
    progressive file keeps all of its DCT coefficients, 128 bytes per
    8x8 block per component), then enforced as libjpeg's
    max_memory_to_use; baseline images need a few rows whatever their
    size. PNG and WebP, decoded at full size: every pixel (3 bytes) and
    the decoder's buffers (a WebP's decoded rectangle, 3 bytes a pixel
    more; a lossless one's ARGB image; an interlaced PNG whole), and a
    PNG's text and ICC profile chunks (at most 1 MiB each and 64 MiB in
    all, as Pillow). Default 512 MiB: a progressive 4:4:4 JPEG of 85
    megapixels, 4:2:0 of 170; a PNG of 178, a lossy WebP of 89, a
    lossless one of 51. At least 1 MiB."""
    log: Optional[Callable[[int, str], None]]
    """None (default): the "pinload" logger (notices at INFO, warnings at
    WARNING), and each kind of warning once per loader as a
    pinload.PinloadWarning; or a callable(level, message) with logging's
    levels, which then gets them all"""
    layout: Optional[str]
    """"nchw" (float formats' default) or "nhwc": float images interleaved,
    a channels_last tensor of NCHW shape in torch; u8 is always NHWC"""
    max_device_buffers: Optional[int]
    """None (default): a batch kept alive while the next is asked for adds
    a device buffer, without bound (memory, never an error); N >
    device_buffers: at most N buffers, then BusyError; 0: device_buffers"""
    cache_dir: Optional[PathLike]
    """The node's cache of fetched shards, shared by the ranks of a node
    (file locks: each shard is fetched once per node). Default None:
    $PINLOAD_CACHE_DIR, else $XDG_CACHE_HOME/pinload/shards, else
    ~/.cache/pinload/shards, else /tmp/pinload-UID/shards. Folders it
    makes are 0700; one another user could change (not yours, writable
    by others, under another user's folder) is refused, PL_EIO naming
    it; a group's setgid folder named here is shared on purpose
    (docs/DATA.md). The library keeps no pointer after create."""
    cache_limit: Optional[int]
    """Bytes the cache may hold: 0 (default): no bound. Beyond it the least
    recently used shards no rank reads are evicted; when the remote
    dataset is larger than the bound, members are read one by one with
    ranged requests instead (the exact order needs any member at any
    time), except in order="shards", where each rank streams its own
    shards whole, a few at a time, if the bound holds those of the
    node's ranks (docs/DATA.md)."""
    remote_timeout_ms: Optional[int]
    """A transfer that moves no byte for this long is cut and retried (also
    the connect timeout), in ms: 0 (default): 30000."""
    remote_retries: Optional[int]
    """Attempts after the first on a transport error, a short body, a
    stall, HTTP 408, 429 or 5xx, with backoff (100 ms doubling, at most
    5 s); a download resumes where it stopped (Range). 0 (default): 5;
    -1: none."""
    order: Optional[str]
    """"global" (the default: the exact global shuffle) or "shards" (tar
    shards only: a seeded order of the shards dealt to the ranks in
    equal ranges, each read in sequence, shuffled within windows of
    shuffle_window positions)"""
    shuffle_window: Optional[int]
    """order="shards": the samples of this many consecutive positions of a
    rank's epoch are shuffled among themselves (with shuffle 1); 1:
    none, the shards' samples in file order. 0 (default): 4096. Set with
    order="global" it is refused (PL_EINVAL): it would do nothing."""
    extras: Optional[Union[str, Sequence[str], Mapping[str, ExtraDecoder]]]
    """side data each batch carries per sample: shard members by extension,
    a list file's tab-separated columns after the label, or the files
    beside a folder's images (x.txt beside x.jpg): "txt,json", ("txt",
    "json"), or {"txt": "str", "json": "json", "npy": callable};
    batch.extras gives the bytes, loader.extras_of(batch) them decoded;
    default None: none"""
    extras_required: Optional[bool]
    """What a sample lacking one of them gets. 0 (default): an empty entry
    (0 bytes). True: the sample is bad, PL_ENOEXTRA naming the member,
    and on_error decides as for an image that cannot be read."""
    label_field: Optional[str]
    """Tar shards: each sample's label from this top-level field of its
    JSON member (KEY.json), an integer in [0, 2^20), instead of its cls
    member. Every json member is read at create (one read a sample, once
    a create). A key whose label cannot be had so (no json member, not
    JSON, no such field, not such an integer) is bad by construction,
    PL_ECORRUPT saying why. Local shards only: remote ones, folders and
    list files are PL_EINVAL. Default None: the cls member. The library
    keeps no pointer after create."""
    transform: Optional[str]
    """The ops each sample goes through, as a spec: ops separated by ';',
    each a name with its values in parentheses, positional then
    key=value ("rrc(224,scale=0.08:1);hflip(0.5);grayscale(0.1);
    normalize(mean=0.485:0.456:0.406,std=0.229:0.224:0.225)"): first the
    geometric ops (random_resized_crop or rrc, resize, center_crop,
    hflip, vflip: fused into the decode, one resample at most, ending at
    width x height), then the pixel ops (grayscale, color_jitter,
    gaussian_blur, solarize, posterize, equalize, autocontrast, rotate,
    affine, and the policies rand_augment, trivial_augment_wide and
    auto_augment), then normalize (float formats only; without it they
    are normalised with mean and std), then random_erasing (erase: on
    the normalised sample, as timm), each op drawing from its own random
    stream, keyed by (seed, epoch, dataset index, its place); and last,
    at most one batch op, mixup (timm's Mixup and CutMix on each
    delivered batch, soft labels in pl_batch.soft_labels; drawn per
    batch and rank). Parsed at create: PL_EINVAL names the op and the
    parameter ("config.transform: rrc: scale=0.08:x: not a number");
    pl_transform_check checks one without a loader. Default None:
    augment's preset (which a spec replaces). The library keeps no
    pointer after create."""
    remote_create_timeout_ms: Optional[int]
    """The most pl_loader_create spends on the remote shards' transfers
    (their indexes, the shards without one fetched whole, classes.txt),
    attempts, backoff and waits for another rank's download included, in
    ms: past it they are cut and create fails, PL_EIO naming the first
    shard in order and this field. 0 (default): 600000 (10 minutes); -1:
    none."""
    decode: Optional[str]
    """where JPEGs are decoded: "cpu" (the default: the workers, with
    libjpeg-turbo), "gpu" (the loader's GPU, with nvJPEG loaded at run
    time: an error without it) or "auto" (the GPU where nvJPEG can be
    had, else the CPU, with a notice); PNG, WebP and the JPEGs nvJPEG
    cannot decode stay on the CPU"""
    views: Optional[Sequence[str]]
    """None (default): one view, transform='s; or 2 to 16 transform specs,
    each made from every sample and delivered in the same batch
    (batch.views, one array each; pinload.torch.Loader yields a list of
    tensors): SimCLR's two crops, DINO's global and local ones. Each
    ends the image at its own size (its last crop or resize to WxH, or
    S); the image is decoded once, at full size, and view v draws from
    seed + v. transform= and augment= are then not used"""
    cpu_budget: Optional[int]
    """N > 0: the most worker threads that take samples at once, the cores
    the workers may keep busy: num_workers 0 (the default) and PL_AUTO
    stay within it, and a num_workers above it is refused. With decode
    decode="auto" the GPU decodes what the budget's workers do not.
    Default 0: none."""


#: keyword: (kind, the pl_config fields it sets, the fields' value when
#: it is None or left out: None for the C default)
KEYWORDS: Dict[str, Tuple[str, Tuple[str, ...], Optional[int]]] = {
    "batch_size": ("int", ("batch_size",), None),
    "size": ("size", ("width", "height"), None),
    "format": ("choice", ("format",), None),
    "augment": ("choice", ("augment",), None),
    "mean": ("floats", ("mean",), None),
    "std": ("floats", ("std",), None),
    "dct_scaling": ("flag", ("dct_scaling",), None),
    "seed": ("int", ("seed",), None),
    "shuffle": ("flag", ("shuffle",), None),
    "drop_last": ("flag", ("drop_last",), None),
    "rank": ("rank", ("rank",), None),
    "world_size": ("rank", ("world_size",), None),
    "shard_mode": ("choice", ("shard_mode",), None),
    "first_epoch": ("int", ("first_epoch",), None),
    "resume": ("state", ("resume",), None),
    "num_workers": ("workers", ("num_workers",), None),
    "pin_workers": ("flag", ("pin_workers",), None),
    "readahead": ("int", ("readahead",), None),
    "prefetch": ("prefetch", ("prefetch",), None),
    "memory": ("choice", ("memory",), None),
    "pinned_fallback": ("flag", ("pinned_fallback",), None),
    "device": ("device", ("device",), None),
    "device_buffers": ("int", ("device_buffers",), None),
    "keep_host": ("flag", ("keep_host",), None),
    "gpu_normalize": ("flag", ("gpu_normalize",), None),
    "on_error": ("choice", ("on_error",), None),
    "strict": ("flag", ("strict",), None),
    "max_width": ("int", ("max_width",), None),
    "max_height": ("int", ("max_height",), None),
    "max_pixels": ("int", ("max_pixels",), None),
    "max_file_bytes": ("int", ("max_file_bytes",), None),
    "max_decode_ms": ("int", ("max_decode_ms",), None),
    "max_scans": ("int", ("max_scans",), None),
    "max_decode_memory": ("int", ("max_decode_memory",), None),
    "log": ("log", ("log",), None),
    "layout": ("layout", ("channels_last",), None),
    "max_device_buffers": ("int", ("max_device_buffers",), -1),
    "cache_dir": ("path", ("cache_dir",), None),
    "cache_limit": ("int", ("cache_limit",), None),
    "remote_timeout_ms": ("int", ("remote_timeout_ms",), None),
    "remote_retries": ("int", ("remote_retries",), None),
    "order": ("choice", ("order",), None),
    "shuffle_window": ("int", ("shuffle_window",), None),
    "extras": ("extras", ("extras",), None),
    "extras_required": ("flag", ("extras_required",), None),
    "label_field": ("str", ("label_field",), None),
    "transform": ("str", ("transform",), None),
    "remote_create_timeout_ms": ("int", ("remote_create_timeout_ms",), None),
    "decode": ("choice", ("decode",), None),
    "views": ("views", ("views", "num_views"), None),
    "cpu_budget": ("int", ("cpu_budget",), None),
}

#: a name-valued keyword's words (its enum's list in pinload.h, as
#: pl_*_name() gives them), and the _pinload constants they stand for
CHOICES: Dict[str, Dict[str, str]] = {
    "format": {
        "u8": "FORMAT_U8_NHWC",
        "f32": "FORMAT_F32_NCHW",
        "f16": "FORMAT_F16_NCHW",
        "bf16": "FORMAT_BF16_NCHW",
    },
    "augment": {
        "none": "AUGMENT_NONE",
        "eval": "AUGMENT_EVAL",
        "train": "AUGMENT_TRAIN",
    },
    "shard_mode": {
        "pad": "SHARD_PAD",
        "drop": "SHARD_DROP",
    },
    "memory": {
        "pinned": "MEMORY_PINNED",
        "pageable": "MEMORY_PAGEABLE",
        "managed": "MEMORY_MANAGED",
    },
    "on_error": {
        "fail": "ON_ERROR_FAIL",
        "skip": "ON_ERROR_SKIP",
        "substitute": "ON_ERROR_SUBSTITUTE",
    },
    "order": {
        "global": "ORDER_GLOBAL",
        "shards": "ORDER_SHARDS",
    },
    "decode": {
        "cpu": "DECODE_CPU",
        "gpu": "DECODE_GPU",
        "auto": "DECODE_AUTO",
    },
}

#: device=: the words of the device field's special values (PL_DEVICE_MAP),
#: and the _pinload constants they stand for
DEVICES: Dict[str, str] = {
    "auto": "DEVICE_AUTO",
    "host": "DEVICE_HOST",
    "local_rank": "DEVICE_LOCAL_RANK",
}
