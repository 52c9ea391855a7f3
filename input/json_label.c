#include "json_label.h"

#include <json-c/json.h>

#include "catalog.h"

int32_t json_label_of(const char *buf, size_t len, const char *field,
                      int32_t max)
{
    if (len > INT32_MAX)
        return JSON_LABEL_NOT_JSON;
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return JSON_LABEL_NOT_JSON;
    json_object *root = json_tokener_parse_ex(tok, buf, (int)len);
    /* The whole text is one value: trailing bytes other than blanks are
     * not JSON. */
    size_t end = json_tokener_get_parse_end(tok);
    while (root && end < len &&
           (buf[end] == ' ' || buf[end] == '\n' || buf[end] == '\r' ||
            buf[end] == '\t'))
        end++;
    int32_t label = JSON_LABEL_NOT_JSON;
    json_object *v;
    if (!root || end != len || !json_object_is_type(root, json_type_object))
        label = JSON_LABEL_NOT_JSON;
    else if (!json_object_object_get_ex(root, field, &v))
        label = JSON_LABEL_NO_FIELD;
    else if (!json_object_is_type(v, json_type_int) ||
             json_object_get_int64(v) < 0 || json_object_get_int64(v) >= max)
        label = JSON_LABEL_NOT_LABEL;
    else
        label = (int32_t)json_object_get_int64(v);
    json_object_put(root);
    json_tokener_free(tok);
    return label;
}
