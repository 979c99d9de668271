"""tessera.autograd from Python: backward, grad, no_grad / enable_grad / set_grad_enabled, hooks, and
gradients checked against PyTorch on the same values and against tessera's C++ gradcheck."""
import numpy as np
import pytest
import torch

import tessera as ts


def to_torch(x, requires_grad=False):
    return torch.tensor(np.array(x.detach().tolist()), dtype=torch.float64, requires_grad=requires_grad)


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.array(a.tolist()), b.detach().numpy(), rtol=tol, atol=tol)


def test_gradients_of_a_small_network_match_pytorch():
    ts.manual_seed(0)
    x = ts.randn(8, 5, dtype=ts.float64)
    w1 = ts.randn(5, 7, dtype=ts.float64, requires_grad=True)
    w2 = ts.randn(7, 3, dtype=ts.float64, requires_grad=True)
    y = ts.randint(0, 3, (8,))
    loss = ts.nn.functional.cross_entropy(ts.tanh(x @ w1).relu() @ w2, y) + (w1 ** 2).mean()
    loss.backward()

    tx, tw1, tw2 = to_torch(x), to_torch(w1, True), to_torch(w2, True)
    ty = torch.tensor(y.tolist())
    tloss = torch.nn.functional.cross_entropy(torch.tanh(tx @ tw1).relu() @ tw2, ty) + (tw1 ** 2).mean()
    tloss.backward()
    close(loss, tloss)
    close(w1.grad, tw1.grad)
    close(w2.grad, tw2.grad)
    assert w1.is_leaf and not loss.is_leaf and loss.grad_fn is not None


def test_autograd_grad_and_create_graph():
    x = ts.tensor([1.0, 2.0, 3.0], dtype=ts.float64, requires_grad=True)
    (g,) = ts.autograd.grad((x ** 3).sum(), x, create_graph=True)
    assert g.tolist() == [3.0, 12.0, 27.0]
    (gg,) = ts.autograd.grad(g.sum(), x)
    assert gg.tolist() == [6.0, 12.0, 18.0]
    assert x.grad is None
    a, b = ts.ones(2, requires_grad=True), ts.ones(2, requires_grad=True)
    ga, gb = ts.autograd.grad([(a * 2).sum(), (b * 3).sum()], [a, b])
    assert ga.tolist() == [2.0, 2.0] and gb.tolist() == [3.0, 3.0]
    ts.autograd.backward([(a * a).sum()])
    assert a.grad.tolist() == [2.0, 2.0]


def test_gradcheck_through_the_cpp_checker():
    x = ts.randn(3, 4, dtype=ts.float64, requires_grad=True)
    assert ts.autograd.gradcheck(lambda t: (t.sin() * t).softmax(-1), (x,))


def test_grad_mode_context_managers():
    x = ts.ones(2, requires_grad=True)
    with ts.no_grad():
        y = x * 2
        assert not ts.is_grad_enabled()
        with ts.enable_grad():
            z = x * 2
    assert not y.requires_grad and z.requires_grad and ts.is_grad_enabled()

    @ts.no_grad()
    def f(t):
        return t * 3
    assert not f(x).requires_grad
    with ts.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert ts.is_grad_enabled()
    try:
        with ts.no_grad():
            raise KeyError("x")
    except KeyError:
        pass
    assert ts.is_grad_enabled()


def test_requires_grad_grad_and_hooks():
    x = ts.ones(3)
    assert x.requires_grad_() is x and x.requires_grad
    seen = []
    h = x.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    (x * 2).sum().backward()
    assert seen == [[2.0, 2.0, 2.0]] and x.grad.tolist() == [20.0, 20.0, 20.0]
    h.remove()
    x.grad = None
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    y = x * 1
    y.retain_grad()
    y.sum().backward()
    assert y.grad.tolist() == [1.0, 1.0, 1.0]
    assert x.detach().requires_grad is False


def test_inplace_on_a_leaf_that_requires_grad_raises():
    x = ts.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="leaf Variable that requires grad"):
        x.add_(1)
