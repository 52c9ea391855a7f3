/* config.extras: side data delivered with the pixels. From tar shards,
 * each extra is a member's bytes (KEY.txt, KEY.json), in the batch's order,
 * whatever the worker count and across a resume; a missing member is an
 * empty entry, or the sample's PL_ENOEXTRA when required. From a list file,
 * the tab-separated columns after the label; from a folder, the files
 * beside each image (x.jpg's txt is x.txt). Bad names are refused naming
 * the field. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinload.h"
#include "testloader.h"
#include "testutil.h"

#define KEYS 29

/* Key i's caption: of a length that varies, empty for i % 7 == 3; none
 * (no member) for i % 5 == 4. */
static int caption_of(int i, char *out, size_t cap)
{
    if (i % 5 == 4)
        return -1;
    if (i % 7 == 3)
        return out[0] = '\0', 0;
    int n = snprintf(out, cap, "a photo %d", i);
    for (int k = 0; k < i % 6; k++)
        n += snprintf(out + n, cap - (size_t)n, " of a cat");
    return n;
}

static int json_of(int i, char *out, size_t cap)
{
    return snprintf(out, cap, "{\"i\": %d, \"w\": \"%.*s\"}\n", i, i * 3,
                    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
}

/* dir/a.tar (keys 0..14) and dir/b.tar (15..28): k<i>.jpg, k<i>.cls
 * (i % 3), k<i>.txt (caption_of), k<i>.json; [out] data: the folder. */
static void make_shards(const char *dir, char data[160])
{
    char p[256], text[512], cmd[512];
    for (int i = 0; i < KEYS; i++) {
        const char *shard = i < 15 ? "a" : "b";
        snprintf(p, sizeof p, "%s/stage/%s/k%03d.jpg", dir, shard, i);
        tu_mkdirs_for(p);
        tu_write_jpeg(p, 30 + i, 28, (unsigned)i, NULL);
        snprintf(p, sizeof p, "%s/stage/%s/k%03d.cls", dir, shard, i);
        const int cl = snprintf(text, sizeof text, "%d", i % 3);
        tu_write_file(p, text, (size_t)cl);
        const int n = caption_of(i, text, sizeof text);
        if (n >= 0) {
            snprintf(p, sizeof p, "%s/stage/%s/k%03d.txt", dir, shard, i);
            tu_write_file(p, text, (size_t)n);
        }
        snprintf(p, sizeof p, "%s/stage/%s/k%03d.json", dir, shard, i);
        const int jn = json_of(i, text, sizeof text);
        tu_write_file(p, text, (size_t)jn);
    }
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/data && for s in a b; do (cd %s/stage/$s && tar "
             "-cf ../../data/$s.tar $(ls | sort)); done",
             dir, dir);
    tu_system(cmd);
    snprintf(data, 160, "%s/data", dir);
}

/* The key number of dataset index idx ("dir/a.tar:k007.jpg": 7). */
static int key_of(pl_loader *l, int64_t idx)
{
    const char *path;
    cr_assert_eq(pl_loader_sample(l, idx, &path, NULL), 0);
    const char *k = strstr(path, ":k");
    cr_assert_not_null(k, "%s", path);
    return atoi(k + 2);
}

/* Every sample delivered: its index, label, and each extra's entry. */
typedef struct got {
    int n;
    int64_t idx[128];
    int32_t label[128], status[128];
    int zeros[128]; /* 1 where the sample's pixels are all zero */
    char *extra[128][2];
    size_t len[128][2];
} got;

static void got_free(got *g)
{
    for (int i = 0; i < g->n; i++)
        for (int k = 0; k < 2; k++)
            free(g->extra[i][k]);
}

/* Batches until the epoch ends or `batches` were taken (-1: all). */
static int take(pl_loader *l, got *g, int batches, int nextras)
{
    const pl_batch *b;
    int rc = 0;
    for (int nb = 0; batches < 0 || nb < batches; nb++) {
        if ((rc = pl_loader_next(l, &b)) != 0)
            break;
        cr_assert_eq(b->num_extras, nextras);
        for (int k = 0; k < nextras; k++) {
            const pl_extra *x = &b->extras[k];
            cr_assert_eq(x->offsets[0], 0);
            for (int i = 0; i < b->count; i++) {
                cr_assert_leq(x->offsets[i], x->offsets[i + 1]);
                const size_t len = x->offsets[i + 1] - x->offsets[i];
                char *e = malloc(len + 1);
                memcpy(e, x->data + x->offsets[i], len);
                e[len] = '\0';
                g->extra[g->n + i][k] = e;
                g->len[g->n + i][k] = len;
            }
        }
        uint8_t *px = malloc(b->bytes);
        cr_assert_not_null(px);
        tu_batch_pixels(b, px);
        const size_t each = b->bytes / (size_t)b->count;
        for (int i = 0; i < b->count; i++) {
            g->idx[g->n + i] = b->indices[i];
            g->label[g->n + i] = b->labels[i];
            g->status[g->n + i] = b->status[i];
            g->zeros[g->n + i] = 1;
            for (size_t k = 0; k < each; k++)
                g->zeros[g->n + i] &= px[(size_t)i * each + k] == 0;
        }
        free(px);
        g->n += b->count;
        pl_loader_release(l, b, NULL);
    }
    return rc;
}

static void shard_cfg(pl_config *c, const char *data, int workers)
{
    base_cfg(c, data);
    c->batch_size = 4;
    c->width = c->height = 16;
    c->seed = 11;
    c->num_workers = workers;
    c->extras = "txt,json";
}

/* Each delivered entry is its key's member, byte for byte. */
static void assert_members(pl_loader *l, const got *g)
{
    char want[512];
    for (int i = 0; i < g->n; i++) {
        const int key = key_of(l, g->idx[i]);
        int n = caption_of(key, want, sizeof want);
        if (n < 0) /* no member: an empty entry */
            n = 0, want[0] = '\0';
        cr_assert_eq(g->len[i][0], (size_t)n, "key %d: txt of %zu bytes", key,
                     g->len[i][0]);
        cr_assert_str_eq(g->extra[i][0], want, "key %d", key);
        n = json_of(key, want, sizeof want);
        cr_assert_eq(g->len[i][1], (size_t)n, "key %d's json", key);
        cr_assert_str_eq(g->extra[i][1], want, "key %d", key);
        cr_assert_eq(g->label[i], key % 3, "key %d", key);
    }
}

Test(extras, shard_members_in_the_batch_order_whatever_the_workers,
     .timeout = TIMEOUT)
{
    char dir[64], data[160];
    tu_tmpdir(dir);
    make_shards(dir, data);
    got g[2] = {0};
    for (int w = 0; w < 2; w++) {
        pl_config c;
        shard_cfg(&c, data, w ? 4 : 1);
        pl_loader *l = create(&c);
        cr_assert_eq(take(l, &g[w], -1, 2), PL_EPOCH_END, "%s",
                     pl_last_error());
        cr_assert_eq(g[w].n, KEYS);
        assert_members(l, &g[w]);
        pl_loader_destroy(l);
    }
    for (int i = 0; i < KEYS; i++) {
        cr_assert_eq(g[0].idx[i], g[1].idx[i], "position %d", i);
        for (int k = 0; k < 2; k++)
            cr_assert_str_eq(g[0].extra[i][k], g[1].extra[i][k]);
    }
    got_free(&g[0]);
    got_free(&g[1]);
    tu_rm_rf(dir);
}

Test(extras, a_resumed_loader_delivers_the_same_extras, .timeout = TIMEOUT)
{
    char dir[64], data[160];
    tu_tmpdir(dir);
    make_shards(dir, data);
    pl_config c;
    shard_cfg(&c, data, 2);
    pl_loader *l = create(&c);
    got whole = {0}, head = {0}, rest = {0};
    cr_assert_eq(take(l, &whole, -1, 2), PL_EPOCH_END);
    pl_loader_destroy(l);

    l = create(&c);
    cr_assert_eq(take(l, &head, 3, 2), 0);
    pl_state st;
    cr_assert_eq(pl_loader_state(l, &st), 0);
    pl_loader_destroy(l);
    c.resume = &st;
    c.num_workers = 3;
    l = create(&c);
    cr_assert_eq(take(l, &rest, -1, 2), PL_EPOCH_END);
    cr_assert_eq(head.n + rest.n, KEYS);
    for (int i = 0; i < rest.n; i++) {
        const int j = head.n + i;
        cr_assert_eq(rest.idx[i], whole.idx[j], "position %d", j);
        for (int k = 0; k < 2; k++)
            cr_assert_str_eq(rest.extra[i][k], whole.extra[j][k]);
    }
    assert_members(l, &rest);
    pl_loader_destroy(l);
    got_free(&whole);
    got_free(&head);
    got_free(&rest);
    tu_rm_rf(dir);
}

/* Required: a key without a txt member is a bad sample naming it; under
 * SUBSTITUTE it comes as zeros with PL_ENOEXTRA and empty entries, under
 * FAIL the epoch stops at it. A cls extra still gives the label. */
Test(extras, a_required_extra_missing_is_the_samples_error, .timeout = TIMEOUT)
{
    char dir[64], data[160];
    tu_tmpdir(dir);
    make_shards(dir, data);
    pl_config c;
    shard_cfg(&c, data, 2);
    c.extras = "txt,cls";
    c.extras_required = 1;
    c.on_error = PL_ON_ERROR_SUBSTITUTE;
    pl_loader *l = create(&c);
    got g = {0};
    cr_assert_eq(take(l, &g, -1, 2), PL_EPOCH_END);
    cr_assert_eq(g.n, KEYS);
    int bad = 0;
    for (int i = 0; i < g.n; i++) {
        const int key = key_of(l, g.idx[i]);
        char cls[16];
        snprintf(cls, sizeof cls, "%d", key % 3);
        cr_assert_eq(g.label[i], key % 3);
        if (key % 5 == 4) {
            bad++;
            cr_assert_eq(g.status[i], PL_ENOEXTRA, "key %d", key);
            cr_assert_eq(g.len[i][0] + g.len[i][1], 0);
            /* zeros, not the pixels its good JPEG decodes to */
            cr_assert(g.zeros[i], "key %d: its pixels under PL_ENOEXTRA", key);
        } else {
            cr_assert_eq(g.status[i], 0, "key %d", key);
            cr_assert_str_eq(g.extra[i][1], cls, "key %d", key);
            cr_assert(!g.zeros[i], "key %d: a good sample all zeros", key);
        }
    }
    cr_assert_eq(bad, 5); /* keys 4, 9, 14, 19 and 24 */
    pl_failure f;
    size_t n;
    cr_assert_eq(pl_loader_failures(l, 0, &f, 1, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(f.code, PL_ENOEXTRA);
    cr_assert_not_null(strstr(f.reason, "has no txt member"), "%s", f.reason);
    pl_loader_destroy(l);
    got_free(&g);

    c.on_error = PL_ON_ERROR_FAIL;
    c.shuffle = 0;
    l = create(&c);
    got h = {0};
    cr_assert_eq(take(l, &h, -1, 2), PL_ENOEXTRA);
    cr_assert_eq(h.n, 4); /* key 4 is in the second batch */
    cr_assert_not_null(strstr(pl_last_error(), "a.tar:k004.jpg"), "%s",
                       pl_last_error());
    pl_loader_destroy(l);
    got_free(&h);
    tu_rm_rf(dir);
}

Test(extras, list_file_columns_are_the_extras, .timeout = TIMEOUT)
{
    char dir[64], p[256];
    tu_tmpdir(dir);
    static const char *const caption[] = {"a cat on a mat", "", "two  dogs",
                                          NULL, "x"};
    FILE *f;
    snprintf(p, sizeof p, "%s/list.tsv", dir);
    cr_assert_not_null(f = fopen(p, "w"));
    for (int i = 0; i < 5; i++) {
        char img[256];
        snprintf(img, sizeof img, "%s/i%d.jpg", dir, i);
        tu_write_jpeg(img, 20, 20, (unsigned)i, NULL);
        if (caption[i])
            fprintf(f, "i%d.jpg\t%d\t%s\tt%d\tignored\r\n", i, i, caption[i],
                    i);
        else
            fprintf(f, "i%d.jpg\t%d\n", i, i);
    }
    fclose(f);
    pl_config c;
    base_cfg(&c, p);
    c.batch_size = 5;
    c.width = c.height = 8;
    c.shuffle = 0;
    c.extras = "caption,tag";
    pl_loader *l = create(&c);
    got g = {0};
    cr_assert_eq(take(l, &g, -1, 2), PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_eq(g.n, 5);
    for (int i = 0; i < 5; i++) {
        char tag[16] = "";
        if (caption[i])
            snprintf(tag, sizeof tag, "t%d", i);
        cr_assert_eq(g.idx[i], i);
        cr_assert_str_eq(g.extra[i][0], caption[i] ? caption[i] : "");
        cr_assert_str_eq(g.extra[i][1], tag);
    }
    pl_loader_destroy(l);
    got_free(&g);

    c.extras_required = 1;
    pl_loader *none = NULL;
    cr_assert_eq(pl_loader_create(&c, &none), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "list.tsv:4: no tag column"),
                       "%s", pl_last_error());
    tu_rm_rf(dir);
}

Test(extras, bad_names_are_refused_naming_the_field, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 3, 1);
    static const char *const bad[] = {
        "txt,",    "txt,,json",         ".txt",  "txt.", "a b",
        "txt,TXT", "a,b,c,d,e,f,g,h,i", "json/x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pl_config c;
        base_cfg(&c, root);
        c.extras = bad[i];
        pl_loader *l = NULL;
        cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL, "\"%s\"", bad[i]);
        cr_assert_null(l);
        cr_assert_not_null(strstr(pl_last_error(), "config.extras"), "%s",
                           pl_last_error());
    }
    pl_config c;
    base_cfg(&c, root);
    pl_loader *l = NULL;
    c.extras = "txt";
    c.extras_required = 2;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "config.extras_required"), "%s",
                       pl_last_error());
    tu_rm_rf(root);
}

/* A folder's sidecars: x.jpg's txt is x.txt beside it, in an ImageFolder
 * tree and in a flat folder; one that is not there is an empty entry, or
 * with extras_required the sample's PL_ENOEXTRA naming the file. */
Test(extras, folder_sidecar_files_are_the_extras, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 12, 3);
    pl_config c;
    base_cfg(&c, root);
    c.shuffle = 0;
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    char p[512], text[64];
    for (int64_t i = 0; i < in.dataset_size; i++) {
        const char *path;
        pl_loader_sample(l, i, &path, NULL);
        if (i % 4 == 1)
            continue; /* no sidecar */
        snprintf(p, sizeof p, "%.*s.txt", (int)(strlen(path) - 4), path);
        const int n = snprintf(text, sizeof text, "caption %lld", (long long)i);
        tu_write_file(p, text, (size_t)n);
    }
    pl_loader_destroy(l);
    c.extras = "txt";
    c.batch_size = 12;
    l = create(&c);
    got g = {0};
    cr_assert_eq(take(l, &g, -1, 1), PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_eq(g.n, 12);
    for (int i = 0; i < 12; i++) {
        cr_assert_eq(g.idx[i], i);
        if (i % 4 == 1)
            text[0] = '\0';
        else
            snprintf(text, sizeof text, "caption %d", i);
        cr_assert_str_eq(g.extra[i][0], text, "sample %d", i);
        size_t len;
        const int rc = pl_loader_read_extra(l, i, 0, NULL, 0, &len);
        cr_assert_eq(rc, i % 4 == 1 ? PL_ENOEXTRA : PL_EINVAL, "%d", i);
        cr_assert_eq(len, strlen(text));
    }
    pl_loader_destroy(l);
    got_free(&g);

    c.extras_required = 1;
    c.on_error = PL_ON_ERROR_SUBSTITUTE;
    l = create(&c);
    got h = {0};
    cr_assert_eq(take(l, &h, -1, 1), PL_EPOCH_END, "%s", pl_last_error());
    for (int i = 0; i < 12; i++) {
        cr_assert_eq(h.status[i], i % 4 == 1 ? PL_ENOEXTRA : 0, "sample %d", i);
        /* A missing sidecar is found when read, after the catalog: the
         * sample is zeros all the same, not its good JPEG's pixels. */
        cr_assert_eq(h.zeros[i], i % 4 == 1, "sample %d", i);
    }
    pl_failure f;
    size_t n;
    cr_assert_eq(pl_loader_failures(l, 0, &f, 1, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_not_null(strstr(f.reason, ".txt beside it"), "%s", f.reason);
    pl_loader_destroy(l);
    got_free(&h);
    tu_rm_rf(root);
}

/* pl_loader_read_extra: a shard member's bytes as stored, PL_ENOEXTRA for
 * a key without it, PL_EINVAL for an extra not asked for. */
Test(extras, read_extra_gives_a_members_bytes, .timeout = TIMEOUT)
{
    char dir[64], data[160];
    tu_tmpdir(dir);
    make_shards(dir, data);
    pl_config c;
    shard_cfg(&c, data, 1);
    pl_loader *l = create(&c);
    for (int64_t i = 0; i < KEYS; i++) {
        const int key = key_of(l, i);
        char want[512], got_[512];
        const int n = caption_of(key, want, sizeof want);
        size_t len = 99;
        const int rc = pl_loader_read_extra(l, i, 0, got_, sizeof got_, &len);
        if (n < 0) {
            cr_assert_eq(rc, PL_ENOEXTRA, "key %d", key);
            cr_assert_eq(len, 0);
        } else {
            cr_assert_eq(rc, 0, "key %d: %s", key, pl_last_error());
            cr_assert_eq(len, (size_t)n);
            cr_assert(memcmp(got_, want, len) == 0, "key %d", key);
        }
    }
    size_t len;
    cr_assert_eq(pl_loader_read_extra(l, 0, 2, NULL, 0, &len), PL_EINVAL);
    pl_loader_destroy(l);
    tu_rm_rf(dir);
}

/* config.label_field: each sample's label from its json member's field,
 * read at create: the key numbers here ({"i": i, ...}), the class count
 * from the largest; keys whose json gives none are bad by construction,
 * naming why; folders and list files are refused. */
Test(extras, labels_from_a_json_field, .timeout = TIMEOUT)
{
    char dir[64], data[160];
    tu_tmpdir(dir);
    make_shards(dir, data);
    pl_config c;
    shard_cfg(&c, data, 2);
    c.extras = NULL;
    c.label_field = "i";
    pl_loader *l = create(&c);
    cr_assert_eq(info_of(l).num_classes, KEYS);
    got g = {0};
    cr_assert_eq(take(l, &g, -1, 0), PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_eq(g.n, KEYS);
    for (int i = 0; i < g.n; i++)
        cr_assert_eq(g.label[i], key_of(l, g.idx[i]), "sample %d", i);
    pl_loader_destroy(l);

    /* A shard of keys whose json gives no label, one each way. JSON
     * nested 32 levels deep (json-c's depth) gives one; 33 levels is
     * valid JSON too, but too deep: it said "not JSON", and an empty
     * member "not JSON" too. */
    char deep32[128], deep33[128];
    for (int i = 0; i < 2; i++) {
        char *d = i ? deep33 : deep32;
        const int arrays = i ? 32 : 31; /* below the top-level object */
        int o = snprintf(d, 64, "{\"i\": 3, \"a\": ");
        for (int k = 0; k < arrays; k++)
            d[o++] = '[';
        for (int k = 0; k < arrays; k++)
            d[o++] = ']';
        d[o++] = '}';
        d[o] = 0;
    }
    const struct {
        const char *json; /* NULL: no json member */
        const char *why;
    } bad[] = {
        {"{\"i\": 3}", NULL},
        {NULL, "no json member"},
        {"{\"i\": 3", "not JSON"},
        {"{\"j\": 3}", "has no field \"i\""},
        {"{\"i\": \"3\"}", "is not a label"},
        {"{\"i\": -1}", "is not a label"},
        {"[3]", "not JSON"},
        {deep32, NULL},
        {deep33, "its json member is nested too deep (JSON deeper than 32 "
                 "levels)"},
        {"", "its json member is empty"},
        {" \n\t", "its json member is empty"},
    };
    const int nbad = (int)(sizeof bad / sizeof *bad);
    char p[256], cmd[512];
    for (int i = 0; i < nbad; i++) {
        snprintf(p, sizeof p, "%s/odd/k%02d.jpg", dir, i);
        tu_mkdirs_for(p);
        tu_write_jpeg(p, 20, 20, (unsigned)i, NULL);
        if (bad[i].json) {
            snprintf(p, sizeof p, "%s/odd/k%02d.json", dir, i);
            tu_write_file(p, bad[i].json, strlen(bad[i].json));
        }
    }
    snprintf(cmd, sizeof cmd, "cd %s/odd && tar -cf ../odd.tar $(ls | sort)",
             dir);
    cr_assert_eq(system(cmd), 0);
    char odd[160];
    snprintf(odd, sizeof odd, "%s/odd.tar", dir);
    shard_cfg(&c, odd, 1);
    c.extras = NULL;
    c.label_field = "i";
    c.shuffle = 0;
    c.on_error = PL_ON_ERROR_SUBSTITUTE;
    l = create(&c);
    got h = {0};
    cr_assert_eq(take(l, &h, -1, 0), PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_eq(h.n, nbad);
    for (int i = 0; i < nbad; i++) {
        cr_assert_eq(h.status[i], bad[i].why ? PL_ECORRUPT : 0, "key %d", i);
        cr_assert_eq(h.label[i], bad[i].why ? 0 : 3, "key %d", i);
    }
    pl_failure f[16];
    size_t n;
    cr_assert_eq(pl_loader_failures(l, 0, f, 16, &n), 0);
    cr_assert_eq(n, (size_t)nbad - 2);
    for (size_t k = 0; k < n; k++) {
        const int key = atoi(strstr(f[k].path, ":k") + 2);
        cr_assert_not_null(strstr(f[k].reason, bad[key].why), "key %d: %s", key,
                           f[k].reason);
        cr_assert_not_null(strstr(f[k].reason, "config.label_field"), "%s",
                           f[k].reason);
    }
    pl_loader_destroy(l);

    char root[64];
    tu_make_tree(root, 3, 1);
    base_cfg(&c, root);
    c.label_field = "i";
    pl_loader *none = NULL;
    cr_assert_eq(pl_loader_create(&c, &none), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "config.label_field"), "%s",
                       pl_last_error());
    tu_rm_rf(root);
    tu_rm_rf(dir);
}
