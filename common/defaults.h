/* Defaults that two tiers need, written once: pl_config_default()
 * (loader/config.c) and decode_limits_default() (codecs/codec.c) both
 * read them. Every other default lives in pl_config_default alone. The
 * texts that state them (pinload.h's comments, the README's table, and so
 * Python's docs) are held against pl_config_default() by `make
 * config-check` (tools/config-fields.py --defaults). */
#ifndef PINLOAD_DEFAULTS_H
#define PINLOAD_DEFAULTS_H

#include <stdint.h>

#define DEFAULT_MAX_WIDTH 32768
#define DEFAULT_MAX_HEIGHT 32768
#define DEFAULT_MAX_PIXELS 178956970 /* Pillow's DecompressionBombError */
#define DEFAULT_MAX_SCANS 256        /* progressive scans */
#define DEFAULT_MAX_FILE_BYTES ((int64_t)256 << 20)
/* Wall-clock time one image's decode may take (header to last row), so a
 * file that makes libjpeg run away (thousands of scans, huge arithmetic-
 * coded frames) becomes that sample's PL_ELIMIT. The slowest real photo
 * of ../shared/data takes 0.21 s on the development machine: 24x margin. */
#define DEFAULT_MAX_DECODE_MS 5000
/* What libjpeg may allocate for one image (a progressive file's whole
 * coefficient buffer: 85 megapixels at 4:4:4, 170 at 4:2:0). */
#define DEFAULT_MAX_DECODE_MEMORY ((int64_t)512 << 20)

#endif
