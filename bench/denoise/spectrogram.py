#!/usr/bin/env python3
"""Before/after spectrograms of two WAV files, stacked with a shared colour scale.

    bench/denoise/spectrogram.py BEFORE.wav AFTER.wav -o OUT.png [--title T] [--labels A B]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wavio import read_wav  # noqa: E402


def stft_db(x, rate, n_fft=512, hop=128):
    win = np.hanning(n_fft + 1)[:-1]
    if len(x) < n_fft:
        x = np.pad(x, (0, n_fft - len(x)))
    frames = np.lib.stride_tricks.sliding_window_view(x, n_fft)[::hop] * win
    mag = np.abs(np.fft.rfft(frames, axis=1)).T
    return 20 * np.log10(mag / (win.sum() / 2) + 1e-9)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("-o", "--output", required=True, help="PNG to write")
    ap.add_argument("--title", default="")
    ap.add_argument("--labels", nargs=2, default=["before (noisy)", "after (nndenoise)"])
    ap.add_argument("--max-khz", type=float, default=8.0, help="top of the frequency axis")
    a = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    specs = []
    for path in (a.before, a.after):
        if not os.path.isfile(path):
            sys.exit(f"spectrogram: {path}: no such file")
        try:
            x, rate = read_wav(path)
        except ValueError as e:
            sys.exit(f"spectrogram: {e}")
        n_fft = 512 if rate <= 16000 else 1024 if rate <= 24000 else 2048
        specs.append((stft_db(x, rate, n_fft, n_fft // 4), rate, len(x), n_fft // 4))
    top = max(s[0].max() for s in specs)
    fig, axes = plt.subplots(2, 1, figsize=(10, 6), sharex=True, constrained_layout=True)
    for ax, (S, rate, n, hop), label in zip(axes, specs, a.labels):
        im = ax.imshow(S, origin="lower", aspect="auto", cmap="magma", vmin=top - 80, vmax=top,
                       extent=[0, n / rate, 0, rate / 2000])
        ax.set_ylim(0, min(a.max_khz, rate / 2000))
        ax.set_ylabel("kHz")
        ax.set_title(label, loc="left", fontsize=10)
    axes[-1].set_xlabel("seconds")
    fig.colorbar(im, ax=axes, label="dB", shrink=0.8)
    if a.title:
        fig.suptitle(a.title)
    fig.savefig(a.output, dpi=100)
    print(f"spectrogram: wrote {a.output}")


if __name__ == "__main__":
    main()
