#!/usr/bin/env python3
"""nnsegment's masks against MediaPipe's own runtime, frame by frame.

For each frame of bench/fidelity/frames.py, runs the nnsegment element on the PNG

  gst-launch-1.0 filesrc location=F.png ! pngdec ! videoconvert ! video/x-raw,format=RGB
    ! nnsegment model=M output-mode=mask threshold=0 latency-budget=10000 delegate=cpu [sampling=S]
    ! filesink location=OUT.gray

and compares its GRAY8 mask (/255) with MediaPipe's float mask (bench/fidelity/
mediapipe_masks.mjs): IoU of the two masks thresholded at 0.5, and the mean absolute
difference (MAD) of the probabilities. Target: IoU >= 0.99 on every frame, MAD <= 0.01.
Exit status 1 when a frame misses it.

  /usr/bin/python3 bench/fidelity.py [--sampling auto|area|mediapipe] [--format RGB|I420|...]

Two measurements of the samplings themselves (no MediaPipe data needed for --stability):
  --stability            the whole clip through the element once per sampling: mean
                         frame-to-frame MAD and flipped-pixel share (flicker), scene cuts left out
  --robustness S N       each frame enlarged S times (bicubic) with Gaussian noise of sigma N
                         (a sharper, noisier camera): each sampling's mask there against its own
                         mask of the original frame (resolution and noise invariance)
Set up the data with: bash bench/fidelity/setup.sh
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
IOU_TARGET, MAD_TARGET = 0.99, 0.01
SAMPLINGS = ("mediapipe", "area")


def iou(a, b):
    fa, fb = a > 0.5, b > 0.5
    union = np.logical_or(fa, fb).sum()
    return 1.0 if union == 0 else float(np.logical_and(fa, fb).sum()) / union


class Element:
    """Runs nnsegment with gst-launch-1.0 and reads its GRAY8 masks."""

    def __init__(self, args):
        self.model, self.env = args.model, dict(os.environ, GST_PLUGIN_PATH=os.path.join(args.build, "plugins"))
        self.format, self.via = args.format, args.via

    def line(self, source, out, sampling):
        extra = "" if sampling == "auto" else f" sampling={sampling}"
        via = f"videoconvert ! video/x-raw,format={self.via} ! " if self.via else ""
        return (f"{source} ! {via}videoconvert ! video/x-raw,format={self.format} ! nnsegment model={self.model} "
                f"output-mode=mask threshold=0 latency-budget=10000 delegate=cpu qos=false{extra} "
                f"! filesink location={out}")

    def masks(self, source, w, h, sampling, tmp):
        out = os.path.join(tmp, "mask.gray")
        r = subprocess.run(["gst-launch-1.0", "-q"] + self.line(source, out, sampling).split(), env=self.env,
                           capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(out):
            sys.exit(f"fidelity.py: gst-launch failed on {source}:\n{r.stdout}{r.stderr}")
        stride = (w + 3) & ~3  # GRAY8 rows are 4-byte aligned
        data = np.fromfile(out, np.uint8)
        if data.size % (stride * h):
            sys.exit(f"fidelity.py: {source}: {data.size} bytes is not a number of {w}x{h} GRAY8 frames")
        return data.reshape(-1, h, stride)[:, :, :w].astype(np.float32) / 255.0

    def mask_of_png(self, path, w, h, sampling, tmp):
        return self.masks(f"filesrc location={path} ! pngdec", w, h, sampling, tmp)[0]


def load_frames(args, need_reference=True):
    frames_dir, ref_dir = os.path.join(args.data, "frames"), os.path.join(args.data, "mediapipe")
    listing = os.path.join(frames_dir, "frames.txt")
    if not os.path.exists(listing) or (need_reference and not os.path.isdir(ref_dir)):
        sys.exit(f"fidelity.py: no harness data in {args.data}: run bash bench/fidelity/setup.sh")
    size, *names = open(listing).read().split("\n")
    w, h = map(int, size.split())
    return frames_dir, ref_dir, w, h, [n for n in names if n]


def against_mediapipe(args, el):
    frames_dir, ref_dir, w, h, names = load_frames(args)
    print(f"# nnsegment vs MediaPipe ({open(os.path.join(ref_dir, 'source.txt')).read().strip()})")
    print("# " + el.line("filesrc location=F.png ! pngdec", "OUT.gray", args.sampling).replace(ROOT + "/", ""))
    print(f"{'frame':>6} {'IoU':>7} {'MAD':>7} {'ours':>6} {'mp':>6}")
    ious, mads, failed = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            ours = el.mask_of_png(os.path.join(frames_dir, name + ".png"), w, h, args.sampling, tmp)
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
    return 1 if failed else 0


def stability(args, el):
    video = os.path.join(ROOT, "assets/media/Megamind.avi")
    _, _, w, h, _ = load_frames(args, need_reference=False)
    print(f"# flicker: {os.path.relpath(video, ROOT)}, every frame, consecutive masks (scene cuts, MAD > 0.05, left out)")
    with tempfile.TemporaryDirectory() as tmp:
        for s in SAMPLINGS:
            m = el.masks(f"filesrc location={video} ! decodebin", w, h, s, tmp)
            diff = np.abs(m[1:] - m[:-1]).mean(axis=(1, 2))
            flips = ((m[1:] > 0.5) != (m[:-1] > 0.5)).mean(axis=(1, 2))
            keep = diff < 0.05
            print(f"{s:>9}: {len(m)} frames, frame-to-frame MAD mean {diff[keep].mean():.4f}, "
                  f"flipped pixels {flips[keep].mean():.4f} ({(~keep).sum()} cuts left out)", flush=True)
    return 0


def robustness(args, el, scale, sigma):
    import cv2
    frames_dir, _, w, h, names = load_frames(args, need_reference=False)
    rng = np.random.default_rng(1)
    print(f"# each frame x{scale} (bicubic) + Gaussian noise sigma {sigma}: mask there (area-shrunk back) "
          f"against the same sampling's mask of the original frame")
    stats = {s: [] for s in SAMPLINGS}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            png = os.path.join(frames_dir, name + ".png")
            big = cv2.resize(cv2.imread(png), None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
            big = np.clip(big + rng.normal(0, sigma, big.shape), 0, 255).astype(np.uint8)
            big_png = os.path.join(tmp, "big.png")
            cv2.imwrite(big_png, big, [cv2.IMWRITE_PNG_COMPRESSION, 1])
            for s in SAMPLINGS:
                clean = el.mask_of_png(png, w, h, s, tmp)
                m = el.mask_of_png(big_png, big.shape[1], big.shape[0], s, tmp)
                m = cv2.resize(m, (w, h), interpolation=cv2.INTER_AREA)
                stats[s].append((iou(m, clean), float(np.abs(m - clean).mean())))
    for s, v in stats.items():
        v = np.array(v)
        print(f"{s:>9}: IoU min {v[:, 0].min():.4f} median {np.median(v[:, 0]):.4f}; MAD mean {v[:, 1].mean():.4f}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "assets/models/selfie_segmentation.tflite"))
    ap.add_argument("--data", default=os.path.join(ROOT, "assets/fidelity"))
    ap.add_argument("--sampling", default="auto", choices=["auto", "area", "mediapipe"])
    ap.add_argument("--build", default=os.environ.get("NN_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--format", default="RGB", help="caps format nnsegment gets (RGB, BGRx, I420, NV12, ...)")
    ap.add_argument("--via", help="a format the frames pass through first (I420: as from a camera or decoder)")
    ap.add_argument("--stability", action="store_true", help="flicker of each sampling over the whole clip")
    ap.add_argument("--robustness", nargs=2, type=float, metavar=("SCALE", "NOISE"),
                    help="each sampling's invariance to a sharper, noisier frame")
    args = ap.parse_args()
    el = Element(args)
    if args.stability:
        return stability(args, el)
    if args.robustness:
        return robustness(args, el, *args.robustness)
    return against_mediapipe(args, el)


if __name__ == "__main__":
    sys.exit(main())
