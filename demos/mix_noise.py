#!/usr/bin/env python3
"""Mixes a recorded noise into speech at a given SNR: the noisy input of the denoise demo.

    demos/mix_noise.py SPEECH.wav NOISE.wav [NOISE2.wav ...] --snr 5 -o NOISY.wav

All files are 16-bit PCM WAV at the same rate, mono (scripts/demo-audio.sh decodes and
resamples them with GStreamer first). The noise files are joined end to end and repeated
to the speech's length; the noise is scaled so that speech power / noise power over the
whole file is the SNR in dB. If the mix would clip, both are turned down together.
"""
import argparse
import wave

import numpy as np


def read(path):
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            raise SystemExit(f"{path}: expected 16-bit mono PCM, got {8 * w.getsampwidth()}-bit x {w.getnchannels()}")
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64) / 32768, w.getframerate()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("speech")
    ap.add_argument("noise", nargs="+")
    ap.add_argument("--snr", type=float, default=5.0, help="speech-to-noise ratio, dB")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    speech, rate = read(a.speech)
    parts = []
    for path in a.noise:
        n, r = read(path)
        if r != rate:
            raise SystemExit(f"{path}: {r} Hz, the speech is {rate} Hz")
        parts.append(n)
    noise = np.concatenate(parts)
    noise = np.tile(noise, int(np.ceil(len(speech) / len(noise))))[: len(speech)]
    ps, pn = np.mean(speech**2), np.mean(noise**2)
    if ps == 0 or pn == 0:
        raise SystemExit("silent speech or noise")
    mix = speech + noise * np.sqrt(ps / pn / 10 ** (a.snr / 10))
    peak = np.max(np.abs(mix))
    if peak > 0.99:
        mix *= 0.99 / peak
    with wave.open(a.out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.round(mix * 32767).astype("<i2").tobytes())
    print(f"mix_noise: {a.out}: {len(mix) / rate:.2f} s at {rate} Hz, SNR {a.snr:g} dB "
          f"(speech {10 * np.log10(ps):.1f} dBFS, noise {len(parts)} file(s))")


if __name__ == "__main__":
    main()
