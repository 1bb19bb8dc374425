#!/usr/bin/python3
"""Exports the ONNX reference models and their PyTorch goldens.

    /usr/bin/python3 scripts/make_reference_models.py [--force] [--assets DIR]

Writes assets/models/<name>.onnx and assets/golden/<name>/{input_0,output_0}.npy for
  mobilenet_v2               torchvision, weights=None, 1x3x224x224 -> [1,1000]
  lraspp_mobilenet_v3_large  torchvision, weights=None, 1x3x256x256 -> 'out' [1,21,256,256]
  gru_denoise                42 -> GRU(96) -> Linear(22) -> sigmoid, 1x10x42 -> [1,10,22]
Weights come from torch.manual_seed(0); the batch-norm statistics are calibrated on real
photos (train-mode passes over the JPEGs of Debian's opencv-doc, as training would set
them), so activations keep their scale through the network and the output depends on the
input (with the default statistics, zeros, noise and a photo gave the same output within
1.2e-7). Inputs are in the source layout (NCHW for images). A model whose files all exist
and were made by this version of the recipe (golden/<name>/recipe.txt) is skipped unless
--force is given.
Needs torch 1.13 + torchvision 0.14 (Debian's /usr/bin/python3 here) and opencv-doc.
"""
import argparse
import glob
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torchvision

OPSET = 13
# Bumped when the models or goldens change, so fetch-assets.sh remakes stale ones.
RECIPE = "bn-calibrated-on-photos-1"
PHOTOS = "/usr/share/doc/opencv-doc/examples/data"


class GruDenoise(nn.Module):
    """A small RNNoise-like gain estimator: features -> GRU -> per-band gains in (0, 1)."""

    def __init__(self, features=42, hidden=96, bands=22):
        super().__init__()
        self.gru = nn.GRU(features, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, bands)

    def forward(self, x):
        y, _ = self.gru(x)
        return torch.sigmoid(self.fc(y))


def photos(size):
    """The photos of opencv-doc's examples (BGR JPEGs), size x size, scaled to [-1, 1], NCHW."""
    import cv2
    files = sorted(glob.glob(os.path.join(PHOTOS, "*.jpg")))
    if len(files) < 8:
        sys.exit(f"make_reference_models.py: need the JPEGs of {PHOTOS} (apt-get install opencv-doc)")
    images = []
    for f in files:
        img = cv2.imread(f)
        if img is None or min(img.shape[:2]) < 64:
            continue
        img = cv2.resize(img[:, :, ::-1], (size, size), interpolation=cv2.INTER_AREA)
        images.append(img.astype(np.float32) / 127.5 - 1)
    return torch.from_numpy(np.stack(images).transpose(0, 3, 1, 2).copy())


def calibrate_batchnorm(model, images, seed):
    """Batch-norm scale and shift at random (so folding sees non-trivial values), running
    statistics measured in train mode on the photos and their mirror images."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.reset_running_stats()
            m.momentum = None  # a cumulative average over the passes
    model.train()
    with torch.no_grad():
        for batch in (images, torch.flip(images, dims=[3])):
            for chunk in torch.split(batch, 8):
                model(chunk)
    model.eval()


def build(name):
    torch.manual_seed(0)
    if name == "mobilenet_v2":
        model = torchvision.models.mobilenet_v2(weights=None)
        calibrate_batchnorm(model, photos(224), 1)
        x = torch.rand(1, 3, 224, 224, generator=torch.Generator().manual_seed(10)) * 2 - 1
        return model.eval(), x, ["output"]
    if name == "lraspp_mobilenet_v3_large":
        model = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
            weights=None, weights_backbone=None)
        calibrate_batchnorm(model, photos(256), 2)
        x = torch.rand(1, 3, 256, 256, generator=torch.Generator().manual_seed(11)) * 2 - 1
        return model.eval(), x, ["out"]
    if name == "gru_denoise":
        model = GruDenoise()
        x = torch.rand(1, 10, 42, generator=torch.Generator().manual_seed(12)) * 2 - 1
        return model.eval(), x, ["gains"]
    raise ValueError(name)


class OutOnly(nn.Module):
    """torchvision segmentation models return a dict; export only 'out'."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def export(name, assets, force):
    onnx_path = os.path.join(assets, "models", name + ".onnx")
    golden = os.path.join(assets, "golden", name)
    files = [onnx_path, os.path.join(golden, "input_0.npy"), os.path.join(golden, "output_0.npy")]
    recipe_file = os.path.join(golden, "recipe.txt")
    current = os.path.exists(recipe_file) and open(recipe_file).read().strip() == RECIPE
    if not force and current and all(os.path.exists(f) for f in files):
        print(f"{name}: present, skipped (--force to redo)")
        return
    os.makedirs(os.path.dirname(onnx_path), exist_ok=True)
    os.makedirs(golden, exist_ok=True)
    model, x, output_names = build(name)
    if name == "lraspp_mobilenet_v3_large":
        model = OutOnly(model).eval()
    with torch.no_grad():
        y = model(x)
    torch.onnx.export(model, (x,), onnx_path, opset_version=OPSET, input_names=["input"],
                      output_names=output_names, do_constant_folding=True)
    np.save(os.path.join(golden, "input_0.npy"), x.numpy().astype(np.float32))
    np.save(os.path.join(golden, "output_0.npy"), y.numpy().astype(np.float32))
    with open(recipe_file, "w") as f:
        f.write(RECIPE + "\n")
    print(f"{name}: {onnx_path} input {tuple(x.shape)} output {tuple(y.shape)}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--force", action="store_true", help="re-export even when the files exist")
    p.add_argument("--assets", default=os.path.join(here, "..", "assets"))
    p.add_argument("models", nargs="*", default=["mobilenet_v2", "lraspp_mobilenet_v3_large", "gru_denoise"])
    args = p.parse_args()
    torch.set_num_threads(1)
    for name in args.models:
        export(name, os.path.abspath(args.assets), args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
