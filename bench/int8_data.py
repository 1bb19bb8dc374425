#!/usr/bin/python3
"""Calibration and test data for bench/int8.py and `nnconvert --quantize` (nothing is committed).

  /usr/bin/python3 bench/int8_data.py      # as root it apt-installs the photo packages first

Writes, under assets/calib/ (git-ignored):
  selfie/         the selfie model's calibration set: Megamind.avi frames 0, 3, ..., 87, the people
                  photos of assets/media/people (scripts/fetch-assets.sh: opencv-doc, matplotlib,
                  skimage) and messi5.jpg, and vtest.avi (pedestrians; nnconvert takes frames of it)
                  - each image also flipped, zoomed in (centre 70%), darker (x0.7) and brighter
                  (contrast x1.3, +20): the augmentations a PTQ tool adds
  selfie-megamind/ the frames alone (the calibration set before the people were added)
  selfie-fit/     selfie/ split to choose nnconvert's settings without the test frames: frames
  selfie-val/     0-45, vtest.avi and four photos fit; frames 48-87 and the other photos validate
  selfie-fit-aug/ selfie-fit/ with the augmentations (selfie-val/ says whether they help)
  selfie-test/    frames 90, 93, ..., 267: the selfie accuracy test (bench/int8.py); no sample of
                  Megamind.avi past frame 87 is in any calibration folder
  photos/         every 4th photo (sorted by path): MobileNetV2's calibration set
  photos-test/    the other photos: MobileNetV2's agreement test
  photos-fit/     photos/ split to choose nnconvert's settings without the test photos: every
  photos-val/     3rd calibration photo validates, the others fit
  photos.txt      where every photo came from
  audio/          DTLN's calibration set: the LibriSpeech clip's first 4 s (assets/media) alone and
                  under the Fire1 / Fire2 recordings at 0, 5 and 10 dB SNR, 16 kHz mono
  audio-test/     its test set: the clip's last 3.3 s under Fire3 at 0, 5 and 10 dB (noisy/ and
                  clean/ beside each other); no sample of it is in audio/

Photos are the JPEG/WebP files of at least 200 px and 30 KB in these Debian packages' folders.
"""
import glob
import os
import shutil
import subprocess
import sys

import cv2
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "assets", "calib")
PACKAGES = ["opencv-doc", "mate-backgrounds", "ukui-wallpapers", "gnome-backgrounds", "lomiri-wallpapers"]
PHOTO_DIRS = ["/usr/share/doc/opencv-doc", "/usr/share/backgrounds"]
MEGAMIND = os.path.join(ROOT, "assets", "media", "Megamind.avi")
PEOPLE = os.path.join(ROOT, "assets", "media", "people")
# People photos (scripts/fetch-assets.sh); the validation split's are the last two.
PEOPLE_FIT = [os.path.join(ROOT, "assets", "media", "messi5.jpg")] + \
    [os.path.join(PEOPLE, f) for f in ("basketball1.png", "grace_hopper.jpg", "astronaut.png")]
PEOPLE_VAL = [os.path.join(PEOPLE, f) for f in ("basketball2.png", "camera.png")]
PEOPLE_VIDEO = os.path.join(PEOPLE, "vtest.avi")
FIT_LAST_FRAME = 45  # selfie-fit takes calibration frames up to this, selfie-val the rest
SPEECH = os.path.join(ROOT, "assets", "media", "librispeech-7729-102255-0000.wav")
NOISE = os.path.join(ROOT, "assets", "media", "noise")
AUDIO_RATE = 16000
AUDIO_SPLIT_S = 4.0  # speech before this calibrates, after it tests
CALIB_FRAMES = range(0, 90, 3)
TEST_FRAMES = range(90, 270, 3)


def install_packages():
    missing = [p for p in PACKAGES if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if not missing:
        return
    if os.geteuid() != 0:
        sys.exit("int8_data: install these Debian packages first (as root): " + " ".join(missing))
    subprocess.run(["apt-get", "install", "-y", "--no-install-recommends"] + missing, check=True,
                   env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def augmented(image):
    """(suffix, image) of the calibration augmentations: a mirror, a zoom into the centre 70%,
    darker, and brighter with more contrast (people nearer the camera, other lighting)."""
    h, w = image.shape[:2]
    y0, x0 = int(h * 0.15), int(w * 0.15)
    zoom = cv2.resize(image[y0:h - y0, x0:w - x0], (w, h), interpolation=cv2.INTER_LINEAR)
    dark = np.clip(image * 0.7, 0, 255).astype(np.uint8)
    bright = np.clip((image.astype(np.float32) - 128) * 1.3 + 148, 0, 255).astype(np.uint8)
    return [("flip", image[:, ::-1]), ("zoom", zoom), ("dark", dark), ("bright", bright)]


def write_with_augmentations(image, folder, name, augment):
    cv2.imwrite(os.path.join(folder, name + ".png"), image)
    if augment:
        for suffix, a in augmented(image):
            cv2.imwrite(os.path.join(folder, f"{name}_{suffix}.png"), a)


def megamind_frames(indices):
    """The frames of Megamind.avi at `indices`, as BGR images."""
    cap = cv2.VideoCapture(MEGAMIND)
    if not cap.isOpened():
        sys.exit(f"int8_data: cannot open {MEGAMIND}")
    wanted, frames, i = set(indices), {}, 0
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        if i in wanted:
            frames[i] = frame
        i += 1
    return [frames[i] for i in indices if i in frames]


def photos():
    found = []
    for d in PHOTO_DIRS:
        for f in glob.glob(d + "/**/*", recursive=True):
            if not f.lower().endswith((".jpg", ".jpeg", ".webp")) or os.path.getsize(f) < 30000:
                continue
            im = cv2.imread(f, cv2.IMREAD_COLOR)
            if im is not None and min(im.shape[:2]) >= 200:
                found.append(f)
    # The same picture shipped twice (opencv-doc has copies) counts once.
    seen, unique = set(), []
    for f in sorted(found):
        key = (os.path.basename(f).lower(), os.path.getsize(f))
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def mix(speech, noise, snr_db):
    """speech + noise (looped to its length) at snr_db (power over the whole clip)."""
    reps = int(np.ceil(len(speech) / len(noise)))
    n = np.tile(noise, reps)[:len(speech)]
    gain = np.sqrt(np.mean(speech ** 2) / (np.mean(n ** 2) * 10 ** (snr_db / 10)))
    return (speech + gain * n).astype(np.float32)


def audio_sets():
    sys.path.insert(0, os.path.join(ROOT, "bench", "denoise"))
    from wavio import read_wav, resample, write_wav

    def load(path):
        x, rate = read_wav(path)
        x = x if x.ndim == 1 else x.mean(axis=1)
        return resample(x.astype(np.float64), rate, AUDIO_RATE)

    speech = load(SPEECH)
    split = int(AUDIO_SPLIT_S * AUDIO_RATE)
    calib, test = speech[:split], speech[split:]
    os.makedirs(os.path.join(OUT, "audio"))
    write_wav(os.path.join(OUT, "audio", "speech.wav"), calib.astype(np.float32), AUDIO_RATE, float32=True)
    for name in ("Fire1", "Fire2"):
        noise = load(os.path.join(NOISE, name + ".wav"))
        for snr in (0, 5, 10):
            write_wav(os.path.join(OUT, "audio", f"speech_{name}_{snr}dB.wav"), mix(calib, noise, snr), AUDIO_RATE,
                      float32=True)
    for sub in ("noisy", "clean"):
        os.makedirs(os.path.join(OUT, "audio-test", sub))
    noise = load(os.path.join(NOISE, "Fire3.wav"))
    for snr in (0, 5, 10):
        name = f"speech_Fire3_{snr}dB.wav"
        write_wav(os.path.join(OUT, "audio-test", "noisy", name), mix(test, noise, snr), AUDIO_RATE, float32=True)
        write_wav(os.path.join(OUT, "audio-test", "clean", name), test.astype(np.float32), AUDIO_RATE, float32=True)


def main():
    install_packages()
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    selfie_sets = ("selfie", "selfie-megamind", "selfie-fit", "selfie-fit-aug", "selfie-val")
    for sub in selfie_sets + ("selfie-test", "photos", "photos-test", "photos-fit", "photos-val"):
        os.makedirs(os.path.join(OUT, sub))
    for f in PEOPLE_FIT + PEOPLE_VAL + [PEOPLE_VIDEO]:
        if not os.path.isfile(f):
            sys.exit(f"int8_data: {f} is missing: run scripts/fetch-assets.sh")
    # (image, name, the split that holds it) for every calibration image.
    calib = [(frame, f"megamind_{i:03d}", "fit" if i <= FIT_LAST_FRAME else "val")
             for i, frame in zip(CALIB_FRAMES, megamind_frames(list(CALIB_FRAMES)))]
    calib += [(cv2.imread(f, cv2.IMREAD_COLOR), "people_" + os.path.splitext(os.path.basename(f))[0], split)
              for split, files in (("fit", PEOPLE_FIT), ("val", PEOPLE_VAL)) for f in files]
    for image, name, split in calib:
        write_with_augmentations(image, os.path.join(OUT, "selfie"), name, augment=True)
        if name.startswith("megamind"):
            write_with_augmentations(image, os.path.join(OUT, "selfie-megamind"), name, augment=False)
        write_with_augmentations(image, os.path.join(OUT, "selfie-" + split), name, augment=False)
        if split == "fit":
            write_with_augmentations(image, os.path.join(OUT, "selfie-fit-aug"), name, augment=True)
    for sub in ("selfie", "selfie-fit", "selfie-fit-aug"):
        shutil.copy(PEOPLE_VIDEO, os.path.join(OUT, sub, "people_vtest.avi"))
    for i, frame in zip(TEST_FRAMES, megamind_frames(list(TEST_FRAMES))):
        cv2.imwrite(os.path.join(OUT, "selfie-test", f"megamind_{i:03d}.png"), frame)
    listing = []
    for n, f in enumerate(photos()):
        sub = "photos" if n % 4 == 0 else "photos-test"
        subs = [sub] + ([] if sub != "photos" else ["photos-val" if (n // 4) % 3 == 2 else "photos-fit"])
        name = f"{n:04d}_{os.path.basename(f)}"
        for d in subs:
            if name.lower().endswith(".webp"):  # nnconvert reads jpg/png/bmp
                cv2.imwrite(os.path.join(OUT, d, name[:-5] + ".png"), cv2.imread(f, cv2.IMREAD_COLOR))
            else:
                shutil.copy(f, os.path.join(OUT, d, name))
        listing.append(f"{sub}\t{f}")
    with open(os.path.join(OUT, "photos.txt"), "w") as fh:
        fh.write("\n".join(listing) + "\n")
    audio_sets()
    counts = {s: len(os.listdir(os.path.join(OUT, s))) for s in selfie_sets + ("selfie-test", "photos", "photos-test", "photos-fit", "photos-val",
                                                                 "audio")}
    print(f"int8_data: {OUT}: {counts}")


if __name__ == "__main__":
    main()
