"""views= (issue 37): several views of each sample in one batch, each
view its own array of its own size (batch.views; pinload.torch.Loader
yields a list of tensors). View 0 is the batch's images, and the bytes a
loader of its spec alone gives (the same seed, at full-size decoding);
every view's bytes are the same for any worker count; the torch Loader
takes torchvision v2 pipelines as views; bad views are refused in
Python's words."""
import numpy as np
import pytest

import pinload

SIMCLR = ["rrc(24x16,scale=0.3:1);hflip;color_jitter(0.4,0.4,0.4,0.1,p=0.8);"
          "grayscale(0.2);normalize",
          "rrc(8,scale=0.05:0.4);hflip;gaussian_blur(3,p=0.5);normalize"]


def collect(loader):
    """Per batch: (each view's array, labels)."""
    out = []
    for b in loader:
        views = [np.from_dlpack(v).copy() for v in b.views]
        out.append((views, np.from_dlpack(b.labels).copy()))
        del views
        b.release()
    return out


def test_each_batch_holds_every_view_of_its_own_size(dataset):
    loader = pinload.Loader(dataset, views=SIMCLR, batch_size=8, format="f32",
                            seed=5, device="host", num_workers=2)
    assert loader.info["num_views"] == 2
    assert (loader.info["width"], loader.info["height"]) == (24, 16)
    assert loader.info["batch_bytes"] == 8 * 4 * 3 * (24 * 16 + 8 * 8)
    b = loader.next()
    assert b.views is not None and len(b.views) == 2
    a0, a1 = (np.from_dlpack(v) for v in b.views)
    # The host backend: the host arrays are the arrays.
    h0, h1 = (np.from_dlpack(v) for v in b.host_views)
    assert np.array_equal(h0, a0) and np.array_equal(h1, a1)
    del h0, h1
    assert a0.shape == (8, 3, 16, 24) and a0.dtype == np.float32
    assert a1.shape == (8, 3, 8, 8)
    assert np.array_equal(np.from_dlpack(b.images), a0), "images is view 0"
    del a0, a1
    b.release()
    loader.close()
    plain = pinload.Loader(dataset, batch_size=8, size=24, device="host")
    b = plain.next()
    assert b.views is None and b.host_views is None
    assert plain.info["num_views"] == 1
    b.release()
    plain.close()


def test_view_zero_is_its_spec_alone_and_workers_change_nothing(dataset):
    kw = dict(batch_size=8, format="f32", seed=5, device="host")
    one = collect(pinload.Loader(dataset, views=SIMCLR, num_workers=1, **kw))
    four = collect(pinload.Loader(dataset, views=SIMCLR, num_workers=4,
                                  prefetch="auto", **kw))
    assert len(one) == len(four) == 6
    for (va, la), (vb, lb) in zip(one, four):
        assert np.array_equal(la, lb)
        for x, y in zip(va, vb):
            assert x.tobytes() == y.tobytes()
    alone = pinload.Loader(dataset, transform=SIMCLR[0], size=(16, 24),
                           dct_scaling=False, **kw)
    for (views, labels), b in zip(one, alone):
        assert np.array_equal(views[0], np.from_dlpack(b.images))
        assert np.array_equal(labels, np.from_dlpack(b.labels))
        b.release()
    # The two views of a sample are drawn apart (seed + v).
    assert not np.array_equal(one[0][0][1], one[1][0][1])


@pytest.mark.parametrize("views,words", [
    ("rrc(16)", "views: expected a list of 2 to 16 transform specs"),
    (["rrc(16)", 3], "views: item 1: expected a transform spec"),
])
def test_views_of_the_wrong_type_are_refused(dataset, views, words):
    with pytest.raises(ValueError) as e:
        pinload.Loader(dataset, views=views, device="host")
    assert words in str(e.value)


def test_bad_views_are_refused_in_pythons_words(dataset):
    with pytest.raises(pinload.InvalidArgument) as e:
        pinload.Loader(dataset, views=["rrc(16)"], device="host")
    assert "views: 1: views gives 2 to 16 views" in str(e.value)
    assert "config." not in str(e.value) and "num_views" not in str(e.value)
    with pytest.raises(pinload.InvalidArgument, match=r"views\[1\]: ends at"):
        pinload.Loader(dataset, views=["rrc(16)", "resize(20)"],
                       device="host")
    with pytest.raises(pinload.InvalidArgument,
                       match="transform: set with views"):
        pinload.Loader(dataset, views=SIMCLR, transform="rrc", device="host")


def test_the_torch_loader_yields_a_list_of_view_tensors(dataset):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    import torchvision.transforms.v2 as T
    import pinload.torch as ptorch
    norm = [T.ToImage(), T.ToDtype(torch.float32, scale=True),
            T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))]
    glob = T.Compose([T.RandomResizedCrop(32, scale=(0.4, 1)),
                      T.RandomHorizontalFlip(), *norm])
    local = T.Compose([T.RandomResizedCrop(12, scale=(0.05, 0.4)),
                       T.RandomHorizontalFlip(), *norm])
    loader = ptorch.Loader(dataset, views=[glob, glob, local, local],
                           batch_size=6, device="host")
    views, labels = next(iter(loader))
    assert isinstance(views, list) and len(views) == 4
    assert [tuple(v.shape) for v in views] == [(6, 3, 32, 32)] * 2 + [
        (6, 3, 12, 12)] * 2
    assert all(v.dtype == torch.float32 for v in views)
    assert labels.dtype == torch.int64 and tuple(labels.shape) == (6,)
    assert not torch.equal(views[0], views[1]), "two draws of one pipeline"
    loader.close()
    # Strings and pipelines mix; formats must agree.
    with pytest.raises(ValueError, match="a batch's views share one format"):
        ptorch.Loader(dataset, views=[glob, T.RandomResizedCrop(8)],
                      device="host")
