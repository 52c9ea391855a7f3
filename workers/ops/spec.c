/* The spec's grammar (docs/transforms.md): ops separated by ';', each a
 * name (or its alias) with an optional list of values in parentheses,
 * positional first (in the op's parameter order), then key=value:
 *
 *   rrc(224,scale=0.08:1,ratio=3/4:4/3);hflip(0.5);normalize
 *
 * Every error names the op as written and, where one is at fault, the
 * parameter with its value: "rrc: scale=0.08:x: not a number". */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* Sets why (printf-style) and returns PL_EINVAL. */
static int fail(char *why, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return PL_EINVAL;
}

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* [s, s + len) without the spaces around it. */
static void trim(const char **s, size_t *len)
{
    while (*len && isspace((unsigned char)**s))
        (*s)++, (*len)--;
    while (*len && isspace((unsigned char)(*s)[*len - 1]))
        (*len)--;
}

/* A decimal number or a fraction a/b, finite, all of [s, s + len). */
static int number(const char *s, size_t len, double *out)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if (end == buf)
        return -1;
    if (*end == '/') {
        char *den = end + 1;
        const double d = strtod(den, &end);
        if (end == den || d == 0.0)
            return -1;
        v /= d;
    }
    if (*end != '\0' || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* "not a number", or for a triple that takes words, what it takes. */
static int not_number(const op_instance *op, const op_param *p, const char *s,
                      size_t len, char *why, size_t cap)
{
    if (!(p->type == OP_TRIPLE && p->words))
        return fail(why, cap, "%s: %s=%.*s: not a number", op->written, p->name,
                    (int)len, s);
    char list[256] = "";
    for (int i = 0; p->words[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                 p->words[i + 1] ? ", " : " or ", p->words[i]);
    return fail(why, cap, "%s: %s=%.*s: not a number, R:G:B%s", op->written,
                p->name, (int)len, s, list);
}

/* The value written for parameter p of op `op` (its text: [s, s + len)),
 * into *v; on error, why names them both. */
static int parse_value(const op_instance *op, const op_param *p, const char *s,
                       size_t len, op_value *v, char *why, size_t cap)
{
    const char *name = op->written;
    memset(v, 0, sizeof *v);
    if (len == 0)
        return fail(why, cap, "%s: %s: no value after '='", name, p->name);
    if (p->type == OP_WORD || p->type == OP_BOOL) {
        static const char *const bools[] = {"false", "true", "0", "1", NULL};
        const char *const *words = p->type == OP_BOOL ? bools : p->words;
        for (int i = 0; words[i]; i++)
            if (strlen(words[i]) == len && memcmp(words[i], s, len) == 0) {
                v->v[0] = p->type == OP_BOOL ? i % 2 : i;
                v->n = 1;
                return 0;
            }
        char list[256] = "";
        for (int i = 0; words[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                     i == 0         ? ""
                     : words[i + 1] ? ", "
                                    : " or ",
                     words[i]);
        return fail(why, cap, "%s: %s=%.*s: not %s", name, p->name, (int)len, s,
                    list);
    }
    if (p->type == OP_TRIPLE && p->words)
        for (int i = 0; p->words[i]; i++)
            if (strlen(p->words[i]) == len &&
                memcmp(p->words[i], s, len) == 0) {
                v->word = i + 1;
                v->n = 1;
                return 0;
            }
    /* Numbers: up to three, separated by ':' (by 'x' in a size). */
    const char sep = p->type == OP_SIZE ? 'x' : ':';
    const int most = p->type == OP_NUMBER ? 1 : p->type == OP_TRIPLE ? 3 : 2;
    const char *at = s, *end = s + len;
    int n = 0;
    for (;;) {
        const char *stop = memchr(at, sep, (size_t)(end - at));
        if (!stop && p->type == OP_SIZE)
            stop = memchr(at, 'X', (size_t)(end - at));
        stop = stop ? stop : end;
        if (n == most)
            return fail(why, cap, "%s: %s=%.*s: more than %d number%s", name,
                        p->name, (int)len, s, most, most == 1 ? "" : "s");
        const char *t = at;
        size_t tl = (size_t)(stop - at);
        trim(&t, &tl);
        if (number(t, tl, &v->v[n]) < 0)
            return not_number(op, p, s, len, why, cap);
        const double x = v->v[n++];
        if (p->type == OP_SIZE && x != floor(x))
            return fail(why, cap, "%s: %s=%.*s: %g is not a whole number", name,
                        p->name, (int)len, s, x);
        if (x > p->hi || (p->open_lo ? x <= p->lo : x < p->lo))
            return fail(why, cap, "%s: %s=%.*s: %g is outside %c%g, %g]", name,
                        p->name, (int)len, s, x, p->open_lo ? '(' : '[', p->lo,
                        p->hi);
        if (stop == end)
            break;
        at = stop + 1;
    }
    if (p->type == OP_TRIPLE && n == 2)
        return fail(why, cap, "%s: %s=%.*s: 1 or 3 numbers (R:G:B)", name,
                    p->name, (int)len, s);
    if (p->type == OP_RANGE && n == 2 && v->v[0] > v->v[1])
        return fail(why, cap,
                    "%s: %s=%.*s: %g is above %g (a range is low:high)", name,
                    p->name, (int)len, s, v->v[0], v->v[1]);
    for (int k = n; k < 3 && p->type != OP_SIZE; k++)
        v->v[k] = v->v[k - 1]; /* a alone: a:a, or a:a:a */
    v->n = n;
    return 0;
}

/* "size, scale, ratio, interpolation, antialias" */
static void param_list(const op_kind *k, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (int i = 0; i < k->nparams; i++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i ? ", " : "",
                 k->params[i].name);
    if (k->nparams == 0)
        snprintf(buf, cap, "none");
}

/* One value of the list: [s, s + len), the k-th positional or key=value. */
static int parse_arg(op_instance *op, const char *s, size_t len,
                     int *positional, int *keyed, int given[], char *why,
                     size_t cap)
{
    const op_kind *k = op->kind;
    char names[256];
    trim(&s, &len);
    const char *eq = memchr(s, '=', len);
    int i;
    if (eq) {
        const char *key = s;
        size_t kl = (size_t)(eq - s);
        trim(&key, &kl);
        for (i = 0; i < k->nparams; i++)
            if (strlen(k->params[i].name) == kl &&
                memcmp(k->params[i].name, key, kl) == 0)
                break;
        if (i == k->nparams) {
            param_list(k, names, sizeof names);
            return fail(why, cap, "%s: \"%.*s\": no such parameter (%s)",
                        op->written, (int)kl, key, names);
        }
        *keyed = 1;
        len -= (size_t)(eq + 1 - s);
        s = eq + 1;
        trim(&s, &len);
    } else {
        if (len == 0)
            return fail(why, cap, "%s: an empty value in its list",
                        op->written);
        if (*keyed)
            return fail(why, cap,
                        "%s: \"%.*s\" has no name, after a key=value: "
                        "name it, or put it first",
                        op->written, (int)len, s);
        i = (*positional)++;
        if (i >= k->nparams) {
            param_list(k, names, sizeof names);
            return fail(why, cap,
                        "%s: \"%.*s\" is value %d, but it takes %d (%s)",
                        op->written, (int)len, s, i + 1, k->nparams, names);
        }
    }
    if (given[i])
        return fail(why, cap, "%s: %s is given twice", op->written,
                    k->params[i].name);
    given[i] = 1;
    return parse_value(op, &k->params[i], s, len, &op->arg[i], why, cap);
}

/* The values in parentheses, from just after '('; *pp ends after ')'. */
static int parse_args(op_instance *op, const char **pp, int given[], char *why,
                      size_t cap)
{
    const char *p = skip_space(*pp);
    int positional = 0, keyed = 0;
    if (*p == ')') {
        *pp = p + 1;
        return 0;
    }
    for (;;) {
        const size_t len = strcspn(p, ",);(");
        if (p[len] != ',' && p[len] != ')')
            return fail(why, cap, "%s: no ')' to close its values",
                        op->written);
        const int rc =
            parse_arg(op, p, len, &positional, &keyed, given, why, cap);
        if (rc < 0)
            return rc;
        p += len + 1;
        if (p[-1] == ')')
            break;
    }
    *pp = p;
    return 0;
}

/* The defaults of the parameters not given, then the kind's setup. */
static int finish_op(op_instance *op, const int given[], const op_setup *s,
                     char *why, size_t cap)
{
    const op_kind *k = op->kind;
    for (int i = 0; i < k->nparams; i++) {
        const op_param *p = &k->params[i];
        if (given[i] || !p->def)
            continue;
        const int rc =
            parse_value(op, p, p->def, strlen(p->def), &op->arg[i], why, cap);
        if (rc < 0)
            return rc; /* a table's own default: tests hold every one */
    }
    if (!k->setup)
        return 0;
    char detail[256];
    if (k->setup(op, s, detail, sizeof detail) < 0)
        return fail(why, cap, "%s: %s", op->written, detail);
    return 0;
}

/* One op from *pp (at its name) into p->op[p->n]. */
static int parse_op(ops_pipeline *pl, const char **pp, const op_setup *s,
                    char *why, size_t cap)
{
    const char *p = *pp;
    size_t len = 0;
    while (isalnum((unsigned char)p[len]) || p[len] == '_')
        len++;
    if (len == 0)
        return fail(why, cap, "\"%.20s\": an op's name was expected", p);
    const op_kind *k = op_kind_find(p, len);
    if (!k) {
        char names[512] = "";
        for (int i = 0; op_kinds[i]; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names),
                     "%s%s", i ? ", " : "", op_kinds[i]->name);
        return fail(why, cap, "\"%.*s\": no such op (%s)", (int)len, p, names);
    }
    if (pl->n == OPS_MAX)
        return fail(why, cap, "%.*s: more than %d ops", (int)len, p, OPS_MAX);
    op_instance *op = &pl->op[pl->n];
    memset(op, 0, sizeof *op);
    op->kind = k;
    op->index = pl->n;
    snprintf(op->written, sizeof op->written, "%.*s", (int)len, p);
    p = skip_space(p + len);
    int given[OP_PARAMS_MAX] = {0};
    int rc = 0;
    if (*p == '(') {
        p++;
        rc = parse_args(op, &p, given, why, cap);
    }
    p = skip_space(p);
    if (rc == 0 && *p != ';' && *p != '\0')
        rc = fail(why, cap, "%s: \"%.20s\" after it (ops are separated by ';')",
                  op->written, p);
    if (rc == 0)
        rc = finish_op(op, given, s, why, cap);
    if (rc == 0)
        pl->n++;
    *pp = p;
    return rc;
}

static const char *const stage_words[] = {"geometric", "pixel", "normalize",
                                          "after-normalize", "batch"};

/* Stages in order, normalize once; the counts. */
static int check_stages(ops_pipeline *pl, char *why, size_t cap)
{
    int counts[5] = {0};
    for (int i = 0; i < pl->n; i++) {
        const op_instance *op = &pl->op[i];
        const int st = op->kind->stage;
        for (int later = st + 1; later < 5; later++)
            if (counts[later]) {
                const op_instance *prev = &pl->op[i - 1];
                return fail(why, cap,
                            "%s: a %s op after %s (a %s op): the order is "
                            "geometric ops (fused into the decode), pixel "
                            "ops, normalize, after-normalize ops, a batch op",
                            op->written, stage_words[st], prev->written,
                            stage_words[prev->kind->stage]);
            }
        if (st == OP_STAGE_NORMALIZE && counts[st])
            return fail(why, cap, "%s: a second normalize", op->written);
        if (st == OP_STAGE_BATCH && counts[st])
            return fail(why, cap,
                        "%s: a second batch op (after %s): one "
                        "mixes a batch",
                        op->written, pl->op[i - 1].written);
        counts[st]++;
    }
    pl->ngeometry = counts[OP_STAGE_GEOMETRY];
    pl->npixels = counts[OP_STAGE_PIXELS];
    pl->nnormalize = counts[OP_STAGE_NORMALIZE];
    pl->ntensor = counts[OP_STAGE_TENSOR];
    pl->nbatch = counts[OP_STAGE_BATCH];
    return 0;
}

/* One resample at most, and the output's size at the end. */
static int check_shape(const ops_pipeline *pl, const op_setup *s, char *why,
                       size_t cap)
{
    op_shape sh = {0, 0, 0, 0};
    const op_instance *resampled = NULL;
    for (int i = 0; i < pl->ngeometry; i++) {
        const op_instance *op = &pl->op[i];
        const int before = sh.resamples;
        op->kind->shape(op, &sh);
        if (sh.resamples == before)
            continue;
        if (resampled)
            return fail(why, cap,
                        "%s: resamples the image a second time (after %s): "
                        "pinload resamples once, fused into the decode; "
                        "drop one of them",
                        op->written, resampled->written);
        resampled = op;
    }
    if (sh.w == s->out_w && sh.h == s->out_h)
        return 0;
    char made[96];
    if (sh.w)
        snprintf(made, sizeof made, "%d x %d images", sh.w, sh.h);
    else if (sh.short_side)
        snprintf(made, sizeof made, "images %d pixels on their shorter side",
                 sh.short_side);
    else
        snprintf(made, sizeof made, "images of each file's own size");
    return fail(why, cap,
                "the ops make %s, not the output's %d x %d (config.width x "
                "config.height): end the geometric ops with a crop or resize "
                "to it (random_resized_crop, center_crop, resize(WxH); each "
                "takes that size by default)",
                made, s->out_w, s->out_h);
}

/* The ops of spec, their stages checked; the shape too when check_size. */
static int parse_ops(ops_pipeline *pl, const char *spec, const op_setup *s,
                     char *why, size_t cap, int check_size);

int ops_parse(ops_pipeline *pl, const char *spec, const op_setup *s, char *why,
              size_t cap)
{
    return parse_ops(pl, spec, s, why, cap, 1);
}

int ops_end_size(const char *spec, const op_setup *s, int *w, int *h,
                 char *why, size_t cap)
{
    ops_pipeline *pl = malloc(sizeof *pl);
    if (!pl)
        return fail(why, cap, "out of memory");
    int rc = parse_ops(pl, spec, s, why, cap, 0);
    op_shape sh = {0, 0, 0, 0};
    for (int i = 0; rc == 0 && i < pl->ngeometry; i++)
        pl->op[i].kind->shape(&pl->op[i], &sh);
    free(pl);
    if (rc < 0)
        return rc;
    if (!sh.w)
        return fail(why, cap,
                    "ends at no one size (%s): end its geometric ops with a "
                    "crop or resize to WxH (random_resized_crop(96), "
                    "center_crop(224), resize(224x224))",
                    sh.short_side ? "a shorter side alone"
                                  : "each file's own size");
    *w = sh.w;
    *h = sh.h;
    return 0;
}

static int parse_ops(ops_pipeline *pl, const char *spec, const op_setup *s,
                     char *why, size_t cap, int check_size)
{
    memset(pl, 0, sizeof *pl);
    const char *p = spec ? spec : "";
    for (;;) {
        p = skip_space(p);
        if (*p == ';') {
            p++;
            continue;
        }
        if (*p == '\0')
            break;
        const int rc = parse_op(pl, &p, s, why, cap);
        if (rc < 0)
            return rc;
    }
    if (pl->n == 0)
        return fail(why, cap,
                    "no ops (leave it NULL for config.augment's preset)");
    int rc = check_stages(pl, why, cap);
    if (rc == 0 && check_size)
        rc = check_shape(pl, s, why, cap);
    if (rc < 0)
        return rc;
    for (int c = 0; c < 3; c++) {
        pl->mean[c] = s->mean[c];
        pl->std[c] = s->std[c];
    }
    for (int i = 0; i < pl->n; i++)
        if (pl->op[i].kind->stage == OP_STAGE_NORMALIZE)
            for (int c = 0; c < 3; c++) {
                pl->mean[c] = (float)pl->op[i].arg[0].v[c];
                pl->std[c] = (float)pl->op[i].arg[1].v[c];
            }
    return 0;
}

void ops_preset(ops_pipeline *pl, pl_augment preset, const op_setup *s)
{
    char spec[128], why[256];
    const int w = s->out_w, h = s->out_h;
    if (preset == PL_AUGMENT_TRAIN)
        snprintf(spec, sizeof spec, "random_resized_crop(%dx%d);hflip", w, h);
    else if (preset == PL_AUGMENT_EVAL)
        snprintf(spec, sizeof spec, "resize(%d);center_crop(%dx%d)",
                 (w > h ? w : h) * 256 / 224, w, h);
    else
        snprintf(spec, sizeof spec, "resize(%dx%d)", w, h);
    /* Every size config.c lets through parses; a preset that did not
     * would be a bug here, and leaves an empty pipeline (a geometry of
     * the whole image, which the workers' plan refuses). */
    if (ops_parse(pl, spec, s, why, sizeof why) < 0)
        memset(pl, 0, sizeof *pl);
    pl->shared_stream = 1;
}

/* x as the shortest %g that reads back as x. */
static int put_number(char *buf, size_t cap, double x)
{
    char t[32];
    snprintf(t, sizeof t, "%.15g", x);
    if (strtod(t, NULL) != x)
        snprintf(t, sizeof t, "%.17g", x);
    return snprintf(buf, cap, "%s", t);
}

/* buf + len and what is left of cap, for snprintf: NULL and 0 past the
 * end, so that lengths still add up. */
#define AT_ ((len) < cap ? buf + (len) : NULL), ((len) < cap ? cap - (len) : 0)

static int put_value(char *buf, size_t cap, const op_param *p,
                     const op_value *v)
{
    if (p->type == OP_WORD)
        return snprintf(buf, cap, "%s", p->words[(int)v->v[0]]);
    if (p->type == OP_BOOL)
        return snprintf(buf, cap, "%s", v->v[0] ? "true" : "false");
    if (v->word)
        return snprintf(buf, cap, "%s", p->words[v->word - 1]);
    const int n = p->type == OP_NUMBER                        ? 1
                  : p->type == OP_RANGE || p->type == OP_PAIR ? 2
                  : p->type == OP_TRIPLE                      ? 3
                                                              : v->n;
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        if (i)
            len += (size_t)snprintf(AT_, "%c", p->type == OP_SIZE ? 'x' : ':');
        len += (size_t)put_number(AT_, v->v[i]);
    }
    return (int)len;
}

int ops_format(const ops_pipeline *pl, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap)
        buf[0] = '\0';
    for (int i = 0; i < pl->n; i++) {
        const op_instance *op = &pl->op[i];
        len += (size_t)snprintf(AT_, "%s%s(", i ? ";" : "", op->kind->name);
        int first = 1;
        for (int k = 0; k < op->kind->nparams; k++) {
            if (!op->arg[k].n)
                continue;
            len += (size_t)snprintf(AT_, "%s%s=", first ? "" : ",",
                                    op->kind->params[k].name);
            len += (size_t)put_value(AT_, &op->kind->params[k], &op->arg[k]);
            first = 0;
        }
        len += (size_t)snprintf(AT_, ")");
    }
    return (int)len;
}
