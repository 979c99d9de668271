#!/usr/bin/env python3
"""The Fashion-MNIST CNN trained with tessera from Python: a line-by-line translation of
fashion_mnist_cnn_torch.py, the same script in PyTorch (same model, data, optimizer, learning-rate
schedule and hyper-parameters). A diff of the two files shows what differs between the APIs: the
imports, the dataset (tessera reads Debian's dataset-fashion-mnist files itself) and the loader's seed.

The model is the CNN of the C++ API (tessera::models::CNN, `tessera train --model cnn`): two 3x3
convolutions (32 and 64 channels), each followed by ReLU and 2x2 max pooling, then Linear(1600, 128),
ReLU, Linear(128, 10); AdamW (lr 1e-3, weight decay 0.01), cosine annealing over the run, batch 64.

    PYTHONPATH=build/python python3 examples/python/fashion_mnist_cnn.py --epochs 2
    PYTHONPATH=build/python python3 examples/python/fashion_mnist_cnn.py --steps 300   # a short run

--init FILE.npz starts from the weights in FILE (numpy arrays by state_dict name, what --save-init
writes), so that the two scripts can start from the same weights; --losses FILE.json writes every
step's training loss.
"""
import argparse
import json
import time

import numpy as np

import tessera as ts
import tessera.nn as nn
import tessera.nn.functional as F
from tessera.utils.data import DataLoader, FashionMNIST


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(64 * 5 * 5, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):  # (B, 1, 28, 28)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # (B, 32, 13, 13)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # (B, 64, 5, 5)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)  # (B, 10) logits


def evaluate(net, loader, device):
    net.eval()
    correct, total = 0, 0
    with ts.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            correct += (net(x).argmax(1) == y).sum().item()
            total += y.numel()
    net.train()
    return correct / total


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: run every epoch)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-shuffle", action="store_true", help="the training set in file order")
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--device", default="cpu")
    p.add_argument("--init", help="initial weights: an .npz of numpy arrays by state_dict name")
    p.add_argument("--save-init", help="write the initial weights there (.npz) before training")
    p.add_argument("--losses", help="write every step's loss there (JSON list)")
    args = p.parse_args(argv)

    ts.manual_seed(args.seed)
    train_set = FashionMNIST(args.data, train=True)
    test_set = FashionMNIST(args.data, train=False)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=not args.no_shuffle, drop_last=True,
                              seed=args.seed)
    test_loader = DataLoader(test_set, batch_size=1000)

    net = Net()
    if args.init:
        net.load_state_dict({k: ts.from_numpy(v) for k, v in np.load(args.init).items()})
    if args.save_init:
        np.savez(args.save_init, **{k: v.numpy() for k, v in net.state_dict().items()})
    net.to(args.device)
    optimizer = ts.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    scheduler = ts.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * len(train_loader))

    losses = []
    step = 0
    t0 = time.time()
    for epoch in range(args.epochs):
        for x, y in train_loader:
            x, y = x.to(args.device), y.to(args.device)
            optimizer.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            step += 1
            if step % args.log_every == 0:
                mean = sum(losses[-args.log_every:]) / args.log_every
                print(f"epoch {epoch + 1} step {step} | loss {mean:.4f} | {step / (time.time() - t0):.1f} steps/s", flush=True)
            if step == args.steps:
                break
        if step == args.steps:
            break
        print(f"epoch {epoch + 1}: test accuracy {evaluate(net, test_loader, args.device):.4f}", flush=True)

    if args.losses:
        with open(args.losses, "w") as f:
            json.dump(losses, f)
    return losses


if __name__ == "__main__":
    main()
