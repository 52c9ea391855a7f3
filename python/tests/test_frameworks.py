"""pinload.torch.Loader where training frameworks take a data loader:
Lightning DDP with 2 gloo ranks (real processes, started by Lightning's own
launcher and by torchrun: lightning_ddp.py), Hugging Face Accelerate's
prepare (one process, and 2 ranks: accelerate_ddp.py) and save_state,
torch.distributed.checkpoint (one process, and 2 ranks: dcp_ranks.py).
Each test skips when its package is absent; the multi-process ones are
bounded by a timeout that ends them all."""
import hashlib
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pinload  # noqa: E402
import pinload.torch as pt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KW = dict(batch_size=8, size=16, seed=7, device="host", num_workers=2,
          log=lambda level, msg: None)
MAP = ("images", "labels", "indices")


def rows(batches):
    """(indices, labels, image bytes) of each dict batch, copied."""
    return [(b["indices"].tolist(), b["labels"].tolist(),
             b["images"].numpy().tobytes()) for b in batches]


def reference_rows(dataset, epoch):
    """The same, from a fresh pinload.Loader (no torch) at `epoch`."""
    return [(np.from_dlpack(b.indices).tolist(),
             np.from_dlpack(b.labels).tolist(),
             np.from_dlpack(b.images).tobytes())
            for b in pinload.Loader(dataset, first_epoch=epoch, **KW)]


# -- Lightning DDP: two ranks, two real processes ----------------------------

# What a launcher leaves in the environment; none may leak into the run.
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
               "GROUP_RANK", "ROLE_RANK", "NODE_RANK", "MASTER_ADDR",
               "MASTER_PORT")
LAUNCH_PREFIXES = ("SLURM_", "OMPI_", "PMI_", "MPI_LOCAL", "TORCHELASTIC_",
                   "PL_")


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if k not in LAUNCH_VARS and not k.startswith(LAUNCH_PREFIXES)}
    env["OMP_NUM_THREADS"] = "1"
    return env


def run_bounded(cmd, cwd, timeout):
    """Run cmd (which starts the ranks) in its own session; on timeout
    end the whole session: SIGTERM (torchrun ends its workers), then
    SIGKILL."""
    proc = subprocess.Popen(cmd, cwd=str(cwd), env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
                out, _ = proc.communicate(timeout=15)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                out = b""
        pytest.fail("%s: no end after %d s\n%s"
                    % (cmd, timeout, out.decode(errors="replace")[-4000:]))
    text = out.decode(errors="replace")
    assert proc.returncode == 0, "%s: exit %d\n%s" % (cmd, proc.returncode,
                                                      text[-6000:])
    return text


def gloo_or_skip():
    dist = torch.distributed
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("torch.distributed with gloo is not available")


# MPIEnvironment.detect()'s steps (lightning/fabric/plugins/environments/
# mpi.py): an ImportError means no MPI (False), else world size > 1 is MPI.
MPI_PROBE = """
try:
    from mpi4py import MPI
except ImportError as e:
    print("mpi-probe: no MPI:", e)
else:
    print("mpi-probe: world size", MPI.COMM_WORLD.Get_size())
"""


def mpi_probe():
    """What Lightning's MPIEnvironment.detect() meets in a process started
    as two_ranks starts one: None where mpi4py is not installed (detect()
    says False), else (ok, output) of `from mpi4py import MPI` (which
    initialises MPI) and the world size, as detect() asks them, run apart
    in the same clean environment and in its own session, ended with any
    daemon it started after 60 s. An MPI that cannot start aborts the
    process there (OpenMPI with no ssh or rsh for its daemon did, on the
    GPU machine of issue 35)."""
    import importlib.util
    if importlib.util.find_spec("mpi4py") is None:
        return None
    proc = subprocess.Popen([sys.executable, "-c", MPI_PROBE],
                            env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return False, "no answer in 60 s"
    text = out.decode(errors="replace").strip()
    said = [line for line in text.splitlines()
            if line.startswith("mpi-probe: ")]
    ok = proc.returncode == 0 and len(said) == 1 and (
        said[0] == "mpi-probe: world size 1" or
        said[0].startswith("mpi-probe: no MPI:"))
    return ok, "exit %d: %s" % (proc.returncode, text)


def lightning_mpi_or_skip():
    """Lightning's own launcher picks its cluster environment by asking
    each one's detect(), MPIEnvironment's last; with mpi4py installed that
    imports mpi4py.MPI, which starts MPI. Where MPI cannot start (or says
    there is more than one rank) the run cannot be Lightning's plain one:
    skip, saying why. Without mpi4py detect() says no and the test runs."""
    probe = mpi_probe()
    if probe is not None and not probe[0]:
        pytest.skip("mpi4py is installed, and `from mpi4py import MPI`, "
                    "which Lightning's MPI detection runs, fails or finds "
                    "other ranks here: %s" % probe[1][-800:])


def two_ranks(script, dataset, tmp_path, torchrun):
    """Run script DATA OUT as 2 ranks (under torchrun, or as it starts them
    itself); the two records it wrote, by rank."""
    out = tmp_path / "out"
    out.mkdir()
    cmd = [os.path.join(HERE, script), dataset, str(out)]
    if torchrun:
        cmd = ["-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node=2"] + cmd
    log = run_bounded([sys.executable] + cmd, tmp_path, timeout=240)
    records = []
    for r in (0, 1):
        path = out / ("rank%d.json" % r)
        assert path.exists(), "rank %d wrote nothing\n%s" % (r, log[-4000:])
        records.append(json.loads(path.read_text()))
    return records


def check_split(records, dataset, epochs=2):
    """Each rank trained on its DistributedSampler-style share of every
    epoch (position j of rank r is position r + 2j of the epoch's order, 3
    batches of 8), the shares are disjoint and cover the 48 samples, both
    ranks took the same number of steps, and the epochs' orders differ."""
    whole = pinload.Loader(dataset, rank=0, world_size=1, **KW)
    for e in range(epochs):
        order = whole.epoch_order(e)
        assert sorted(order) == list(range(48))
        shares = []
        for r, rec in enumerate(records):
            assert (rec["rank"], rec["world"]) == (r, 2)
            assert (rec["loader_rank"], rec["loader_world"]) == (r, 2)
            steps = [idx for epoch, idx in rec["seen"] if epoch == e]
            assert [len(s) for s in steps] == [8, 8, 8], (r, e)
            share = [i for s in steps for i in s]
            assert share == order[r::2], (r, e)
            shares.append(share)
        assert not set(shares[0]) & set(shares[1])
        assert sorted(shares[0] + shares[1]) == list(range(48))
    for r, rec in enumerate(records):
        assert rec["len"] == 3
        assert rec["steps"] == len(rec["seen"]) == epochs * 3, r
        first = [i for epoch, idx in rec["seen"] if epoch == 0 for i in idx]
        second = [i for epoch, idx in rec["seen"] if epoch == 1 for i in idx]
        assert first != second


@pytest.mark.parametrize("launcher", ["lightning", "torchrun"])
def test_lightning_ddp_two_gloo_ranks_split_every_epoch(dataset, tmp_path,
                                                        launcher):
    """Trainer(strategy="ddp", gloo, devices=2) on the CPU, the loader made
    in train_dataloader() and left alone by Lightning (use_distributed_
    sampler on): check_split's exact shares for 2 epochs. Started as
    Lightning starts it (rank 1 is the script run again, with LOCAL_RANK
    and WORLD_SIZE but no RANK: the rank comes from the process group) and
    as torchrun does (RANK, WORLD_SIZE in the environment)."""
    pytest.importorskip("lightning")
    gloo_or_skip()
    if launcher == "lightning":
        # (Under torchrun Lightning takes TorchElasticEnvironment before
        # it would ask MPI.)
        lightning_mpi_or_skip()
    records = two_ranks("lightning_ddp.py", dataset, tmp_path,
                        torchrun=launcher == "torchrun")
    check_split(records, dataset)


def test_a_half_launcher_environment_names_train_dataloader(dataset,
                                                             monkeypatch):
    """A loader made before Lightning's launcher has set up the process
    group (at a script's top level), in the process Lightning started for
    rank 1: WORLD_SIZE and LOCAL_RANK but no RANK. Refused, saying where to
    make it; with rank and world_size given it is made."""
    for k in LAUNCH_VARS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(pinload.InvalidArgument) as e:
        pt.Loader(dataset, **KW)
    assert "not RANK" in str(e.value) and "train_dataloader()" in str(e.value)
    loader = pt.Loader(dataset, rank=1, world_size=2, **KW)
    assert (loader.info["rank"], loader.info["world_size"]) == (1, 2)


# -- Hugging Face Accelerate -------------------------------------------------

def _accelerator():
    accelerate = pytest.importorskip("accelerate")
    return accelerate.Accelerator(cpu=True)


def test_accelerate_prepare_hands_the_loader_back_untouched(dataset):
    """accelerator.prepare(model, optimizer, loader): the loader comes back
    as the same object (prepare re-shards only DataLoaders), so training
    through the prepared model and optimizer sees exactly pinload's
    batches, bytes included, epoch after epoch."""
    acc = _accelerator()
    model = torch.nn.Linear(3, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = pt.Loader(dataset, output_map=MAP, **KW)
    model, optimizer, prepared = acc.prepare(model, optimizer, loader)
    assert prepared is loader
    before = [p.detach().clone() for p in model.parameters()]
    for epoch in range(2):
        got = []
        for batch in prepared:
            got.extend(rows([batch]))
            x = batch["images"].float().mean(dim=(1, 2))
            loss = torch.nn.functional.cross_entropy(model(x),
                                                     batch["labels"])
            acc.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        assert got == reference_rows(dataset, epoch), epoch
    assert any(not torch.equal(a, b)
               for a, b in zip(before, model.parameters()))


def test_accelerate_save_state_resumes_the_loader_exactly(dataset, tmp_path):
    """register_for_checkpointing(loader), save_state mid-epoch, then a
    fresh Accelerator and loader, load_state: the rest of the epoch and the
    next one are the uninterrupted run's batches, bytes included."""
    acc = _accelerator()
    loader = pt.Loader(dataset, output_map=MAP, **KW)
    acc.register_for_checkpointing(loader)
    it = iter(loader)
    head = rows([next(it), next(it)])
    acc.save_state(str(tmp_path / "ckpt"))
    rest = rows(it) + rows(loader)  # the epoch's rest, then epoch 1
    assert head + rest[:len(loader) - 2] == reference_rows(dataset, 0)

    acc = _accelerator()
    fresh = pt.Loader(dataset, output_map=MAP, **KW)
    acc.register_for_checkpointing(fresh)
    acc.load_state(str(tmp_path / "ckpt"))
    assert rows(fresh) + rows(fresh) == rest


def test_accelerate_two_ranks_prepare_keeps_each_ranks_share(dataset,
                                                           tmp_path):
    """2 processes under torchrun (what `accelerate launch` runs), gloo on
    the CPU: prepare hands each rank's loader back as it was, so each rank
    trains on its own share (check_split), not on a re-dispatched one."""
    pytest.importorskip("accelerate")
    gloo_or_skip()
    records = two_ranks("accelerate_ddp.py", dataset, tmp_path,
                        torchrun=True)
    assert all(rec["same"] for rec in records)
    assert all(rec["distributed_type"].endswith("MULTI_CPU")
               for rec in records)
    check_split(records, dataset)


# -- torch.distributed.checkpoint --------------------------------------------

@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_state_dict_round_trips_through_distributed_checkpoint(dataset,
                                                               tmp_path):
    """dcp.save of {"model": ..., "loader": loader.state_dict()} in one
    process (no process group), dcp.load into a fresh model's and
    loader's state dicts: the loader goes on with the uninterrupted run's
    batches, bytes included, and the model has the saved weights."""
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    dcp = pytest.importorskip("torch.distributed.checkpoint")
    whole = pt.Loader(dataset, output_map=MAP, **KW)
    want = rows(whole) + rows(whole)

    model = torch.nn.Linear(3, 4)
    loader = pt.Loader(dataset, output_map=MAP, **KW)
    it = iter(loader)
    head = rows([next(it), next(it)])
    assert head == want[:2]
    saved = loader.state_dict()
    dcp.save({"model": model.state_dict(), "loader": saved},
             checkpoint_id=str(tmp_path / "dcp"))
    del it

    fresh_model = torch.nn.Linear(3, 4)
    fresh = pt.Loader(dataset, output_map=MAP, **KW)
    state = {"model": fresh_model.state_dict(), "loader": fresh.state_dict()}
    assert state["loader"] != saved
    dcp.load(state, checkpoint_id=str(tmp_path / "dcp"))
    assert state["loader"] == saved
    fresh.load_state_dict(state["loader"])
    fresh_model.load_state_dict(state["model"])
    assert torch.equal(fresh_model.weight, model.weight)
    assert rows(fresh) + rows(fresh) == want[2:]


def test_two_ranks_resume_from_one_distributed_checkpoint(dataset, tmp_path):
    """2 gloo ranks under torchrun save beside a model, each its loader's
    state under its own key (dcp_ranks.py; rank r after r + 1 batches),
    and load it into fresh loaders: each rank goes on with exactly its
    uninterrupted run's batches (indices and image bytes), the rest of
    epoch 0 and then epoch 1."""
    gloo_or_skip()
    pytest.importorskip("torch.distributed.checkpoint")
    records = two_ranks("dcp_ranks.py", dataset, tmp_path, torchrun=True)
    for r, rec in enumerate(records):
        assert rec["rank"] == r and rec["model"]
        want = []
        for epoch in range(2):
            loader = pinload.Loader(dataset, rank=r, world_size=2,
                                    first_epoch=epoch, **KW)
            want += [[np.from_dlpack(b.indices).tolist(),
                      hashlib.sha256(np.from_dlpack(b.images).tobytes())
                      .hexdigest()] for b in loader]
        assert len(want) == 6
        assert rec["rows"] == want[r + 1:], r


def test_batch_size_and_dataset_are_where_frameworks_look(dataset):
    """loader.batch_size and loader.dataset, as a DataLoader's (issue 39):
    the dataset is every rank's samples, (path, label) by index, with the
    class names; not an IterableDataset, so Lightning re-shards nothing and
    its batch size finder reads the dataset's length."""
    loader = pt.Loader(dataset, rank=1, world_size=2, **KW)
    assert loader.batch_size == 8
    ds = loader.dataset
    assert len(ds) == 48 and len(loader) == 3  # 24 samples of this rank
    assert ds[0] == loader.sample(0) and ds[-1] == loader.sample(47)
    assert ds[1:3] == [loader.sample(1), loader.sample(2)]
    assert list(ds)[5] == loader.sample(5)
    assert ds.classes == loader.classes
    with pytest.raises(IndexError):
        ds[48]
    pytest.importorskip("lightning")
    from lightning.fabric.utilities.data import has_iterable_dataset
    from lightning.pytorch.utilities.combined_loader import CombinedLoader
    assert not has_iterable_dataset(loader)
    assert CombinedLoader(loader)._dataset_length() == 48
