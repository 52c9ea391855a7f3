/* The ops' spec (workers/ops/spec.c): every op parsed with its defaults
 * and written back in full, positional and named values, aliases and
 * fractions; each error naming the op as written and the parameter with
 * its value; the stages' order, one resample, the output's size; the
 * presets as the specs they are; each op drawing from its own stream; what
 * describe says. */
#include <math.h>

#include "../workers/ops/ops.h"
#include "pinload.h"
#include "testops.h"
#include "testutil.h"

static const op_setup u8_224 = {224,
                                224,
                                PL_FORMAT_U8_NHWC,
                                {0.485f, 0.456f, 0.406f},
                                {0.229f, 0.224f, 0.225f}};
static const op_setup f32_64x48 = {
    64, 48, PL_FORMAT_F32_NCHW, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}};

#define RRC_DEFAULTS                                                           \
    "scale=0.08:1,ratio=0.75:1.3333333333333333,interpolation=bilinear,"       \
    "antialias=true"

static ops_pipeline pl; /* large: not on the stack */

static void parses_to(const char *spec, const op_setup *s, const char *want)
{
    tops_parses_to(&pl, s, spec, want);
}

static void refused(const char *spec, const op_setup *s, const char *want)
{
    tops_refused(&pl, s, spec, want);
}

Test(ops_spec, every_op_parses_with_its_defaults_written_out)
{
    parses_to("random_resized_crop;hflip;vflip;grayscale", &u8_224,
              "random_resized_crop(size=224x224," RRC_DEFAULTS ");"
              "hflip(p=0.5);vflip(p=0.5);grayscale(p=1)");
    cr_assert_eq(pl.ngeometry, 3);
    cr_assert_eq(pl.npixels, 1);
    cr_assert_eq(pl.shared_stream, 0, "a spec's ops draw on their own");
    parses_to("resize(256);center_crop;normalize", &f32_64x48,
              "resize(size=256,interpolation=bilinear,antialias=true);"
              "center_crop(size=64x48,interpolation=bilinear,antialias=true);"
              "normalize(mean=0.5:0.5:0.5,std=0.25:0.25:0.25)");
    cr_assert_eq(pl.nnormalize, 1);
    parses_to("resize", &u8_224,
              "resize(size=224x224,interpolation=bilinear,antialias=true)");
    cr_assert_eq(pl.n, 1);
}

Test(ops_spec, values_are_positional_then_named_with_aliases_and_fractions)
{
    parses_to(" rrc ( 224 , 0.25:1 , ratio = 3/4:4/3 , "
              "interpolation=bicubic,antialias=false ) ; "
              "random_horizontal_flip(1) ;",
              &u8_224,
              "random_resized_crop(size=224,scale=0.25:1,"
              "ratio=0.75:1.3333333333333333,interpolation=bicubic,"
              "antialias=false);hflip(p=1)");
    cr_assert(pl.op[0].arg[2].v[1] == 4.0 / 3.0, "4/3 is 4.0 / 3.0 exactly");
    cr_assert_str_eq(pl.op[0].written, "rrc");
    cr_assert_str_eq(pl.op[1].written, "random_horizontal_flip");
    /* One number for a range is a:a; for a triple a:a:a. */
    parses_to("rrc(scale=0.5);random_grayscale(0.1);normalize(mean=0.5)",
              &f32_64x48,
              "random_resized_crop(size=64x48,scale=0.5:0.5,"
              "ratio=0.75:1.3333333333333333,interpolation=bilinear,"
              "antialias=true);grayscale(p=0.1);"
              "normalize(mean=0.5:0.5:0.5,std=0.25:0.25:0.25)");
    parses_to("resize(300,max_size=400,interpolation=nearest_exact);"
              "center_crop(224)",
              &u8_224,
              "resize(size=300,interpolation=nearest_exact,max_size=400,"
              "antialias=true);center_crop(size=224,interpolation=bilinear,"
              "antialias=true)");
    parses_to("center_crop(crop_pct=7/8,interpolation=area);vflip(p=0)",
              &u8_224,
              "center_crop(size=224x224,crop_pct=0.875,interpolation=area,"
              "antialias=true);vflip(p=0)");
    /* A normalize of its own sets what float formats are made with. */
    parses_to("resize;normalize(mean=0.1:0.2:0.3,std=1:2:4)", &f32_64x48,
              "resize(size=64x48,interpolation=bilinear,antialias=true);"
              "normalize(mean=0.1:0.2:0.3,std=1:2:4)");
    cr_assert_float_eq(pl.mean[1], 0.2f, 0);
    cr_assert_float_eq(pl.std[2], 4.0f, 0);
    parses_to("resize", &f32_64x48,
              "resize(size=64x48,interpolation=bilinear,antialias=true)");
    cr_assert_float_eq(pl.mean[0], 0.5f, 0, "without one: the config's");
}

Test(ops_spec, each_error_names_the_op_as_written_and_the_parameter)
{
    refused("rrc(scale=0.08:x)", &u8_224, "rrc: scale=0.08:x: not a number");
    refused("rrc(scale=1:0.08)", &u8_224,
            "rrc: scale=1:0.08: 1 is above 0.08 (a range is low:high)");
    refused("rrc(scale=0:1)", &u8_224, "rrc: scale=0:1: 0 is outside (0, 100]");
    refused("rrc(scale=0.1:0.2:0.3)", &u8_224,
            "rrc: scale=0.1:0.2:0.3: more than 2 numbers");
    refused("rrc(224.5)", &u8_224,
            "rrc: size=224.5: 224.5 is not a whole number");
    refused("rrc(224x)", &u8_224, "rrc: size=224x: not a number");
    refused("rrc(scal=0.5)", &u8_224,
            "rrc: \"scal\": no such parameter (size, scale, ratio, "
            "interpolation, antialias)");
    refused("rrc(interpolation=cubic)", &u8_224,
            "rrc: interpolation=cubic: not bilinear, nearest, nearest_exact, "
            "bicubic or area");
    refused("rrc(antialias=yes)", &u8_224,
            "rrc: antialias=yes: not false, true, 0 or 1");
    refused("rrc(scale=0.5,scale=0.6)", &u8_224, "rrc: scale is given twice");
    refused("rrc(scale=0.5,224)", &u8_224,
            "rrc: \"224\" has no name, after a key=value: name it, or put it "
            "first");
    refused("hflip(0.5,0.5)", &u8_224,
            "hflip: \"0.5\" is value 2, but it takes 1 (p)");
    refused("hflip(p=)", &u8_224, "hflip: p: no value after '='");
    refused("hflip(p=1.5)", &u8_224, "hflip: p=1.5: 1.5 is outside [0, 1]");
    refused("hflip(,)", &u8_224, "hflip: an empty value in its list");
    refused("resize(p=1", &u8_224, "resize: no ')' to close its values");
    refused("resize(224x224) hflip", &u8_224,
            "resize: \"hflip\" after it (ops are separated by ';')");
    refused("rotat(30)", &u8_224,
            "\"rotat\": no such op (random_resized_crop, resize, "
            "center_crop, hflip, vflip, grayscale, color_jitter, "
            "gaussian_blur, solarize, posterize, equalize, autocontrast, "
            "rotate, affine, rand_augment, trivial_augment_wide, "
            "auto_augment, normalize, random_erasing, mixup)");
    refused(";(", &u8_224, "\"(\": an op's name was expected");
    refused("", &u8_224, "no ops (leave it NULL for config.augment's preset)");
    refused("resize(224,max_size=200)", &u8_224,
            "resize: max_size=200: must be above size (224), the shorter "
            "side");
    refused("resize(224x224,max_size=300)", &u8_224,
            "resize: max_size=300: applies to a size S (the shorter side) "
            "only, not to WxH");
    refused("resize;normalize", &u8_224,
            "normalize: config.format is u8, which holds no normalised "
            "values: use f32, f16 or bf16, or drop normalize");
    refused("resize;normalize(std=1:0:1)", &f32_64x48,
            "normalize: std=1:0:1: 0 is outside (0, 1e+06]");
}

Test(ops_spec, the_stages_resamples_and_output_size_are_checked)
{
    refused("rrc;grayscale;hflip", &u8_224,
            "hflip: a geometric op after grayscale (a pixel op): the order "
            "is geometric ops (fused into the decode), pixel ops, "
            "normalize, after-normalize ops, a batch op");
    refused("resize;normalize;grayscale", &f32_64x48,
            "grayscale: a pixel op after normalize (a normalize op): the "
            "order is geometric ops (fused into the decode), pixel ops, "
            "normalize, after-normalize ops, a batch op");
    refused("resize;normalize;normalize", &f32_64x48,
            "normalize: a second normalize");
    refused("resize(256);rrc", &u8_224,
            "rrc: resamples the image a second time (after resize): pinload "
            "resamples once, fused into the decode; drop one of them");
    refused("rrc;center_crop(crop_pct=0.9)", &u8_224,
            "center_crop: resamples the image a second time (after rrc): "
            "pinload resamples once, fused into the decode; drop one of "
            "them");
    refused("resize(256)", &u8_224,
            "the ops make images 256 pixels on their shorter side, not the "
            "output's 224 x 224 (config.width x config.height): end the "
            "geometric ops with a crop or resize to it (random_resized_crop, "
            "center_crop, resize(WxH); each takes that size by default)");
    refused("hflip;grayscale", &u8_224,
            "the ops make images of each file's own size, not the output's "
            "224 x 224 (config.width x config.height): end the geometric ops "
            "with a crop or resize to it (random_resized_crop, center_crop, "
            "resize(WxH); each takes that size by default)");
    refused("rrc(200)", &u8_224,
            "the ops make 200 x 200 images, not the output's 224 x 224 "
            "(config.width x config.height): end the geometric ops with a "
            "crop or resize to it (random_resized_crop, center_crop, "
            "resize(WxH); each takes that size by default)");
    /* Crops after the resample, and several of them, are fine. */
    parses_to("rrc(300);center_crop(250);hflip;center_crop(224)", &u8_224,
              "random_resized_crop(size=300," RRC_DEFAULTS ");"
              "center_crop(size=250,interpolation=bilinear,antialias=true);"
              "hflip(p=0.5);"
              "center_crop(size=224,interpolation=bilinear,antialias=true)");
}

Test(ops_spec, more_ops_than_a_pipeline_holds_are_refused)
{
    char spec[1024] = "resize";
    for (int i = 1; i <= OPS_MAX; i++)
        strcat(spec, ";hflip");
    refused(spec, &u8_224, "hflip: more than 32 ops");
}

Test(ops_spec, the_presets_are_their_specs_drawing_from_one_stream)
{
    char got[1024];
    ops_preset(&pl, PL_AUGMENT_TRAIN, &u8_224);
    ops_format(&pl, got, sizeof got);
    cr_assert_str_eq(got, "random_resized_crop(size=224x224," RRC_DEFAULTS
                          ");hflip(p=0.5)");
    cr_assert_eq(pl.shared_stream, 1);
    ops_preset(&pl, PL_AUGMENT_EVAL, &f32_64x48);
    ops_format(&pl, got, sizeof got);
    cr_assert_str_eq(got,
                     "resize(size=73,interpolation=bilinear,antialias=true);"
                     "center_crop(size=64x48,interpolation=bilinear,"
                     "antialias=true)");
    ops_preset(&pl, PL_AUGMENT_NONE, &u8_224);
    ops_format(&pl, got, sizeof got);
    cr_assert_str_eq(
        got, "resize(size=224x224,interpolation=bilinear,antialias=true)");
}

/* The first double of op k's stream for the sample. */
static double first_draw(uint64_t seed, int64_t epoch, int64_t index, int k)
{
    philox_stream s;
    philox_stream_op(&s, seed, (uint64_t)epoch, (uint64_t)index, (unsigned)k);
    return philox_next_double(&s);
}

static int flipped(const char *spec, int64_t index)
{
    char why[256];
    cr_assert_eq(ops_parse(&pl, spec, &u8_224, why, sizeof why), 0, "%s", why);
    op_geometry g;
    ops_geometry(&pl, 99, 3, index, 640, 480, &g);
    return g.hflip;
}

Test(ops_spec, each_op_draws_from_its_own_stream)
{
    /* The flip is op 1's first draw whatever op 0 drew before it: a crop
     * that retries (scale far above what fits), one that never does, or a
     * resize that draws nothing. */
    int flips = 0;
    for (int64_t i = 0; i < 300; i++) {
        const int want = first_draw(99, 3, i, 1) < 0.5;
        cr_assert_eq(flipped("rrc(scale=4:8);hflip", i), want, "%lld",
                     (long long)i);
        cr_assert_eq(flipped("rrc(scale=0.1:0.2);hflip", i), want);
        cr_assert_eq(flipped("resize;hflip", i), want);
        flips += want;
    }
    cr_assert(flips > 100 && flips < 200, "%d flips of 300", flips);
    /* The presets' flip is the draw after their crop's, in op 0's
     * stream, as pinload always drew it; so it differs somewhere. */
    int differ = 0;
    for (int64_t i = 0; i < 100; i++) {
        ops_preset(&pl, PL_AUGMENT_TRAIN, &u8_224);
        op_geometry g;
        ops_geometry(&pl, 99, 3, i, 640, 480, &g);
        differ += g.hflip != (first_draw(99, 3, i, 1) < 0.5);
    }
    cr_assert_gt(differ, 10);
}

Test(ops_spec, describe_says_what_each_op_drew)
{
    char why[256], got[512];
    cr_assert_eq(ops_parse(&pl,
                           "resize(256);hflip(1);center_crop(224);vflip(0);"
                           "grayscale(1);normalize",
                           &(op_setup){224,
                                       224,
                                       PL_FORMAT_F16_NCHW,
                                       {0.5f, 0.5f, 0.5f},
                                       {0.5f, 0.5f, 0.5f}},
                           why, sizeof why),
                 0, "%s", why);
    ops_describe(&pl, 1, 0, 0, 640, 480, got, sizeof got);
    /* 640 x 480: the shorter side to 256 is 341 x 256; the centre crop
     * of it at round(117 / 2) = 58 (even), 16. */
    cr_assert_str_eq(got, "resize(width=341,height=256);hflip(flip=1);"
                          "center_crop(top=16,left=58);vflip(flip=0);"
                          "grayscale(apply=1);normalize()");
    /* Cut short, it says how long it would be. */
    const int n = ops_describe(&pl, 1, 0, 0, 640, 480, got, 10);
    cr_assert_eq(n, (int)strlen("resize(width=341,height=256);hflip(flip=1);"
                                "center_crop(top=16,left=58);vflip(flip=0);"
                                "grayscale(apply=1);normalize()"));
    cr_assert_str_eq(got, "resize(wi");
}

Test(ops_spec, the_geometric_pixel_ops_and_erasing_parse_as_torchvision_reads)
{
    /* One number d for degrees or a shear is -d:d, as RandomRotation and
     * RandomAffine read it; translate is x:y. */
    parses_to("resize;rotate(15,fill=0)", &u8_224,
              "resize(size=224x224,interpolation=bilinear,antialias=true);"
              "rotate(degrees=-15:15,interpolation=nearest,fill=0:0:0)");
    parses_to("resize;affine(degrees=10,translate=0.1:0.1,scale=0.9:1.1,"
              "shear=5)",
              &u8_224,
              "resize(size=224x224,interpolation=bilinear,antialias=true);"
              "affine(degrees=-10:10,translate=0.1:0.1,scale=0.9:1.1,"
              "shear=-5:5,shear_y=0:0,interpolation=nearest,fill=0:0:0)");
    parses_to("random_resized_crop;random_rotation(-5:30,bilinear,1:2:3,"
              "center=0:7.5);random_affine(0,0.2:0,shear_y=1:2)",
              &u8_224,
              "random_resized_crop(size=224x224," RRC_DEFAULTS ");"
              "rotate(degrees=-5:30,interpolation=bilinear,fill=1:2:3,"
              "center=0:7.5);affine(degrees=0:0,translate=0.2:0,scale=1:1,"
              "shear=0:0,shear_y=1:2,interpolation=nearest,fill=0:0:0)");
    cr_assert_eq(pl.npixels, 2);
    parses_to("resize;normalize;erase(0.25,value=random)", &f32_64x48,
              "resize(size=64x48,interpolation=bilinear,antialias=true);"
              "normalize(mean=0.5:0.5:0.5,std=0.25:0.25:0.25);"
              "random_erasing(p=0.25,scale=0.02:0.33,ratio=0.3:3.3,"
              "value=random)");
    cr_assert_eq(pl.ntensor, 1);
    cr_assert_eq(pl.op[2].arg[3].word, 1);
    parses_to(
        "resize;random_erasing(value=-1:0:2.5);erase(value=random_channel)",
        &f32_64x48,
        "resize(size=64x48,interpolation=bilinear,antialias=true);"
        "random_erasing(p=0.5,scale=0.02:0.33,ratio=0.3:3.3,"
        "value=-1:0:2.5);random_erasing(p=0.5,scale=0.02:0.33,"
        "ratio=0.3:3.3,value=random_channel)");
    cr_assert_eq(pl.op[1].arg[3].word, 0);
}

Test(ops_spec, the_geometric_pixel_ops_and_erasing_name_a_bad_parameter)
{
    refused("resize;rotate", &u8_224,
            "rotate: degrees: not given (RandomRotation's is required: d for "
            "-d:d, or a:b)");
    refused("resize;rotate(-15)", &u8_224,
            "rotate: degrees=-15: one number d is the range -d:d, so not "
            "below 0 (write a:b for another range)");
    refused("resize;rotate(15,fill=256)", &u8_224,
            "rotate: fill=256: 256 is outside [0, 255]");
    refused("resize;rotate(15,interpolation=bicubic)", &u8_224,
            "rotate: interpolation=bicubic: not nearest or bilinear");
    refused("resize;affine(translate=0.1)", &u8_224,
            "affine: degrees: not given (RandomAffine's is required: d for "
            "-d:d, a:b, or 0 for none)");
    refused("resize;affine(10,translate=1.5:0)", &u8_224,
            "affine: translate=1.5:0: 1.5 is outside [0, 1]");
    refused("resize;affine(10,scale=0:1)", &u8_224,
            "affine: scale=0:1: 0 is outside (0, 100]");
    refused("resize;affine(10,shear=90)", &u8_224,
            "affine: shear=90: 90 is outside [-89, 89]");
    refused("resize;affine(10,shear=-3)", &u8_224,
            "affine: shear=-3: one number d is the range -d:d, so not below 0 "
            "(write a:b for another range)");
    refused("resize;erase(1.5)", &f32_64x48,
            "erase: p=1.5: 1.5 is outside [0, 1]");
    refused("resize;erase(value=rand)", &f32_64x48,
            "erase: value=rand: not a number, R:G:B, random or "
            "random_channel");
    refused("resize;erase(value=1:2)", &f32_64x48,
            "erase: value=1:2: 1 or 3 numbers (R:G:B)");
    refused("resize;erase(ratio=2:1)", &f32_64x48,
            "erase: ratio=2:1: 2 is above 1 (a range is low:high)");
    refused("resize;erase", &u8_224,
            "erase: erases the normalised sample (after normalize, as timm "
            "does), and config.format is u8: use f32, f16 or bf16");
    refused("resize;erase;normalize", &f32_64x48,
            "normalize: a normalize op after erase (a after-normalize op): "
            "the order is geometric ops (fused into the decode), pixel ops, "
            "normalize, after-normalize ops, a batch op");
    refused("resize;erase;rotate(5)", &f32_64x48,
            "rotate: a pixel op after erase (a after-normalize op): the order "
            "is geometric ops (fused into the decode), pixel ops, normalize, "
            "after-normalize ops, a batch op");
}

/* docs/transforms.md's section of an op: from its "### " heading (which
 * names it, alone or with its kin: "### hflip, vflip") to the next
 * heading. NULL if there is none. */
static char *doc_section(char *doc, const char *name, char **end)
{
    for (char *p = strstr(doc, "\n### "); p; p = strstr(p + 1, "\n### ")) {
        char *eol = strchr(p + 1, '\n');
        if (!eol)
            return NULL;
        /* The heading's names, each followed by ", ". */
        char heading[160], word[80];
        snprintf(heading, sizeof heading, ", %.*s, ", (int)(eol - p - 5),
                 p + 5);
        snprintf(word, sizeof word, ", %s, ", name);
        if (!strstr(heading, word))
            continue;
        char *next = strstr(eol, "\n#");
        *end = next ? next : eol + strlen(eol);
        return eol;
    }
    return NULL;
}

Test(ops_spec, the_docs_list_every_op_and_parameter_with_its_default)
{
    char *doc = tu_slurp("docs/transforms.md");
    cr_assert_not_null(doc, "docs/transforms.md");
    for (int k = 0; op_kinds[k]; k++) {
        const op_kind *kind = op_kinds[k];
        char *end, *sec = doc_section(doc, kind->name, &end);
        cr_assert_not_null(sec, "docs/transforms.md has no \"### %s\"",
                           kind->name);
        const char saved = *end;
        *end = '\0';
        if (kind->alias)
            cr_assert(strstr(sec, kind->alias), "%s: its alias %s", kind->name,
                      kind->alias);
        for (int i = 0; i < kind->nparams; i++) {
            const op_param *p = &kind->params[i];
            char row[64], def[64];
            snprintf(row, sizeof row, "| `%s` |", p->name);
            char *r = strstr(sec, row);
            cr_assert_not_null(r, "%s: no row for %s", kind->name, p->name);
            char *eol = strchr(r, '\n');
            if (eol)
                *eol = '\0';
            snprintf(def, sizeof def, "`%s`", p->def ? p->def : "");
            cr_assert(!p->def || strstr(r, def),
                      "%s: %s's row lacks its default %s: %s", kind->name,
                      p->name, def, r);
            if (eol)
                *eol = '\n';
        }
        *end = saved;
    }
    free(doc);
}

Test(ops_spec, every_row_has_what_its_stage_runs)
{
    for (int k = 0; op_kinds[k]; k++) {
        const op_kind *o = op_kinds[k];
        cr_assert(o->name && o->doc && o->nparams <= OP_PARAMS_MAX &&
                      o->drawn_size <= OP_DRAWN_MAX,
                  "%s", o->name);
        cr_assert_eq(op_kind_find(o->name, strlen(o->name)), o);
        if (o->alias)
            cr_assert_eq(op_kind_find(o->alias, strlen(o->alias)), o);
        switch (o->stage) {
        case OP_STAGE_GEOMETRY:
            cr_assert(o->shape && o->geometry, "%s", o->name);
            break;
        case OP_STAGE_PIXELS:
            cr_assert(o->apply, "%s", o->name);
            break;
        case OP_STAGE_TENSOR:
            cr_assert(o->apply_tensor, "%s", o->name);
            break;
        case OP_STAGE_NORMALIZE:
            cr_assert(!o->draw && !o->apply, "%s", o->name);
            break;
        case OP_STAGE_BATCH:
            cr_assert(o->draw && o->apply_batch, "%s", o->name);
            break;
        default:
            cr_assert(0, "%s: stage %d", o->name, (int)o->stage);
        }
        cr_assert(!o->drawn_size || (o->draw && o->describe), "%s", o->name);
        for (int i = 0; i < o->nparams; i++)
            cr_assert(o->params[i].name && o->params[i].doc &&
                          (o->params[i].type != OP_WORD || o->params[i].words),
                      "%s: parameter %d", o->name, i);
    }
}
