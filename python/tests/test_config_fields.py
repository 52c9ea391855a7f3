"""pl_config's fields listed once: tools/config-fields.py writes the
binding's table, keywords, types and docs from include/pinload.h, its
--check (make test) fails naming a stale file, and a field it cannot map
stops it with the field's name."""

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
         "python/pinload/__init__.py", "docs/python.md"]


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


def test_the_checkout_s_files_are_up_to_date():
    rc, out = run(ROOT, "--check")
    assert rc == 0, out
    assert "4 files" in out and "up to date" in out


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
    rc, out = compile_config_c(tree)
    assert rc != 0
    assert "pl_config grew: run tools/config-fields.py" in out
    assert run(tree)[0] == 0
    rc, out = compile_config_c(tree)
    assert rc == 0, out
