#!/usr/bin/env python3
"""The Fashion-MNIST CNN trained with PyTorch: the script that fashion_mnist_cnn.py translates line by
line into tessera (same model, data, optimizer, learning-rate schedule and hyper-parameters).

torchvision's FashionMNIST wants its own folder layout; FashionMNIST below reads Debian's
dataset-fashion-mnist files (the MNIST layout, gzip-compressed) into a TensorDataset normalized as
tessera's dataset is (pixels in [0, 1], then the training set's mean 0.2860 and std 0.3530).

    python3 examples/python/fashion_mnist_cnn_torch.py --epochs 2

--init FILE.npz starts from the weights in FILE (numpy arrays by state_dict name, as
fashion_mnist_cnn.py --save-init writes them); --losses FILE.json writes every step's training loss.
"""
import argparse
import gzip
import json
import os
import time

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def FashionMNIST(root, train=True):
    prefix = "train" if train else "t10k"
    with gzip.open(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    x = (torch.from_numpy(images.astype(np.float32)) / 255 - 0.2860) / 0.3530
    return TensorDataset(x, torch.from_numpy(labels.astype(np.int64)))


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
    with torch.no_grad():
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

    torch.manual_seed(args.seed)
    train_set = FashionMNIST(args.data, train=True)
    test_set = FashionMNIST(args.data, train=False)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=not args.no_shuffle, drop_last=True,
                              generator=torch.Generator().manual_seed(args.seed))
    test_loader = DataLoader(test_set, batch_size=1000)

    net = Net()
    if args.init:
        net.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(args.init).items()})
    if args.save_init:
        np.savez(args.save_init, **{k: v.numpy() for k, v in net.state_dict().items()})
    net.to(args.device)
    optimizer = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * len(train_loader))

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
