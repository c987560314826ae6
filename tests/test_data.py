"""cltensor.utils.data against torch.utils.data: datasets, samplers, collation, the DataLoader
in the main process and with worker processes."""
import collections
import os
import time
import warnings

import numpy as np
import pytest

import cltensor
import cltensor.nn.functional as F
from cltensor.utils import data as cd



@pytest.fixture(scope="module")
def torch():
    # NOTE: imported here, not at module top: workers import this module for its datasets
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def td(torch):
    return torch.utils.data

Pair = collections.namedtuple("Pair", "a b")


def _host(x):
    """A batch with tensors as numpy arrays, for comparing structures and values."""
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        return x.numpy()
    if isinstance(x, dict):
        return {k: _host(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(*map(_host, x)) if hasattr(x, "_fields") else type(x)(map(_host, x))
    return x


def _assert_same(ours, theirs):
    ours, theirs = _host(ours), _host(theirs)
    assert type(ours) is type(theirs), (ours, theirs)
    if isinstance(ours, np.ndarray):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)
    elif isinstance(ours, dict):
        assert ours.keys() == theirs.keys()
        for k in ours:
            _assert_same(ours[k], theirs[k])
    elif isinstance(ours, (list, tuple)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_same(a, b)
    else:
        assert ours == theirs


# ---- datasets -----------------------------------------------------------------------------------

class Squares(cd.Dataset):
    """Module-level (picklable for spawned workers): sample i is rich in structure."""

    def __init__(self, n=10):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": np.full(3, i, np.float32), "i": i, "f": i / 2, "s": f"s{i}",
                "t": (i, [i * 1.5, True]), "p": Pair(np.int32(i), np.arange(2) * i)}


class TorchSquares:
    def __init__(self, n=10):
        self.inner = Squares(n)

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        return self.inner[i]


def test_torch_import_paths():
    """Where torch scripts reach these names, with `import cltensor as torch`."""
    from cltensor.utils.data.dataloader import default_collate
    from cltensor.utils.data.distributed import DistributedSampler
    from cltensor.utils.data.sampler import SubsetRandomSampler
    assert cltensor.utils.data.DataLoader is cd.DataLoader
    assert default_collate is cd.default_collate and DistributedSampler is cd.DistributedSampler
    assert SubsetRandomSampler is cd.SubsetRandomSampler


def test_default_collate_matches_torch(td):
    batch = [Squares()[i] for i in (3, 1, 4)]
    _assert_same(cd.default_collate(batch), td.default_collate(batch))
    for sample in ([1, 2], [0.5, 1.5], [True, False], ["a", "b"], [np.float64(2.0), np.float64(1)]):
        _assert_same(cd.default_collate(sample), td.default_collate(sample))


def test_default_convert_matches_torch(td):
    sample = {"x": np.ones((2, 2), np.float32), "n": 3, "t": (np.int64(4), "s"),
              "p": Pair(np.zeros(1), 1.0)}
    _assert_same(cd.default_convert(sample), td.default_convert(sample))


def test_default_collate_stacks_device_tensors(device):
    rows = [cltensor.tensor([float(i), i + 0.5], device=device) for i in range(3)]
    out = cd.default_collate(rows)
    assert out.device is device and out.shape == (3, 2)
    np.testing.assert_array_equal(out.numpy(), np.stack([r.numpy() for r in rows]))


def test_default_collate_errors():
    with pytest.raises(TypeError, match="found"):
        cd.default_collate([object(), object()])
    with pytest.raises(TypeError, match="found"):
        cd.default_collate([np.array(["a"]), np.array(["b"])])
    with pytest.raises(RuntimeError, match="equal size"):
        cd.default_collate([[1, 2], [3]])
    with pytest.raises(RuntimeError, match="equal size"):
        cd.default_collate([np.zeros(2), np.zeros(3)])


def test_tensor_dataset_and_combinations(device):
    x = cltensor.tensor(np.arange(12.0).reshape(6, 2), device=device)
    ds = cd.TensorDataset(x, np.arange(6))
    assert len(ds) == 6 and ds[2][1] == 2
    np.testing.assert_array_equal(ds[2][0].numpy(), [4.0, 5.0])
    with pytest.raises(ValueError, match="size mismatch"):
        cd.TensorDataset(x, np.arange(5))
    cat = cd.ConcatDataset([Squares(3), Squares(4)])
    assert len(cat) == 7 and cat[3]["i"] == 0 and cat[-1]["i"] == 3
    with pytest.raises(IndexError):
        cat[7]
    sub = cd.Subset(Squares(), [5, 2])
    assert len(sub) == 2 and sub[1]["i"] == 2
    stacked = cd.StackDataset(a=Squares(3), b=range(3))
    assert stacked[2]["b"] == 2 and len(stacked) == 3
    with pytest.raises(ValueError, match="length"):
        cd.StackDataset(Squares(3), Squares(4))


@pytest.mark.parametrize("n, lengths", [(10, [3, 7]), (11, [0.3, 0.3, 0.4]), (5, [0.5, 0.5]),
                                        (7, [1 / 3] * 3)])
def test_random_split_sizes_match_torch(n, lengths, torch, td):
    ours = cd.random_split(range(n), lengths, generator=cltensor.Generator().manual_seed(1))
    theirs = td.random_split(range(n), lengths, generator=torch.Generator().manual_seed(1))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    assert sorted(i for s in ours for i in s) == list(range(n))


def test_random_split_reproducible_and_errors():
    def split():
        return [list(s) for s in cd.random_split(range(20), [10, 10])]
    cltensor.manual_seed(5)
    first = split()
    cltensor.manual_seed(5)
    assert split() == first
    assert split() != first
    with pytest.raises(ValueError, match="Sum of input lengths"):
        cd.random_split(range(5), [2, 2])
    with pytest.raises(TypeError, match="Generator"):
        cd.random_split(range(5), [2, 3], generator=np.random.default_rng(0))


# ---- samplers -----------------------------------------------------------------------------------

@pytest.mark.parametrize("n, size, drop", [(10, 3, False), (10, 3, True), (9, 3, True),
                                           (2, 5, False)])
def test_batch_sampler_matches_torch(n, size, drop, td):
    ours = cd.BatchSampler(range(n), size, drop)
    theirs = td.BatchSampler(range(n), size, drop)
    assert list(ours) == list(theirs) and len(ours) == len(theirs)


@pytest.mark.parametrize("bad", [dict(batch_size=0, drop_last=False),
                                 dict(batch_size=True, drop_last=False),
                                 dict(batch_size=2, drop_last=1)])
def test_batch_sampler_rejects_bad_options(bad, td):
    with pytest.raises(ValueError):
        td.BatchSampler(range(4), **bad)
    with pytest.raises(ValueError, match="should be a"):
        cd.BatchSampler(range(4), **bad)


@pytest.mark.parametrize("n, replicas, drop", [(10, 3, False), (10, 3, True), (2, 5, False),
                                               (12, 4, False), (7, 2, True)])
def test_distributed_sampler_matches_torch(n, replicas, drop, td):
    for rank in range(replicas):
        ours = cd.DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop)
        theirs = td.DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_distributed_sampler_shuffle_partitions():
    n, replicas = 23, 4
    def shares(epoch, seed=0):
        out = []
        for rank in range(replicas):
            s = cd.DistributedSampler(range(n), replicas, rank, shuffle=True, seed=seed)
            s.set_epoch(epoch)
            out.append(list(s))
        return out
    first = shares(0)
    assert all(len(s) == 6 for s in first)
    flat = [i for s in first for i in s]
    assert set(flat) == set(range(n)) and len(flat) == 24   # one index repeated as padding
    assert shares(0) == first and shares(1) != first and shares(0, seed=1) != first
    with pytest.raises(ValueError, match="Invalid rank"):
        cd.DistributedSampler(range(n), 2, 2)
    with pytest.raises(ValueError, match="explicitly"):
        cd.DistributedSampler(range(n))


def test_random_sampler_reproducible_and_uniform():
    cltensor.manual_seed(0)
    a = list(cd.RandomSampler(range(10)))
    cltensor.manual_seed(0)
    sampler = cd.RandomSampler(range(10))
    assert list(sampler) == a and sorted(a) == list(range(10))
    assert list(sampler) != a     # each pass a new order
    g = cltensor.Generator().manual_seed(3)
    firsts = np.bincount([next(iter(cd.RandomSampler(range(4), generator=g)))
                          for _ in range(4000)], minlength=4)
    assert np.all(np.abs(firsts - 1000) < 150), firsts
    def seeded():
        return list(cd.RandomSampler(range(10), generator=cltensor.Generator().manual_seed(3)))
    assert seeded() == seeded()


def test_random_sampler_num_samples_and_errors():
    s = cd.RandomSampler(range(4), num_samples=10)
    drawn = list(s)
    assert len(drawn) == len(s) == 10 and sorted(drawn[:4]) == [0, 1, 2, 3]
    r = list(cd.RandomSampler(range(3), replacement=True, num_samples=50))
    assert len(r) == 50 and set(r) == {0, 1, 2}
    with pytest.raises(ValueError, match="num_samples"):
        cd.RandomSampler(range(3), num_samples=0)
    with pytest.raises(TypeError, match="replacement"):
        cd.RandomSampler(range(3), replacement=1)


def test_weighted_and_subset_samplers():
    cltensor.manual_seed(1)
    w = list(cd.WeightedRandomSampler([0.0, 1.0, 3.0], 4000))
    counts = np.bincount(w, minlength=3)
    assert counts[0] == 0 and 2.6 < counts[2] / counts[1] < 3.4
    assert sorted(cd.WeightedRandomSampler([1, 1, 1], 3, replacement=False)) == [0, 1, 2]
    with pytest.raises(ValueError, match="without replacement"):
        cd.WeightedRandomSampler([0, 1, 1], 3, replacement=False)
    with pytest.raises(ValueError, match="non-negative"):
        cd.WeightedRandomSampler([-1, 1], 2)
    assert sorted(cd.SubsetRandomSampler([7, 3, 9])) == [3, 7, 9]


# ---- DataLoader in the main process -------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [dict(batch_size=4), dict(batch_size=4, drop_last=True),
                                    dict(batch_size=None), dict(batch_size=10)])
def test_loader_batches_match_torch(kwargs, td):
    ours = cd.DataLoader(Squares(), **kwargs)
    theirs = td.DataLoader(TorchSquares(), **kwargs)
    assert len(ours) == len(theirs)
    for _ in range(2):      # iterating twice gives the same batches
        got, want = list(ours), list(theirs)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            _assert_same(a, b)


def test_loader_over_device_tensor_dataset(device):
    x = cltensor.tensor(np.arange(14.0).reshape(7, 2), device=device)
    y = cltensor.tensor(np.arange(7), device=device)
    batches = list(cd.DataLoader(cd.TensorDataset(x, y), batch_size=3))
    assert [b[0].shape for b in batches] == [(3, 2), (3, 2), (1, 2)]
    assert all(b[0].device is device for b in batches)
    np.testing.assert_array_equal(np.concatenate([b[1].numpy() for b in batches]), np.arange(7))


class Doubled(cd.TensorDataset):
    def __getitem__(self, i):
        return tuple(2 * t[i] for t in self.tensors)


def test_tensor_dataset_batches_gathered_as_collated(device):
    """The loader gathers a TensorDataset's batch at once: the same as collating its rows."""
    x = np.arange(21.0).reshape(7, 3)
    for ds in (cd.TensorDataset(cltensor.tensor(x, device=device), np.arange(7)),
               cd.TensorDataset(x.astype(np.float32), np.arange(7, dtype=np.int32))):
        sub = cd.Subset(cd.Subset(ds, [6, 5, 4, 3, 2, 1, 0]), [0, 2, 4, 6, -1])
        for d in (ds, sub):
            got = list(cd.DataLoader(d, batch_size=3, sampler=[4, 0, 2, 3, 1]))
            want = [cd.default_collate([d[i] for i in b]) for b in ([4, 0, 2], [3, 1])]
            for a, b in zip(got, want):
                _assert_same(a, b)
    ds = Doubled(np.arange(4.0))
    assert list(cd.DataLoader(ds, batch_size=4))[0][0].numpy().tolist() == [0.0, 2.0, 4.0, 6.0]


class Batched(Squares):
    """Fetches a batch of samples at once (torch's __getitems__ protocol)."""

    def __getitems__(self, indices):
        return [{"i": i, "many": True} for i in indices]


def test_loader_uses_getitems_as_torch(td):
    for batch_size in (3, None):
        ours = list(cd.DataLoader(Batched(5), batch_size=batch_size))
        theirs = list(td.DataLoader(Batched(5), batch_size=batch_size))
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_same(a, b)


def test_loader_shuffle_reproducible_with_manual_seed():
    loader = cd.DataLoader(range(12), batch_size=5, shuffle=True)
    def epoch():
        return np.concatenate([b.numpy() for b in loader]).tolist()
    cltensor.manual_seed(7)
    a, b = epoch(), epoch()
    assert sorted(a) == list(range(12)) and a != b
    cltensor.manual_seed(7)
    assert [epoch(), epoch()] == [a, b]
    g = cltensor.Generator().manual_seed(2)
    with_gen = cd.DataLoader(range(12), batch_size=5, shuffle=True, generator=g)
    order = [t.numpy().tolist() for t in with_gen]
    g.manual_seed(2)
    assert [t.numpy().tolist() for t in with_gen] == order


class Stream(cd.IterableDataset):
    """range(start, stop), shared out between DataLoader workers by get_worker_info()."""

    def __init__(self, start, stop):
        self.start, self.stop = start, stop

    def __len__(self):
        return self.stop - self.start

    def __iter__(self):
        info = cd.get_worker_info()
        if info is None:
            return iter(range(self.start, self.stop))
        return iter(range(self.start + info.id, self.stop, info.num_workers))


@pytest.mark.parametrize("kwargs", [dict(batch_size=3), dict(batch_size=3, drop_last=True),
                                    dict(batch_size=None)])
def test_iterable_dataset_matches_torch(kwargs, td):
    class TorchStream(td.IterableDataset):
        def __init__(self, start, stop):
            self.start, self.stop = start, stop

        def __iter__(self):
            return iter(range(self.start, self.stop))

        def __len__(self):
            return self.stop - self.start

    ours, theirs = cd.DataLoader(Stream(0, 8), **kwargs), td.DataLoader(TorchStream(0, 8), **kwargs)
    assert len(ours) == len(theirs)
    got, want = list(ours), list(theirs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        _assert_same(a, b)


BAD_OPTIONS = [dict(batch_sampler=[[0]], batch_size=2), dict(batch_sampler=[[0]], shuffle=True),
               dict(batch_sampler=[[0]], drop_last=True), dict(sampler=[0, 1], shuffle=True),
               dict(batch_size=None, drop_last=True), dict(num_workers=-1), dict(timeout=-1),
               dict(prefetch_factor=2), dict(persistent_workers=True), dict(batch_size=0)]


@pytest.mark.parametrize("kwargs", BAD_OPTIONS)
def test_loader_rejects_conflicting_options(kwargs, td):
    with pytest.raises(ValueError):
        td.DataLoader(range(4), **kwargs)
    with pytest.raises(ValueError):
        cd.DataLoader(range(4), **kwargs)


def test_loader_rejects_options_for_iterable_and_late_changes():
    for kwargs in (dict(shuffle=True), dict(sampler=[0]), dict(batch_sampler=[[0]])):
        with pytest.raises(ValueError, match="IterableDataset"):
            cd.DataLoader(Stream(0, 4), **kwargs)
    loader = cd.DataLoader(range(4))
    with pytest.raises(ValueError, match="initialized"):
        loader.batch_size = 2
    with pytest.raises(ValueError, match="fork"):
        cd.DataLoader(range(4), num_workers=1, multiprocessing_context="fork")


def test_batch_sampler_and_sampler_options():
    loader = cd.DataLoader(range(10), batch_sampler=[[1, 2], [9]])
    assert [b.numpy().tolist() for b in loader] == [[1, 2], [9]] and len(loader) == 2
    loader = cd.DataLoader(range(10), sampler=[4, 0, 2], batch_size=2)
    assert [b.numpy().tolist() for b in loader] == [[4, 0], [2]]
    assert next(iter(cd.DataLoader(range(10), collate_fn=lambda b: b, pin_memory=True))) == [0]


def test_training_from_loader_matches_torch(device, torch, td):
    """Three SGD steps of a linear model fed by a DataLoader, against torch with the same data."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((12, 3)), rng.standard_normal((12, 1))
    w0, b0 = rng.standard_normal((1, 3)), rng.standard_normal(1)
    model = cltensor.nn.Linear(3, 1).to(device).double()
    model.weight.data = cltensor.tensor(w0, device=device)
    model.bias.data = cltensor.tensor(b0, device=device)
    opt = cltensor.optim.SGD(model.parameters(), lr=0.1)
    tmodel = torch.nn.Linear(3, 1).double()
    with torch.no_grad():
        tmodel.weight.copy_(torch.from_numpy(w0))
        tmodel.bias.copy_(torch.from_numpy(b0))
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1)
    ds = cd.TensorDataset(cltensor.tensor(x, device=device), cltensor.tensor(y, device=device))
    tds = td.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    pairs = zip(cd.DataLoader(ds, batch_size=4), td.DataLoader(tds, batch_size=4))
    for (xb, yb), (txb, tyb) in pairs:
        opt.zero_grad()
        F.mse_loss(model(xb), yb).backward()
        opt.step()
        topt.zero_grad()
        torch.nn.functional.mse_loss(tmodel(txb), tyb).backward()
        topt.step()
    np.testing.assert_allclose(model.weight.numpy(), tmodel.weight.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(model.bias.numpy(), tmodel.bias.detach().numpy(), rtol=1e-10)


# ---- worker processes ---------------------------------------------------------------------------

class WhoLoads(cd.Dataset):
    """Sample i: (i, the loading worker's id, its seed, a draw from its numpy RNG)."""

    def __len__(self):
        return 9

    def __getitem__(self, i):
        info = cd.get_worker_info()
        return i, info.id, info.seed, float(np.random.random_sample())


def _record_init(worker_id):
    assert cd.get_worker_info().id == worker_id
    np.random.seed(100 + worker_id)     # runs after the per-worker seeding


@pytest.mark.parametrize("method", [None, "spawn"])
def test_workers_deliver_in_order_with_worker_info(method):
    loader = cd.DataLoader(WhoLoads(), batch_size=2, num_workers=2, worker_init_fn=_record_init,
                           generator=cltensor.Generator().manual_seed(0),
                           multiprocessing_context=method)
    batches = list(loader)
    idx, wid, seed, draw = (np.concatenate([b[k].numpy() for b in batches]) for k in range(4))
    assert idx.tolist() == list(range(9)) and len(loader) == 5
    assert wid.tolist() == [0, 0, 1, 1, 0, 0, 1, 1, 0]      # batches round-robin
    assert len(set(seed[wid == 0])) == 1 and seed[wid == 1][0] == seed[wid == 0][0] + 1
    np.random.seed(100)
    assert draw[0] == np.random.random_sample()     # worker_init_fn ran in worker 0
    assert cd.get_worker_info() is None


def test_workers_shard_iterable_and_persist():
    loader = cd.DataLoader(Stream(0, 10), batch_size=2, num_workers=2, persistent_workers=True)
    for _ in range(2):
        got = [b.numpy().tolist() for b in loader]
        assert sorted(sum(got, [])) == list(range(10))
        assert got[0] == [0, 2] and got[1] == [1, 3]        # worker 0's batch, then worker 1's
    workers = loader._iterator.workers
    del loader      # the loader holds the persistent iterator; deleting it stops the workers
    assert not any(w.is_alive() for w in workers)


class Faulty(cd.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            raise KeyError("no sample 2")
        return i


class Slow(cd.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(30)
        return i


def test_worker_error_is_raised_with_traceback():
    it = iter(cd.DataLoader(Faulty(), batch_size=1, num_workers=2))
    assert next(it).numpy().tolist() == [0] and next(it).numpy().tolist() == [1]
    with pytest.raises(KeyError, match="(?s)worker process 0.*no sample 2") as err:
        next(it)
    assert "Faulty" in str(err.value) or "__getitem__" in str(err.value)
    assert next(it).numpy().tolist() == [3]
    workers = it.workers
    with pytest.raises(StopIteration):
        next(it)
    assert not any(w.is_alive() for w in workers)     # exhausted: the workers are gone


class Exits(cd.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 1:
            os._exit(3)
        return i


class DeviceState(cd.Dataset):
    """Whether this process has queried OpenCL (a forked worker would inherit its parent's)."""

    def __len__(self):
        return 2

    def __getitem__(self, i):
        return cltensor.device._devices is None


class MakesTensors(cd.Dataset):
    """Creates a ClTensor per sample: in a worker that is the worker's own OpenCL context."""

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return cltensor.tensor([float(i), 2.0 * i]), i


def test_workers_return_tensors_made_in_the_dataset(device):
    got = list(cd.DataLoader(MakesTensors(), batch_size=2, num_workers=2))
    want = list(cd.DataLoader(MakesTensors(), batch_size=2))
    assert len(got) == len(want) == 2
    for a, b in zip(got, want):
        _assert_same(a, b)


def test_workers_start_clean_and_stop_when_deleted(device):
    assert cltensor.device._devices is not None      # OpenCL is initialised in this process
    it = iter(cd.DataLoader(DeviceState(), num_workers=2))
    assert next(it).numpy().tolist() == [True]
    workers = it.workers
    del it          # mid-epoch: the workers stop
    assert not any(w.is_alive() for w in workers)


def test_dead_worker_raises():
    with pytest.raises(RuntimeError, match="exited unexpectedly.*exit code 3"):
        list(cd.DataLoader(Exits(), num_workers=1))


def _failing_init(worker_id):
    raise ValueError(f"cannot set up worker {worker_id}")


def test_worker_init_fn_error_is_raised():
    with pytest.raises(ValueError, match="(?s)worker process 0.*cannot set up worker 0"):
        next(iter(cd.DataLoader(range(4), num_workers=1, worker_init_fn=_failing_init)))


def test_worker_timeout_and_shutdown():
    loader = cd.DataLoader(Slow(), num_workers=1, timeout=0.5, persistent_workers=True)
    for _ in range(2):      # the persistent workers, stopped by the time-out, start again
        it = iter(loader)
        start = time.monotonic()
        with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
            next(it)
        assert time.monotonic() - start < 20
        assert not any(w.is_alive() for w in it.workers)


def _collate_on_device(batch):
    return cltensor.tensor(batch)


def _no_init(worker_id):
    pass


def test_device_dataset_loads_in_this_process_with_a_warning(device):
    """A TensorDataset of device tensors with workers: batches made here, as num_workers=0,
    with one warning per loader; with a worker_init_fn (which would be skipped) it raises."""
    x = cltensor.arange(12, device=device).view(6, 2)
    loader = cd.DataLoader(cd.TensorDataset(x), batch_size=4, num_workers=2)
    with pytest.warns(UserWarning, match="made in this process instead of 2 workers"):
        batches = [b.numpy() for (b,) in loader]
    np.testing.assert_array_equal(np.concatenate(batches), x.numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(loader)) == 2  # the second epoch warns no more
    with pytest.raises(TypeError, match="num_workers=0"):
        iter(cd.DataLoader(cd.TensorDataset(x), num_workers=2, worker_init_fn=_no_init))


def test_workers_refuse_device_data_and_unpicklable(device):
    with pytest.raises(TypeError, match="picklable"):
        iter(cd.DataLoader(range(4), num_workers=2, collate_fn=lambda b: b))
    with pytest.raises(TypeError, match="(?s)worker process 0.*device tensors"):
        next(iter(cd.DataLoader(range(4), num_workers=1, collate_fn=_collate_on_device)))
