/* pinload: version of the headers this program was compiled against.
 * pl_version() in pinload.h gives the version of the library it runs with. */
#ifndef PINLOAD_VERSION_H
#define PINLOAD_VERSION_H

#define PL_VERSION_MAJOR 0
#define PL_VERSION_MINOR 1
#define PL_VERSION_PATCH 0

/* One integer that orders versions: 0x00MMmmpp. */
#define PL_VERSION_HEX                                                         \
    ((PL_VERSION_MAJOR << 16) | (PL_VERSION_MINOR << 8) | PL_VERSION_PATCH)

#define PL_STRINGIFY_(x) #x
#define PL_STRINGIFY(x) PL_STRINGIFY_(x)
#define PL_VERSION_STRING                                                      \
    PL_STRINGIFY(PL_VERSION_MAJOR)                                             \
    "." PL_STRINGIFY(PL_VERSION_MINOR) "." PL_STRINGIFY(PL_VERSION_PATCH)

#endif
