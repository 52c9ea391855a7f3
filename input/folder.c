/* The folder reader: an ImageFolder tree (root/<class>/.../x.jpg, labels
 * by the sorted class folders, as torchvision's ImageFolder) or a flat
 * folder of images (one class). Each directory, by device and inode, is
 * listed once, so links that loop or share sub-directories end. Files
 * named with an extension of the table of formats (.jpg, .jpeg, .png,
 * .webp) are samples (the decoder tells the format from the bytes); the
 * other names torchvision's ImageFolder takes (codec_unread: .bmp .pgm
 * .ppm .tif .tiff) are counted and named in a warning, so
 * that nothing it would read is left out without a word. What the listing
 * leaves out (a path too long, a folder that cannot be opened or is too
 * deep, images that belong to no class, a class without images) is a
 * warning: the caller trains on less than the folder holds; a link met
 * twice is a notice, since each file is still read once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../codecs/codec.h"
#include "../common/error.h"
#include "../common/grow.h"
#include "readers.h"

#define MAX_DEPTH 64

/* ---- directory entries ---- */

/* ---- image files not read ---- */

/* The extensions torchvision's ImageFolder reads that pinload does not. */
#define UNREAD_KINDS CODEC_UNREAD_COUNT
#define UNREAD_NAMED 5 /* names given in the notice, per extension */

typedef struct unread {
    size_t count[UNREAD_KINDS];
    char *names[UNREAD_KINDS]; /* "a.tif, b.tif" (the first UNREAD_NAMED) */
    size_t len[UNREAD_KINDS], cap[UNREAD_KINDS];
} unread;

static int unread_kind(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot ? codec_unread_index(dot + 1) : -1;
}

/* Counts the file at `path` (relative to the root) if its extension is
 * one of codec_unread. PL_ENOMEM. */
static int unread_add(unread *u, const char *path)
{
    const int k = unread_kind(path);
    if (k < 0 || u->count[k]++ >= UNREAD_NAMED)
        return 0;
    const size_t n = strlen(path);
    if (grow(&u->names[k], &u->cap[k], u->len[k] + n + 3, 1, 64) < 0)
        return PL_ENOMEM;
    u->len[k] += (size_t)sprintf(u->names[k] + u->len[k], "%s%s",
                                 u->len[k] ? ", " : "", path);
    return 0;
}

/* One notice per extension met: "root: 12 .tif files not supported ...". */
static void unread_log(unread *u, logger *lg, const char *root)
{
    char formats[64];
    codec_words(formats, sizeof formats, CODEC_NAMES, " and ");
    for (size_t k = 0; k < UNREAD_KINDS; k++) {
        if (u->count[k])
            log_msg(lg, PL_LOG_WARNING,
                    "%s: %zu .%s file%s not supported (%s are), left out: "
                    "%s%s",
                    root, u->count[k], codec_unread[k],
                    u->count[k] == 1 ? "" : "s", formats, u->names[k],
                    u->count[k] > UNREAD_NAMED ? ", ..." : "");
        free(u->names[k]);
    }
    memset(u, 0, sizeof *u);
}

/* A directory's entries, sorted by name (byte order, as Python sorts). */
typedef struct entry {
    char *name;
    int is_dir;
} entry;

typedef struct entries {
    entry *v;
    size_t n, cap;
} entries;

static void entries_free(entries *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].name);
    free(e->v);
    memset(e, 0, sizeof *e);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

/* Whether the entry is a directory, following symbolic links as
 * torchvision's os.walk(followlinks=True) does. A dangling link is not. */
static int entry_is_dir(int dirfd, const struct dirent *de)
{
    if (de->d_type == DT_DIR)
        return 1;
    if (de->d_type != DT_UNKNOWN && de->d_type != DT_LNK)
        return 0;
    struct stat st;
    return fstatat(dirfd, de->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

static int add_entry(entries *e, int dirfd, const struct dirent *de)
{
    if (grow(&e->v, &e->cap, e->n + 1, sizeof *e->v, 64) < 0)
        return PL_ENOMEM;
    char *name = strdup(de->d_name);
    if (!name)
        return PL_ENOMEM;
    e->v[e->n++] = (entry){.name = name, .is_dir = entry_is_dir(dirfd, de)};
    return 0;
}

/* Read and sort dirfd's entries; dirfd stays open and owned by the caller.
 * PL_EIO with errno set if the directory cannot be read. */
static int read_entries(int dirfd, entries *e)
{
    const int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return PL_EIO;
    }
    rewinddir(d);
    int rc = 0;
    const struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            rc = add_entry(e, dirfd, de);
    closedir(d);
    if (rc == 0 && e->n > 1)
        qsort(e->v, e->n, sizeof *e->v, cmp_entry);
    return rc;
}

/* ---- directories seen ---- */

/* The directories a walk has listed, by (device, inode): an open-addressed
 * set, so a tree whose links share sub-directories (two links per level
 * make 2^levels paths) is listed in time linear in its directories. */
typedef struct dir_id {
    dev_t dev;
    ino_t ino;
} dir_id;

typedef struct seen_set {
    dir_id *v; /* cap slots; ino 0 (never a directory's) marks a free one */
    size_t n, cap;
} seen_set;

static size_t seen_slot(const seen_set *s, dir_id id)
{
    uint64_t h = (uint64_t)id.ino * 0x9e3779b97f4a7c15u ^ (uint64_t)id.dev;
    h ^= h >> 29;
    size_t i = (size_t)h & (s->cap - 1);
    while (s->v[i].ino != 0 && (s->v[i].ino != id.ino || s->v[i].dev != id.dev))
        i = (i + 1) & (s->cap - 1);
    return i;
}

/* Adds id: 1 if it is new, 0 if it was there, PL_ENOMEM. */
static int seen_add(seen_set *s, dir_id id)
{
    if (id.ino == 0) /* not a real inode: cannot be tracked */
        return 1;
    if (2 * (s->n + 1) > s->cap) {
        seen_set bigger = {.cap = s->cap ? 2 * s->cap : 256};
        bigger.v = calloc(bigger.cap, sizeof *bigger.v);
        if (!bigger.v)
            return PL_ENOMEM;
        for (size_t i = 0; i < s->cap; i++)
            if (s->v[i].ino != 0)
                bigger.v[seen_slot(&bigger, s->v[i])] = s->v[i];
        bigger.n = s->n;
        free(s->v);
        *s = bigger;
    }
    const size_t i = seen_slot(s, id);
    if (s->v[i].ino != 0)
        return 0;
    s->v[i] = id;
    s->n++;
    return 1;
}

/* ---- ImageFolder walk ---- */

typedef struct walk {
    catalog *cat;
    logger *lg;
    int32_t label;
    dev_t dev[MAX_DEPTH];
    ino_t ino[MAX_DEPTH];
    int depth;
    seen_set seen;       /* every directory listed so far */
    unread unread;       /* image files of kinds not read */
    char path[PATH_MAX]; /* relative to the root */
} walk;

static int walk_dir(walk *w, int dirfd, size_t path_len);

/* Appends "/name" to w->path (just "name" at the root); returns the new
 * length, or 0 if it would not fit. */
static size_t path_push(walk *w, size_t path_len, const char *name)
{
    const size_t len = strlen(name);
    const size_t sep = path_len ? 1 : 0;
    if (path_len + sep + len + 1 > sizeof w->path)
        return 0;
    if (sep)
        w->path[path_len] = '/';
    memcpy(w->path + path_len + sep, name, len + 1);
    return path_len + sep + len;
}

static int walk_subdir(walk *w, int dirfd, const char *name, size_t path_len)
{
    const size_t len = path_push(w, path_len, name);
    int rc = 0;
    if (len == 0) {
        log_msg(w->lg, PL_LOG_WARNING, "%s/%s/%s: path too long, skipped",
                w->cat->root, w->path, name);
    } else {
        const int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            log_msg(w->lg, PL_LOG_WARNING, "%s/%s: cannot open (%s), skipped",
                    w->cat->root, w->path, strerror(errno));
        } else {
            rc = walk_dir(w, fd, len);
            close(fd);
        }
    }
    w->path[path_len] = '\0';
    return rc;
}

/* Adds the images under w->path (open as dirfd) to the dataset. Directories
 * already on the current path are skipped: that is a symlink loop; so is
 * any directory listed before through another path (each is listed once). */
static int walk_dir(walk *w, int dirfd, size_t path_len)
{
    struct stat st;
    if (fstat(dirfd, &st) < 0)
        return 0;
    for (int i = 0; i < w->depth; i++) {
        if (w->dev[i] == st.st_dev && w->ino[i] == st.st_ino) {
            log_msg(w->lg, PL_LOG_NOTICE,
                    "%s/%s: symbolic link loop, not followed", w->cat->root,
                    w->path);
            return 0;
        }
    }
    const int fresh = seen_add(&w->seen, (dir_id){st.st_dev, st.st_ino});
    if (fresh < 0)
        return fresh;
    if (!fresh) {
        log_msg(w->lg, PL_LOG_NOTICE,
                "%s/%s: a directory already listed through another path "
                "(links share it), not listed again",
                w->cat->root, w->path);
        return 0;
    }
    if (w->depth == MAX_DEPTH) {
        /* depth counts the root too */
        log_msg(w->lg, PL_LOG_WARNING,
                "%s/%s: more than %d levels below the root, skipped",
                w->cat->root, w->path, MAX_DEPTH - 1);
        return 0;
    }
    w->dev[w->depth] = st.st_dev;
    w->ino[w->depth] = st.st_ino;
    w->depth++;

    entries e = {0};
    int rc = read_entries(dirfd, &e);
    for (size_t i = 0; rc == 0 && i < e.n; i++) {
        if (e.v[i].is_dir)
            continue;
        const int image = codec_is_image_name(e.v[i].name);
        if (!image && unread_kind(e.v[i].name) < 0)
            continue;
        const size_t len = path_push(w, path_len, e.v[i].name);
        if (len && !image)
            rc = unread_add(&w->unread, w->path);
        else if (len)
            rc = catalog_add_file(w->cat, w->path, len, w->label);
        else
            log_msg(w->lg, PL_LOG_WARNING, "%s/%s/%s: path too long, skipped",
                    w->cat->root, w->path, e.v[i].name);
        w->path[path_len] = '\0';
    }
    /* Sub-directories in a second pass, so each class's paths stay sorted
     * as torchvision sorts them (see sort_class). */
    for (size_t i = 0; rc == 0 && i < e.n; i++)
        if (e.v[i].is_dir)
            rc = walk_subdir(w, dirfd, e.v[i].name, path_len);
    entries_free(&e);
    w->depth--;
    return rc;
}

/* torchvision walks a class with sorted(os.walk(dir)) and sorted file names:
 * files are ordered by their directory's path as a string, then by name.
 * That is not depth-first order ("a-b" sorts before "a/x"), hence a sort. */
static int cmp_by_dir_then_name(const void *a, const void *b, void *arg)
{
    const char *arena = arg;
    const char *pa = arena + *(const size_t *)a;
    const char *pb = arena + *(const size_t *)b;
    const size_t da = (size_t)(strrchr(pa, '/') - pa);
    const size_t db = (size_t)(strrchr(pb, '/') - pb);
    const int c = memcmp(pa, pb, da < db ? da : db);
    if (c != 0)
        return c;
    if (da != db)
        return da < db ? -1 : 1;
    return strcmp(pa + da + 1, pb + db + 1);
}

static void sort_class(catalog *cat, int64_t first)
{
    if (cat->n - first > 1)
        qsort_r(cat->name_off + first, (size_t)(cat->n - first),
                sizeof *cat->name_off, cmp_by_dir_then_name, cat->arena);
}

/* One ImageFolder class: its label is its rank among the sorted folders,
 * kept even when it holds no JPEG (as torchvision's labels are), with a
 * notice, since torchvision would refuse such a tree. */
static int walk_class(catalog *cat, walk *w, const char *name, logger *lg)
{
    if (cat->num_classes == MAX_CLASSES)
        return err_set(PL_EINVAL, "pl_loader_create: %s: more than %d classes",
                       cat->root, MAX_CLASSES);
    const int64_t first = cat->n;
    w->label = cat->num_classes;
    int rc = catalog_add_class(cat, name);
    if (rc == 0)
        rc = walk_subdir(w, cat->dirfd, name, 0);
    if (rc == 0)
        sort_class(cat, first);
    if (rc == 0 && cat->n == first)
        log_msg(lg, PL_LOG_WARNING, "%s/%s: class %d has no image files",
                cat->root, name, w->label);
    return rc;
}

static int read_folder(catalog *cat, logger *lg)
{
    entries e = {0};
    int rc = read_entries(cat->dirfd, &e);
    if (rc < 0) {
        entries_free(&e);
        return err_set(rc, "pl_loader_create: %s: cannot list: %s", cat->root,
                       rc == PL_EIO ? strerror(errno) : pl_strerror(rc));
    }
    size_t dirs = 0, files = 0;
    for (size_t i = 0; i < e.n; i++) {
        dirs += e.v[i].is_dir;
        files += !e.v[i].is_dir && codec_is_image_name(e.v[i].name);
    }
    walk *w = calloc(1, sizeof *w);
    if (!w) {
        entries_free(&e);
        return PL_ENOMEM;
    }
    w->cat = cat;
    w->lg = lg;
    /* The root is on every walk's path, so a link back to it is a loop. */
    struct stat st;
    if (fstat(cat->dirfd, &st) == 0) {
        w->dev[0] = st.st_dev;
        w->ino[0] = st.st_ino;
        w->depth = 1;
        if (seen_add(&w->seen, (dir_id){st.st_dev, st.st_ino}) < 0)
            rc = PL_ENOMEM;
    }
    if (rc < 0) {
        /* out of memory before the walk */
    } else if (dirs == 0) {
        /* A flat folder: one class, named after the folder. */
        const char *slash = strrchr(cat->root, '/');
        rc = catalog_add_class(cat, slash && slash[1] ? slash + 1 : cat->root);
        for (size_t i = 0; rc == 0 && i < e.n; i++)
            if (codec_is_image_name(e.v[i].name))
                rc = catalog_add_file(cat, e.v[i].name, strlen(e.v[i].name), 0);
            else if (!e.v[i].is_dir)
                rc = unread_add(&w->unread, e.v[i].name);
    } else {
        if (files > 0)
            log_msg(lg, PL_LOG_WARNING,
                    "%s: %zu image file(s) directly under an ImageFolder root "
                    "ignored (they belong to no class)",
                    cat->root, files);
        for (size_t i = 0; rc == 0 && i < e.n; i++)
            if (e.v[i].is_dir)
                rc = walk_class(cat, w, e.v[i].name, lg);
        if (rc == 0 && cat->n == 0 && files > 0)
            rc = err_set(PL_ENODATA,
                         "pl_loader_create: %s: no image files in its %zu "
                         "class folder(s); the %zu image file(s) directly "
                         "under it belong to no class (a folder with "
                         "sub-folders is read as an ImageFolder, "
                         "root/<class>/*.jpg: remove or move the "
                         "sub-folders to read it as one flat class)",
                         cat->root, dirs, files);
    }
    unread_log(&w->unread, lg, cat->root);
    free(w->seen.v);
    free(w);
    entries_free(&e);
    return rc;
}

int folder_read(catalog *cat, const char *dir, logger *lg)
{
    if (catalog_extras(cat))
        catalog_extras_beside(cat);
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/')
        len--;
    const int rc = catalog_set_root(cat, dir, len);
    return rc < 0 ? rc : read_folder(cat, lg);
}
