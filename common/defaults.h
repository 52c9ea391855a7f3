/* Defaults that two tiers need, written once: pl_config_default()
 * (loader/config.c) and decode_limits_default() (workers/decode.c) both
 * read them. Every other default lives in pl_config_default alone. */
#ifndef PINLOAD_DEFAULTS_H
#define PINLOAD_DEFAULTS_H

#include <stdint.h>

#define DEFAULT_MAX_WIDTH 32768
#define DEFAULT_MAX_HEIGHT 32768
#define DEFAULT_MAX_PIXELS 178956970 /* Pillow's DecompressionBombError */
#define DEFAULT_MAX_SCANS 256        /* progressive scans; not in pl_config */
#define DEFAULT_MAX_FILE_BYTES ((int64_t)256 << 20)

#endif
