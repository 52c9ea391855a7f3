/* A sample's label from a field of its JSON member (config.label_field):
 * the one file that includes json-c's headers. */
#ifndef PINLOAD_JSON_LABEL_H
#define PINLOAD_JSON_LABEL_H

#include <stddef.h>
#include <stdint.h>

/* The integer in [0, max) at top-level `field` of the JSON text
 * buf[0, len): the label, or JSON_LABEL_NOT_JSON, _NO_FIELD or
 * _NOT_LABEL (catalog.h). Any thread. */
int32_t json_label_of(const char *buf, size_t len, const char *field,
                      int32_t max);

#endif
