#!/usr/bin/env python3
"""DTLN denoising with the numpy TFLite interpreter: the benchmark's independent oracle.

    bench/denoise/dtln_numpy.py IN.wav OUT.wav [--models DIR] [--align]

The streaming loop of DTLN (Westhausen & Meyer, Interspeech 2020), as the authors'
real-time TFLite script runs it: 16 kHz, a 512-sample block every 128 samples, no
analysis window; stage 1 maps the block's rFFT magnitude (257 bins) and its LSTM state to
a mask; the masked spectrum (noisy phase) goes back to time by irFFT; stage 2 maps that
block and its own state to a 512-sample block, overlap-added into the output. States start
at zero and are carried hop to hop. The output is the stream delayed by block - hop
(384 samples, 24 ms), the same length as the input (nnpipe's StreamProcessor convention);
--align removes the delay (the tail is flushed with zeros).

Input must be mono 16 kHz (other rates are refused: resample first, as the element's
caps make audioresample do). Output is float32 WAV so the comparison with nndenoise is
not limited by 16-bit quantisation.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tflite_numpy import TFLiteModel  # noqa: E402
from wavio import read_wav, write_wav  # noqa: E402

RATE, BLOCK, HOP = 16000, 512, 128
LATENCY = BLOCK - HOP
DEFAULT_MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "assets", "models")


def model_paths(folder):
    """The two stages in folder: dtln_1/2.tflite (scripts/fetch-assets.sh) or model_1/2.tflite (the npm package)."""
    for stem in ("dtln_{}.tflite", "model_{}.tflite"):
        paths = [os.path.join(folder, stem.format(i)) for i in (1, 2)]
        if all(os.path.isfile(p) for p in paths):
            return paths
    return None


class DTLN:
    def __init__(self, model_1, model_2):
        self.m1, self.m2 = TFLiteModel(model_1), TFLiteModel(model_2)
        # The framing is checked against the files, not assumed: stage 1 takes BLOCK/2+1
        # magnitudes, stage 2 a BLOCK-sample frame, each with one state tensor.
        (_, mag_shape), (_, s1_shape) = self.m1.input_shapes()
        (_, blk_shape), (_, s2_shape) = self.m2.input_shapes()
        if mag_shape[-1] != BLOCK // 2 + 1 or blk_shape[-1] != BLOCK:
            raise ValueError(f"DTLN files want {mag_shape} and {blk_shape}, expected block {BLOCK}")
        self.s1_shape, self.s2_shape = s1_shape, s2_shape
        self.reset()

    def reset(self):
        self.state1 = np.zeros(self.s1_shape, np.float32)
        self.state2 = np.zeros(self.s2_shape, np.float32)
        self.inbuf = np.zeros(BLOCK, np.float32)
        self.outbuf = np.zeros(BLOCK, np.float32)

    def hop(self, x):
        """Takes HOP samples, returns HOP samples (delayed by LATENCY)."""
        self.inbuf = np.concatenate([self.inbuf[HOP:], np.asarray(x, np.float32)])
        spec = np.fft.rfft(self.inbuf.astype(np.float64))
        mag = np.abs(spec).astype(np.float32).reshape(1, 1, -1)
        mask, self.state1 = self.m1.run(mag, self.state1)
        # mag * mask * e^(j phase) == spec * mask (where mag > 0; both are 0 where it is 0)
        est = np.fft.irfft(spec * mask.reshape(-1).astype(np.float64), BLOCK).astype(np.float32)
        block, self.state2 = self.m2.run(est.reshape(1, 1, -1), self.state2)
        self.outbuf = np.concatenate([self.outbuf[HOP:], np.zeros(HOP, np.float32)]) + block.reshape(-1)
        return self.outbuf[:HOP].copy()

    def process(self, x, align=False):
        n = len(x)
        total = n + (LATENCY if align else 0)
        padded = np.zeros(-(-total // HOP) * HOP, np.float32)
        padded[:n] = x
        out = np.concatenate([self.hop(padded[i:i + HOP]) for i in range(0, len(padded), HOP)])
        return out[LATENCY:LATENCY + n] if align else out[:n]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--models", default=DEFAULT_MODELS,
                    help="folder with dtln_1.tflite and dtln_2.tflite (or model_1/model_2.tflite)")
    ap.add_argument("--align", action="store_true", help="remove the 384-sample algorithmic delay")
    a = ap.parse_args()
    paths = model_paths(a.models)
    if paths is None:
        sys.exit(f"dtln_numpy: {a.models}: no dtln_1/2.tflite or model_1/2.tflite (scripts/fetch-assets.sh fetches them)")
    if not os.path.isfile(a.input):
        sys.exit(f"dtln_numpy: {a.input}: no such file")
    try:
        x, rate = read_wav(a.input)
    except ValueError as e:
        sys.exit(f"dtln_numpy: {e}")
    if rate != RATE:
        sys.exit(f"dtln_numpy: {a.input}: {rate} Hz, DTLN takes {RATE} Hz (resample first)")
    y = DTLN(*paths).process(x, align=a.align)
    write_wav(a.output, y, RATE, float32=True)


if __name__ == "__main__":
    main()
