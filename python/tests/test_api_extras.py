"""The API pieces beside the tensor and the modules: several param groups per optimizer (against
PyTorch), optimizer and scheduler state_dicts, OneCycleLR, SequentialLR and ChainedScheduler (against
PyTorch), tessera.nn.init and nn.utils, tessera.compile over Python functions and modules,
tessera.profiler, and CUDA graphs (the capture on the GPU; without one, the error)."""
import json
import warnings

import pytest

import tessera as ts
import tessera.nn as nn
import tessera.nn.functional as F
from conftest import HAS_GPU


def net_pair(torch):
    """A tessera MLP and a PyTorch one with the same weights."""
    ts.manual_seed(0)
    a = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    b = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    b.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in a.state_dict().items()})
    return a, b


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_param_groups_match_torch(torch, name):
    a, b = net_pair(torch)
    kw = {"SGD": dict(momentum=0.9), "Adam": dict(betas=(0.8, 0.9)), "AdamW": dict(weight_decay=0.1),
          "RMSprop": dict(momentum=0.5), "Adagrad": dict(lr_decay=0.01)}[name]

    def groups(m):  # the weights at lr 0.05 with weight decay 0.01, the biases at the default lr 0.01
        return [{"params": [m[0].weight, m[2].weight], "lr": 0.05, "weight_decay": 0.01},
                {"params": [m[0].bias, m[2].bias]}]
    oa = getattr(ts.optim, name)(groups(a), lr=0.01, **kw)
    ob = getattr(torch.optim, name)(groups(b), lr=0.01, **kw)
    assert len(oa.param_groups) == 2 and oa.param_groups[0]["lr"] == 0.05 and oa.param_groups[1]["lr"] == 0.01
    assert oa.param_groups[0]["weight_decay"] == 0.01
    x = ts.randn(5, 6)
    y = ts.randint(0, 3, (5,))
    xt, yt = torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy())
    for _ in range(3):
        for opt, net, inp, tgt, lib in ((oa, a, x, y, F), (ob, b, xt, yt, torch.nn.functional)):
            opt.zero_grad()
            lib.cross_entropy(net(inp), tgt).backward()
            opt.step()
    for (k, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.allclose(torch.from_numpy(p.numpy()), q, rtol=1e-5, atol=1e-6), (name, k)


def test_add_param_group_and_extra_keys():
    w, v = nn.Parameter(ts.randn(3)), nn.Parameter(ts.randn(2))
    opt = ts.optim.SGD([{"params": [w], "name": "weights"}], lr=0.1)
    assert opt.param_groups[0]["name"] == "weights"  # a key the optimizer has no use for is kept, as in PyTorch
    opt.add_param_group({"params": v, "lr": 0.5})
    assert len(opt.param_groups) == 2 and opt.param_groups[1]["lr"] == 0.5
    v.grad = ts.ones(2)
    before = v.detach().clone()
    opt.step()
    assert ts.allclose(v.detach(), before - 0.5)
    with pytest.raises(ValueError, match="lr"):
        ts.optim.SGD([{"params": [ts.randn(2, requires_grad=True)], "lr": -1.0}])
    with pytest.raises(TypeError):
        ts.optim.SGD([{"lr": 0.1}])


def test_init_and_clip_grad(torch):
    w = nn.Parameter(ts.empty(200, 300))
    assert nn.init.normal_(w, mean=1.0, std=0.5) is w  # in place, the same object back
    assert abs(w.mean().item() - 1.0) < 0.01 and abs(w.std().item() - 0.5) < 0.01
    nn.init.zeros_(w)
    assert w.abs().sum().item() == 0
    nn.init.kaiming_uniform_(w, a=5 ** 0.5)
    bound = 1 / 300 ** 0.5
    assert w.abs().max().item() <= bound and w.abs().max().item() > 0.9 * bound
    assert nn.init.calculate_gain("tanh") == pytest.approx(5 / 3)

    ps = [nn.Parameter(ts.randn(4, 3)), nn.Parameter(ts.randn(5))]
    qs = [torch.nn.Parameter(torch.from_numpy(p.detach().numpy().copy())) for p in ps]
    for p, q in zip(ps, qs):
        p.grad = ts.randn(*p.shape) * 3
        q.grad = torch.from_numpy(p.grad.numpy().copy())
    n1 = nn.utils.clip_grad_norm_(ps, 1.0)
    n2 = torch.nn.utils.clip_grad_norm_(qs, 1.0)
    assert n1.item() == pytest.approx(n2.item(), rel=1e-6)
    for p, q in zip(ps, qs):
        assert torch.allclose(torch.from_numpy(p.grad.numpy()), q.grad, rtol=1e-6, atol=1e-7)
    nn.utils.clip_grad_value_(ps, 0.01)
    assert max(p.grad.abs().max().item() for p in ps) <= 0.01


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


def test_compile_module_and_function():
    ts.manual_seed(0)
    net = Net()
    fast = ts.compile(net)
    x = ts.randn(5, 8)
    for _ in range(3):
        out = fast(x)
        ref = net(x)
        assert ts.allclose(out, ref, rtol=1e-6, atol=1e-6)
    s = fast.stats()
    assert s["captures"] == 1 and s["graph_calls"] == 2 and s["variants"] == 1, s
    assert "linear" in fast.last_graph() or "addmm" in fast.last_graph() or "mm" in fast.last_graph()
    # The captured backward gives the eager gradients.
    net.zero_grad()
    fast(x).pow(2).sum().backward()
    g = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    net(x).pow(2).sum().backward()
    for a, p in zip(g, net.parameters()):
        assert ts.allclose(a, p.grad, rtol=1e-5, atol=1e-6)
    # A new shape is a new variant; the parameters are read at each call (in-place updates show).
    fast(ts.randn(3, 8))
    assert fast.stats()["variants"] == 2
    with ts.no_grad():
        net.fc2.bias.add_(1.0)
    assert ts.allclose(fast(x), net(x), rtol=1e-6, atol=1e-6)

    @ts.compile
    def f(a, b, scale):
        return (a * b + scale).relu(), a - b
    a, b = ts.randn(4), ts.randn(4)
    for _ in range(2):
        y, z = f(a, b, 0.5)
        assert ts.allclose(y, (a * b + 0.5).relu()) and ts.allclose(z, a - b)
    f(a, b, 2.0)  # numbers are guarded by value
    assert f.stats()["variants"] == 2
    assert "variant" in ts.compile_explain(f, a, b, 0.5)


def test_compile_batch_size_is_symbolic_after_two_captures():
    # dynamic=True: two batch sizes captured, then one graph.
    ts.manual_seed(0)
    net = Net()
    fast = ts.compile(net, dynamic=True)
    for b in (4, 6, 9, 13, 9):
        x = ts.randn(b, 8)
        assert ts.equal(fast(x), net(x)), b
    s = fast.stats()
    assert s["captures"] == 2 and s["symbolic_variants"] == 1 and s["batch_instances"] == 2, s
    static = ts.compile(net)  # dynamic=None: static
    for b in (4, 6, 9):
        static(ts.randn(b, 8))
    assert static.stats()["captures"] == 3 and static.stats()["symbolic_variants"] == 0


def test_compile_graph_break_and_errors():
    def g(x):
        if x.sum().item() > 0:  # a host read: a graph break
            return x * 2
        return x
    cg = ts.compile(g)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = cg(ts.ones(3))
    assert ts.equal(y, ts.full((3,), 2.0))
    assert any("runs eagerly" in str(m.message) for m in w), [str(m.message) for m in w]
    with pytest.raises(NotImplementedError, match="fullgraph"):
        ts.compile(g, fullgraph=True)(ts.ones(3))

    calls = []

    def bad(x):
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("raised inside the compiled function")
        return x + 1
    cb = ts.compile(bad)
    with pytest.raises(KeyError):
        cb(ts.ones(2))
    assert ts.equal(cb(ts.ones(2)), ts.full((2,), 2.0))  # the failed capture left nothing behind
    assert ts.equal(ts.ones(2) + 1, ts.full((2,), 2.0))
    with pytest.raises(ValueError, match="backend"):
        ts.compile(g, backend="nope")
    with pytest.raises(ValueError, match="mode"):
        ts.compile(g, mode="fastest")(ts.ones(1))


def test_profiler(tmp_path):
    from tessera.profiler import ProfilerActivity, profile, record_function
    a, b = ts.randn(32, 32), ts.randn(32, 32)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("my_block"):
            for _ in range(3):
                c = (a @ b).relu()
    rows = prof.key_averages()
    names = [rows[i].key for i in range(len(rows))]
    assert "my_block" in names and "relu" in names, names
    relu = rows.find("relu")
    assert relu.count == 3 and relu.cpu_time_total > 0
    block = rows.find("my_block")
    assert block.cpu_time_total >= relu.cpu_time_total
    table = rows.table(sort_by="self_cpu_time_total", row_limit=5)
    assert "Name" in table and "# of Calls" in table
    with pytest.raises(ValueError):
        rows.table(sort_by="nonsense")
    ev = [e for e in prof.events() if e["name"] == "relu"]
    assert ev and ev[0]["input_shapes"] == [[32, 32]]
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.load(open(path))
    assert any(e.get("name") == "my_block" for e in trace["traceEvents"])
    del c


@pytest.mark.skipif(HAS_GPU, reason="checks the error without a GPU")
def test_cuda_graph_without_gpu():
    with pytest.raises(RuntimeError):
        g = ts.cuda.CUDAGraph()
        g.capture_begin()
    assert not ts.cuda.is_current_stream_capturing()
    with pytest.raises(ts.DeviceError, match="must be CUDA tensors"):
        ts.cuda.make_graphed(lambda x: x * 2, [ts.randn(3)])
    assert issubclass(ts.DeviceError, RuntimeError)


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay():
    x = ts.randn(1024, device="cuda")
    w = ts.randn(1024, device="cuda")
    s = ts.cuda.Stream()
    with ts.cuda.stream(s):  # warm-up on a side stream
        y = (x * w).relu()
    ts.cuda.synchronize()
    g = ts.cuda.CUDAGraph()
    with ts.cuda.graph(g):
        y = (x * w).relu()
    x.copy_(ts.randn(1024, device="cuda"))
    g.replay()
    ts.cuda.synchronize()
    assert ts.allclose(y.cpu(), (x.cpu() * w.cpu()).relu())
    assert g.captured()


@pytest.mark.gpu
def test_make_graphed_training_step():
    ts.manual_seed(0)
    net = nn.Linear(16, 4).cuda()
    opt = ts.optim.SGD(net.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss
    x, y = ts.randn(8, 16, device="cuda"), ts.randint(0, 4, (8,), device="cuda")
    graphed = ts.cuda.make_graphed(step, [x, y], warmup_iters=3)
    before = net.weight.detach().clone()
    losses = [graphed(x, y)[0].item() for _ in range(5)]
    assert losses[-1] < losses[0] and not ts.equal(before, net.weight.detach())


def test_optimizer_state_dict_round_trip(torch):
    a, b = net_pair(torch)
    oa = ts.optim.AdamW([{"params": [a[0].weight, a[2].weight], "tag": "matrices"},
                         {"params": [a[0].bias, a[2].bias], "weight_decay": 0.0}], lr=0.01)
    ob = torch.optim.AdamW([{"params": [b[0].weight, b[2].weight], "tag": "matrices"},
                            {"params": [b[0].bias, b[2].bias], "weight_decay": 0.0}], lr=0.01)
    x = ts.randn(5, 6)
    y = ts.randint(0, 3, (5,))
    for opt, net, inp, tgt, lib in ((oa, a, x, y, F), (ob, b, torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy()),
                                                       torch.nn.functional)):
        opt.zero_grad()
        lib.cross_entropy(net(inp), tgt).backward()
        opt.step()
    sa, sb = oa.state_dict(), ob.state_dict()
    assert sorted(sa["state"]) == sorted(sb["state"]) == [0, 1, 2, 3]
    for i in sa["state"]:
        assert sorted(sa["state"][i]) == sorted(sb["state"][i])
        for k in sa["state"][i]:
            assert torch.allclose(torch.from_numpy(sa["state"][i][k].numpy()).to(sb["state"][i][k].dtype),
                                  sb["state"][i][k], rtol=1e-5, atol=1e-7), (i, k)
    for ga, gb in zip(sa["param_groups"], sb["param_groups"]):
        for k in ("lr", "betas", "eps", "weight_decay", "amsgrad", "params"):
            assert ga[k] == pytest.approx(gb[k]) if k != "betas" else tuple(ga[k]) == tuple(gb[k]), (k, ga[k], gb[k])
    assert sa["param_groups"][0]["tag"] == "matrices"
    # Into a fresh optimizer: the next step of both is the same.
    c = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    c.load_state_dict(a.state_dict())
    oc = ts.optim.AdamW([{"params": [c[0].weight, c[2].weight]}, {"params": [c[0].bias, c[2].bias]}], lr=0.5)
    oc.load_state_dict(sa)
    assert oc.param_groups[0]["lr"] == 0.01 and oc.param_groups[1]["weight_decay"] == 0.0
    assert oc.param_groups[0]["tag"] == "matrices"
    for opt, net in ((oa, a), (oc, c)):
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
    for p, q in zip(a.parameters(), c.parameters()):
        assert ts.equal(p.detach(), q.detach())


@pytest.mark.filterwarnings("ignore:The epoch parameter")  # PyTorch 1.13's SequentialLR warns about itself
def test_more_schedulers_match_torch(torch):
    def lrs(lib, make, steps=12):
        p = lib.zeros(3, requires_grad=True)
        opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
        sched = make(lib, opt)
        out = []
        for _ in range(steps):
            opt.step()
            sched.step()
            out.append(opt.param_groups[0]["lr"])
        return out, sched

    makers = {
        "OneCycleLR": lambda lib, o: lib.optim.lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=20),
        "SequentialLR": lambda lib, o: lib.optim.lr_scheduler.SequentialLR(
            o, [lib.optim.lr_scheduler.LinearLR(o, start_factor=0.1, total_iters=4),
                lib.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)], milestones=[4]),
        "ChainedScheduler": lambda lib, o: lib.optim.lr_scheduler.ChainedScheduler(
            [lib.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5), lib.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)]),
    }
    for name, make in makers.items():
        a, sa = lrs(ts, make)
        b, sb = lrs(torch, make)
        assert a == pytest.approx(b, rel=1e-12), name
        da, db = sa.state_dict(), sb.state_dict()
        for k in ("last_epoch", "_step_count", "base_lrs", "_last_lr"):  # the keys both keep (torch keeps more)
            if k in db:
                assert da[k] == pytest.approx(db[k], rel=1e-12), (name, k)
    # A scheduler's state round-trips.
    p = ts.zeros(2, requires_grad=True)
    opt = ts.optim.SGD([p], lr=0.1)
    s = ts.optim.lr_scheduler.StepLR(opt, step_size=2)
    for _ in range(5):
        s.step()
    s2 = ts.optim.lr_scheduler.StepLR(ts.optim.SGD([ts.zeros(2, requires_grad=True)], lr=0.1), step_size=2)
    s2.load_state_dict(s.state_dict())
    assert s2.last_epoch == 5 and s2.get_last_lr() == s.get_last_lr()


def test_dataloader_over_a_python_dataset():
    from tessera.utils.data import DataLoader, Dataset, TensorDataset, default_collate

    class Squares(Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return {"x": ts.full((2,), float(i)), "y": i * i, "name": f"n{i}"}

    batches = list(DataLoader(Squares(), batch_size=4))
    assert len(batches) == 3 and len(DataLoader(Squares(), batch_size=4, drop_last=True)) == 2
    assert batches[0]["x"].shape == (4, 2) and batches[0]["y"].tolist() == [0, 1, 4, 9]
    assert batches[2]["name"] == ["n8", "n9"] and batches[2]["y"].dtype == ts.int64
    a = [b["y"].tolist() for b in DataLoader(Squares(), batch_size=5, shuffle=True, seed=3)]
    b = [b["y"].tolist() for b in DataLoader(Squares(), batch_size=5, shuffle=True, seed=3)]
    assert a == b and sorted(a[0] + a[1]) == [i * i for i in range(10)] and a != [[0, 1, 4, 9, 16], [25, 36, 49, 64, 81]]
    assert isinstance(TensorDataset(ts.zeros(3)), Dataset)  # the C++ datasets are Datasets too
    ds = TensorDataset(ts.arange(6.0), ts.arange(6))
    x, y = next(iter(DataLoader(ds + ds, batch_size=12)))  # a ConcatDataset of C++ datasets, in Python
    assert x.tolist() == list(range(6)) * 2 and y.dtype == ts.int64
    assert default_collate([(1.5, [1, 2]), (2.5, [3, 4])])[1][1].tolist() == [2, 4]
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(Squares(), batch_size=2, num_workers=2)
