#!/usr/bin/env python3
"""nnpipe's DTLN (nnrun, and the nndenoise element through gst-launch) against the numpy
oracle (bench/denoise/dtln_numpy.py): each output must equal the oracle's, SI-SDR >= 60 dB.

    bench/denoise/compare_oracle.py --model dtln.nnapi --tflite-dir DIR --speech CLIP.wav \
        [--nnrun PATH] [--plugin-dir DIR] [--min-db 60]

Inputs: the speech clip resampled to 16 kHz, alone and with seeded pink noise at 5 dB SNR
(no downloads). nnpipe's outputs are delay-compensated (lined up with the input); the
oracle's is the raw stream, 384 samples late: the comparison finds the lag by
cross-correlation, requires it to be exactly the model's delay, and compares the overlap
sample for sample. The element runs with a 10 s latency budget: equality is under test
here, deadlines in tests/plugins. Exit 0 only when every comparison passes; a missing model file is
reported and exits 77 (ctest SKIP_RETURN_CODE), anything else that fails exits 1.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import metrics as M  # noqa: E402
from dtln_numpy import DTLN, LATENCY, RATE  # noqa: E402
from wavio import read_wav, resample, write_wav  # noqa: E402


def inputs(speech_path, tmp):
    x, r = read_wav(speech_path)
    x = resample(x, r, RATE)
    x = 0.1 * x / np.sqrt(np.mean(x ** 2))
    rng = np.random.default_rng(15)
    X = np.fft.rfft(rng.standard_normal(len(x)))
    X[1:] /= np.sqrt(np.arange(1, len(X)))
    X[0] = 0
    n = np.fft.irfft(X, len(x))
    n *= np.sqrt(np.mean(x ** 2) / np.mean(n ** 2) / 10 ** 0.5)
    out = {}
    for name, sig in (("clean", x), ("pink_5dB", x + n)):
        p = os.path.join(tmp, f"{name}.wav")
        write_wav(p, sig, RATE, float32=True)
        out[name] = p
    return out


def run_nnrun(nnrun, model, wav, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    r = subprocess.run([nnrun, model, "--input", wav, "--save-outputs", d], capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"nnrun failed: {(r.stdout + r.stderr)[-500:]}")
    return read_wav(os.path.join(d, "output_0.wav"))[0], ""


def run_element(plugin_dir, model, wav, tmp):
    out = os.path.join(tmp, "element.wav")
    env = dict(os.environ, GST_PLUGIN_PATH=plugin_dir)
    cmd = ["gst-launch-1.0", "-m", "filesrc", f"location={wav}", "!", "decodebin", "!", "audioconvert", "!",
           "audioresample", "!", "nndenoise", f"model={model}", "stats-interval=1",
           # equality, not deadlines, is under test: a loaded machine must not bypass hops
           "latency-budget=10000", "!", "audioconvert", "!",
           "audio/x-raw,format=F32LE", "!", "wavenc", "!", "filesink", f"location={out}"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"gst-launch nndenoise failed: {(r.stdout + r.stderr)[-500:]}")
    late = re.findall(r"hops-(?:late|bypassed)=\(guint64\)(\d+)", r.stdout)
    note = f"hops late or bypassed: {sum(map(int, late[-2:]))}" if late else "no stats message"
    return read_wav(out)[0], note


def compare(oracle_raw, got, n):
    """(lag, SI-SDR over the overlap) of got (compensated) against the raw oracle stream."""
    lag = M.lag(got[:n], oracle_raw[:n], 2 * LATENCY)
    ref = oracle_raw[lag:n] if lag >= 0 else oracle_raw[:n + lag]
    est = got[:n - lag] if lag >= 0 else got[-lag:n]
    return lag, M.si_sdr(ref, est), float(np.abs(ref - est).max())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tflite-dir", required=True, help="holds dtln_1.tflite and dtln_2.tflite")
    ap.add_argument("--speech", required=True)
    ap.add_argument("--nnrun")
    ap.add_argument("--plugin-dir")
    ap.add_argument("--min-db", type=float, default=60.0)
    a = ap.parse_args()
    tfl = [os.path.join(a.tflite_dir, f"dtln_{i}.tflite") for i in (1, 2)]
    missing = [p for p in [a.model] + tfl + [a.speech] if not os.path.isfile(p)]
    if missing:
        print(f"compare_oracle: SKIPPED: missing {', '.join(missing)} (scripts/fetch-assets.sh fetches the "
              "DTLN stages and clip; ctest's make_dtln_nnapi packs dtln.nnapi)")
        sys.exit(77)
    if not a.nnrun and not a.plugin_dir:
        sys.exit("compare_oracle: give --nnrun and/or --plugin-dir")
    tmp = tempfile.mkdtemp(prefix="dtln_oracle_")
    dtln = DTLN(*tfl)
    failures = 0
    for name, wav in inputs(a.speech, tmp).items():
        x = read_wav(wav)[0]
        dtln.reset()
        oracle = dtln.process(x)
        runners = []
        if a.nnrun:
            runners.append(("nnrun", lambda w: run_nnrun(a.nnrun, a.model, w, tmp)))
        if a.plugin_dir:
            runners.append(("nndenoise", lambda w: run_element(a.plugin_dir, a.model, w, tmp)))
        for label, fn in runners:
            got, note = fn(wav)
            ok_len = len(got) == len(x)
            lag, db, maxabs = compare(oracle, got, min(len(got), len(x)))
            ok = ok_len and lag == LATENCY and db >= a.min_db
            failures += not ok
            print(f"{'PASS' if ok else 'FAIL'} {label} on {name}: SI-SDR vs oracle {db:.1f} dB (min {a.min_db:g}), "
                  f"max |diff| {maxabs:.2e}, lag {lag} (want {LATENCY}), samples {len(got)}/{len(x)}"
                  + (f"; {note}" if note else ""))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
