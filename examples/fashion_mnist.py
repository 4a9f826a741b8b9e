"""Fashion-MNIST for the Python examples, benchmarks and tests: the IDX
reader, the normalised training set, and the CNN of
examples/train_fashion_mnist.cpp (Debian's dataset-fashion-mnist)."""
import gzip
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    if magic >> 8 != 0x08:
        raise RuntimeError(f"{path}: not an IDX file of bytes")
    nd = magic & 0xFF
    dims = struct.unpack(">" + "I" * nd, data[4:4 + 4 * nd])
    return torch.frombuffer(bytearray(data[4 + 4 * nd:]), dtype=torch.uint8).reshape(dims)


def load_train(d=DATA, n=None, split="train"):
    """The first n (all) images of `split` ("train", "t10k"), normalised, and
    their labels."""
    images = read_idx(os.path.join(d, f"{split}-images-idx3-ubyte.gz"))[:n]
    labels = read_idx(os.path.join(d, f"{split}-labels-idx1-ubyte.gz"))[:n]
    images = images.unsqueeze(1).float().div_(255.0).sub_(0.2860).div_(0.3530)
    return images, labels.long()


class Cnn(nn.Module):
    """The CNN of examples/train_fashion_mnist.cpp."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(F.dropout(x, 0.25, self.training))
