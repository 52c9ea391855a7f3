/* The list reader: a file of "path label" lines, paths relative to the
 * list file's folder. Lines are bounded and a NUL byte is refused, so
 * neither /dev/zero nor a binary file given as a list is read without end;
 * a UTF-8 byte order mark is skipped. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/error.h"
#include "../common/file.h"
#include "readers.h"

/* The longest line of a list file: a path of PATH_MAX and its label. */
#define LIST_LINE_MAX (PATH_MAX + 64)

/* ---- list file ---- */

static int parse_label(const char *text, const char *file, long lineno,
                       int32_t *label)
{
    char *end;
    errno = 0;
    const long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno || v < 0 || v >= MAX_CLASSES)
        return err_set(PL_EINVAL,
                       "pl_loader_create: %s:%ld: bad label "
                       "\"%s\" (want an integer in [0, %d))",
                       file, lineno, text, MAX_CLASSES);
    *label = (int32_t)v;
    return 0;
}

/* With extras: "path<TAB>label<TAB>extra..." (a CR before the newline
 * dropped); the columns are the extras in the order named, as they are,
 * those past them not read, those missing left missing. */
static int parse_columns(catalog *cat, char *line, const char *file,
                         long lineno, int32_t *max_label)
{
    size_t len = strlen(line);
    if (len && line[len - 1] == '\r')
        line[--len] = '\0';
    if (len == 0 || line[0] == '#')
        return 0;
    char *tab = strchr(line, '\t');
    if (!tab)
        return err_set(PL_EINVAL,
                       "pl_loader_create: %s:%ld: expected \"path<TAB>label"
                       "<TAB>%s...\" (config.extras reads tab-separated "
                       "columns)",
                       file, lineno, cat->extra_names[0]);
    *tab = '\0';
    char *label_text = tab + 1, *rest = strchr(label_text, '\t');
    if (rest)
        *rest++ = '\0';
    int32_t label;
    int rc = parse_label(label_text, file, lineno, &label);
    if (rc == 0)
        rc = catalog_add_file(cat, line, strlen(line), label);
    for (int k = 0; rc == 0 && rest && k < cat->nextras; k++) {
        const size_t n = strcspn(rest, "\t");
        rc = catalog_set_extra_text(cat, k, rest, n);
        rest = rest[n] ? rest + n + 1 : NULL;
    }
    if (rc == 0 && label > *max_label)
        *max_label = label;
    if (rc == 0 && cat->extras_required &&
        cat->extra_size[(size_t)cat->n * (size_t)cat->nextras - 1] < 0)
        rc = err_set(PL_EINVAL,
                     "pl_loader_create: %s:%ld: no %s column (config.extras, "
                     "required)",
                     file, lineno, cat->extra_names[cat->nextras - 1]);
    return rc;
}

/* One "path<whitespace>label" line; the label is the last field, so paths
 * may contain spaces. */
static int parse_line(catalog *cat, char *line, const char *file, long lineno,
                      int32_t *max_label)
{
    if (cat->nextras)
        return parse_columns(cat, line, file, lineno, max_label);
    size_t len = strlen(line);
    while (len && isspace((unsigned char)line[len - 1]))
        line[--len] = '\0';
    char *s = line;
    while (isspace((unsigned char)*s))
        s++;
    if (*s == '\0' || *s == '#')
        return 0;
    char *sep = s + strlen(s);
    while (sep > s && !isspace((unsigned char)sep[-1]))
        sep--;
    if (sep == s)
        return err_set(PL_EINVAL,
                       "pl_loader_create: %s:%ld: expected "
                       "\"path label\"",
                       file, lineno);
    int32_t label;
    const int rc = parse_label(sep, file, lineno, &label);
    if (rc < 0)
        return rc;
    char *path_end = sep;
    while (path_end > s && isspace((unsigned char)path_end[-1]))
        path_end--;
    if (label > *max_label)
        *max_label = label;
    return catalog_add_file(cat, s, (size_t)(path_end - s), label);
}

/* One line of f, without its newline, into buf (LIST_LINE_MAX + 1 bytes),
 * its length in *len: 1; 0 at the end of the file; PL_EINVAL (naming file
 * and line)
 * for a line longer than LIST_LINE_MAX or holding a NUL byte, so that
 * neither /dev/zero nor a binary file given as a list grows without bound
 * or loses text silently. */
static int read_list_line(FILE *f, char *buf, const char *file, long lineno,
                          long *len)
{
    long n = 0;
    int c;
    while ((c = getc_unlocked(f)) != EOF && c != '\n') {
        if (c == '\0')
            return err_set(PL_EINVAL,
                           "pl_loader_create: %s:%ld: NUL byte at column "
                           "%ld (a binary file, not a list of \"path "
                           "label\" lines?)",
                           file, lineno, n + 1);
        if (n == LIST_LINE_MAX)
            return err_set(PL_EINVAL,
                           "pl_loader_create: %s:%ld: line longer than %d "
                           "bytes (not a list of \"path label\" lines?)",
                           file, lineno, LIST_LINE_MAX);
        buf[n++] = (char)c;
    }
    buf[n] = '\0';
    *len = n;
    return c != EOF || n > 0;
}

static int read_list(catalog *cat, const char *path)
{
    const char *why;
    FILE *f = file_open_regular(path, &why);
    if (!f)
        return err_set(PL_EIO, "pl_loader_create: %s: %s", path, why);
    char *line = malloc(LIST_LINE_MAX + 1);
    long lineno = 0, len = 0;
    int32_t max_label = -1;
    int rc = line ? 0 : PL_ENOMEM;
    while (rc == 0 &&
           (rc = read_list_line(f, line, path, ++lineno, &len)) > 0) {
        char *text = line;
        /* A UTF-8 byte order mark, as some editors write, is not part of
         * the first path. */
        if (lineno == 1 && len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
            text += 3;
        rc = parse_line(cat, text, path, lineno, &max_label);
    }
    if (rc == 0 && ferror(f))
        rc = err_set(PL_EIO, "pl_loader_create: %s: read error", path);
    free(line);
    fclose(f);
    for (int32_t c = 0; rc == 0 && c <= max_label; c++) {
        char name[16];
        snprintf(name, sizeof name, "%d", c);
        rc = catalog_add_class(cat, name);
    }
    return rc;
}

int list_read(catalog *cat, const char *path)
{
    /* Paths are relative to the list file's folder: "/" for "/list.txt",
     * "." for "list.txt". */
    const char *slash = strrchr(path, '/');
    const char *root = !slash ? "." : slash == path ? "/" : path;
    const size_t len = !slash || slash == path ? 1 : (size_t)(slash - path);
    const int rc = catalog_set_root(cat, root, len);
    return rc < 0 ? rc : read_list(cat, path);
}
