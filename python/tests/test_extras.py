"""extras=: side data per sample in each batch. Shards' members by extension
(bytes equal to the members, in the batch's order), decoded as asked, dict
batches in pinload.torch, required extras as errors, a list file's columns."""
import io
import json
import os
import tarfile

import numpy as np
import pytest

import pinload


def _jpeg_bytes(dataset, i):
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(dataset)
                   for f in fs)
    with open(files[i % len(files)], "rb") as f:
        return f.read()


def caption(i):
    """Key i's caption; None (no member) for every fourth key."""
    return None if i % 4 == 3 else "photo %d%s" % (i, " of a cat" * (i % 3))


@pytest.fixture(scope="module")
def shards(dataset, tmp_path_factory):
    """Two shards of 10 keys: KEY.jpg, KEY.cls, KEY.txt, KEY.json."""
    out = tmp_path_factory.mktemp("extras")
    for s in range(2):
        with tarfile.open(out / ("s%d.tar" % s), "w") as t:
            for i in range(s * 10, s * 10 + 10):
                members = {"jpg": _jpeg_bytes(dataset, i),
                           "cls": str(i % 4).encode(),
                           "json": json.dumps({"i": i, "tags": ["x"] * i})
                           .encode()}
                if caption(i) is not None:
                    members["txt"] = caption(i).encode()
                for ext, data in sorted(members.items()):
                    info = tarfile.TarInfo("k%03d.%s" % (i, ext))
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
    return str(out)


def key_of(loader, index):
    path, _ = loader.sample(index)
    return int(path.rsplit(":k", 1)[1].split(".")[0])


def test_batch_extras_are_the_members_bytes_and_decode_as_asked(shards):
    with pinload.Loader(shards, batch_size=6, size=16, device="host",
                        extras={"txt": "str", "json": "json"}) as loader:
        assert loader.extras == ("txt", "json")
        seen = []
        for batch in loader:
            raw = batch.extras
            assert sorted(raw) == ["json", "txt"]
            dec = loader.extras_of(batch)
            for j, index in enumerate(np.from_dlpack(batch.indices).tolist()):
                k = key_of(loader, index)
                seen.append(k)
                want = caption(k)
                assert raw["txt"][j] == (want or "").encode()
                assert dec["txt"][j] == (want or "")
                assert json.loads(raw["json"][j]) == {"i": k,
                                                      "tags": ["x"] * k}
                assert dec["json"][j] == {"i": k, "tags": ["x"] * k}
        assert sorted(seen) == list(range(20))
        batch.release()
        with pytest.raises(ValueError, match="released"):
            batch.extras


def test_required_extras_fail_naming_the_member(shards):
    loader = pinload.Loader(shards, batch_size=4, size=16, device="host",
                            shuffle=False, extras="txt",
                            extras_required=True, on_error="fail")
    with pytest.raises(pinload.MissingExtraError, match="s0.tar:k003.jpg"):
        for _ in loader:
            pass
    loader.close()


def test_bad_extras_are_refused():
    with pytest.raises(ValueError, match="extras"):
        pinload.Loader(".", extras={"txt": "yaml"})
    with pytest.raises(ValueError, match="extras"):
        pinload.Loader(".", extras=3)


def test_list_file_columns(dataset, tmp_path):
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(dataset)
                   for f in fs)[:5]
    lst = tmp_path / "list.tsv"
    lst.write_text("".join("%s\t%d\tcaption number %d\n" % (f, i, i)
                           for i, f in enumerate(files)))
    with pinload.Loader(str(lst), batch_size=5, size=8, shuffle=False,
                        device="host", extras={"caption": "str"}) as loader:
        batch = next(iter(loader))
        assert loader.extras_of(batch) == {
            "caption": ["caption number %d" % i for i in range(5)]}


def test_torch_dict_batches_carry_the_extras(shards):
    torch = pytest.importorskip("torch")
    import pinload.torch as pt
    loader = pt.Loader(shards, batch_size=5, size=16, device="cpu",
                       shuffle=False, extras={"txt": "str"})
    batches = list(loader)
    assert [sorted(b) for b in batches] == [["images", "labels", "txt"]] * 4
    got = [t for b in batches for t in b["txt"]]
    assert got == [caption(i) or "" for i in range(20)]
    assert isinstance(batches[0]["images"], torch.Tensor)
    only = pt.Loader(shards, batch_size=5, size=16, device="cpu",
                     shuffle=False, extras="txt",
                     output_map=("txt", "labels"))
    b = next(iter(only))
    assert list(b) == ["txt", "labels"] and b["txt"][0] == b"photo 0"
    with pytest.raises(ValueError, match="output_map"):
        pt.Loader(shards, device="cpu", extras="txt", output_map=("json",))
    loader.close()
    only.close()


def test_labels_from_a_json_field(shards):
    with pinload.Loader(shards, batch_size=10, size=16, device="host",
                        label_field="i") as loader:
        assert loader.info["num_classes"] == 20
        for batch in loader:
            labels = np.from_dlpack(batch.labels).tolist()
            indices = np.from_dlpack(batch.indices).tolist()
            assert labels == [key_of(loader, i) for i in indices]
