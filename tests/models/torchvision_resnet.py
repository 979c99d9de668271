"""The outside reference for tessera's ResNet (tests/models/test_resnet_torchvision.cpp): torchvision's
resnet18 and resnet50 with seeded weights and non-trivial BatchNorm statistics, in eval mode, on a
seeded input. For each, OUT_DIR/<arch>.safetensors holds the state_dict under "model.<name>", the input
and torchvision's logits. usage: torchvision_resnet.py OUT_DIR"""
import os
import sys

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import safetensors_io  # noqa: E402


def main():
    out = sys.argv[1]
    for arch in ("resnet18", "resnet50"):
        torch.manual_seed(0)
        m = getattr(torchvision.models, arch)(num_classes=1000)
        with torch.no_grad():
            for mod in m.modules():
                if isinstance(mod, torch.nn.BatchNorm2d):  # eval mode must use these, not batch statistics
                    mod.running_mean.uniform_(-0.2, 0.2)
                    mod.running_var.uniform_(0.5, 1.5)
                    mod.weight.uniform_(0.5, 1.5)
                    mod.bias.uniform_(-0.2, 0.2)
        m.eval()
        x = torch.randn(2, 3, 64, 64)
        with torch.no_grad():
            y = m(x)
        tensors = {"model." + k: v for k, v in m.state_dict().items()}
        tensors["input"] = x
        tensors["logits"] = y
        safetensors_io.write(os.path.join(out, arch + ".safetensors"), tensors, {"torchvision": torchvision.__version__})


if __name__ == "__main__":
    main()
