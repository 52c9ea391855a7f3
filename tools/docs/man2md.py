#!/usr/bin/env python3
"""man2md.py OUT PAGE...: the man pages as Markdown pages for the site.

The pages come from tools/man3.sh (the header's comments, section 3) and
tools/help2man.sh (the tools' --help, section 1), which write a small
subset of man(7): .TH .SH .SS .PP .RS .RE .nf .fi and the escapes \\fB
\\fP \\e \\- \\& \\(aq. This converts exactly that subset and fails on any
other request or escape, so a page that grows a construct this does not
know breaks the docs build instead of rendering wrongly.

Each page NAME.N becomes OUT/NAME.md (a ".so" page, which only points to
the page that documents its name, becomes none). In running text every
name that a page documents (a .SS heading, or a ".so" page's name) is a
link to its heading, so the link check covers the cross references too.
"""

import os
import re
import sys
import unicodedata

ESCAPES = {r"\e": "\\", r"\-": "-", r"\&": "", r"\(aq": "'"}
ESCAPE_RE = re.compile(r"\\(fB|fP|fI|fR|e|-|&|\(..|.)")


def unescape(s, where, fonts=False):
    """Text of a roff line; font changes dropped (fonts=True: kept as
    \\x00B / \\x00P markers for the caller)."""
    def one(m):
        tok = m.group(0)
        if tok in ESCAPES:
            return ESCAPES[tok]
        if tok in (r"\fB", r"\fP"):
            return ("\0" + tok[2]) if fonts else ""
        sys.exit("man2md: %s: unknown escape %r" % (where, tok))
    return ESCAPE_RE.sub(one, s)


def slug(text):
    """Python-Markdown's toc slugify, so that links meet its ids."""
    text = unicodedata.normalize("NFKD", text)
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def parse(path):
    """(title, section, name line, [(kind, text)]) of a page, or None for
    a .so page. kinds: sh, ss, para, code."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[0].startswith(".so "):
        return None
    blocks, para, code, in_code = [], [], [], False
    title = section = None

    def flush():
        if para:
            blocks.append(("para", " ".join(para)))
            del para[:]

    for no, line in enumerate(lines, 1):
        where = "%s:%d" % (path, no)
        if in_code:
            if line == ".fi":
                blocks.append(("code", "\n".join(code)))
                code, in_code = [], False
            elif line.startswith(".") and line[1:2].isalpha():
                sys.exit("man2md: %s: request %r in a .nf block" % (where, line))
            else:
                code.append(unescape(line, where))
            continue
        if line.startswith((".", "'")) and not line.startswith("\\&"):
            req, _, arg = line.partition(" ")
            if req == ".TH":
                title, section = arg.split()[0], arg.split()[1]
            elif req in (".SH", ".SS"):
                flush()
                blocks.append((req[1:].lower(), unescape(arg, where)))
            elif req in (".PP", ".RS", ".RE"):
                flush()
            elif req == ".nf":
                flush()
                in_code = True
            else:
                sys.exit("man2md: %s: unknown request %r" % (where, req))
            continue
        if line == "":
            flush()
            continue
        para.append(unescape(line, where, fonts=True))
    if in_code:
        sys.exit("man2md: %s: .nf without .fi" % path)
    flush()
    if title is None:
        sys.exit("man2md: %s: no .TH" % path)
    return title, section, blocks


MD_SPECIAL = re.compile(r"([\\`*_\[\]<>#|])")
NAME_RE = re.compile(r"\b(pl_[A-Za-z0-9_]+|PL_[A-Z0-9_]+|pinload)\b")


def prose(text, links, here):
    """Running text as Markdown: specials escaped, bold as code, and each
    documented name a link to where it is documented."""
    out = []
    for part in re.split(r"(\0B.*?\0P)", text):
        if part.startswith("\0B"):
            out.append("`%s`" % part[2:-2])
            continue
        pos = 0
        for m in NAME_RE.finditer(part):
            out.append(MD_SPECIAL.sub(r"\\\1", part[pos:m.start()]))
            name = m.group(1)
            target = links.get(name)
            if target and target[0] == here and not target[1]:
                target = None  # a page's own name in its own text
            if target:
                page, anchor = target
                href = ("" if page == here else page + ".md") + \
                    ("#" + anchor if anchor else "")
                out.append("[`%s`](%s)" % (name, href))
            else:
                out.append("`%s`" % name if name != "pinload" else name)
            pos = m.end()
        out.append(MD_SPECIAL.sub(r"\\\1", part[pos:]))
    return "".join(out)


def summary(blocks):
    for i, (kind, text) in enumerate(blocks):
        if kind == "sh" and text == "NAME" and i + 1 < len(blocks):
            return blocks[i + 1][1].partition(" - ")[2].replace(
                "\0B", "").replace("\0P", "")
    return ""


def write_index(out, pages):
    """OUT/index.md: the pages, section 3 (pinload first, the overview)
    then section 1, each with its NAME line's summary."""
    md = ["# The C API and the tools\n",
          "The manual pages, as `make install` installs them (`man pinload`, "
          "`man pl_loader_next`, `man pinload-bench`), made from "
          "`include/pinload.h`'s comments (`tools/man3.sh`) and from each "
          "tool's `--help` (`tools/help2man.sh`).\n",
          "## The API (section 3)\n"]
    order = sorted(pages, key=lambda n: (n != "pinload", n))
    for section, title in (("3", None), ("1", "## The tools (section 1)\n")):
        if title:
            md.append("\n" + title)
        for name in order:
            if pages[name][1] == section:
                md.append("- [%s(%s)](%s.md): %s" % (
                    name, section, name, summary(pages[name][2])))
    with open(os.path.join(out, "index.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(md) + "\n")


def main(argv):
    if len(argv) < 3:
        sys.exit("usage: man2md.py OUT PAGE...")
    out, paths = argv[1], argv[2:]
    pages, links = {}, {}
    for path in paths:
        name = os.path.basename(path).rsplit(".", 1)[0]
        parsed = parse(path)
        if parsed is None:
            with open(path, encoding="utf-8") as f:
                target = f.readline().split()[1]
            links.setdefault(name, (os.path.basename(target).rsplit(".", 1)[0],
                                    None))
            continue
        pages[name] = parsed
    for name, (_, _, blocks) in pages.items():
        links[name] = (name, None)
        for kind, text in blocks:
            if kind == "ss":
                for n in text.split(", "):
                    links[n] = (name, slug(text))
    # A .so name whose page has a heading of it links to that heading.
    for name, (page, anchor) in list(links.items()):
        if anchor is None and page != name and page in pages:
            for kind, text in pages[page][2]:
                if kind == "ss" and name in text.split(", "):
                    links[name] = (page, slug(text))
        if links[name][0] not in pages:
            sys.exit("man2md: %s points to %s, which is not given" %
                     (name, links[name][0]))
    os.makedirs(out, exist_ok=True)
    write_index(out, pages)
    for name, (title, section, blocks) in sorted(pages.items()):
        lang = "c" if section == "3" else "text"
        md = []
        sh = None
        for kind, text in blocks:
            if kind == "sh":
                sh = text
                if text != "NAME":
                    md.append("## %s\n" % text.capitalize())
            elif kind == "ss":
                md.append("### %s\n" % text)
            elif kind == "code":
                md.append("```%s\n%s\n```\n" % (lang, text.replace("\0B", "")
                                                 .replace("\0P", "")))
            elif sh == "NAME":
                names, _, summary = text.partition(" - ")
                md.insert(0, "# %s(%s): %s\n\n%s\n" % (
                    name, section, summary.replace("\0B", "")
                    .replace("\0P", ""), prose(names, links, name)))
            elif sh == "SEE ALSO":
                plain = text.replace("\0B", "").replace("\0P", "")
                md.append(re.sub(r"([\w-]+)\((\d)\)", lambda m: (
                    "[%s(%s)](%s.md)" % (m.group(1), m.group(2), m.group(1))
                    if m.group(1) in pages else m.group(0)), plain) + "\n")
            else:
                md.append(prose(text, links, name) + "\n")
        with open(os.path.join(out, name + ".md"), "w", encoding="utf-8") as f:
            f.write("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
