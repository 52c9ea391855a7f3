/* A sample's label from a field of its JSON member (config.label_field):
 * the one file that includes json-c's headers. */
#ifndef PINLOAD_JSON_LABEL_H
#define PINLOAD_JSON_LABEL_H

#include <stddef.h>
#include <stdint.h>

/* How deep the JSON may nest: json-c's default depth, said here so that
 * the reason can name it. */
#define JSON_LABEL_MAX_DEPTH 32

/* The integer in [0, max) at top-level `field` of the JSON text
 * buf[0, len): the label, or JSON_LABEL_NOT_JSON, _NO_FIELD, _NOT_LABEL,
 * _EMPTY (nothing but blanks) or _TOO_DEEP (nested deeper than
 * JSON_LABEL_MAX_DEPTH) (catalog.h). Any thread. */
int32_t json_label_of(const char *buf, size_t len, const char *field,
                      int32_t max);

#endif
