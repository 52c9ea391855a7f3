"""Types of the C extension (python/src/*.c), for type checkers."""
from typing import Any, Callable, Dict, List, Optional, Tuple

library_version: str
codes: Dict[str, int]
#: each enum constant's word, as pl_*_name() gives it ("f32")
names: Dict[str, str]

FORMAT_U8_NHWC: int
FORMAT_F32_NCHW: int
FORMAT_F16_NCHW: int
FORMAT_BF16_NCHW: int
AUGMENT_NONE: int
AUGMENT_EVAL: int
AUGMENT_TRAIN: int
MEMORY_PINNED: int
MEMORY_PAGEABLE: int
MEMORY_MANAGED: int
ON_ERROR_FAIL: int
ON_ERROR_SKIP: int
ON_ERROR_SUBSTITUTE: int
SHARD_PAD: int
SHARD_DROP: int
ORDER_GLOBAL: int
ORDER_SHARDS: int
BACKEND_HOST: int
BACKEND_CUDA: int
LOG_NOTICE: int
LOG_WARNING: int
DEVICE_AUTO: int
DEVICE_HOST: int
DEVICE_LOCAL_RANK: int
DECODE_CPU: int
DECODE_GPU: int
DECODE_AUTO: int
FROM_ENV: int
AUTO: int
STATE_BYTES: int
VIEWS_MAX: int

def config_defaults() -> Dict[str, Any]: ...
def state_get(state: bytes) -> Tuple[int, int, int]: ...
def register_errors(classes: Dict[int, type]) -> None: ...
def strerror(code: int) -> Tuple[str, str]: ...
def transform_params(config: Dict[str, Any], img_w: int, img_h: int,
                     epoch: int, index: int) -> str: ...
def transform_check(config: Dict[str, Any]) -> str: ...
def transform_image(config: Dict[str, Any], rgb: bytes, img_w: int,
                    img_h: int, epoch: int, index: int) -> bytes: ...

class View:
    shape: Tuple[int, ...]
    dtype: str
    device: str
    nbytes: int
    ptr: int  # 0 once the batch is released
    def __dlpack__(self, *, stream: Optional[int] = ...,
                   max_version: Optional[Tuple[int, int]] = ...,
                   dl_device: Optional[Tuple[int, int]] = ...,
                   copy: Optional[bool] = ...) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    def tobytes(self) -> bytes: ...

class Batch:
    images: View
    host_images: Optional[View]
    labels: View
    indices: View
    status: View
    soft_labels: Optional[View]
    views: Optional[Tuple[View, ...]]
    host_views: Optional[Tuple[View, ...]]
    extras: Dict[str, List[bytes]]
    # What the batch is, whether it was released or not (and after its
    # loader is closed).
    count: int
    epoch: int
    index: int
    released: bool
    exports: int
    def release(self) -> None: ...

class Loader:
    held: int
    closed: bool
    destroyed: bool
    def __init__(self, config: Dict[str, Any],
                 log: Optional[Callable[[int, str], None]] = ...) -> None: ...
    def next(self) -> Optional[Batch]: ...
    def close(self) -> None: ...
    def info(self) -> Dict[str, Any]: ...
    def stats(self) -> Dict[str, int]: ...
    def class_name(self, label: int) -> str: ...
    def sample(self, index: int) -> Tuple[str, int]: ...
    def epoch_order(self, epoch: int) -> List[int]: ...
    def failures(self) -> List[Tuple[int, str, int, str, str, int, int]]: ...
    def state(self) -> bytes: ...
    def drain_log(self) -> None: ...
