/* The dispatcher: which reader config.data needs. */
#include "input.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "../codecs/codec.h"
#include "../common/braces.h"
#include "../common/error.h"
#include "../remote/remote.h"
#include "readers.h"

static int read_shards(catalog *c, const char *data, logger *lg, int *found)
{
    char **paths;
    int n;
    const int rc = shards_detect(data, &paths, &n);
    *found = rc > 0;
    if (rc <= 0)
        return rc;
    const int read = shards_read(c, paths, n, lg);
    paths_free(paths, n);
    return read;
}

static int read_remote(catalog *c, const char *data, const remote_opts *o,
                       logger *lg, int *found)
{
    char **urls;
    int n;
    const int rc = remote_detect(data, &urls, &n);
    *found = rc > 0;
    if (rc <= 0)
        return rc;
    const int read = remote_read(c, urls, n, o, lg);
    paths_free(urls, n);
    return read;
}

int input_open(catalog *c, const char *data, const remote_opts *remote,
               logger *lg)
{
    int shards;
    int rc = read_remote(c, data, remote, lg, &shards);
    if (rc == 0 && !shards)
        rc = read_shards(c, data, lg, &shards);
    if (rc == 0 && !shards && c->label_field)
        rc = err_set(PL_EINVAL,
                     "pl_loader_create: config.label_field: %s is not tar "
                     "shards (labels from a JSON member are read from "
                     "shards' KEY.json members)",
                     data);
    if (rc == 0 && !shards) {
        struct stat st;
        if (stat(data, &st) < 0)
            rc = err_set(PL_EIO, "pl_loader_create: config.data: %s: %s", data,
                         strerror(errno));
        else if (S_ISDIR(st.st_mode))
            rc = folder_read(c, data, lg);
        else
            rc = list_read(c, data);
    }
    if (rc == PL_ENOMEM)
        rc = err_set(PL_ENOMEM, "pl_loader_create: %s: out of memory listing",
                     data);
    char formats[64];
    codec_words(formats, sizeof formats, CODEC_NAMES, " or ");
    if (rc == 0 && catalog_size(c) == 0)
        rc = err_set(PL_ENODATA, "pl_loader_create: %s: no %s files found",
                     data, formats);
    if (rc == 0 && catalog_size(c) >= ((int64_t)1 << 32))
        rc = err_set(PL_EINVAL, "pl_loader_create: %s: more than 2^32 files",
                     data);
    if (rc < 0)
        catalog_close(c);
    return rc;
}
