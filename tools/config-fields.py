#!/usr/bin/env python3
"""tools/config-fields.py [--check] [--root DIR]: pl_config's fields, listed
once (include/pinload.h), written out for the Python binding.

The header's `typedef struct pl_config {...} pl_config;` gives each field's
name, C type and comment. From them this writes (files committed to git, so
that the sdist builds from itself alone):

  python/src/config_fields.h   PL_CONFIG_FIELDS(X): the fields the extension
                               sets from a dict, with their C kinds
                               (python/src/config.c), and the last field
  python/pinload/_options.py   LoaderOptions, the TypedDict of
                               pinload.Loader's keywords with the header's
                               comments as their docs, and KEYWORDS, each
                               keyword's kind, for conversion
  python/pinload/__init__.py   Loader's docstring, after its line
                               "Keywords (...tools/config-fields.py...):"
  docs/python.md               the table of keywords that are not a field
                               as it is, between its two marker comments

A keyword naming an enum's values (format="f32") takes the words of that
enum's list in the header (PL_FORMAT_MAP: XX(NAME, value, "word")), the
words pl_format_name() gives and the tools take: CHOICES and DEVICES in
_options.py are written from those lists, never by hand.

A field is a keyword of its own name as it is (an int32_t, int64_t or
uint64_t is an integer, a float[3] three numbers, a const char * a string)
unless PYTHON, the one hand-kept table below, says otherwise: a flag, a
name-valued enum, a path, or a keyword of another name or kind (size,
layout, device, log...). A field the table does not cover whose C type has
no keyword as it is (a pointer, a callback), or whose comment says it holds
an enum ("a pl_order"), or that has no comment, stops this script with the
field's name: a new field is never forgotten.

--check writes nothing: each stale file is named and the status is 1
(`make test` runs it; `make config-fields` writes them). It also holds
what is kept by hand against the header, naming each difference (status
1, in either mode):

  README.md                    its configuration table lists every
                               pl_config field, once, and no other; an
                               integer field's default there is the
                               header comment's ("default 64")
  include/pinload.h            every integer field's comment says its
                               default, and the float and pointer fields'
                               say it where they do
  python/pinload/_pinload.pyi  declares every enum constant
  PYTHON (below)               a name-valued keyword's docs name each of
                               its words, and "(the default" the default's

--defaults PROG: PROG prints pl_config_default()'s values, a field a line
("batch_size 64", "mean 0.485 0.456 0.406", "data NULL"), and the header's
and the README's defaults are held against them too: the library is the
source of the defaults, the texts are checked (`make config-check` builds
PROG from --defaults-program, which writes its C source from the header's
fields to stdout). Python 3 stdlib only.
"""

import argparse
import os
import re
import subprocess
import sys
import textwrap

SCRIPT = "tools/config-fields.py"
HEADER = "include/pinload.h"
README = "README.md"
STUBS = "python/pinload/_pinload.pyi"
C_TABLE = "python/src/config_fields.h"
OPTIONS = "python/pinload/_options.py"
INIT = "python/pinload/__init__.py"
DOCS = "docs/python.md"

INIT_HEAD = ("Keywords (written from include/pinload.h by "
             "tools/config-fields.py):")
DOCS_BEGIN = ("<!-- tools/config-fields.py writes the lines below: do not "
              "edit -->")
DOCS_END = "<!-- tools/config-fields.py: end -->"


class Keyword:
    """One Python keyword that is not a C field as it is."""

    def __init__(self, keyword, fields, kind, pytype, doc=None, values=None,
                 enum=None, unset=None, row=None):
        self.keyword = keyword      # its name; None: no keyword at all
        self.fields = fields        # the pl_config fields it sets
        self.kind = kind            # how pinload/__init__.py converts it
        self.pytype = pytype        # its annotation in LoaderOptions
        self.doc = doc              # None: the header's comment
        self.values = values        # docs/python.md's "values" column
        self.enum = enum            # the pl_* enum whose words it takes
        self.choices = None         # word -> _pinload constant, from the
                                    # enum's list (kind choice)
        self.unset = unset          # the field's value when left out (None:
                                    # the C default)
        self.row = row or [keyword]  # docs/python.md's keyword column


def choice(keyword, enum, doc, values=None, pytype="str"):
    """A keyword taking the words of `enum`'s list in the header (its
    docs/python.md values: each word quoted, unless given)."""
    return Keyword(keyword, [keyword], "choice", pytype, doc, values,
                   enum=enum)


def flag(field):
    return Keyword(field, [field], "flag", "bool")


# The hand-kept table: every pl_config field whose Python keyword is not the
# field as it is. A new field of an enum type needs one line here (choice);
# any other int32_t, int64_t, uint64_t, float[3] or const char * field
# needs none.
PYTHON = [
    Keyword("data", ["data"], "data", "PathLike",
            "an ImageFolder root, a flat folder of images, a list file of "
            '"path label" lines, or WebDataset tar shards (a .tar, a folder '
            'of them, "train-{000..146}.tar", a list of shard paths), local '
            "or as http(s)://, s3:// or pipe: URLs; the one positional "
            "argument"),
    Keyword("size", ["width", "height"], "size",
            "Union[int, Tuple[int, int]]",
            "the output's height and width in pixels: an int for both, or "
            "(height, width); default 224",
            "an int, or `(height, width)`"),
    choice("format", "pl_format",
           '"u8" (uint8 NHWC, the default), "f32", "f16" or "bf16" '
           "(normalised NCHW; bf16 a torch.bfloat16 tensor), or the torch "
           "dtype: torch.uint8, torch.float32, torch.float16, "
           "torch.bfloat16",
           '`"u8"` (uint8 NHWC), `"f32"`, `"f16"`, `"bf16"` (normalised '
           "NCHW; bf16 a `torch.bfloat16` tensor, NumPy has no such type), "
           "or the images' torch dtype (`torch.float32` for `\"f32\"`)",
           pytype="Union[str, TorchDtype]"),
    choice("augment", "pl_augment",
           '"train" (RandomResizedCrop + flip, the default), "eval" (Resize '
           '+ CenterCrop) or "none" (resize to size)'),
    flag("dct_scaling"),
    flag("shuffle"),
    flag("drop_last"),
    Keyword("rank", ["rank"], "rank", "int",
            "this process's shard: None (default) takes rank and "
            "world_size from the launcher (torchrun, SLURM, MPI); give both "
            "or neither",
            "`None` (both): the launcher's (torchrun, SLURM, MPI); for "
            "`pinload.torch.Loader`, torch.distributed's process group where "
            "one is up and the environment names no such pair (Lightning's "
            "launcher)", row=["rank", "world_size"]),
    Keyword("world_size", ["world_size"], "rank", "int",
            "the number of shards: with rank, or neither"),
    choice("shard_mode", "pl_shard_mode",
           '"pad" (the default) or "drop": DistributedSampler\'s drop_last'),
    Keyword("resume", ["resume"], "state", "StateLike",
            "None (default): start at first_epoch; else go on from a state "
            "of state_dict() or state(), with exactly the batches the saved "
            "loader would have delivered next",
            "a `state_dict()` or `state()`"),
    Keyword("num_workers", ["num_workers"], "workers", "Union[int, str]",
            "Decode threads. 0 (default): the CPUs this process may run on "
            "(its affinity mask, and a cgroup CPU quota where one is set) "
            "shared among the launcher's ranks on this node, at least 1; "
            '"auto": as many threads, of which the loader uses the fewest '
            "that keep the training loop from waiting (a notice says how "
            "many; stats['workers_active']); or N",
            '`0`, `N`, or `"auto"`: the fewest of the default count that '
            "keep the loop from waiting"),
    flag("pin_workers"),
    Keyword("prefetch", ["prefetch"], "prefetch", "Union[int, str]",
            "Batch slots in the host ring; default 2 (prefetch x the "
            "batch's bytes of page-locked memory, bounded with the node's "
            'other ranks); "auto": 2 at first, one more whenever batches '
            "come late while the workers wait for a free slot (a slow "
            "sample holding its batch back), up to 8 or what the node's "
            "pinned bound allows (a notice says where it settled; "
            "stats['prefetch_active']); or N",
            '`N` (1 or more), or `"auto"`: grows from 2 while batches come '
            "late with the workers waiting for a slot"),
    choice("memory", "pl_memory",
           'the host ring\'s memory: "pinned" (the default), "pageable" or '
           '"managed"'),
    flag("pinned_fallback"),
    Keyword("device", ["device"], "device", "Any",
            '"auto" (the default: the current CUDA device, else the host), '
            '"host"/"cpu", "local_rank", "cuda", "cuda:N", N, or a '
            "torch.device",
            '`"auto"`, `"host"`/`"cpu"`, `"local_rank"`, `"cuda"`, '
            '`"cuda:N"`, `N`, a `torch.device`', enum="pl_device"),
    flag("keep_host"),
    flag("gpu_normalize"),
    choice("on_error", "pl_on_error",
           'what a bad file does: "skip" (the default), "fail" or '
           '"substitute" (zeros, with its status)'),
    flag("strict"),
    Keyword("log", ["log"], "log", "Callable[[int, str], None]",
            'None (default): the "pinload" logger (notices at INFO, '
            "warnings at WARNING), and each kind of warning once per loader "
            "as a pinload.PinloadWarning; or a callable(level, message) "
            "with logging's levels, which then gets them all",
            '`None`: the `pinload` logger, and each kind of warning once '
            "per loader as a `pinload.PinloadWarning` (below); or "
            "`callable(level, message)`"),
    Keyword(None, ["log_ctx"], None, None),  # the extension's own
    # C's per-sample hook: no Python keyword (a Python callable per sample
    # would hold the GIL in every worker; python/pinload/_v2.py says why).
    Keyword(None, ["sample_fn", "sample_ctx"], None, None),
    Keyword("views", ["views", "num_views"], "views", "Sequence[str]",
            "None (default): one view, transform='s; or 2 to 16 transform "
            "specs, each made from every sample and delivered in the same "
            "batch (batch.views, one array each; pinload.torch.Loader "
            "yields a list of tensors): SimCLR's two crops, DINO's global "
            "and local ones. Each ends the image at its own size (its last "
            "crop or resize to WxH, or S); the image is decoded once, at "
            "full size, and view v draws from seed + v. transform= and "
            "augment= are then not used",
            "`None`, or 2 to 16 specs (`pinload.torch.Loader`: torchvision "
            "v2 pipelines too): [Transforms](transforms.md#several-views-of-"
            "a-sample)"),
    Keyword("layout", ["channels_last"], "layout", "str",
            '"nchw" (float formats\' default) or "nhwc": float images '
            "interleaved, a channels_last tensor of NCHW shape in torch; u8 "
            "is always NHWC",
            '`"nchw"` (float formats\' default) or `"nhwc"`: float images '
            "interleaved in memory, exported with NCHW's shape and "
            "channels-last strides (a `torch.channels_last` tensor, the "
            "same values)"),
    Keyword("max_device_buffers", ["max_device_buffers"], "int", "int",
            "None (default): a batch kept alive while the next is asked "
            "for adds a device buffer, without bound (memory, never an "
            "error); N > device_buffers: at most N buffers, then "
            "BusyError; 0: device_buffers",
            "`None` (the binding's default): no bound but memory, never "
            "`BusyError`; `N`: at most N buffers; `0`: `device_buffers`",
            unset=-1),
    Keyword("cache_dir", ["cache_dir"], "path", "PathLike"),
    choice("order", "pl_order",
           '"global" (the default: the exact global shuffle) or "shards" '
           "(tar shards only: a seeded order of the shards dealt to the "
           "ranks in equal ranges, each read in sequence, shuffled within "
           "windows of shuffle_window positions)",
           '`"global"` (default: the exact global shuffle), `"shards"` (tar '
           "shards only: a seeded order of the shards dealt to the ranks in "
           "equal ranges, read in sequence, shuffled within windows; "
           "docs/DATA.md)"),
    Keyword("extras", ["extras"], "extras",
            "Union[str, Sequence[str], Mapping[str, ExtraDecoder]]",
            "side data each batch carries per sample: shard members by "
            "extension, a list file's tab-separated columns after the label, "
            "or the files beside a folder's images (x.txt beside x.jpg): "
            '"txt,json", ("txt", "json"), or {"txt": "str", "json": "json", '
            '"npy": callable}; batch.extras gives the bytes, '
            "loader.extras_of(batch) them decoded; default None: none",
            '`"txt,json"`, a sequence of names, or `{name: "bytes" \\| '
            '"str" \\| "json" \\| callable}` (below)'),
    flag("extras_required"),
    choice("decode", "pl_decode",
           'where JPEGs are decoded: "cpu" (the default: the workers, with '
           'libjpeg-turbo), "gpu" (the loader\'s GPU, with nvJPEG loaded at '
           'run time: an error without it) or "auto" (the GPU where nvJPEG '
           "can be had, else the CPU, with a notice); PNG, WebP and the "
           "JPEGs nvJPEG cannot decode stay on the CPU",
           '`"cpu"` (default: the workers, libjpeg-turbo), `"gpu"` (nvJPEG '
           "on the loader's GPU, loaded at run time: an error without it), "
           '`"auto"` (the GPU where it can, else the CPU with a notice); '
           "docs/ARCHITECTURE.md, GPU decoding"),
]

# C types whose fields are keywords as they are: (kind in the C table, kind
# in Python, annotation).
AS_IS = {
    "int32_t": ("F_I32", "int", "int"),
    "int64_t": ("F_I64", "int", "int"),
    "uint64_t": ("F_U64", "int", "int"),
    "float[3]": ("F_FLOAT3", "floats", "Sequence[float]"),
    "const char *": ("F_PATH", "str", "str"),
}
# C types the dict may set once a keyword says how (the C table's kind).
C_KIND = dict((t, k[0]) for t, k in AS_IS.items())
C_KIND["const pl_state *"] = "F_STATE"
C_KIND["const char *const *"] = "F_STRS"


class Failure(Exception):
    pass


class Field:
    def __init__(self, name, ctype, doc, line):
        self.name, self.ctype, self.doc, self.line = name, ctype, doc, line


def comment_text(raw):
    """A /* ... */ comment's words, one paragraph."""
    body = raw[2:-2]
    lines = [re.sub(r"^\s*\*?\s?", "", l) for l in body.split("\n")]
    return " ".join(" ".join(lines).split())


DECL = re.compile(r"^(const\s+)?(\w+)\s*(\*?(?:\s*const\s*\*)?)\s*(\w+)"
                  r"\s*(\[\s*(\d+)\s*\])?$")


def parse(text):
    """pl_config's fields in order: name, C type, the comment that says
    what it is (those above it, and the one its line ends with)."""
    m = re.search(r"typedef struct pl_config \{(.*?)\n\} pl_config;", text,
                  re.S)
    if not m:
        raise Failure("%s: no `typedef struct pl_config {...} pl_config;`"
                      % HEADER)
    body, base = m.group(1), text.count("\n", 0, m.start(1)) + 1
    fields, pending, last_line = [], [], None
    for tok in re.finditer(r"/\*.*?\*/|[^;/]+;|\s+|.", body, re.S):
        s = tok.group(0)
        line = base + body.count("\n", 0, tok.start())
        if s.startswith("/*"):
            text_ = comment_text(s)
            if line == last_line:
                f = fields[-1]       # it ends the field's own line
                f.doc = (f.doc + " " + text_).strip()
            elif text_.startswith("----"):
                pending = []         # a group's title, nobody's doc
            else:
                pending.append(text_)
            continue
        if s.strip() == "" or not s.endswith(";"):
            if s.strip():
                raise Failure("%s:%d: cannot read %r" % (HEADER, line, s))
            continue
        decl = " ".join(s[:-1].split())
        d = DECL.match(decl)
        if not d:
            raise Failure("%s:%d: cannot read the field `%s`"
                          % (HEADER, line, decl))
        const, ctype, star, name, _, dim = d.groups()
        ctype = (const or "") + ctype + (
            " *const *" if "const" in star else " *" if star else "")
        if dim:
            ctype += "[%s]" % dim
        end = base + body.count("\n", 0, tok.end())
        fields.append(Field(name, ctype, " ".join(pending), end))
        pending, last_line = [], end
    return fields


class Value:
    """One value of an enum's list: PL_FORMAT_F32_NCHW, 1, "f32"."""

    def __init__(self, const, value, word):
        self.const, self.value, self.word = const, value, word


def parse_enums(text):
    """The enums made from a list, XX(NAME, value, "word"), with a
    PL_*_ENUM_(name, value, word) generator: {"pl_format": [Value...]}."""
    lists = {}
    for m in re.finditer(r"^#define (PL_\w+_MAP)\(XX\)((?:.*\\\n)*.*)$",
                         text, re.M):
        lists[m.group(1)] = re.findall(r'XX\((\w+), (-?\d+), "([^"]*)"\)',
                                       m.group(2))
    enums = {}
    for m in re.finditer(r"typedef enum (pl_\w+) \{\n#define (\w+)\(name, "
                         r"value, word\) (PL_\w*)##name = value,\n\s*"
                         r"(PL_\w+_MAP)\(\2\)", text):
        enum, prefix, name = m.group(1), m.group(3), m.group(4)
        if not lists.get(name):
            raise Failure("%s: %s generates %s, and has no XX(NAME, value, "
                          '"word") lines' % (HEADER, name, enum))
        enums[enum] = [Value(prefix + n, int(v), w) for n, v, w in lists[name]]
    if not enums:
        raise Failure("%s: no enum made from a PL_*_MAP(XX) list" % HEADER)
    return enums


def parse_constants(text, enums):
    """Every constant a default may be written as: the enums' values and
    the plain ones (#define PL_FROM_ENV (-1))."""
    consts = {v.const: v.value for vs in enums.values() for v in vs}
    for m in re.finditer(r"^#define (PL_[A-Z0-9_]+) \(?(-?\d+)\)?$", text,
                         re.M):
        consts[m.group(1)] = int(m.group(2))
    return consts


def resolve(enums):
    """Each name-valued keyword's words, from its enum's list."""
    for k in PYTHON:
        if k.enum is None:
            continue
        if k.enum not in enums:
            raise Failure("%s: PYTHON's %s takes the words of %s, which %s "
                          "does not list (a PL_*_MAP)"
                          % (SCRIPT, k.keyword, k.enum, HEADER))
        if k.kind == "choice":
            k.choices = dict((v.word, v.const[3:]) for v in enums[k.enum])
            if k.values is None:
                k.values = ", ".join('`"%s"`' % w for w in k.choices)


def plan(fields):
    """Each keyword in the header's order (a keyword of several fields at
    its first), checking that every field is covered."""
    by_field = {}
    for k in PYTHON:
        for f in k.fields:
            by_field[f] = k
    names = {f.name for f in fields}
    for k in PYTHON:
        for f in k.fields:
            if f not in names:
                raise Failure("%s: PYTHON names pl_config.%s, which %s has "
                              "not" % (SCRIPT, f, HEADER))
    keywords, seen = [], set()
    for f in fields:
        if not f.doc:
            raise Failure("%s:%d: pl_config.%s has no comment: say what it "
                          "is and its default" % (HEADER, f.line, f.name))
        k = by_field.get(f.name)
        if k is None:
            if f.ctype not in AS_IS:
                raise Failure(
                    "%s:%d: pl_config.%s is a %s, which has no Python "
                    "keyword as it is: say what it is in PYTHON, in %s"
                    % (HEADER, f.line, f.name, f.ctype, SCRIPT))
            enum = re.search(r"\b[Aa]n? (pl_\w+)", f.doc)
            if enum:
                raise Failure(
                    "%s:%d: pl_config.%s holds a %s: give its values names "
                    "in PYTHON (a choice line), in %s"
                    % (HEADER, f.line, f.name, enum.group(1), SCRIPT))
            _, kind, pytype = AS_IS[f.ctype]
            k = Keyword(f.name, [f.name], kind, pytype)
        if k.keyword is None or id(k) in seen:
            continue
        seen.add(id(k))
        docs = [x.doc for x in fields if x.name in k.fields]
        keywords.append((k, k.doc or python_words(k.kind, " ".join(docs))))
    return keywords


def c_table(fields):
    out = ["/* tools/config-fields.py wrote this file from "
           "include/pinload.h's",
           " * pl_config: do not edit (`make config-fields`). Each field a "
           "dict",
           " * may set, and how (python/src/config.c); log and log_ctx are "
           "the",
           " * extension's own. */",
           "#ifndef PINLOAD_PY_CONFIG_FIELDS_H",
           "#define PINLOAD_PY_CONFIG_FIELDS_H",
           "",
           "#define PL_CONFIG_FIELDS(X)"]
    rows = [f for f in fields if f.ctype in C_KIND]
    for f in rows:
        out.append("    X(%s, %s)" % (f.name, C_KIND[f.ctype]))
    # The backslashes where clang-format puts them (column 80).
    for i in range(len(out) - len(rows) - 1, len(out) - 1):
        out[i] = out[i].ljust(79) + "\\"
    out += ["",
            "/* The header's last field: config.c asserts that none follows "
            "it. */",
            "#define PL_CONFIG_LAST_FIELD %s" % fields[-1].name,
            "",
            "#endif", ""]
    return "\n".join(out)


def literal(line):
    """A docstring's line as source: backslashes doubled, and a quote
    that would run into the closing quotes escaped."""
    line = line.replace("\\", "\\\\")
    if line.endswith('""""'):
        line = line[:-4] + '\\""""'
    return line


def python_words(kind, doc):
    """A comment in Python's words: NULL is None, an enum's constant its
    keyword's value (PL_ORDER_SHARDS is order="shards"), and a flag's 1 and
    0 are True and False."""
    doc = re.sub(r"\bNULL\b", "None", doc)
    for k in PYTHON:
        for name, const in (k.choices or {}).items():
            doc = re.sub(r"\bPL_%s\b" % const, '%s="%s"' % (k.keyword, name),
                         doc)
    if kind != "flag":
        return doc
    doc = re.sub(r"(^|[;.] )1: ", r"\1True: ", doc)
    doc = re.sub(r"(^|[;.] )0: ", r"\1False: ", doc)
    doc = re.sub(r"\b([Dd]efault) 1\b", r"\1 True", doc)
    return re.sub(r"\b([Dd]efault) 0\b", r"\1 False", doc)


def wrap(text, width, indent=""):
    return textwrap.wrap(text, width, initial_indent=indent,
                         subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False)


def annotation(k):
    return k.pytype if k.pytype in ("Any",) else "Optional[%s]" % k.pytype


def options(keywords, enums):
    out = ['"""pinload.Loader\'s keywords. tools/config-fields.py wrote '
           "this file",
           "from include/pinload.h's pl_config (the docs are its comments) "
           "and",
           "its own table of the keywords that are not a field as it is: do "
           "not",
           'edit (`make config-fields`)."""',
           "",
           "import os",
           "from typing import (Any, Callable, Dict, Mapping, Optional, "
           "Sequence, Tuple,",
           "                    TypedDict, Union)",
           "",
           "#: What a path may be (os.fspath takes it).",
           'PathLike = Union[str, bytes, "os.PathLike[str]", '
           '"os.PathLike[bytes]"]',
           "#: A saved state: a state_dict(), or the 128 bytes (state()).",
           "StateLike = Union[Mapping[str, Any], bytes, bytearray, "
           "memoryview, str]",
           "#: How an extra's bytes become what extras_of gives: \"bytes\", "
           "\"str\",",
           "#: \"json\", or a callable.",
           "ExtraDecoder = Union[str, Callable[[bytes], Any]]",
           "#: A torch dtype (torch.float32...): format= takes the images' "
           "own. Any:",
           "#: pinload does not import torch.",
           "TorchDtype = Any",
           "",
           "",
           "class LoaderOptions(TypedDict, total=False):",
           '    """pinload.Loader\'s keywords, each optional (None: the '
           "default,",
           "    pinload.Loader.defaults).\"\"\"",
           ""]
    for k, doc in keywords:
        if k.kind == "data":
            continue
        out.append("    %s: %s" % (k.keyword, annotation(k)))
        lines = wrap(doc, 72, "    ")
        lines[0] = '    """' + lines[0][4:]
        lines[-1] += '"""'
        out += [literal(l) for l in lines]
    out += ["", "",
            "#: keyword: (kind, the pl_config fields it sets, the fields' "
            "value when",
            "#: it is None or left out: None for the C default)",
            "KEYWORDS: Dict[str, Tuple[str, Tuple[str, ...], Optional[int]]] "
            "= {"]
    for k, _ in keywords:
        if k.kind == "data":
            continue
        out.append('    "%s": ("%s", (%s), %r),'
                   % (k.keyword, k.kind,
                      ", ".join('"%s"' % f for f in k.fields) +
                      ("," if len(k.fields) == 1 else ""), k.unset))
    out += ["}", "",
            "#: a name-valued keyword's words (its enum's list in pinload.h, "
            "as",
            "#: pl_*_name() gives them), and the _pinload constants they "
            "stand for",
            "CHOICES: Dict[str, Dict[str, str]] = {"]
    for k, _ in keywords:
        if k.kind == "choice":
            out.append('    "%s": {' % k.keyword)
            out += ['        "%s": "%s",' % c for c in k.choices.items()]
            out.append("    },")
    out += ["}", "",
            "#: device=: the words of the device field's special values "
            "(PL_DEVICE_MAP),",
            "#: and the _pinload constants they stand for",
            "DEVICES: Dict[str, str] = {"]
    out += ['    "%s": "%s",' % (v.word, v.const[3:])
            for v in enums["pl_device"]]
    out += ["}", ""]
    return "\n".join(out)


def init_docstring(keywords):
    """Loader's docstring's keyword list: name, then its doc."""
    out = []
    for k, doc in keywords:
        name = k.keyword
        lines = wrap(doc, 76, " " * 20)
        if len(name) < 16:
            lines[0] = "    " + name.ljust(16) + lines[0][20:]
        else:
            first = wrap(doc, 76 - len(name) - 6, "")
            rest = wrap(doc[len(" ".join(first[:1])):].strip(), 76, " " * 20)
            lines = ["    %s  %s" % (name, first[0])] + rest
        out += lines
    return out


def splice_init(text, keywords):
    lines = text.split("\n")
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == INIT_HEAD)
        end = next(i for i in range(start + 1, len(lines))
                   if lines[i].strip() == '"""')
    except StopIteration:
        raise Failure('%s: no line "%s" followed by the docstring\'s end'
                      % (INIT, INIT_HEAD))
    body = [""] + init_docstring(keywords)
    return "\n".join(lines[:start + 1] + body + lines[end:])


def docs_table(keywords):
    """docs/python.md's table of the keywords that are not a field as it is
    (those with a `values` text), and the flags."""
    fields = {k.keyword: k.fields for k, _ in keywords}
    out = ["| keyword | pl_config | values |", "|---|---|---|"]
    flags = []
    for k, _ in keywords:
        if k.kind == "flag":
            flags.append("`%s`" % k.keyword)
        elif k.values:
            out.append("| %s | %s | %s |" % (
                ", ".join("`%s`" % r for r in k.row),
                ", ".join("`%s`" % f for r in k.row for f in fields[r]),
                k.values))
    flags_line = "Flags (%s) take `True`/`False`." % ", ".join(flags)
    return out + [""] + wrap(flags_line, 76)


def splice_docs(text, keywords):
    lines = text.split("\n")
    try:
        start = lines.index(DOCS_BEGIN)
        end = lines.index(DOCS_END, start)
    except ValueError:
        raise Failure("%s: no lines %s ... %s" % (DOCS, DOCS_BEGIN, DOCS_END))
    return "\n".join(lines[:start + 1] + docs_table(keywords) + lines[end:])


# ---------------------------------------------------------------------------
# What is kept by hand, held against the header (and the library)

UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
NUMBERS3 = r"-?\d*\.?\d+ -?\d*\.?\d+ -?\d*\.?\d+"
# A comment's statement of its default: "default 64", "Default 256 MiB",
# "default ImageNet's 0.485 0.456 0.406", "0 (default)", "NULL (default)".
DEFAULT_SAID = re.compile(
    r"\b[Dd]efault:?\s+(?:\w+'s\s+)?(%s|-?\d+(?:\s*[KMG]iB)?|PL_[A-Z0-9_]+"
    r"|NULL)\b|(?<![\w.])(-?\d+|PL_[A-Z0-9_]+|NULL) \(default\)" % NUMBERS3)
INTEGER = ("int32_t", "int64_t", "uint64_t")


def value_of(text, consts):
    """A default as written ("64", "256 MiB", "`PL_ORDER_GLOBAL`", "NULL",
    "0.485 0.456 0.406"): an int, "NULL", three floats, or None if it is
    none of those (a sentence: "ImageNet", "stderr")."""
    t = text.strip().strip("`").strip()
    if re.fullmatch(NUMBERS3, t):
        return tuple(float(x) for x in t.split())
    m = re.match(r"(-?\d+)(?:\s*([KMG]iB))?(?![\w.])", t)
    if m:
        return int(m.group(1)) * UNITS.get(m.group(2), 1)
    m = re.match(r"(PL_[A-Z0-9_]+)\b", t)
    if m:
        return consts.get(m.group(1), m.group(1))  # unknown: its name
    return "NULL" if re.match(r"NULL\b", t) else None


def same(a, b):
    if isinstance(a, tuple) and isinstance(b, tuple):
        # float32 holds the header's decimals to about 7 digits
        return len(a) == len(b) and all(abs(x - y) <= 1e-6 * max(1, abs(x))
                                        for x, y in zip(a, b))
    return a == b


def shown(v):
    return " ".join("%g" % x for x in v) if isinstance(v, tuple) else str(v)


def header_defaults(fields, consts, problems):
    """{field: the default its comment states}, naming each integer field
    whose comment states none, and each constant the header lacks."""
    said = {}
    for f in fields:
        m = DEFAULT_SAID.search(f.doc)
        v = value_of(m.group(1) or m.group(2), consts) if m else None
        if isinstance(v, str) and v != "NULL":
            problems.append("%s:%d: pl_config.%s's default is %s, which the "
                            "header does not define" % (HEADER, f.line,
                                                        f.name, v))
        elif v is not None:
            said[f.name] = v
        elif f.ctype in INTEGER:
            problems.append('%s:%d: pl_config.%s\'s comment does not say its '
                            'default ("default 64", "0 (default)")'
                            % (HEADER, f.line, f.name))
    return said


def split_top(cell):
    """A table cell cut at its top-level ", " (not within parentheses or
    backquotes): "224, 224" is two, "0 (no bound, ever)" one."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(cell):
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch in "([":
            depth += 1
        elif not quoted and ch in ")]":
            depth -= 1
        elif (not quoted and depth == 0 and cell.startswith(", ", i)):
            parts.append(cell[start:i])
            start = i + 2
    return [p.strip() for p in parts + [cell[start:]]]


def readme_rows(text):
    """README.md's configuration table: (field, its default's text, line)
    for each field a row names (`width`, `height` | 224, 224 | ...)."""
    m = re.search(r"^## Configuration\b.*\n\n(\|.*\n\|[-|]*\n)((?:\|.*\n)*)",
                  text, re.M)
    if not m:
        raise Failure('%s: no table under its "## Configuration" heading'
                      % README)
    base = text.count("\n", 0, m.start(2)) + 1
    rows = []
    for i, line in enumerate(m.group(2).splitlines()):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        names = re.findall(r"`(\w+)`", cells[0]) if cells else []
        if len(cells) < 2 or not names:
            raise Failure("%s:%d: a row of the configuration table without "
                          "`field` | default" % (README, base + i))
        parts = split_top(cells[1])
        if len(parts) != len(names):
            parts = [cells[1]] * len(names)  # one default for them all
        rows += [(n, p, base + i) for n, p in zip(names, parts)]
    return rows


def check_readme(text, fields, said, consts, problems):
    """The README's table against the header: every field once, no other
    name, and the defaults the header states."""
    rows = readme_rows(text)
    by_name = dict((f.name, f) for f in fields)
    seen = {}
    for name, cell, line in rows:
        if name not in by_name:
            problems.append("%s:%d: the configuration table names %s, which "
                            "pl_config has not" % (README, line, name))
            continue
        if name in seen:
            problems.append("%s:%d: the configuration table names %s again "
                            "(line %d)" % (README, line, name, seen[name]))
            continue
        seen[name] = line
        f, v = by_name[name], value_of(cell, consts)
        if f.ctype in INTEGER and not isinstance(v, int):
            problems.append("%s:%d: %s's default is %r: say the number (or "
                            "the PL_ constant)" % (README, line, name, cell))
        elif v is not None and name in said and not same(v, said[name]):
            problems.append("%s:%d: %s's default is %s; %s says %s"
                            % (README, line, name, shown(v), HEADER,
                               shown(said[name])))
    for f in fields:
        if f.name not in seen:
            problems.append("%s: the configuration table (\"## "
                            "Configuration\") lacks pl_config.%s"
                            % (README, f.name))
    return dict((n, value_of(c, consts)) for n, c, _ in rows)


def library_defaults(prog, fields):
    """What PROG (--defaults-program, built) prints: {field: value}."""
    out = subprocess.run([prog], stdout=subprocess.PIPE, check=True,
                         universal_newlines=True).stdout
    got = {}
    for line in out.splitlines():
        name, _, rest = line.partition(" ")
        got[name] = rest if rest in ("NULL", "set") else value_of(rest, {})
    if list(got) != [f.name for f in fields]:
        raise Failure("%s prints the fields %s, not the header's: rebuild it "
                      "(make config-check)" % (prog, ", ".join(got)))
    return got


def check_library(lib, fields, said, readme, problems):
    """The header's and the README's defaults against the library's."""
    for f in fields:
        v = lib[f.name]
        if f.name in said and not same(said[f.name], v):
            problems.append("%s:%d: pl_config.%s's comment says default %s; "
                            "pl_config_default() gives %s"
                            % (HEADER, f.line, f.name, shown(said[f.name]),
                               shown(v)))
        r = readme.get(f.name)
        if r is not None and not same(r, v):
            problems.append("%s: %s's default is %s in the configuration "
                            "table; pl_config_default() gives %s"
                            % (README, f.name, shown(r), shown(v)))


def check_words(enums, said, stubs, problems):
    """Python's hand-written texts against the enums' lists: each
    name-valued keyword's docs name every word, and the default's as "the
    default"; the extension's stubs declare every constant."""
    for k in PYTHON:
        if k.enum is None:
            continue
        words = [v.word for v in enums[k.enum]]
        for text, where in ((k.doc, "doc"), (k.values, "docs/python.md "
                                                       "values")):
            missing = [w for w in words if text and '"%s"' % w not in text]
            if missing:
                problems.append('%s: PYTHON\'s %s %s does not name %s'
                                % (SCRIPT, k.keyword, where,
                                   ", ".join('"%s"' % w for w in missing)))
        m = re.search(r'"(\w+)" \([^)]*\bthe default\b', k.doc or "")
        want = [v.word for v in enums[k.enum]
                if v.value == said.get(k.fields[0])]
        if m and want and m.group(1) != want[0]:
            problems.append('%s: PYTHON\'s %s doc calls "%s" the default; '
                            '%s says "%s"' % (SCRIPT, k.keyword, m.group(1),
                                              HEADER, want[0]))
    for vs in enums.values():
        for v in vs:
            if not re.search(r"^%s: int$" % v.const[3:], stubs, re.M):
                problems.append("%s: no `%s: int` (pinload.h's %s)"
                                % (STUBS, v.const[3:], v.const))


def defaults_program(fields):
    """A C program printing pl_config_default()'s values, a field a line,
    as library_defaults reads them."""
    out = ["/* tools/config-fields.py --defaults-program wrote this from "
           "include/pinload.h:",
           " * pl_config_default()'s values, a field a line. */",
           "#include <stdio.h>", "", '#include "pinload.h"', "",
           "int main(void)", "{", "    pl_config c;",
           "    pl_config_default(&c);"]
    for f in fields:
        if f.ctype in ("int32_t", "int64_t"):
            out.append('    printf("%s %%lld\\n", (long long)c.%s);'
                       % (f.name, f.name))
        elif f.ctype == "uint64_t":
            out.append('    printf("%s %%llu\\n", (unsigned long long)c.%s);'
                       % (f.name, f.name))
        elif f.ctype == "float[3]":
            out.append('    printf("%s %%.9g %%.9g %%.9g\\n", c.%s[0], '
                       'c.%s[1], c.%s[2]);' % ((f.name,) * 4))
        else:
            out.append('    printf("%s %%s\\n", c.%s ? "set" : "NULL");'
                       % (f.name, f.name))
    return "\n".join(out + ["    return 0;", "}", ""])


def outputs(root, prog=None):
    """The files written from the header, and what differs between the
    header and the texts kept by hand (and the library, given PROG)."""
    def read(path):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            return f.read()
    header = read(HEADER)
    fields = parse(header)
    enums = parse_enums(header)
    consts = parse_constants(header, enums)
    resolve(enums)
    keywords = plan(fields)
    problems = []
    said = header_defaults(fields, consts, problems)
    readme = check_readme(read(README), fields, said, consts, problems)
    check_words(enums, said, read(STUBS), problems)
    if prog:
        check_library(library_defaults(prog, fields), fields, said, readme,
                      problems)
    return {C_TABLE: c_table(fields),
            OPTIONS: options(keywords, enums),
            INIT: splice_init(read(INIT), keywords),
            DOCS: splice_docs(read(DOCS), keywords)}, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; name each stale file, exit 1")
    ap.add_argument("--root", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), ".."),
        help="the checkout (default: this script's)")
    ap.add_argument("--defaults", metavar="PROG",
                    help="hold the defaults against what PROG prints")
    ap.add_argument("--defaults-program", action="store_true",
                    help="write PROG's C source to stdout, and nothing else")
    args = ap.parse_args()
    try:
        if args.defaults_program:
            with open(os.path.join(args.root, HEADER), encoding="utf-8") as f:
                sys.stdout.write(defaults_program(parse(f.read())))
            return 0
        want, problems = outputs(args.root, args.defaults)
    except (Failure, OSError, subprocess.CalledProcessError) as e:
        print("config-fields: %s" % e, file=sys.stderr)
        return 2
    stale = []
    for path, text in want.items():
        full = os.path.join(args.root, path)
        try:
            with open(full, encoding="utf-8") as f:
                have = f.read()
        except FileNotFoundError:
            have = None
        if have == text:
            continue
        stale.append(path)
        if not args.check:
            with open(full, "w", encoding="utf-8") as f:
                f.write(text)
            print("config-fields: wrote %s" % path)
    for p in problems:
        print("config-fields: %s" % p, file=sys.stderr)
    if args.check and stale:
        for path in stale:
            print("config-fields: %s is stale: run tools/config-fields.py "
                  "(make config-fields)" % path, file=sys.stderr)
        return 1
    if problems:
        return 1
    if args.check:
        print("config-fields: the %d files written from %s's pl_config are "
              "up to date" % (len(want), HEADER))
        print("config-fields: %s's table, %s and PYTHON's docs agree with "
              "it%s" % (README, STUBS, ", and its defaults with the "
                        "library's" if args.defaults else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
