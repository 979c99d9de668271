"""Training the Fashion-MNIST CNN from Python for a few hundred steps lowers the loss (Debian's
dataset-fashion-mnist; the same network as tessera's C++ CNN: conv-relu-pool x2, linear x2)."""
import os

import pytest

import tessera as ts
import tessera.nn as nn
import tessera.nn.functional as F

ROOT = "/usr/share/datasets/fashion-mnist"


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3)
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.fc1 = nn.Linear(16 * 5 * 5, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, "t10k-images-idx3-ubyte.gz")), reason="dataset-fashion-mnist missing")
def test_cnn_loss_falls():
    ts.manual_seed(0)
    data = ts.utils.data.FashionMNIST(ROOT, train=False)
    loader = ts.utils.data.DataLoader(data, batch_size=32, shuffle=True, seed=0, drop_last=True)
    net = CNN()
    opt = ts.optim.AdamW(net.parameters(), lr=2e-3)
    losses = []
    for step, (x, y) in enumerate(loader):
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step == 299:
            break
    first, last = sum(losses[:30]) / 30, sum(losses[-30:]) / 30
    # Measured: 1.73 over the first 30 steps, 0.62 over the last 30.
    assert losses[0] > 2.0 and last < 0.6 * first and last < 0.9, (losses[0], first, last)
