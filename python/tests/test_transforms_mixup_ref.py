"""The batch op mixup against timm's own Mixup (issue 37): each batch a
loader with `...;mixup(...)` delivers is timm.data.mixup.Mixup (mode
"batch") applied to the same loader's batch without it, timm's numpy
draws replaced by the ones pinload made (pinload._plan: the coins, the
beta, the box's centre or minmax draws), images and soft labels
torch.equal; lambda's distribution against numpy's Beta by a two-sample
Kolmogorov-Smirnov test; and pinload.torch.Loader giving the soft labels
as the batch's targets. Skipped without torch or timm."""
import numpy as np
import pytest

import pinload

torch = pytest.importorskip("torch")
mixup_mod = pytest.importorskip("timm.data.mixup")
import pinload.torch as ptorch  # noqa: E402

from test_transforms_ref import ks_bound, ks_statistic  # noqa: E402

SIDE, BATCH = 24, 4
PLAIN = "resize;normalize"

CASES = [
    ("mixup(0.8,label_smoothing=0.1)",
     dict(mixup_alpha=0.8, label_smoothing=0.1)),
    ("mixup(0,1,label_smoothing=0)",
     dict(mixup_alpha=0.0, cutmix_alpha=1.0, label_smoothing=0.0)),
    ("mixup(0.8,1.0)", dict(mixup_alpha=0.8, cutmix_alpha=1.0)),
    ("mixup(0.2,1,prob=0.6,switch_prob=0.3,correct_lam=false)",
     dict(mixup_alpha=0.2, cutmix_alpha=1.0, prob=0.6, switch_prob=0.3,
          correct_lam=False)),
    ("mixup(0.5,cutmix_minmax=0.2:0.8)",
     dict(mixup_alpha=0.5, cutmix_minmax=(0.2, 0.8))),
]


def plan(spec, epoch, batch, seed=4):
    """What the batch op drew for batch `batch` of `epoch` (rank 0)."""
    steps = pinload._plan("%s;%s" % (PLAIN, spec), SIDE, (SIDE, SIDE), epoch,
                          batch, seed=seed, format="f32")
    name, drawn = steps[-1]
    assert name == "mixup"
    return drawn


def timm_with(drawn, kw, classes):
    """timm's Mixup whose numpy draws are pinload's, in timm's order."""
    m = mixup_mod.Mixup(num_classes=classes, **kw)
    mixed = drawn["lam"] != 1.0 or drawn["cutmix"]
    both = m.mixup_alpha > 0 and m.cutmix_alpha > 0
    rands = [0.0 if mixed else 1.0]
    if mixed and both:
        rands.append(0.0 if drawn["cutmix"] else 1.0)
    beta = drawn.get("beta", drawn["lam"])
    ints = []
    if drawn["cutmix"]:
        if kw.get("cutmix_minmax"):
            ints = [drawn["height"], drawn["width"], drawn["top"],
                    drawn["left"]]
        else:
            ints = [drawn["cy"], drawn["cx"]]
    return m, rands, beta, ints


class Draws:
    """numpy.random's functions timm calls, answering from lists."""

    def __init__(self, monkeypatch, rands, beta, ints):
        self.rands, self.ints = list(rands), list(ints)
        monkeypatch.setattr(np.random, "rand", lambda *a: self.rands.pop(0))
        monkeypatch.setattr(np.random, "beta", lambda a, b: beta)
        monkeypatch.setattr(np.random, "randint",
                            lambda lo, hi, size=None: self.ints.pop(0))

    def done(self):
        assert not self.rands and not self.ints, (self.rands, self.ints)


@pytest.mark.parametrize("spec,kw", CASES)
def test_each_batch_is_timms_mixup_of_the_plain_batch(dataset, spec, kw,
                                                      monkeypatch):
    common = dict(batch_size=BATCH, size=SIDE, format="f32", seed=4,
                  num_workers=2, device="host", drop_last=True)
    plain = ptorch.Loader(dataset, transform=PLAIN, **common)
    mixed = ptorch.Loader(dataset, transform="%s;%s" % (PLAIN, spec),
                          **common)
    classes = plain.info["num_classes"]
    n = changed = 0
    for epoch in range(2):
        plain.set_epoch(epoch)
        mixed.set_epoch(epoch)
        for b, ((x, y), (mx, soft)) in enumerate(zip(plain, mixed)):
            drawn = plan(spec, epoch, b)
            m, rands, beta, ints = timm_with(drawn, kw, classes)
            with monkeypatch.context() as mp:
                draws = Draws(mp, rands, beta, ints)
                tx, ty = m(x.clone(), y.clone())
                draws.done()
            assert torch.equal(mx, tx), (epoch, b, drawn)
            changed += not torch.equal(mx, x)
            assert torch.equal(soft, ty), (epoch, b, drawn)
            assert soft.shape == (BATCH, classes)
            n += 1
    assert n == 2 * (48 // BATCH)
    assert changed > n // 3, changed  # the batches were mixed
    plain.close()
    mixed.close()


def test_lambda_is_numpys_beta():
    """10,000 batches' lambda against numpy.random.beta's, for a small
    and a large alpha; another alpha told apart."""
    for alpha in (0.2, 0.8, 3.0):
        ours = [plan("mixup(%r)" % alpha, 1, i)["lam"]
                for i in range(10000)]
        theirs = np.random.default_rng(5).beta(alpha, alpha, 10000)
        assert ks_statistic(ours, theirs) < ks_bound(10000, 10000), alpha
    other = np.random.default_rng(6).beta(1.0, 1.0, 10000)
    assert ks_statistic(ours, other) > ks_bound(10000, 10000)


def test_the_torch_loader_gives_soft_labels(dataset):
    loader = ptorch.Loader(dataset, batch_size=4, size=SIDE, format="f32",
                           device="host",
                           transform="%s;mixup(0.8,1.0)" % PLAIN)
    images, targets = next(iter(loader))
    assert targets.dtype == torch.float32
    assert tuple(targets.shape) == (4, loader.info["num_classes"])
    assert torch.allclose(targets.sum(1), torch.ones(4))
    batch = next(iter(pinload.Loader(dataset, batch_size=4, size=SIDE,
                                     format="f32", device="host",
                                     transform="%s;mixup" % PLAIN)))
    assert np.from_dlpack(batch.soft_labels).shape == (4, 4)
    plain = next(iter(pinload.Loader(dataset, batch_size=4, size=SIDE,
                                     device="host")))
    assert plain.soft_labels is None
    loader.close()
