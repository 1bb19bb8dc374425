#!/usr/bin/python3
"""Makes PyTorch's own NNAPI model of a float MobileNetV2 (the seed's exact path).

torchvision's quantizable MobileNetV2 with its modules fused (conv+bn+relu: the plain
model's hardtanh has no NNAPI conversion), seeded random weights (no download), traced
and converted with torch.backends._nnapi.prepare.convert_model_to_nnapi. Writes:
  OUT_DIR/mobilenet_v2_nnapi.pt      the TorchScript model holding the serialized NNAPI model
  OUT_DIR/mobilenet_v2_input.npy     a seeded NCHW input, [1,3,224,224]
  OUT_DIR/mobilenet_v2_eager.npy     eager PyTorch's output on it, [1,1000]
Usage: make_torch_nnapi_model.py OUT_DIR [--nhwc]   (--nhwc: the input is channels-last;
without it both variants are written)
"""
import os
import sys

import numpy as np

try:
    import torch
    import torchvision
    from torch.backends._nnapi.prepare import convert_model_to_nnapi
except ImportError as e:  # the tests that need the .pt then report skipped
    print(f"no torch/torchvision here ({e}); skipping")
    sys.exit(77)


def main():
    out_dir = sys.argv[1]
    variants = [True] if "--nhwc" in sys.argv[2:] else [False, True]
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    model = torchvision.models.quantization.mobilenet_v2(weights=None, quantize=False)
    # Random weights leave activations near 0 (outputs ~1e-10, a comparison that cannot
    # fail): batch-norm statistics from a few random batches keep every layer near unit
    # variance, so the logits are O(1).
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.rand(4, 3, 224, 224))
    model.eval()
    model.fuse_model()
    x = torch.rand(1, 3, 224, 224)
    with torch.no_grad():
        eager = model(x)
    traced = torch.jit.trace(model, x)
    for nhwc in variants:
        example = x.contiguous(memory_format=torch.channels_last) if nhwc else x.clone()
        if nhwc:
            example.nnapi_nhwc = True
        nnapi_model = convert_model_to_nnapi(traced, example)
        suffix = "_nhwc" if nhwc else ""
        nnapi_model.save(os.path.join(out_dir, f"mobilenet_v2_nnapi{suffix}.pt"))
    np.save(os.path.join(out_dir, "mobilenet_v2_input.npy"), x.numpy())
    np.save(os.path.join(out_dir, "mobilenet_v2_eager.npy"), eager.numpy())


if __name__ == "__main__":
    main()
