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
/* Wall-clock time one image's decode may take (header to last row), so a
 * file that makes libjpeg run away (thousands of scans, huge arithmetic-
 * coded frames) becomes that sample's PL_ELIMIT. The slowest real photo
 * of ../shared/data takes 0.21 s on the development machine: 24x margin.
 * Not in pl_config yet. */
#define DEFAULT_MAX_DECODE_MS 5000

#endif
