"""Fixtures: a generated dataset (pinload-mkdata) and pinload-dump's output
for a configuration, as the reference the Python batches must equal; and the
guard that keeps a test from leaning on pinload.torch's default device."""
import importlib.util
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD = os.environ.get("PINLOAD_BUILD", os.path.join(ROOT, "build"))
if not os.path.isabs(BUILD):
    BUILD = os.path.join(ROOT, BUILD)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "default_device: the test makes pinload.torch loaders "
        "without device= on purpose and holds whichever device they pick "
        "(torch's current CUDA device where it sees one, else the host)")


@pytest.fixture(autouse=True)
def _no_host_default(request, monkeypatch):
    """pinload.torch.Loader's default device is the GPU wherever torch sees
    one. On a machine without, a test not marked default_device that makes
    a loader without device= fails here as it would fail there, rather than
    passing on the host by chance (issue 35: tests written where there was
    no GPU took the default for the host, and read CUDA batches with NumPy
    or fed them to a model on the CPU). Where torch sees a GPU the real
    default is left in place."""
    if (request.node.get_closest_marker("default_device") or
            importlib.util.find_spec("torch") is None):
        return
    try:
        import torch
        import pinload.torch
    except ImportError:
        return  # the torch tests skip on their own
    if torch.cuda.is_available():
        return

    def gpu_default():
        pytest.fail("pinload.torch.Loader without device=: on a machine with "
                    "a GPU that is CUDA device 0, not the host. Name the "
                    "device (device=\"host\" to compare with the host "
                    "backend), or mark the test default_device and make it "
                    "hold either", pytrace=False)

    monkeypatch.setattr(pinload.torch, "_default_device", gpu_default)


def default_backend():
    """The backend pinload.torch.Loader picks without device=: "cuda" where
    torch sees a GPU, else "host" (the tests marked default_device check
    that they got it)."""
    import torch
    return "cuda" if torch.cuda.is_available() else "host"


def tool(name):
    path = os.path.join(BUILD, "pinload-" + name)
    if not os.path.exists(path):
        pytest.fail("%s is missing: run `make` first" % path)
    return path


@pytest.fixture(scope="session")
def dataset(tmp_path_factory):
    """4 classes x 12 JPEGs, 64-160 px."""
    out = tmp_path_factory.mktemp("data") / "train"
    subprocess.run([tool("mkdata"), "--out", str(out), "--classes", "4",
                    "--per-class", "12", "--size-range", "64-160",
                    "--quiet"], check=True)
    return str(out)


def read_ppm(path):
    with open(path, "rb") as f:
        data = f.read()
    fields = data.split(maxsplit=4)
    assert fields[0] == b"P6" and fields[3] == b"255", path
    w, h = int(fields[1]), int(fields[2])
    return h, w, fields[4][-h * w * 3:]


def dump(data, out, size, augment, seed, batch, epoch=0, workers=2,
         shuffle=True):
    """Run pinload-dump; [(path, label, rgb bytes)] in delivery order."""
    subprocess.run([tool("dump"), "--data", data, "--out", str(out),
                    "--size", str(size), "--augment", augment,
                    "--seed", str(seed), "--batch", str(batch),
                    "--epoch", str(epoch), "--workers", str(workers),
                    "--shuffle", "on" if shuffle else "off",
                    "--device", "host", "--quiet"], check=True)
    rows = []
    with open(os.path.join(str(out), "index.tsv")) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if not fields[0].isdigit():
                continue  # the header
            pos, path, label = int(fields[0]), fields[1], int(fields[2])
            _, _, rgb = read_ppm(os.path.join(str(out), "%06d.ppm" % pos))
            rows.append((path, label, rgb))
    return rows
