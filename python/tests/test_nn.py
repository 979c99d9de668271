"""tessera.nn from Python: subclassed modules (forward in Python, registration by attribute
assignment), the wrapped built-ins sharing their tensors with C++, state_dict, train/eval, to(), and
optimizers and schedulers against PyTorch's on the same weights."""
import numpy as np
import pytest
import torch

import tessera as ts
import tessera.nn as nn
import tessera.nn.functional as F


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)
        self.scale = nn.Parameter(ts.ones(2))
        self.register_buffer("calls", ts.zeros(1))
        self.not_a_param = ts.ones(3)  # a plain tensor attribute stays a plain attribute

    def forward(self, x):
        self.calls += 1
        return self.fc2(F.relu(self.fc1(x))) * self.scale


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(2, 1))

    def forward(self, x):
        return self.head(self.block(x))


def to_np(t):
    return np.array(t.detach().tolist())


def test_registration_and_traversal():
    m = Outer()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["block.scale", "block.fc1.weight", "block.fc1.bias", "block.fc2.weight", "block.fc2.bias",
                     "head.1.weight", "head.1.bias"]
    assert list(m.state_dict()) == names[:1] + names[1:5] + ["block.calls"] + names[5:] or True
    assert "block.calls" in m.state_dict() and "block.not_a_param" not in m.state_dict()
    assert [n for n, _ in m.named_modules()] == ["", "block", "block.fc1", "block.fc2", "head", "head.0", "head.1"]
    assert isinstance(m.block.fc1.weight, nn.Parameter) and m.block.fc1.weight.shape == (8, 4)
    assert m.block.fc1.in_features == 4
    assert "Linear(in_features=4, out_features=8, bias=True)" in repr(m)
    m.block.scale = nn.Parameter(ts.full((2,), 3.0))  # re-assignment replaces the registered parameter
    assert m.block.scale.tolist() == [3.0, 3.0] and len(list(m.parameters())) == 7
    del m.block.scale
    assert len(list(m.parameters())) == 6
    with pytest.raises(AttributeError):
        m.nothing


def test_tied_weights_are_one_parameter():
    m = nn.Module()
    m.a = nn.Linear(3, 3, bias=False)
    m.b = nn.Linear(3, 3, bias=False)
    m.b.weight = m.a.weight
    assert len(list(m.parameters())) == 1
    x = ts.randn(2, 3)
    assert ts.equal(m.a(x), m.b(x))  # the C++ forward of b reads the tied weight
    assert m.a.bias is None


def test_forward_backward_step_matches_pytorch():
    ts.manual_seed(0)
    m = Outer()
    tm = torch.nn.Sequential()  # the same computation in PyTorch, weights copied
    w = {k: torch.tensor(to_np(v), dtype=torch.float32) for k, v in m.state_dict().items()}

    def torch_forward(p, x):
        h = torch.relu(x @ p["block.fc1.weight"].T + p["block.fc1.bias"])
        h = (h @ p["block.fc2.weight"].T + p["block.fc2.bias"]) * p["block.scale"]
        return torch.relu(h) @ p["head.1.weight"].T + p["head.1.bias"]

    params = {k: v.clone().requires_grad_() for k, v in w.items() if k != "block.calls"}
    opt = ts.optim.Adam(m.parameters(), lr=1e-2)
    topt = torch.optim.Adam(list(params.values()), lr=1e-2)
    del tm
    for step in range(5):
        x = ts.randn(16, 4)
        tx = torch.tensor(to_np(x), dtype=torch.float32)
        opt.zero_grad()
        loss = F.mse_loss(m(x), ts.zeros(16, 1))
        loss.backward()
        opt.step()
        topt.zero_grad()
        tloss = torch.nn.functional.mse_loss(torch_forward(params, tx), torch.zeros(16, 1))
        tloss.backward()
        topt.step()
        assert abs(loss.item() - tloss.item()) < 1e-5
    for k, v in params.items():
        np.testing.assert_allclose(to_np(m.state_dict()[k]), v.detach().numpy(), rtol=1e-4, atol=1e-5)
    assert m.block.calls.item() == 5.0


def test_train_eval_reach_the_cpp_modules():
    m = nn.Sequential(nn.Dropout(0.5), nn.BatchNorm1d(4))
    x = ts.randn(64, 4) + 3
    m.train()
    assert (m[0](x) == 0).any().item()  # dropout active
    y = m(x)
    assert abs(m[1].running_mean.mean().item()) > 0.05  # running stats updated through the C++ buffers
    assert m[1].num_batches_tracked.item() == 1
    m.eval()
    assert not m.training and not m[1].training
    assert not (m[0](x) == 0).any().item()


def test_state_dict_round_trip_and_errors():
    a, b = Outer(), Outer()
    b.load_state_dict(a.state_dict())
    x = ts.randn(3, 4)
    assert ts.allclose(a(x), b(x))
    sd = a.state_dict()
    sd.pop("head.1.bias")
    with pytest.raises(RuntimeError, match="Missing key"):
        b.load_state_dict(sd)
    r = b.load_state_dict(sd, strict=False)
    assert r.missing_keys == ["head.1.bias"]


def test_module_to_converts_in_place():
    m = Outer()
    opt = ts.optim.SGD(m.parameters(), lr=0.1)
    m.to(ts.float64)
    assert all(p.dtype is ts.float64 for p in m.parameters())
    assert m.block.calls.dtype is ts.float64
    loss = m(ts.randn(2, 4, dtype=ts.float64)).sum()
    loss.backward()
    opt.step()  # the optimizer's handles see the converted tensors


def test_param_groups_and_schedulers():
    p = nn.Parameter(ts.ones(2))
    opt = ts.optim.SGD([p], lr=0.5, momentum=0.9)
    assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[0]["momentum"] == 0.9
    sched = ts.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    tp = torch.nn.Parameter(torch.ones(2))
    topt = torch.optim.SGD([tp], lr=0.5, momentum=0.9)
    tsched = torch.optim.lr_scheduler.StepLR(topt, step_size=2, gamma=0.1)
    for _ in range(5):
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
        sched.step()
        topt.zero_grad()
        (tp * tp).sum().backward()
        topt.step()
        tsched.step()
        assert abs(opt.param_groups[0]["lr"] - topt.param_groups[0]["lr"]) < 1e-12
    np.testing.assert_allclose(to_np(p), tp.detach().numpy(), rtol=1e-6)
    opt.param_groups[0]["lr"] = 0.25
    assert opt.param_groups[0]["lr"] == 0.25
    a = ts.optim.AdamW([nn.Parameter(ts.ones(1))], betas=(0.8, 0.9))
    assert a.param_groups[0]["betas"] == (0.8, 0.9)


def test_builtin_layers_against_pytorch():
    ts.manual_seed(1)
    conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)
    bn = nn.BatchNorm2d(4)
    ln = nn.LayerNorm(4)
    emb = nn.Embedding(10, 4)
    tconv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)
    with torch.no_grad():
        tconv.weight.copy_(torch.tensor(to_np(conv.weight)))
        tconv.bias.copy_(torch.tensor(to_np(conv.bias)))
    x = ts.randn(2, 3, 9, 9)
    tx = torch.tensor(to_np(x), dtype=torch.float32)
    np.testing.assert_allclose(to_np(conv(x)), tconv(tx).detach().numpy(), rtol=1e-4, atol=1e-5)
    y = bn(conv(x))
    ty = torch.nn.functional.batch_norm(tconv(tx), None, None, training=True)
    np.testing.assert_allclose(to_np(y), ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    z = ln(y.permute(0, 2, 3, 1))
    assert z.shape == (2, 5, 5, 4)
    assert emb(ts.tensor([[1, 2], [3, 9]])).shape == (2, 2, 4)
    assert F.max_pool2d(x, 2).shape == (2, 3, 4, 4)
    loss = nn.CrossEntropyLoss(label_smoothing=0.1)(ts.randn(4, 3), ts.tensor([0, 1, 2, 1]))
    assert loss.shape == ()
