/* Lists of paths and brace patterns (braces.h). */
#include "braces.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "grow.h"

void paths_free(char **p, int n)
{
    for (int i = 0; i < n; i++)
        free(p[i]);
    free(p);
}

int paths_push(char ***p, int *n, size_t *cap, char *s)
{
    if (!s || *n >= PATHS_MAX ||
        grow(p, cap, (size_t)*n + 1, sizeof **p, 64) < 0) {
        free(s);
        return PL_ENOMEM;
    }
    (*p)[(*n)++] = s;
    return 0;
}

int braces_expand(const char *path, char ***out, int *n)
{
    const char *open = strchr(path, '{');
    const char *dots = open ? strstr(open, "..") : NULL;
    const char *close = dots ? strchr(dots, '}') : NULL;
    if (!close)
        return 0;
    for (const char *c = open + 1; c < dots; c++)
        if (!isdigit((unsigned char)*c))
            return 0;
    for (const char *c = dots + 2; c < close; c++)
        if (!isdigit((unsigned char)*c))
            return 0;
    if (dots == open + 1 || close == dots + 2)
        return 0;
    const long long a = strtoll(open + 1, NULL, 10);
    const long long b = strtoll(dots + 2, NULL, 10);
    const int width = open[1] == '0' ? (int)(dots - open - 1) : 0;
    if (b < a || b - a >= PATHS_MAX)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.data: %s: the range "
                       "{%lld..%lld} is empty or over %d shards",
                       path, a, b, PATHS_MAX);
    size_t cap = 0;
    for (long long v = a; v <= b; v++) {
        char *s = malloc(strlen(path) + 32);
        if (s)
            sprintf(s, "%.*s%0*lld%s", (int)(open - path), path, width, v,
                    close + 1);
        const int rc = paths_push(out, n, &cap, s);
        if (rc < 0)
            return rc;
    }
    return 1;
}
