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

A field is a keyword of its own name as it is (an int32_t, int64_t or
uint64_t is an integer, a float[3] three numbers, a const char * a string)
unless PYTHON, the one hand-kept table below, says otherwise: a flag, a
name-valued enum, a path, or a keyword of another name or kind (size,
layout, device, log...). A field the table does not cover whose C type has
no keyword as it is (a pointer, a callback), or whose comment says it holds
an enum ("a pl_order"), or that has no comment, stops this script with the
field's name: a new field is never forgotten.

--check writes nothing: each stale file is named and the status is 1
(`make test` runs it; `make config-fields` writes them). Python 3 stdlib
only.
"""

import argparse
import os
import re
import sys
import textwrap

SCRIPT = "tools/config-fields.py"
HEADER = "include/pinload.h"
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
                 choices=None, unset=None, row=None):
        self.keyword = keyword      # its name; None: no keyword at all
        self.fields = fields        # the pl_config fields it sets
        self.kind = kind            # how pinload/__init__.py converts it
        self.pytype = pytype        # its annotation in LoaderOptions
        self.doc = doc              # None: the header's comment
        self.values = values        # docs/python.md's "values" column
        self.choices = choices      # name -> _pinload constant (kind choice)
        self.unset = unset          # the field's value when left out (None:
                                    # the C default)
        self.row = row or [keyword]  # docs/python.md's keyword column


def choice(keyword, names, doc, values=None, pytype="str"):
    return Keyword(keyword, [keyword], "choice", pytype, doc,
                   values or ", ".join('`"%s"`' % n for n in names),
                   choices=names)


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
    choice("format", {"u8": "FORMAT_U8_NHWC", "f32": "FORMAT_F32_NCHW",
                      "f16": "FORMAT_F16_NCHW", "bf16": "FORMAT_BF16_NCHW"},
           '"u8" (uint8 NHWC, the default), "f32", "f16" or "bf16" '
           "(normalised NCHW; bf16 a torch.bfloat16 tensor), or the torch "
           "dtype: torch.uint8, torch.float32, torch.float16, "
           "torch.bfloat16",
           '`"u8"` (uint8 NHWC), `"f32"`, `"f16"`, `"bf16"` (normalised '
           "NCHW; bf16 a `torch.bfloat16` tensor, NumPy has no such type), "
           "or the images' torch dtype (`torch.float32` for `\"f32\"`)",
           pytype="Union[str, TorchDtype]"),
    choice("augment", {"none": "AUGMENT_NONE", "eval": "AUGMENT_EVAL",
                       "train": "AUGMENT_TRAIN"},
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
    choice("shard_mode", {"pad": "SHARD_PAD", "drop": "SHARD_DROP"},
           '"pad" (the default) or "drop": DistributedSampler\'s drop_last'),
    Keyword("resume", ["resume"], "state", "StateLike",
            "None (default): start at first_epoch; else go on from a state "
            "of state_dict() or state(), with exactly the batches the saved "
            "loader would have delivered next",
            "a `state_dict()` or `state()`"),
    flag("pin_workers"),
    choice("memory", {"pinned": "MEMORY_PINNED",
                      "pageable": "MEMORY_PAGEABLE",
                      "managed": "MEMORY_MANAGED"},
           'the host ring\'s memory: "pinned" (the default), "pageable" or '
           '"managed"'),
    flag("pinned_fallback"),
    Keyword("device", ["device"], "device", "Any",
            '"auto" (the default: the current CUDA device, else the host), '
            '"host"/"cpu", "local_rank", "cuda", "cuda:N", N, or a '
            "torch.device",
            '`"auto"`, `"host"`/`"cpu"`, `"local_rank"`, `"cuda"`, '
            '`"cuda:N"`, `N`, a `torch.device`'),
    flag("keep_host"),
    flag("gpu_normalize"),
    choice("on_error", {"fail": "ON_ERROR_FAIL", "skip": "ON_ERROR_SKIP",
                        "substitute": "ON_ERROR_SUBSTITUTE"},
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
    choice("order", {"global": "ORDER_GLOBAL", "shards": "ORDER_SHARDS"},
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


DECL = re.compile(r"^(const\s+)?(\w+)\s*(\*?)\s*(\w+)\s*(\[\s*(\d+)\s*\])?$")


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
        ctype = (const or "") + ctype + (" *" if star else "")
        if dim:
            ctype += "[%s]" % dim
        end = base + body.count("\n", 0, tok.end())
        fields.append(Field(name, ctype, " ".join(pending), end))
        pending, last_line = [], end
    return fields


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


def options(keywords):
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
            "#: a name-valued keyword's names, and the _pinload constants "
            "they stand for",
            "CHOICES: Dict[str, Dict[str, str]] = {"]
    for k, _ in keywords:
        if k.kind == "choice":
            out.append('    "%s": {' % k.keyword)
            out += ['        "%s": "%s",' % c for c in k.choices.items()]
            out.append("    },")
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


def outputs(root):
    def read(path):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            return f.read()
    fields = parse(read(HEADER))
    keywords = plan(fields)
    return {C_TABLE: c_table(fields),
            OPTIONS: options(keywords),
            INIT: splice_init(read(INIT), keywords),
            DOCS: splice_docs(read(DOCS), keywords)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; name each stale file, exit 1")
    ap.add_argument("--root", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), ".."),
        help="the checkout (default: this script's)")
    args = ap.parse_args()
    try:
        want = outputs(args.root)
    except (Failure, OSError) as e:
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
    if args.check and stale:
        for path in stale:
            print("config-fields: %s is stale: run tools/config-fields.py "
                  "(make config-fields)" % path, file=sys.stderr)
        return 1
    if args.check:
        print("config-fields: the %d files written from %s's pl_config are "
              "up to date" % (len(want), HEADER))
    return 0


if __name__ == "__main__":
    sys.exit(main())
