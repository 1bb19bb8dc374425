#!/usr/bin/env python3
"""Builds the held-out denoise test set from Debian and npm packages (nothing committed).

    bench/denoise/make_testset.py [--out bench/results/denoise/testset] [--quick]

Sources, each pinned by package version and by the sha256 of the file used:
  speech  npm @vonage/noise-suppression 1.0.3   data/7729-102255-0000.wav (LibriSpeech, 48 kHz)
          Debian ktuberling-data 4:22.12.3-1     recorded words (en, de, fr: three speakers),
                                                 strung into sentences with pauses
  noise   Debian lincity-ng-data 2.9~git20150314-5  TraficHigh2 (street traffic), Substation4 (electrical hum)
          Debian extremetuxracer-data 0.8.2-1    mud_slide, rock_slide (recorded sliding/rolling)
          plus pink noise (synthetic, seeded) as a stationary reference
All resampled to 16 kHz mono. Mixtures at -5, 0, 5, 10 dB SNR (speech power over its
active frames, noise over the whole clip), noise looped with a crossfade from a seeded
random offset; plus each clean utterance alone. Writes manifest.json beside the WAVs.
Demo noise (issue 15's soundtrack): --demo-noise OUT.wav writes the traffic recording, loop-ready.
"""
import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from wavio import read_wav, resample, write_wav  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
CACHE = os.path.join(REPO, "bench", "results", "denoise", "cache")
RATE = 16000
SNRS = [-5, 0, 5, 10]

NPM_VONAGE = ("@vonage/noise-suppression", "1.0.3")
DEBS = {
    "lincity-ng-data": "2.9~git20150314-5",
    "extremetuxracer-data": "0.8.2-1",
    "ktuberling-data": "4:22.12.3-1",
}
# (package, path inside it, sha256)
FILES = {
    "librispeech": ("npm", "package/data/7729-102255-0000.wav",
                    "b59aded660c94cf23a38b88390b9cc9ee66b03de3a2be4fcff4128c3acb5c911"),
    "dtln_model_1": ("npm", "package/dist/model_1.tflite",
                     "91281a38e80fe9fd330e28eda7e16fe4e483ee5199a3e687a099939013c25de0"),
    "dtln_model_2": ("npm", "package/dist/model_2.tflite",
                     "7ae37ec802862d8a65b5cdabfbcbbe22caaf7cd39e79adf574d15837d1520830"),
    "traffic": ("lincity-ng-data", "usr/share/games/lincity-ng/sounds/TraficHigh2.wav",
                "36c7947a6cb3396cb5f99dbc4df1e8e6980918994c6b5e674a1539a4662c8a24"),
    "hum": ("lincity-ng-data", "usr/share/games/lincity-ng/sounds/Substation4.wav",
            "bfaaa6bff7b3ca3f37bb87e0e1bad8fb54f96430bb3d4c1eed821495e271d30f"),
    "mud": ("extremetuxracer-data", "usr/share/games/etr/sounds/mud_slide.wav",
            "1fe3c38eb0a6d7347afa262bf6419e591888782185472acc5e98de38fde3d5c8"),
    "rock": ("extremetuxracer-data", "usr/share/games/etr/sounds/rock_slide.wav",
             "917c5d0e125897c067caf4c31af07556e057dc9af1d5ecce4c6f51cf9b75d542"),
}
# ktuberling sentences: words in order, per language (one speaker each)
KTU = {
    "ktu_en": ("en", ["tv_train", "moon_astronaut", "pizzeria_pineapple", "egypt_pyramid", "sunglasses",
                      "moon_satellite", "pizzeria_mushroom"]),
    "ktu_de": ("de", ["tv_train", "moon_astronaut", "pizzeria_pineapple", "egypt_pyramid", "sunglasses",
                      "moon_satellite", "pizzeria_mushroom"]),
    "ktu_fr": ("fr", ["tv_train", "moon_astronaut", "pizzeria_pineapple", "egypt_pyramid", "sunglasses",
                      "moon_satellite", "pizzeria_mushroom"]),
}
KTU_SHA256 = "ktuberling-data words are checked through the package version (apt verifies the .deb)"
NOISES = ["traffic", "hum", "mud", "rock", "pink"]
DEMO_NOISE = "traffic"  # continuous street traffic: the demo soundtrack's noise
SPEECH = ["librispeech", "ktu_en", "ktu_de", "ktu_fr"]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_npm(name, version, dest):
    """npm pack into dest/npm-<name>-<version>/ (once)."""
    out = os.path.join(dest, f"npm-{name.replace('/', '-').lstrip('@')}-{version}")
    if os.path.isdir(os.path.join(out, "package")):
        return out
    os.makedirs(out, exist_ok=True)
    r = subprocess.run(["npm", "pack", f"{name}@{version}", "--silent"], cwd=out, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"make_testset: npm pack {name}@{version} failed: {r.stderr.strip()[-400:]}")
    tgz = glob.glob(os.path.join(out, "*.tgz"))[0]
    subprocess.run(["tar", "xzf", tgz, "-C", out], check=True)
    return out


def fetch_deb(pkg, version, dest):
    """apt-get download PKG=VERSION and unpack to dest/deb-<pkg>/ (once)."""
    out = os.path.join(dest, f"deb-{pkg}")
    if os.path.isdir(os.path.join(out, "usr")):
        return out
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=dest)
    os.chmod(tmp, 0o777)  # apt's _apt user downloads into it
    r = subprocess.run(["apt-get", "download", f"{pkg}={version}"], cwd=tmp, capture_output=True, text=True)
    debs = glob.glob(os.path.join(tmp, "*.deb"))
    if r.returncode != 0 or not debs:
        sys.exit(f"make_testset: apt-get download {pkg}={version} failed: {r.stderr.strip()[-400:]}"
                 " (run apt-get update first)")
    subprocess.run(["dpkg-deb", "-x", debs[0], out], check=True)
    shutil.rmtree(tmp)
    return out


def source_path(key, cache):
    where, rel, digest = FILES[key]
    root = fetch_npm(*NPM_VONAGE, cache) if where == "npm" else fetch_deb(where, DEBS[where], cache)
    path = os.path.join(root, rel)
    got = sha256(path)
    if got != digest:
        sys.exit(f"make_testset: {path}: sha256 {got}, expected {digest}")
    return path


def decode(path, cache):
    """Any format gst's decodebin reads -> float mono at the file's rate; WAV read directly."""
    if path.endswith(".wav"):
        return read_wav(path)
    out = os.path.join(cache, "decoded", os.path.basename(os.path.dirname(path)) + "_" +
                       os.path.basename(path) + ".wav")
    if not os.path.exists(out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        subprocess.run(["gst-launch-1.0", "-q", "filesrc", f"location={path}", "!", "decodebin", "!",
                        "audioconvert", "!", "audio/x-raw,format=F32LE,channels=1", "!", "wavenc", "!",
                        "filesink", f"location={out}"], check=True)
    return read_wav(out)


def active_power(x, frame=320):
    """Speech power over active frames (within 30 dB of the loudest 20 ms frame)."""
    n = len(x) // frame * frame
    e = (x[:n].reshape(-1, frame) ** 2).mean(axis=1)
    return float(e[e > e.max() * 1e-3].mean())


def trim_quiet_edges(x, frame=320):
    """Drops fade-in/fade-out at a recording's ends (frames 10 dB under the median), so loop
    seams do not leave quiet gaps."""
    n = len(x) // frame
    e = 10 * np.log10((x[:n * frame].reshape(n, frame) ** 2).mean(axis=1) + 1e-12)
    keep = np.nonzero(e > np.median(e) - 10)[0]
    return x[keep[0] * frame:(keep[-1] + 1) * frame]


def loop_noise(noise, n, rng, fade=800):
    """n samples of noise from a random offset, looped with a linear crossfade at seams."""
    start = int(rng.integers(0, len(noise)))
    seg = np.concatenate([noise[start:], noise[:start]])
    out = seg.copy()
    ramp = np.linspace(0, 1, fade)
    while len(out) < n:
        head = seg.copy()
        out[-fade:] = out[-fade:] * (1 - ramp) + head[:fade] * ramp
        out = np.concatenate([out, head[fade:]])
    return out[:n]


def pink(n, rng):
    X = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(len(X))
    X[1:] /= np.sqrt(f[1:])
    X[0] = 0
    return np.fft.irfft(X, n)


def build_speech(key, cache):
    if key == "librispeech":
        x, r = read_wav(source_path("librispeech", cache))
        return resample(x, r, RATE)
    lang, words = KTU[key]
    root = fetch_deb("ktuberling-data", DEBS["ktuberling-data"], cache)
    rng = np.random.default_rng(sum(map(ord, key)))  # fixed pause lengths per sentence
    parts = [np.zeros(RATE)]  # a second of silence first: a noise-only stretch
    for w in words:
        cands = glob.glob(os.path.join(root, "usr/share/ktuberling/sounds", lang, w + ".*"))
        if not cands:
            continue
        x, r = decode(cands[0], cache)
        x = resample(x, r, RATE)
        x = (x - x.mean()) * np.minimum(1, np.minimum(np.arange(len(x)), np.arange(len(x))[::-1]) / 160)
        parts += [x / (np.abs(x).max() + 1e-9) * 0.5, np.zeros(int(RATE * rng.uniform(0.15, 0.6)))]
    parts.append(np.zeros(RATE // 2))
    return np.concatenate(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results", "denoise", "testset"))
    ap.add_argument("--quick", action="store_true", help="one speech file, every noise and SNR")
    ap.add_argument("--demo-noise", metavar="OUT.wav",
                    help="only write the demo's noise: the traffic recording at 16 kHz mono S16, faded ends "
                         "trimmed so it loops without gaps (for demos/mix_noise.py)")
    a = ap.parse_args()
    os.makedirs(CACHE, exist_ok=True)
    if a.demo_noise:
        x, r = read_wav(source_path(DEMO_NOISE, CACHE))
        x = trim_quiet_edges(resample(x - x.mean(), r, RATE))
        write_wav(a.demo_noise, x, RATE)
        print(f"make_testset: {a.demo_noise}: {FILES[DEMO_NOISE][1]} from {FILES[DEMO_NOISE][0]} "
              f"{DEBS[FILES[DEMO_NOISE][0]]}, {len(x) / RATE:.2f} s at {RATE} Hz")
        return
    os.makedirs(a.out, exist_ok=True)
    noises = {}
    for key in NOISES:
        if key == "pink":
            noises[key] = pink(RATE * 10, np.random.default_rng(7))
        else:
            x, r = read_wav(source_path(key, CACHE))
            noises[key] = trim_quiet_edges(resample(x, r, RATE) - x.mean())
    items = []
    speech_keys = SPEECH[:1] if a.quick else SPEECH
    for si, skey in enumerate(speech_keys):
        s = build_speech(skey, CACHE)
        s = s * (0.05 / np.sqrt(active_power(s)))  # -26 dBFS active speech level, -5 dB mixes unclipped
        clean = os.path.join(a.out, f"clean_{skey}.wav")
        write_wav(clean, s, RATE, float32=True)
        items.append(dict(id=f"{skey}_clean", speech=skey, noise=None, snr=None, clean=clean, noisy=clean,
                          noise_path=None))
        for ni, nkey in enumerate(NOISES):
            for snr in SNRS:
                seed = 1000 * si + 10 * ni + SNRS.index(snr)
                n = loop_noise(noises[nkey], len(s), np.random.default_rng(seed))
                n = n * np.sqrt(active_power(s) / np.mean(n ** 2) / 10 ** (snr / 10))
                noisy = os.path.join(a.out, f"noisy_{skey}_{nkey}_{snr:+d}dB.wav")
                npath = os.path.join(a.out, f"noise_{skey}_{nkey}_{snr:+d}dB.wav")
                write_wav(noisy, s + n, RATE, float32=True)
                write_wav(npath, n, RATE, float32=True)
                items.append(dict(id=f"{skey}_{nkey}_{snr:+d}dB", speech=skey, noise=nkey, snr=snr,
                                  clean=clean, noisy=noisy, noise_path=npath, seed=seed))
    peak = max(np.abs(read_wav(it["noisy"])[0]).max() for it in items)
    manifest = dict(rate=RATE, snrs=SNRS, noises=NOISES, speech=speech_keys, peak=peak, items=items,
                    sources={k: dict(package=v[0], version=DEBS.get(v[0], NPM_VONAGE[1]), path=v[1], sha256=v[2])
                             for k, v in FILES.items()})
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"make_testset: {len(items)} items in {a.out} (peak {peak:.2f})")


if __name__ == "__main__":
    main()
