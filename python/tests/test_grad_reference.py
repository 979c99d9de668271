"""Gradients computed from Python against tessera's C++ results: python_grad_reference (grad_reference.cpp,
built beside the module) differentiates models and ops through the C++ API and writes weights, inputs,
losses and gradients into a safetensors file; here the same weights and inputs go into the Python
models (the examples' Net and GPT, written with tessera.nn in Python, and an MLP) and ops, and the
gradients taken from Python must match. The C++ GPT2 runs its fused ops (add + layer norm, mlp_gelu,
the chunked linear_cross_entropy loss) where the Python GPT composes them; on the CPU both give the
same bits (measured: largest difference 0), and the tolerance, 1e-5 relative, is far below what a wrong
piece gives (the exact GELU in place of the tanh one: 7.7e-4 in ln_2's weight gradient)."""
import os
import subprocess
import sys

import pytest

import tessera as ts
import tessera.nn as nn
import tessera.nn.functional as F
from conftest import source_path

sys.path.insert(0, source_path("examples", "python"))
import byte_gpt  # noqa: E402
import fashion_mnist_cnn  # noqa: E402


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    exe = os.environ.get("TESSERA_GRAD_REFERENCE") or os.path.join(
        os.environ.get("TESSERA_BUILD_DIR", source_path("build")), "python", "python_grad_reference")
    if not os.path.exists(exe):
        pytest.fail(f"the C++ reference program {exe} is not built (cmake --build build --target python_grad_reference)")
    path = tmp_path_factory.mktemp("grad") / "reference.safetensors"
    subprocess.run([exe, str(path)], check=True)
    return ts.safetensors.load_file(str(path))


def close(a, b, rtol, atol, what):
    assert a.shape == b.shape, (what, a.shape, b.shape)
    err = (a - b).abs().max().item()
    assert ts.allclose(a, b, rtol=rtol, atol=atol), f"{what}: max abs difference {err:.3g}"


def load(model, ref, case):
    prefix = f"{case}.param."
    params = {k[len(prefix):]: v for k, v in ref.items() if k.startswith(prefix)}
    sd = {}
    for name in model.state_dict():
        if name in params:
            sd[name] = params[name]
        elif name == "lm_head.weight":  # tied to the token embedding: one tensor under two names
            sd[name] = params["transformer.wte.weight"]
    model.load_state_dict(sd)


def check_grads(model, ref, case, rtol, atol):
    n = 0
    for name, p in model.named_parameters():
        close(p.grad, ref[f"{case}.grad.{name}"], rtol, atol, f"{case} d loss / d {name}")
        n += 1
    assert n == len([k for k in ref if k.startswith(f"{case}.grad.")])


class MLP(nn.Module):  # tessera::models::MLP(20, {16, 16}, 5), written in Python
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 5))

    def forward(self, x):
        return self.layers(x.flatten(1))


@pytest.mark.parametrize("case,make", [("cnn", fashion_mnist_cnn.Net), ("mlp", MLP)])
def test_classifier_gradients_match_cxx(ref, case, make):
    net = make()
    load(net, ref, case)
    loss = F.cross_entropy(net(ref[f"{case}.in.x"]), ref[f"{case}.in.y"])
    loss.backward()
    close(loss.detach(), ref[f"{case}.loss"], 1e-6, 1e-6, f"{case} loss")
    check_grads(net, ref, case, 1e-5, 1e-6)


def test_gpt_gradients_match_cxx(ref):
    model = byte_gpt.GPT(n_layer=2, n_head=2, n_embd=32, block_size=16)
    load(model, ref, "gpt")
    _, loss = model(ref["gpt.in.idx"], ref["gpt.in.targets"])
    loss.backward()
    close(loss.detach(), ref["gpt.loss"], 1e-5, 1e-6, "gpt loss")
    check_grads(model, ref, "gpt", 1e-5, 1e-6)


OPS = {
    "layer_norm": lambda a: F.layer_norm(a["x"], (8,), a["w"], a["b"], 1e-5),
    "gelu_tanh": lambda a: F.gelu(a["x"], approximate="tanh"),
    "log_softmax": lambda a: F.log_softmax(a["x"], dim=1),
    "sdpa_causal": lambda a: F.scaled_dot_product_attention(a["q"], a["k"], a["v"], is_causal=True),
    "embedding": lambda a: F.embedding(a["idx"], a["w"]),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_op_gradients_match_cxx(ref, op):
    prefix = f"ops.in.{op}_"
    inputs = {k[len(prefix):]: v.clone() for k, v in ref.items() if k.startswith(prefix)}
    for t in inputs.values():
        if t.is_floating_point():
            t.requires_grad_(True)
    loss = (OPS[op](inputs) * ref[f"ops.in.r_{op}"]).sum()
    loss.backward()
    close(loss.detach(), ref[f"ops.loss.{op}"], 1e-6, 1e-5, f"{op} loss")
    checked = 0
    for name, t in inputs.items():
        if t.requires_grad:
            close(t.grad, ref[f"ops.grad.{op}_{name}"], 1e-6, 1e-6, f"{op} d loss / d {name}")
            checked += 1
    assert checked > 0
