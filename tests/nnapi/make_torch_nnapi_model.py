#!/usr/bin/python3
"""Makes PyTorch's own NNAPI model of a float MobileNetV2 (the seed's exact path).

torchvision's quantizable MobileNetV2 with its modules fused (conv+bn+relu: the plain
model's hardtanh has no NNAPI conversion), seeded random weights (no download), traced
and converted with torch.backends._nnapi.prepare.convert_model_to_nnapi. Writes:
  OUT_DIR/mobilenet_v2_nnapi.pt      the TorchScript model holding the serialized NNAPI model
  OUT_DIR/mobilenet_v2_input.npy     a seeded NCHW input, [1,3,224,224]
  OUT_DIR/mobilenet_v2_eager.npy     eager PyTorch's output on it, [1,1000]
And the qnnpack post-training-quantized MobileNetV2 (same seeded weights, batch-norm
statistics and quantization ranges calibrated on real photos from Debian's opencv-doc, the
test input a photo not among them; PyTorch's converter wants its quantized input NHWC):
  OUT_DIR/mobilenet_v2_q_nnapi.pt    quantized NNAPI model (QUANTIZE, QUANT8 conv/add/pool/FC,
                                     int32 bias, DEQUANTIZE)
  OUT_DIR/mobilenet_v2_q_input.npy   the test photo, NCHW normalized, [1,3,224,224]
  OUT_DIR/mobilenet_v2_q_eager.npy   eager quantized PyTorch's output on it, [1,1000]
  OUT_DIR/mobilenet_v2_q_scale.txt   the output's quantization step
Usage: make_torch_nnapi_model.py OUT_DIR [--nhwc]   (--nhwc: the input is channels-last;
without it both variants are written)
"""
import glob
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
    make_quantized(out_dir)


PHOTOS = "/usr/share/doc/opencv-doc/examples/data/*.jpg"
TEST_PHOTO = "/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg"


def load_photo(path):
    import cv2
    img = cv2.imread(path)
    if img is None:
        return None
    img = cv2.resize(cv2.cvtColor(img, cv2.COLOR_BGR2RGB), (224, 224), interpolation=cv2.INTER_AREA)
    img = (img.astype(np.float32) / 255 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
    return torch.from_numpy(img.transpose(2, 0, 1).astype(np.float32))


def make_quantized(out_dir):
    photos = [p for p in (load_photo(f) for f in sorted(glob.glob(PHOTOS))[:16]) if p is not None]
    test = load_photo(TEST_PHOTO) if os.path.exists(TEST_PHOTO) else None
    if len(photos) < 8 or test is None:
        print(f"too few photos ({len(photos)} in {PHOTOS}, test photo {TEST_PHOTO}); no quantized model")
        return
    torch.backends.quantized.engine = "qnnpack"
    torch.manual_seed(0)
    model = torchvision.models.quantization.mobilenet_v2(weights=None, quantize=False)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None
    calibration = torch.stack(photos)
    model.train()
    with torch.no_grad():
        model(calibration)
    model.eval()
    model.fuse_model()
    model.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
    torch.ao.quantization.prepare(model, inplace=True)
    with torch.no_grad():
        model(calibration)
    torch.ao.quantization.convert(model, inplace=True)
    x = test[None]
    with torch.no_grad():
        eager = model(x)
    traced = torch.jit.trace(model, x)
    example = x.contiguous(memory_format=torch.channels_last)
    example.nnapi_nhwc = True
    convert_model_to_nnapi(traced, example).save(os.path.join(out_dir, "mobilenet_v2_q_nnapi.pt"))
    np.save(os.path.join(out_dir, "mobilenet_v2_q_input.npy"), x.numpy())
    np.save(os.path.join(out_dir, "mobilenet_v2_q_eager.npy"), eager.numpy())
    with open(os.path.join(out_dir, "mobilenet_v2_q_scale.txt"), "w") as f:
        f.write(f"{model.classifier[1].scale}\n")


if __name__ == "__main__":
    main()
