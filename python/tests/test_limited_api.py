"""The extension is built on CPython 3.10's limited API (issue 39): one
cp310-abi3 wheel for 3.10 and every later version. Each source compiles
with Py_LIMITED_API 0x030A0000 against this interpreter's headers, where
a function of a later limited API (PyType_GetName, the buffer protocol:
3.11) is undeclared and so an error; setup.py builds it so, and the
package asks for no newer Python. (tools/test-python.sh runs the tests
under each CPython 3.10+ it finds, tools/wheel.sh installs the wheel in
each.)"""
import os
import re
import shutil
import subprocess
import sysconfig

import pytest

from conftest import ROOT

SRC = os.path.join(ROOT, "python", "src")


@pytest.mark.parametrize("source", sorted(
    f for f in os.listdir(SRC) if f.endswith(".c")))
def test_each_source_compiles_on_the_limited_api_of_3_10(source):
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    inc = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(inc, "Python.h")):
        pytest.skip("no Python.h")
    p = subprocess.run(
        [cc, "-std=c11", "-fsyntax-only", "-DPy_LIMITED_API=0x030A0000",
         "-Werror=implicit-function-declaration",
         "-Werror=incompatible-pointer-types", "-Werror=int-conversion",
         "-I" + os.path.join(ROOT, "include"), "-I" + inc,
         os.path.join(SRC, source)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True)
    assert p.returncode == 0, p.stdout


def test_the_package_is_built_and_tagged_for_3_10():
    with open(os.path.join(ROOT, "python", "setup.py")) as f:
        setup = f.read()
    assert re.findall(r'"Py_LIMITED_API", "(0x[0-9A-F]+)"', setup) == [
        "0x030A0000"]
    assert re.findall(r'"py_limited_api": "(cp\d+)"', setup) == ["cp310"]
    with open(os.path.join(ROOT, "python", "pyproject.toml")) as f:
        assert 'requires-python = ">=3.10"' in f.read()
