#include "json_label.h"

#include <json-c/json.h>

#include "catalog.h"

static int blank(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* What json-c made of buf[0, len), or the reason it made nothing: a text
 * of blanks is empty, JSON nested past the tokener's depth is too deep
 * (not malformed), and anything but one value and blanks is not JSON. */
static int32_t parse(json_tokener *tok, const char *buf, size_t len,
                     json_object **root)
{
    size_t end = 0;
    while (end < len && blank(buf[end]))
        end++;
    if (end == len)
        return JSON_LABEL_EMPTY;
    *root = json_tokener_parse_ex(tok, buf, (int)len);
    if (!*root)
        return json_tokener_get_error(tok) == json_tokener_error_depth
                   ? JSON_LABEL_TOO_DEEP
                   : JSON_LABEL_NOT_JSON;
    end = json_tokener_get_parse_end(tok);
    while (end < len && blank(buf[end]))
        end++;
    return end == len ? 0 : JSON_LABEL_NOT_JSON;
}

int32_t json_label_of(const char *buf, size_t len, const char *field,
                      int32_t max)
{
    if (len > INT32_MAX)
        return JSON_LABEL_NOT_JSON;
    json_tokener *tok = json_tokener_new_ex(JSON_LABEL_MAX_DEPTH);
    if (!tok)
        return JSON_LABEL_NOT_JSON;
    json_object *root = NULL, *v;
    int32_t label = parse(tok, buf, len, &root);
    if (label < 0)
        ; /* the reason parse gave */
    else if (!json_object_is_type(root, json_type_object))
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
