#!/usr/bin/env python3
"""nnsegment's masks against MediaPipe's own runtime, frame by frame.

For each frame of bench/fidelity/frames.py, runs the nnsegment element on the PNG

  gst-launch-1.0 filesrc location=F.png ! pngdec ! videoconvert ! video/x-raw,format=RGB
    ! nnsegment model=M output-mode=mask threshold=0 latency-budget=10000 [sampling=S]
    ! filesink location=OUT.gray

and compares its GRAY8 mask (/255) with MediaPipe's float mask (bench/fidelity/
mediapipe_masks.mjs): IoU of the two masks thresholded at 0.5, and the mean absolute
difference of the probabilities. Target: IoU >= 0.99 on every frame, MAD <= 0.01.

  /usr/bin/python3 bench/fidelity.py [--sampling auto|area|mediapipe] [--model M]
Exit status 1 when a frame misses the target. Set up the data with
  bash bench/fidelity/setup.sh
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
IOU_TARGET, MAD_TARGET = 0.99, 0.01


def iou(a, b):
    fa, fb = a > 0.5, b > 0.5
    union = np.logical_or(fa, fb).sum()
    return 1.0 if union == 0 else float(np.logical_and(fa, fb).sum()) / union


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "assets/models/selfie_segmentation.tflite"))
    ap.add_argument("--data", default=os.path.join(ROOT, "assets/fidelity"))
    ap.add_argument("--sampling", default="auto", choices=["auto", "area", "mediapipe"])
    ap.add_argument("--build", default=os.environ.get("NN_BUILD_DIR", os.path.join(ROOT, "build")))
    args = ap.parse_args()
    frames_dir, ref_dir = os.path.join(args.data, "frames"), os.path.join(args.data, "mediapipe")
    listing = os.path.join(frames_dir, "frames.txt")
    if not os.path.exists(listing) or not os.path.isdir(ref_dir):
        sys.exit(f"fidelity.py: no harness data in {args.data}: run bash bench/fidelity/setup.sh")
    size, *names = open(listing).read().split("\n")
    w, h = map(int, size.split())
    names = [n for n in names if n]
    env = dict(os.environ, GST_PLUGIN_PATH=os.path.join(args.build, "plugins"))
    sampling = "" if args.sampling == "auto" else f" sampling={args.sampling}"
    print(f"# nnsegment vs MediaPipe ({open(os.path.join(ref_dir, 'source.txt')).read().strip()})")
    print(f"# gst-launch-1.0 filesrc location=F.png ! pngdec ! videoconvert ! video/x-raw,format=RGB ! "
          f"nnsegment model={os.path.relpath(args.model, ROOT)} output-mode=mask threshold=0 "
          f"latency-budget=10000{sampling} ! filesink")
    print(f"{'frame':>6} {'IoU':>7} {'MAD':>7} {'ours':>6} {'mp':>6}")
    ious, mads, failed = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            out = os.path.join(tmp, name + ".gray")
            line = (f"filesrc location={os.path.join(frames_dir, name + '.png')} ! pngdec ! videoconvert ! "
                    f"video/x-raw,format=RGB ! nnsegment model={args.model} output-mode=mask threshold=0 "
                    f"latency-budget=10000 delegate=cpu{sampling} ! filesink location={out}")
            r = subprocess.run(["gst-launch-1.0", "-q"] + line.split(), env=env, capture_output=True, text=True)
            if r.returncode != 0 or not os.path.exists(out):
                sys.exit(f"fidelity.py: frame {name}: gst-launch failed:\n{r.stdout}{r.stderr}")
            data = np.fromfile(out, np.uint8)
            stride = (w + 3) & ~3  # GRAY8 rows are 4-byte aligned
            if data.size != stride * h:
                sys.exit(f"fidelity.py: frame {name}: {data.size} bytes, expected {stride * h}")
            ours = data.reshape(h, stride)[:, :w].astype(np.float32) / 255.0
            ref = np.load(os.path.join(ref_dir, name + ".npy"))
            i, mad = iou(ours, ref), float(np.abs(ours - ref).mean())
            ok = i >= IOU_TARGET and mad <= MAD_TARGET
            failed += not ok
            ious.append(i)
            mads.append(mad)
            print(f"{name:>6} {i:7.4f} {mad:7.4f} {(ours > 0.5).mean():6.3f} {(ref > 0.5).mean():6.3f}"
                  f"{'' if ok else '  MISS'}", flush=True)
    print(f"{len(names)} frames: IoU min {min(ious):.4f} median {np.median(ious):.4f}; "
          f"MAD max {max(mads):.4f} mean {np.mean(mads):.4f}; {failed} below target "
          f"(IoU >= {IOU_TARGET}, MAD <= {MAD_TARGET})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
