#!/usr/bin/env python3
"""Decodes frames of a clip at native size for the fidelity check: NNNN.png (for nnsegment,
through GStreamer's pngdec) and NNNN.rgb (the same pixels raw, for the browser, so no image
decoder or colour management stands between the two runtimes).

  /usr/bin/python3 bench/fidelity/frames.py [--video assets/media/Megamind.avi] [--count 25]
"""
import argparse
import os
import sys

import cv2
import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--video", default=os.path.join(ROOT, "assets/media/Megamind.avi"))
    ap.add_argument("--out", default=os.path.join(ROOT, "assets/fidelity/frames"))
    ap.add_argument("--count", type=int, default=25, help="frames, spread evenly over the clip")
    args = ap.parse_args()
    cap = cv2.VideoCapture(args.video)
    if not cap.isOpened():
        sys.exit(f"frames.py: {args.video}: cannot open video")
    frames = []
    while True:
        ok, bgr = cap.read()
        if not ok:
            break
        frames.append(bgr)
    if len(frames) < args.count:
        sys.exit(f"frames.py: {args.video}: {len(frames)} frames, fewer than --count {args.count}")
    os.makedirs(args.out, exist_ok=True)
    step = (len(frames) - 1) / (args.count - 1)
    picks = sorted({round(i * step) for i in range(args.count)})
    for idx in picks:
        bgr = frames[idx]
        base = os.path.join(args.out, f"{idx:04d}")
        cv2.imwrite(base + ".png", bgr)
        np.ascontiguousarray(bgr[:, :, ::-1]).tofile(base + ".rgb")
    h, w = frames[0].shape[:2]
    with open(os.path.join(args.out, "frames.txt"), "w") as f:
        f.write(f"{w} {h}\n" + "".join(f"{idx:04d}\n" for idx in picks))
    print(f"frames.py: {len(picks)} of {len(frames)} frames ({w}x{h}) -> {args.out}")


if __name__ == "__main__":
    main()
