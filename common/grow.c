#include "grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pinload.h"

int grow(void *pp, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t n = need;
    if (first) {
        n = *cap ? *cap : first;
        while (n < need) {
            if (n > SIZE_MAX / 2)
                return PL_ENOMEM;
            n *= 2;
        }
    }
    if (n > SIZE_MAX / elem)
        return PL_ENOMEM;
    /* Through memcpy: pp points at a pointer of the caller's own type. */
    void *old;
    memcpy(&old, pp, sizeof old);
    void *p = realloc(old, n * elem);
    if (!p)
        return PL_ENOMEM;
    memcpy(pp, &p, sizeof p);
    *cap = n;
    return 0;
}

int grow_scratch(void *pp, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (*cap > GROW_KEEP_BYTES / elem && need <= GROW_KEEP_BYTES / elem) {
        void *old;
        memcpy(&old, pp, sizeof old);
        free(old);
        old = NULL;
        memcpy(pp, &old, sizeof old);
        *cap = 0;
    }
    return grow(pp, cap, need, elem, first);
}
