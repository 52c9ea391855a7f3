"""pl_config's fields listed once: tools/config-fields.py writes the
binding's table, keywords, types and docs from include/pinload.h, its
--check (make test) fails naming a stale file, and a field it cannot map
stops it with the field's name. The enums' words are listed once too
(PL_FORMAT_MAP...): Python's choices are the library's pl_*_name() words.
The README's configuration table and the header's stated defaults are held
against the header's fields and the library's pl_config_default()."""

import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys

import pytest

import pinload
from pinload import _options, _pinload

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "tools", "config-fields.py")
HEADER = "include/pinload.h"
FILES = [HEADER, "python/src/config_fields.h", "python/pinload/_options.py",
         "python/pinload/__init__.py", "docs/python.md", "README.md",
         "python/pinload/_pinload.pyi"]


def run(root, *args):
    p = subprocess.run([sys.executable, SCRIPT, "--root", str(root)] +
                       list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    return p.returncode, p.stdout


@pytest.fixture
def tree(tmp_path):
    """The generator's inputs and outputs, copied from the checkout."""
    for f in FILES:
        os.makedirs(os.path.dirname(str(tmp_path / f)), exist_ok=True)
        shutil.copy(os.path.join(ROOT, f), str(tmp_path / f))
    return tmp_path


def append_field(root, text):
    path = root / HEADER
    h = path.read_text()
    assert h.count("\n} pl_config;") == 1
    path.write_text(h.replace("\n} pl_config;",
                              "\n" + text + "\n} pl_config;"))


def append_readme_rows(root, rows):
    """Rows appended to the README's configuration table."""
    path = root / "README.md"
    text = path.read_text()
    last = re.findall(r"^\| `extras_required` \|.*\n", text, re.M)
    assert len(last) == 1
    path.write_text(text.replace(last[0], last[0] + "".join(
        "| `%s` | %s | |\n" % r for r in rows)))


def test_the_checkout_s_files_are_up_to_date():
    rc, out = run(ROOT, "--check")
    assert rc == 0, out
    assert "4 files" in out and "up to date" in out
    assert "README.md's table" in out


def test_a_stale_file_fails_the_check_naming_it(tree):
    assert run(tree, "--check")[0] == 0
    p = tree / "python/src/config_fields.h"
    p.write_text(p.read_text().replace("X(seed, F_U64)", "X(seed, F_I64)"))
    rc, out = run(tree, "--check")
    assert rc == 1, out
    assert "python/src/config_fields.h is stale" in out
    assert "_options.py" not in out and "docs/python.md" not in out
    assert run(tree)[0] == 0
    assert "X(seed, F_U64)" in p.read_text()
    assert run(tree, "--check")[0] == 0


def test_an_appended_field_is_a_keyword_with_no_hand_edit(tree):
    before = (tree / "python/src/config_fields.h").read_text()
    last = re.findall(r"^    X\((\w+), (\w+)\)", before, re.M)[-1]
    append_field(tree, "    /* Samples shuffled together; default 0. */\n"
                 "    int32_t mix_window;\n"
                 "    const char *note_field; /* the label's member; "
                 "default NULL: cls */\n"
                 "    int64_t budget; /* bytes; default 0 */")
    append_readme_rows(tree, [("mix_window", "0"), ("note_field", "NULL"),
                              ("budget", "0")])
    rc, out = run(tree, "--check")
    assert rc == 1
    for f in FILES[1:4]:
        assert f + " is stale" in out, out
    assert "docs/python.md" not in out
    assert run(tree)[0] == 0
    table = (tree / "python/src/config_fields.h").read_text()
    rows = re.findall(r"^    X\((\w+), (\w+)\)", table, re.M)
    assert rows[-4:] == [last, ("mix_window", "F_I32"),
                         ("note_field", "F_PATH"), ("budget", "F_I64")]
    assert table.count("\\\n") == len(rows)
    assert "#define PL_CONFIG_LAST_FIELD budget\n" in table
    opts = (tree / "python/pinload/_options.py").read_text()
    assert ('    mix_window: Optional[int]\n'
            '    """Samples shuffled together; default 0."""\n') in opts
    assert '    note_field: Optional[str]\n' in opts
    assert '"note_field": ("str", ("note_field",), None),' in opts
    assert '"budget": ("int", ("budget",), None),' in opts
    doc = (tree / "python/pinload/__init__.py").read_text()
    assert "    mix_window      Samples shuffled together; default 0.\n" in doc
    assert run(tree, "--check")[0] == 0


@pytest.mark.parametrize("field,says", [
    ("    void *user; /* the caller's */", "pl_config.user is a void *"),
    ("    pl_log_fn trace; /* traces */", "pl_config.trace is a pl_log_fn"),
    ("    int32_t pace; /* The pace: a pl_pace; default PL_PACE_EVEN */",
     "pl_config.pace holds a pl_pace: give its values names"),
    ("    int32_t bare;", "pl_config.bare has no comment"),
    ("    double ratio; /* a ratio */", "pl_config.ratio is a double"),
])
def test_a_field_with_no_keyword_stops_the_generator(tree, field, says):
    append_field(tree, field)
    rc, out = run(tree, "--check")
    assert rc == 2, out
    assert says in out
    assert "include/pinload.h:" in out
    rc, out = run(tree)
    assert rc == 2 and says in out
    assert (tree / "python/src/config_fields.h").read_text() == \
        open(os.path.join(ROOT, "python/src/config_fields.h")).read()


def test_every_field_has_a_keyword_and_each_keyword_a_type():
    covered = {f for _, fields, _ in _options.KEYWORDS.values()
               for f in fields}
    assert set(_pinload.config_defaults()) - covered == {"data"}
    params = inspect.signature(pinload.Loader).parameters
    assert list(params)[0] == "data"
    assert list(params)[1:] == list(_options.KEYWORDS)
    assert set(_options.LoaderOptions.__annotations__) == \
        set(_options.KEYWORDS)
    # Python 3.13 strips a docstring's indentation when it compiles it;
    # cleandoc does the same for the versions before.
    doc = inspect.cleandoc(pinload.Loader.__doc__)
    for name in _options.KEYWORDS:
        assert params[name].kind == inspect.Parameter.KEYWORD_ONLY
        assert params[name].default is None
        assert "\n%s " % name in doc, name


def test_an_unknown_keyword_is_named(tmp_path):
    with pytest.raises(TypeError) as e:
        pinload.Loader(str(tmp_path), batchsize=4)
    assert "unexpected keyword argument 'batchsize'" in str(e.value)
    assert "did you mean 'batch_size'" in str(e.value)
    with pytest.raises(TypeError) as e:
        pinload.Loader(str(tmp_path), colour="red")
    assert str(e.value) == \
        "Loader() got an unexpected keyword argument 'colour'"


def compile_config_c(root):
    """python/src/config.c of `root`, compiled (not linked): status, and
    the compiler's words."""
    import sysconfig
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    inc = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(inc, "Python.h")):
        pytest.skip("no Python.h")
    p = subprocess.run([cc, "-std=c11", "-fsyntax-only",
                        "-DPy_LIMITED_API=0x030A0000",
                        "-I" + str(root / "include"), "-I" + inc,
                        str(root / "python/src/config.c")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    return p.returncode, p.stdout


def test_the_extension_does_not_compile_with_a_stale_table(tree):
    """A field appended to the header without the script run stops the
    build at config.c's assertion, which says what to run."""
    shutil.copytree(os.path.join(ROOT, "include"), str(tree / "include"),
                    dirs_exist_ok=True)
    for f in ("config.c", "pinload_py.h", "dlpack.h"):
        shutil.copy(os.path.join(ROOT, "python/src", f),
                    str(tree / "python/src" / f))
    rc, out = compile_config_c(tree)
    assert rc == 0, out
    append_field(tree, "    int64_t window; /* samples; default 0 */")
    append_readme_rows(tree, [("window", "0")])
    rc, out = compile_config_c(tree)
    assert rc != 0
    assert "pl_config grew: run tools/config-fields.py" in out
    assert run(tree)[0] == 0
    rc, out = compile_config_c(tree)
    assert rc == 0, out


def test_the_choices_are_the_words_the_library_gives():
    """CHOICES and DEVICES, written from the header's lists, are what the
    library's pl_*_name() says of each value (the extension's `names`),
    and every value of those enums has its word."""
    for keyword, words in _options.CHOICES.items():
        assert words, keyword
        for word, const in words.items():
            assert _pinload.names[const] == word, (keyword, const)
    for word, const in _options.DEVICES.items():
        assert _pinload.names[const] == word
    assert set(_options.DEVICES) == {"auto", "host", "local_rank"}
    mine = {c for w in _options.CHOICES.values() for c in w.values()}
    mine |= set(_options.DEVICES.values())
    # Every value of those enums is a choice; the rest of the library's
    # words are the backends' and the log levels'.
    assert set(_pinload.names) - mine == {
        "BACKEND_HOST", "BACKEND_CUDA", "LOG_NOTICE", "LOG_WARNING"}
    assert _pinload.names["ORDER_SHARDS"] == "shards"


def test_a_value_added_to_a_list_is_a_choice_and_its_docs_are_asked_for(
        tree):
    path = tree / HEADER
    h = path.read_text()
    assert h.count('    XX(BF16_NCHW, 3, "bf16")\n') == 1
    path.write_text(h.replace('    XX(BF16_NCHW, 3, "bf16")\n',
                              '    XX(BF16_NCHW, 3, "bf16")                '
                              '                                   \\\n'
                              '    XX(F8_NHWC, 4, "f8")\n'))
    rc, out = run(tree, "--check")
    assert rc == 1, out
    assert "python/pinload/_options.py is stale" in out
    assert 'PYTHON\'s format doc does not name "f8"' in out
    assert "_pinload.pyi: no `FORMAT_F8_NHWC: int`" in out
    assert run(tree)[0] == 1  # written, but the docs still lack it
    opts = (tree / "python/pinload/_options.py").read_text()
    assert '        "f8": "FORMAT_F8_NHWC",\n' in opts


@pytest.mark.parametrize("edit,says", [
    (lambda t: re.sub(r"^\| `readahead` .*\n", "", t, flags=re.M),
     'README.md: the configuration table ("## Configuration") lacks '
     "pl_config.readahead"),
    (lambda t: t.replace("| `max_scans` | 256 |", "| `max_scans` | 128 |"),
     "max_scans's default is 128; include/pinload.h says 256"),
    (lambda t: t.replace("| `max_file_bytes` | 256 MiB |",
                         "| `max_file_bytes` | 128 MiB |"),
     "max_file_bytes's default is 134217728; include/pinload.h says "
     "268435456"),
    (lambda t: t.replace("| `prefetch` |", "| `prefetch`, `prefetch_depth` |"),
     "the configuration table names prefetch_depth, which pl_config has "
     "not"),
    (lambda t: t.replace("| `seed` | 0 |", "| `seed` | random |"),
     "seed's default is 'random': say the number"),
])
def test_the_readme_table_is_held_against_the_header(tree, edit, says):
    path = tree / "README.md"
    path.write_text(edit(path.read_text()))
    rc, out = run(tree, "--check")
    assert rc == 1, out
    assert says in out
    assert "is stale" not in out


def test_a_header_comment_that_says_no_default_is_named(tree):
    path = tree / HEADER
    h = path.read_text()
    old = "    int32_t batch_size; /* samples per batch; default 64 */"
    assert old in h
    path.write_text(h.replace(old, "    int32_t batch_size; /* samples per "
                                   "batch */"))
    rc, out = run(tree, "--check")
    assert rc != 0
    assert "pl_config.batch_size's comment does not say its default" in out


def fake_defaults(tmp_path, **changed):
    """A stand-in for the --defaults program: pl_config_default()'s values
    as the extension reads them (log and log_ctx NULL), in the header's
    order, with `changed` in place of some."""
    spec = importlib.util.spec_from_file_location("config_fields", SCRIPT)
    cf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cf)
    with open(os.path.join(ROOT, HEADER)) as f:
        fields = cf.parse(f.read())
    got = _pinload.config_defaults()
    lines = []
    for f in fields:
        v = changed.get(f.name, got.get(f.name))
        if isinstance(v, tuple):
            v = " ".join("%.9g" % x for x in v)
        lines.append("%s %s" % (f.name, "NULL" if v is None else v))
    prog = tmp_path / "defaults"
    prog.write_text("#!/bin/sh\ncat <<'EOF'\n%s\nEOF\n" % "\n".join(lines))
    prog.chmod(0o755)
    return str(prog)


def test_the_stated_defaults_are_the_library_s(tree, tmp_path):
    rc, out = run(tree, "--check", "--defaults", fake_defaults(tmp_path))
    assert rc == 0, out
    assert "and its defaults with the library's" in out
    rc, out = run(tree, "--check", "--defaults",
                  fake_defaults(tmp_path, max_decode_ms=3000,
                                mean=(0.5, 0.5, 0.5), cache_dir="set"))
    assert rc == 1, out
    assert ("pl_config.max_decode_ms's comment says default 5000; "
            "pl_config_default() gives 3000") in out
    assert ("README.md: max_decode_ms's default is 5000 in the "
            "configuration table; pl_config_default() gives 3000") in out
    assert ("pl_config.mean's comment says default 0.485 0.456 0.406; "
            "pl_config_default() gives 0.5 0.5 0.5") in out
    assert ("pl_config.cache_dir's comment says default NULL; "
            "pl_config_default() gives set") in out
