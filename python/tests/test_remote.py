"""Remote shards from Python: the config's remote keywords reach the
library (cache_dir, cache_limit, remote_timeout_ms, remote_retries), and
http:// shards served by tests/remote/httpd.py on 127.0.0.1 (started and
stopped here) deliver the local shards' batches."""
import io
import os
import subprocess
import sys
import tarfile
import time

import numpy as np
import pytest

import pinload

from conftest import ROOT, tool


def batches(loader):
    """[(images, labels, indices)] of one epoch, copied through NumPy."""
    return [tuple(np.from_dlpack(a).copy()
                  for a in (b.images, b.labels, b.indices))
            for b in loader]


@pytest.fixture
def served(dataset, tmp_path):
    pack = tmp_path / "pack"
    subprocess.run([tool("pack"), "--data", dataset, "--out", str(pack),
                    "--shard-size", "200KB", "--quiet"], check=True)
    port_file = tmp_path / "port"
    srv = subprocess.Popen([sys.executable,
                            os.path.join(ROOT, "tests/remote/httpd.py"),
                            "--root", str(pack), "--port-file",
                            str(port_file), "--log", str(tmp_path / "log"),
                            "--lifetime", "120"])
    try:
        for _ in range(1000):
            if port_file.exists():
                break
            time.sleep(0.01)
        port = int(port_file.read_text())
        shards = sorted(p for p in os.listdir(pack) if p.endswith(".tar"))
        url = "http://127.0.0.1:%d/shard-{000000..%06d}.tar" % (
            port, len(shards) - 1)
        yield str(pack), url, tmp_path / "log"
    finally:
        srv.kill()
        srv.wait()


def test_http_shards_deliver_the_local_batches(served, tmp_path):
    pack, url, log = served
    kw = dict(batch_size=6, size=24, seed=3, device="host")
    local = batches(pinload.Loader(pack, **kw))
    remote = batches(pinload.Loader(url, cache_dir=tmp_path / "cache",
                                    remote_timeout_ms=5000,
                                    remote_retries=2, **kw))
    assert len(local) == len(remote) == 8
    for x, y in zip(local, remote):
        for a, b in zip(x, y):
            assert a.tobytes() == b.tobytes()
    lines = log.read_text().splitlines()
    whole = [ln for ln in lines if ln.split()[1].endswith(".tar")]
    assert len(whole) == len(set(whole)), "a shard fetched twice"
    assert os.listdir(tmp_path / "cache")


def test_remote_keywords_are_checked_by_the_library(dataset):
    for kwargs, name in [(dict(cache_limit=-1), "cache_limit: "),
                         (dict(remote_retries=-2), "remote_retries: "),
                         (dict(remote_timeout_ms=-1),
                          "remote_timeout_ms: ")]:
        with pytest.raises(pinload.InvalidArgument) as e:
            pinload.Loader(dataset, device="host", **kwargs)
        assert e.value.detail.startswith(name), e.value.detail


def test_shard_order_is_the_same_over_http(served, tmp_path):
    """order="shards": rank 1 of 2 reads the same samples, bytes and all,
    from the local pack and over http://, each window's worth of shards
    in sequence."""
    pack, url, log = served
    kw = dict(batch_size=6, size=24, seed=3, device="host", order="shards",
              shuffle_window=5, rank=1, world_size=2)
    loader = pinload.Loader(pack, **kw)
    order = loader.epoch_order(0)
    local = batches(loader)
    remote = batches(pinload.Loader(url, cache_dir=tmp_path / "cache", **kw))
    assert len(local) == len(remote) == 4
    assert [i for _, _, idx in local for i in idx.tolist()] == order
    for x, y in zip(local, remote):
        for a, b in zip(x, y):
            assert a.tobytes() == b.tobytes()


def test_order_keywords_are_checked(dataset):
    with pytest.raises(ValueError):
        pinload.Loader(dataset, device="host", order="random")
    # The library's messages in Python's words: keywords and their values
    # (order="global"), not pl_config's fields and constants.
    for kwargs, want in [
            (dict(order="shards"),
             'order="shards" deals tar shards to the ranks, and %s is a '
             'folder or a list file of images (use order="global", or pack '
             'it into shards with pinload-pack)' % dataset),
            (dict(shuffle_window=8),
             'shuffle_window: 8 applies to order="shards" only '
             '(order="global", whose shuffle is over the whole dataset): '
             'leave it 0')]:
        with pytest.raises(pinload.InvalidArgument) as e:
            pinload.Loader(dataset, device="host", **kwargs)
        assert e.value.detail == want
        assert str(e.value) == want


def test_a_tar_given_as_data_runs_no_command(tmp_path):
    """A valid tar whose first member is named "pipe:touch MARKER #" is a
    shard (issue 34): the member's name is never read as a list's first
    line, so nothing runs, whatever the list opt-in says."""
    marker = tmp_path / "marker"
    tar = tmp_path / "x.tar"
    with tarfile.open(tar, "w", format=tarfile.USTAR_FORMAT) as t:
        info = tarfile.TarInfo("pipe:touch %s #" % marker)
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))
    os.environ["PINLOAD_ALLOW_PIPE_LISTS"] = "1"
    try:
        with pytest.warns(pinload.PinloadWarning, match="no cls member"):
            loader = pinload.Loader(str(tar), batch_size=1, size=8,
                                    device="host", on_error="fail",
                                    cache_dir=tmp_path / "cache")
        assert loader.sample(0)[0].endswith("x.tar:pipe:touch %s #" % marker)
        with pytest.raises(pinload.Error):
            list(loader)
    finally:
        del os.environ["PINLOAD_ALLOW_PIPE_LISTS"]
    assert not marker.exists()
    assert not (tmp_path / "cache").exists()
