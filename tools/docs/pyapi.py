#!/usr/bin/env python3
"""pyapi.py OUT.md: the Python package's API page, from its docstrings.

Read statically (the ast module) from python/pinload/__init__.py,
torch.py and _pinload.pyi, so that the docs need neither the built
extension nor PyTorch. The public names are __all__'s, in its order; a
name that __init__.py takes from the extension (Batch = _pinload.Batch) is
shown as _pinload.pyi declares it. A name of __all__ found nowhere fails
the run.
"""

import ast
import os
import re
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(HERE, "..", "..", "python", "pinload")
SPECIAL = re.compile(r"([\\*_\[\]<>#|])")


def text(doc):
    """A docstring as Markdown: paragraphs of prose joined and escaped
    (`code` kept), and blocks laid out by hand (indented lines, aligned
    columns) kept as they are."""
    out = []
    for block in re.split(r"\n\s*\n", doc.strip("\n")):
        lines = block.split("\n")
        laid_out = any(l.startswith(" ") or re.search(r"\S {3,}\S", l)
                       for l in lines)
        if laid_out:
            out.append("```text\n%s\n```" % textwrap.dedent(block))
            continue
        para = " ".join(l.strip() for l in lines)
        parts = re.split(r"(`[^`]*`)", para)
        out.append("".join(p if p.startswith("`") else SPECIAL.sub(r"\\\1", p)
                           for p in parts))
    return "\n\n".join(out) + "\n"


def signature(fn, drop_self=True):
    args = fn.args
    a = ast.arguments(posonlyargs=args.posonlyargs,
                      args=args.args[1:] if drop_self and args.args else args.args,
                      vararg=args.vararg, kwonlyargs=args.kwonlyargs,
                      kw_defaults=args.kw_defaults, kwarg=args.kwarg,
                      defaults=args.defaults)
    ret = " -> " + ast.unparse(fn.returns) if fn.returns else ""
    return "(%s)%s" % (ast.unparse(a), ret)


def public_members(cls):
    for node in cls.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        if node.name.startswith("_") and node.name not in (
                "__init__", "__iter__", "__len__", "__next__"):
            continue
        yield node


def is_property(fn):
    return any(ast.unparse(d) == "property" for d in fn.decorator_list)


def render_class(qual, cls, out):
    init = next((m for m in cls.body if isinstance(m, ast.FunctionDef)
                 and m.name == "__init__"), None)
    sig = signature(init) if init else ""
    sig = re.sub(r" -> None$", "", sig)
    out.append("### `%s`\n" % qual)
    out.append("```python\nclass %s%s\n```\n" % (qual, sig))
    doc = ast.get_docstring(cls)
    if doc:
        out.append(text(doc))
    fields = [ast.unparse(n) for n in cls.body if isinstance(n, ast.AnnAssign)]
    if fields:
        out.append("```python\n%s\n```\n" % "\n".join(fields))
    for m in public_members(cls):
        if m.name == "__init__":
            if ast.get_docstring(m):
                out.append(text(ast.get_docstring(m)))
            continue
        name = "%s.%s" % (qual.rsplit(".", 1)[-1], m.name)
        out.append("#### `%s`\n" % name)
        if is_property(m):
            ret = ": " + ast.unparse(m.returns) if m.returns else ""
            out.append("```python\n%s%s  # property\n```\n" % (m.name, ret))
        else:
            out.append("```python\n%s%s\n```\n" % (m.name, signature(
                m, drop_self=not any(ast.unparse(d) == "staticmethod"
                                     for d in m.decorator_list))))
        if ast.get_docstring(m):
            out.append(text(ast.get_docstring(m)))


def render_stub(qual, cls, source, out):
    out.append("### `%s`\n" % qual)
    out.append("Declared by the C extension (`python/src/`); its types, "
               "from `_pinload.pyi`:\n")
    body = ast.get_source_segment(source, cls)
    out.append("```python\n%s\n```\n" % body)


def module(path):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    return src, ast.parse(src)


def defs(tree):
    return {n.name: n for n in tree.body
            if isinstance(n, (ast.ClassDef, ast.FunctionDef))}


def all_names(tree):
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets):
            return [ast.literal_eval(e) for e in n.value.elts]
    return []


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: pyapi.py OUT.md")
    src, tree = module(os.path.join(PKG, "__init__.py"))
    tsrc, ttree = module(os.path.join(PKG, "torch.py"))
    ssrc, stree = module(os.path.join(PKG, "_pinload.pyi"))
    d, sd = defs(tree), defs(stree)
    # Names __init__.py imports from its own modules (from ._options
    # import LoaderOptions) are documented where they are defined.
    for n in tree.body:
        if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module:
            _, other = module(os.path.join(PKG, n.module + ".py"))
            od = defs(other)
            for a in n.names:
                if a.name in od:
                    d.setdefault(a.asname or a.name, od[a.name])
    aliases = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and \
                isinstance(n.targets[0], ast.Name):
            aliases[n.targets[0].id] = ast.unparse(n.value)
    out = ["# Python API\n",
           "Generated from the docstrings of `python/pinload/` and the "
           "extension's `_pinload.pyi` (read as source, not imported). "
           "[pinload from Python](python.md) is the guide: install, the "
           "loop, frameworks, the lifetime rule.\n",
           "## `pinload`\n", text(ast.get_docstring(tree))]
    errors, attrs = [], []
    for name in all_names(tree):
        node = d.get(name)
        if isinstance(node, ast.ClassDef) and any(
                ast.unparse(b) in ("Error", "Exception", "UserWarning",
                                   "MemoryError") or ast.unparse(b) in errors
                for b in node.bases) and name != "Loader":
            errors.append(name)
            continue
        if node is None and name in aliases:
            target = aliases[name]
            if target.startswith("_pinload.") and target[9:] in sd:
                render_stub("pinload." + name, sd[target[9:]], ssrc, out)
                continue
            attrs.append((name, target))
            continue
        if node is None and name in ("__version__",):
            attrs.append((name, aliases.get(name, "")))
            continue
        if node is None:
            sys.exit("pyapi: pinload.%s in __all__ is defined nowhere" % name)
        if isinstance(node, ast.ClassDef):
            render_class("pinload." + name, node, out)
        else:
            out.append("### `pinload.%s`\n" % name)
            out.append("```python\n%s%s\n```\n" % (name, signature(
                node, drop_self=False)))
            out.append(text(ast.get_docstring(node) or ""))
    if errors:
        out.append("### Errors and warnings\n")
        out.append("| class | base | what |\n|---|---|---|")
        for name in errors:
            node = d[name]
            first = (ast.get_docstring(node) or "").split("\n\n")[0]
            out.append("| `pinload.%s` | `%s` | %s |" % (
                name, ", ".join(ast.unparse(b) for b in node.bases),
                text(first).strip().replace("\n", " ")))
        out.append("")
        if "Error" in d:
            out.append(text(ast.get_docstring(d["Error"]) or ""))
    if attrs:
        out.append("### Module attributes\n")
        for name, value in attrs:
            out.append("- `pinload.%s` = `%s`" % (name, value))
        out.append("")
    _, otree = module(os.path.join(PKG, "ops.py"))
    for mod, mtree in (("torch", ttree), ("ops", otree)):
        md = defs(mtree)
        out.append("## `pinload.%s`\n" % mod)
        out.append(text(ast.get_docstring(mtree) or ""))
        for name in (all_names(mtree) or
                     [n for n in md if not n.startswith("_")]):
            node = md.get(name)
            if node is None:
                sys.exit("pyapi: pinload.%s.%s is defined nowhere"
                         % (mod, name))
            if isinstance(node, ast.ClassDef):
                render_class("pinload.%s.%s" % (mod, name), node, out)
            else:
                out.append("### `pinload.%s.%s`\n" % (mod, name))
                out.append("```python\n%s%s\n```\n" % (name, signature(
                    node, drop_self=False)))
                out.append(text(ast.get_docstring(node) or ""))
    with open(argv[1], "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
