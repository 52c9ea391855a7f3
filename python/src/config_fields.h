/* tools/config-fields.py wrote this file from include/pinload.h's
 * pl_config: do not edit (`make config-fields`). Each field a dict
 * may set, and how (python/src/config.c); log and log_ctx are the
 * extension's own. */
#ifndef PINLOAD_PY_CONFIG_FIELDS_H
#define PINLOAD_PY_CONFIG_FIELDS_H

#define PL_CONFIG_FIELDS(X)                                                    \
    X(data, F_PATH)                                                            \
    X(batch_size, F_I32)                                                       \
    X(width, F_I32)                                                            \
    X(height, F_I32)                                                           \
    X(format, F_I32)                                                           \
    X(augment, F_I32)                                                          \
    X(mean, F_FLOAT3)                                                          \
    X(std, F_FLOAT3)                                                           \
    X(dct_scaling, F_I32)                                                      \
    X(seed, F_U64)                                                             \
    X(shuffle, F_I32)                                                          \
    X(drop_last, F_I32)                                                        \
    X(rank, F_I32)                                                             \
    X(world_size, F_I32)                                                       \
    X(shard_mode, F_I32)                                                       \
    X(first_epoch, F_I64)                                                      \
    X(resume, F_STATE)                                                         \
    X(num_workers, F_I32)                                                      \
    X(pin_workers, F_I32)                                                      \
    X(readahead, F_I32)                                                        \
    X(prefetch, F_I32)                                                         \
    X(memory, F_I32)                                                           \
    X(pinned_fallback, F_I32)                                                  \
    X(device, F_I32)                                                           \
    X(device_buffers, F_I32)                                                   \
    X(keep_host, F_I32)                                                        \
    X(gpu_normalize, F_I32)                                                    \
    X(on_error, F_I32)                                                         \
    X(strict, F_I32)                                                           \
    X(max_width, F_I32)                                                        \
    X(max_height, F_I32)                                                       \
    X(max_pixels, F_I64)                                                       \
    X(max_file_bytes, F_I64)                                                   \
    X(max_decode_ms, F_I32)                                                    \
    X(max_scans, F_I32)                                                        \
    X(max_decode_memory, F_I64)                                                \
    X(channels_last, F_I32)                                                    \
    X(max_device_buffers, F_I32)                                               \
    X(cache_dir, F_PATH)                                                       \
    X(cache_limit, F_I64)                                                      \
    X(remote_timeout_ms, F_I32)                                                \
    X(remote_retries, F_I32)                                                   \
    X(order, F_I32)                                                            \
    X(shuffle_window, F_I32)                                                   \
    X(extras, F_PATH)                                                          \
    X(extras_required, F_I32)                                                  \
    X(label_field, F_PATH)                                                     \
    X(transform, F_PATH)                                                       \
    X(remote_create_timeout_ms, F_I32)                                         \
    X(decode, F_I32)                                                           \
    X(views, F_STRS)                                                           \
    X(num_views, F_I32)                                                        \
    X(cpu_budget, F_I32)

/* The header's last field: config.c asserts that none follows it. */
#define PL_CONFIG_LAST_FIELD cpu_budget

#endif
