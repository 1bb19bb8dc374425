#!/usr/bin/python3
"""int8 models beside float: accuracy and latency (bench/README.md, "int8").

  /usr/bin/python3 bench/int8_data.py            # calibration/test data under assets/calib
  /usr/bin/python3 bench/int8.py accuracy        # selfie IoU, MobileNetV2 top-1 agreement (pretrained
                                                 # nsfwjs and random-weight), DTLN SI-SDR
  /usr/bin/python3 bench/int8.py accuracy --variant b02="--max-output-error 0.02" ...  # the trade-off
  /usr/bin/python3 bench/int8.py latency         # int8 vs float (1 thread) and vs ONNX Runtime
  /usr/bin/python3 bench/int8.py latency --all-int8 --no-avx512   # + every op int8, + an AVX2-only host
  /usr/bin/python3 bench/int8.py all

Models are quantized by `nnconvert --quantize int8` into assets/out/int8/ (calibration:
assets/calib/selfie, Megamind frames 0-87; assets/calib/photos). The accuracy tests use
frames 90-267, assets/calib/photos-test and assets/calib/audio-test only (DTLN is calibrated
on assets/calib/audio, WAV files through the stream as nndenoise runs it).
"""
import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("NN_BUILD", os.path.join(ROOT, "build"))
NNCONVERT = os.path.join(BUILD, "engine", "nnconvert")
NNRUN = os.path.join(BUILD, "engine", "nnrun")
NNEXPORT = os.path.join(BUILD, "engine", "nnexport")
CALIB = os.path.join(ROOT, "assets", "calib")
OUT = os.path.join(ROOT, "assets", "out", "int8")
MODELS = os.path.join(ROOT, "assets", "models")

SELFIE = dict(name="selfie", source=os.path.join(MODELS, "selfie_segmentation.tflite"), calib="selfie", extra=[])
MNV2 = dict(name="mobilenet_v2", source=os.path.join(MODELS, "mobilenet_v2.onnx"), calib="photos",
            extra=["--mean", "123.675", "116.28", "103.53", "--std", "58.395", "57.12", "57.375",
                   "--input-color", "RGB", "--task", "classification"])
# The pretrained MobileNetV2 (scripts/fetch-assets.sh: nsfwjs's Keras MobileNetV2, ImageNet
# weights in its first 98 layers, fine-tuned to 5 classes; RGB / 255 as nsfwjs feeds it).
NSFW_MNV2 = dict(name="nsfw_mobilenet_v2", source=os.path.join(MODELS, "nsfw_mobilenet_v2.onnx"), calib="photos",
                 extra=["--mean", "0", "0", "0", "--std", "255", "255", "255", "--input-color", "RGB",
                        "--task", "classification"])
NSFW_CLASSES = ("Drawing", "Hentai", "Neutral", "Porn", "Sexy")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"int8: {' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")
    return r.stdout


QUANTIZE_ARGS = []  # extra nnconvert --quantize options (--max-output-error, ...)


def convert(spec, method=None, quantize=True, tag="", extra=()):
    """The float (.nnapi) or int8 model of spec; returns its path and nnconvert's report."""
    os.makedirs(OUT, exist_ok=True)
    kind = "int8" if quantize else "float"
    path = os.path.join(OUT, f"{spec['name']}_{kind}{tag}.nnapi")
    cmd = [NNCONVERT, spec["source"], "-o", path] + spec["extra"]
    if quantize:
        cmd += ["--quantize", "int8", "--calibration", os.path.join(CALIB, spec["calib"])]
        if method:
            cmd += ["--calibration-method", method]
        cmd += QUANTIZE_ARGS + list(extra)
    report = run(cmd)
    if quantize:  # nnconvert's per-op error report beside the model
        with open(path[:-len(".nnapi")] + "_report.txt", "w") as fh:
            fh.write(" ".join(cmd) + "\n" + report)
    return path, report


DTLN = [os.path.join(MODELS, "dtln_1.tflite"), os.path.join(MODELS, "dtln_2.tflite"), "--stream",
        os.path.join(ROOT, "assets", "streams", "dtln.toml")]


def dtln_sisdr(extra=()):
    """DTLN float and int8 (calibrated on assets/calib/audio) on assets/calib/audio-test:
    SI-SDR improvement per clip, through nnrun's stream (the element's engine code)."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "denoise"))
    import metrics
    from wavio import read_wav
    os.makedirs(OUT, exist_ok=True)
    f, q = os.path.join(OUT, "dtln_float.nnapi"), os.path.join(OUT, "dtln_int8.nnapi")
    run([NNCONVERT] + DTLN + ["-o", f])
    report = run([NNCONVERT] + DTLN + ["-o", q, "--quantize", "int8", "--calibration",
                                       os.path.join(CALIB, "audio")] + list(extra))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for wav in sorted(glob.glob(os.path.join(CALIB, "audio-test", "noisy", "*.wav"))):
            clean = read_wav(wav.replace(os.sep + "noisy" + os.sep, os.sep + "clean" + os.sep))[0]
            before = metrics.si_sdr(clean, read_wav(wav)[0])
            gains = []
            for model in (f, q):
                run([NNRUN, model, "--input", wav, "--save-outputs", tmp, "-d", "cpu"])
                gains.append(metrics.si_sdr(clean, read_wav(os.path.join(tmp, "output_0.wav"))[0][:len(clean)]) - before)
            rows.append(dict(clip=os.path.basename(wav), before=before, float_gain=gains[0], int8_gain=gains[1]))
    summary = [l.strip() for l in report.splitlines() if "ops int8" in l]
    return rows, summary


FLOAT_OUTPUTS = {}  # (model, images): the float model's outputs, the same for every variant


def outputs(model, images, delegate="cpu"):
    """Output 0 of `model` on each image (nnrun, the tools' pre-processing)."""
    key = (model, tuple(images), delegate)
    if "_float" in os.path.basename(model) and key in FLOAT_OUTPUTS:
        return FLOAT_OUTPUTS[key]
    res = []
    with tempfile.TemporaryDirectory() as tmp:
        for img in images:
            run([NNRUN, model, "--input", img, "-d", delegate, "--runs", "1", "--warmup", "0",
                 "--save-outputs", tmp])
            res.append(np.load(os.path.join(tmp, "output_0.npy")))
    if "_float" in os.path.basename(model):
        FLOAT_OUTPUTS[key] = res
    return res


def selfie_iou(float_model, int8_model, images):
    f = outputs(float_model, images)
    q = outputs(int8_model, images)
    ious = []
    for a, b in zip(f, q):
        ma, mb = a > 0.5, b > 0.5
        union = np.logical_or(ma, mb).sum()
        ious.append(1.0 if union == 0 else np.logical_and(ma, mb).sum() / union)
    return ious


MARGINS = (0.01, 0.02, 0.05, 0.1)  # float top-1 lead over the runner-up, as a fraction of the logit spread


def top1_agreement(float_model, int8_model, images):
    """Top-1 agreements over all images, and per MARGINS threshold over the images whose float
    top-1 leads by at least that: {threshold: (agree, count)}."""
    f = outputs(float_model, images)
    q = outputs(int8_model, images)
    agree = [int(np.argmax(a) == np.argmax(b)) for a, b in zip(f, q)]
    # The reference MobileNetV2 has random weights (scripts/make_reference_models.py): many
    # photos have near-tied top classes. Also count those where the float top-1 is clear.
    clear = {m: [0, 0] for m in MARGINS}
    for a, same in zip(f, agree):
        a = a.ravel()
        top2 = np.sort(a)[-2:]
        for m in MARGINS:
            if top2[1] - top2[0] >= m * (a.max() - a.min()):
                clear[m][0] += same
                clear[m][1] += 1
    return sum(agree), len(agree), clear


def logit_errors(float_model, int8_model, images):
    """Per image: |int8 logits - float logits| / |float logits| (L2)."""
    return [float(np.linalg.norm(b.ravel() - a.ravel()) / max(np.linalg.norm(a.ravel()), 1e-12))
            for a, b in zip(outputs(float_model, images), outputs(int8_model, images))]


def class_counts(float_model, images):
    """How many images the float model puts in each class (NSFW_CLASSES)."""
    counts = {}
    for a in outputs(float_model, images):
        c = NSFW_CLASSES[int(np.argmax(a))]
        counts[c] = counts.get(c, 0) + 1
    return counts


def selfie_input(path):
    """The selfie model's input as the tools make it (resize INTER_AREA, RGB, /255), [1,H,W,3]."""
    import cv2
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    x = cv2.resize(img, (256, 256), interpolation=cv2.INTER_AREA)[:, :, ::-1].astype(np.float32) / 255.0
    return np.ascontiguousarray(x[None])


def ort_agreement(int8_model, frames):
    """Mask IoU of ONNX Runtime on our QDQ export against our int8 model (CPU delegate)."""
    peers = os.path.join(ROOT, "bench", "peers")
    if not os.path.isdir(os.path.join(peers, "node_modules", "onnxruntime-node")):
        return None
    qdq = int8_model.replace(".nnapi", "_qdq.onnx")
    run([NNEXPORT, int8_model, "-o", qdq])
    ious = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in frames:
            x = selfie_input(f)
            np.save(os.path.join(tmp, "x.npy"), x)
            x.tofile(os.path.join(tmp, "x.f32"))
            run([NNRUN, int8_model, "--input", os.path.join(tmp, "x.npy"), "-d", "cpu", "--runs", "1",
                 "--warmup", "0", "--save-outputs", tmp])
            ours = np.load(os.path.join(tmp, "output_0.npy")).ravel() > 0.5
            run(["node", os.path.join(peers, "ort_run.js"), qdq, os.path.join(tmp, "x.f32"),
                 os.path.join(tmp, "y.f32")], cwd=peers)
            theirs = np.fromfile(os.path.join(tmp, "y.f32"), dtype=np.float32) > 0.5
            union = np.logical_or(ours, theirs).sum()
            ious.append(1.0 if union == 0 else np.logical_and(ours, theirs).sum() / union)
    return ious


def accuracy(args):
    SELFIE["calib"], MNV2["calib"], NSFW_MNV2["calib"] = args.selfie_calib, args.mobilenet_calib, args.mobilenet_calib
    frames = sorted(glob.glob(os.path.join(CALIB, args.selfie_test, "*.*")))
    photos = sorted(glob.glob(os.path.join(CALIB, args.mobilenet_test, "*")))
    if not frames or not photos:
        sys.exit("int8: run bench/int8_data.py first")
    results = {}
    sf, _ = convert(SELFIE, quantize=False)
    runs = [(method, method, []) for method in args.methods]
    runs += [(label, None, extra.split()) for label, _, extra in (v.partition("=") for v in args.variant)]
    for method, m, extra in runs if args.selfie else []:
        sq, report = convert(SELFIE, m, tag="_" + method, extra=extra)
        ious = selfie_iou(sf, sq, frames)
        results[f"selfie {method}"] = dict(iou_median=statistics.median(ious), iou_min=min(ious), frames=len(ious))
        summary = [l for l in report.splitlines() if "ops int8" in l or "output 0: relative" in l]
        print(f"selfie int8 ({method}): mask IoU vs float over {len(ious)} frames: median "
              f"{statistics.median(ious):.4f}, min {min(ious):.4f}; {'; '.join(summary)}", flush=True)
        if args.methods and method == args.methods[0]:
            ort = ort_agreement(sq, frames[::6])
            if ort:
                results["selfie ORT on the QDQ export vs our int8"] = dict(iou_median=statistics.median(ort),
                                                                           iou_min=min(ort), frames=len(ort))
                print(f"selfie int8: ONNX Runtime on the QDQ export vs our int8 model, mask IoU over {len(ort)} "
                      f"frames: median {statistics.median(ort):.4f}, min {min(ort):.4f}", flush=True)
    if args.audio and glob.glob(os.path.join(CALIB, "audio-test", "noisy", "*.wav")):
        rows, summary = dtln_sisdr()
        results["dtln"] = rows
        for r in rows:
            print(f"dtln {r['clip']}: SI-SDR {r['before']:.2f} dB, float +{r['float_gain']:.2f}, int8 "
                  f"+{r['int8_gain']:.2f} ({r['float_gain'] - r['int8_gain']:.2f} dB lost); {'; '.join(summary)}",
                  flush=True)
    specs = ([NSFW_MNV2] if args.pretrained else []) + ([MNV2] if args.mobilenet else [])
    for spec in specs:
        if not os.path.exists(spec["source"]):
            print(f"{spec['name']}: {spec['source']} is missing (scripts/fetch-assets.sh): skipped", flush=True)
            continue
        mf, _ = convert(spec, quantize=False)
        if spec is NSFW_MNV2:
            results[f"{spec['name']} float top-1 classes"] = classes = class_counts(mf, photos)
            print(f"{spec['name']}: float top-1 classes over the {len(photos)} photos: {classes}", flush=True)
        for method, m, extra in runs:
            mq, report = convert(spec, m, tag="_" + method, extra=extra)
            agree, n, clear = top1_agreement(mf, mq, photos)
            errors = logit_errors(mf, mq, photos)
            results[f"{spec['name']} {method}"] = dict(top1_agreement=agree / n, photos=n,
                                                       by_margin={str(t): c for t, c in clear.items()},
                                                       logit_error_median=statistics.median(errors),
                                                       logit_error_max=max(errors))
            summary = [l for l in report.splitlines() if "ops int8" in l or "output 0: relative" in l]
            by_margin = ", ".join(f">= {t:g}: {a}/{c}" for t, (a, c) in clear.items())
            print(f"{spec['name']} int8 ({method}): top-1 agrees with float on {agree}/{n} photos "
                  f"({100.0 * agree / n:.1f}%); on those whose float top-1 leads by a fraction of the logit "
                  f"spread {by_margin}; logits' relative error median {statistics.median(errors):.4f}, max "
                  f"{max(errors):.4f}; {'; '.join(summary)}", flush=True)
    return results


MINS = {}  # (model, env) -> the fastest run seen: on a shared host, the least disturbed


def nnrun_median(model, threads=1, runs=50, env=None):
    out = run([NNRUN, model, "--random", "-d", "cpu", "--threads", str(threads), "--runs", str(runs),
               "--warmup", "10", "--json"], env=env)
    r = json.loads(out)
    key = (model, tuple(sorted((k, v) for k, v in (env or {}).items() if k.startswith("NN_"))))
    MINS[key] = min(MINS.get(key, float("inf")), r["min_ms"])
    return r["median_ms"]


def nnrun_cpu_ms(model, env=None, runs=(10, 60)):
    """CPU time of one inference at 1 thread: the process's user + system time at two run
    counts, differenced (loading cancels). Steadier than latency on a loaded host."""
    cpu = []
    for n in runs:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run([NNRUN, model, "--random", "-d", "cpu", "--threads", "1", "--runs", str(n), "--warmup", "0"], env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return (cpu[1] - cpu[0]) * 1000 / (runs[1] - runs[0])


def ort_median(onnx_model, threads=1, runs=50):
    peers = os.path.join(ROOT, "bench", "peers")
    out = run(["node", os.path.join(peers, "ort_bench.js"), onnx_model, str(threads), str(runs), "10"], cwd=peers)
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


# Every op int8 whose int8 form validates (no error limits: the op's own error, the model
# error it alone adds, the budget): what the int8 kernels give when nothing stays float,
# apart from what accuracy allows (--all-int8).
ALL_INT8_ARGS = ["--max-op-error", "1e9", "--max-op-output-error", "1e9", "--max-output-error", "1e9"]


def host_has_avx_vnni():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx_vnni" in f.read()
    except OSError:
        return False


def latency(args):
    """Medians of alternating rounds at 1 thread: our float, our int8, the int8 model with the
    native int8 kernels off (NN_NO_NATIVE_INT8=1: XNNPACK's and the reference's), ORT on the
    int8 model's QDQ export (when nnexport can write it and bench/peers has onnxruntime-node)."""
    results = {}
    env_variants = [("", {})]
    if args.no_avx512:
        # An AVX2-only host: our kernels' AVX2 forms, and XNNPACK's (which pick AVX-512 through
        # cpuinfo otherwise; bench/xnnpack_no_avx512.py); --no-avx512-ours-only: ours alone.
        env = {"NN_NO_AVX512": "1"}
        label = " NN_NO_AVX512=1"
        if not args.no_avx512_ours_only:
            lib = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "xnnpack_no_avx512.py")],
                                 capture_output=True, text=True, check=True).stdout.strip()
            env["LD_LIBRARY_PATH"] = lib + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")
            label += " + XNNPACK AVX2"
        # AVX2 CPUs with AVX-VNNI (Intel 12th gen and later) run our int8 convs on its ymm
        # vpdpbusd; where this host has it, the older AVX2 CPUs (NN_NO_AVX_VNNI=1) too.
        if host_has_avx_vnni():
            env_variants.append((label + " + AVX-VNNI", env))
            env_variants.append((label + " NN_NO_AVX_VNNI=1", dict(env, NN_NO_AVX_VNNI="1")))
        else:
            env_variants.append((label, env))
    models = []
    for spec in (SELFIE, MNV2):
        models.append((spec["name"], spec, convert(spec)[0]))
        if args.all_int8:
            saved = QUANTIZE_ARGS[:]
            QUANTIZE_ARGS[:] = saved + ALL_INT8_ARGS
            models.append((spec["name"] + " (every op int8)", spec, convert(spec, tag="_all")[0]))
            QUANTIZE_ARGS[:] = saved
    for name, spec, q in models:
        f, _ = convert(spec, quantize=False)
        qdq = os.path.join(OUT, f"{spec['name']}_int8_qdq.onnx")
        have_ort = os.path.isdir(os.path.join(ROOT, "bench", "peers", "node_modules", "onnxruntime-node"))
        exported = os.path.exists(NNEXPORT) and \
            subprocess.run([NNEXPORT, q, "-o", qdq], capture_output=True, text=True).returncode == 0
        for label, extra in env_variants:
            env = dict(os.environ, **extra)
            times = {"float": [], "int8": [], "int8_no_native": [], "ort_qdq": []}
            cpu = {"float": [], "int8": [], "int8_no_native": []}
            for _ in range(args.rounds):
                times["float"].append(nnrun_median(f, env=env))
                times["int8"].append(nnrun_median(q, env=env))
                times["int8_no_native"].append(nnrun_median(q, env=dict(env, NN_NO_NATIVE_INT8="1")))
                cpu["float"].append(nnrun_cpu_ms(f, env=env))
                cpu["int8"].append(nnrun_cpu_ms(q, env=env))
                cpu["int8_no_native"].append(nnrun_cpu_ms(q, env=dict(env, NN_NO_NATIVE_INT8="1")))
                if have_ort and exported and not extra:
                    times["ort_qdq"].append(ort_median(qdq))
            med = {k: statistics.median(v) for k, v in times.items() if v}
            nn_env = tuple(sorted((k, v) for k, v in env.items() if k.startswith("NN_")))
            no_native = tuple(sorted(dict(nn_env, NN_NO_NATIVE_INT8="1").items()))
            med["min"] = {"float": MINS[(f, nn_env)], "int8": MINS[(q, nn_env)], "int8_no_native": MINS[(q, no_native)]}
            med["cpu"] = {k: statistics.median(v) for k, v in cpu.items()}
            results[name + label] = med
            line = f"{name}{label}: float {med['float']:.3f} ms, int8 {med['int8']:.3f} ms " \
                   f"(int8/float {med['int8'] / med['float']:.2f}; native int8 kernels off " \
                   f"{med['int8_no_native']:.3f} ms, {med['int8_no_native'] / med['float']:.2f})"
            c = med["cpu"]
            line += f"; CPU time: float {c['float']:.3f}, int8 {c['int8']:.3f} ({c['int8'] / c['float']:.2f}), " \
                    f"native off {c['int8_no_native']:.3f} ({c['int8_no_native'] / c['float']:.2f})"
            mins = med["min"]
            line += f"; fastest runs: float {mins['float']:.3f}, int8 {mins['int8']:.3f} " \
                    f"({mins['int8'] / mins['float']:.2f}), native off {mins['int8_no_native']:.3f}"
            if "ort_qdq" in med:
                line += f", ORT on the QDQ export {med['ort_qdq']:.3f} ms (int8/ORT {med['int8'] / med['ort_qdq']:.2f})"
            print(line, flush=True)
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["accuracy", "latency", "all"])
    ap.add_argument("--methods", nargs="*", default=["percentile"],
                    help="calibration methods to compare (none: the variants only)")
    ap.add_argument("--no-mobilenet", dest="mobilenet", action="store_false",
                    help="skip the random-weight MobileNetV2 (scripts/make_reference_models.py)")
    ap.add_argument("--no-pretrained", dest="pretrained", action="store_false",
                    help="skip the pretrained MobileNetV2 (nsfwjs's, scripts/fetch-assets.sh)")
    ap.add_argument("--no-selfie", dest="selfie", action="store_false")
    ap.add_argument("--no-audio", dest="audio", action="store_false")
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL='nnconvert options': one more int8 model of each of selfie and MobileNetV2, "
                         "with the default method and these options (e.g. b02='--max-output-error 0.02')")
    ap.add_argument("--selfie-calib", default="selfie",
                    help="selfie's calibration folder under assets/calib (selfie-fit: to choose settings)")
    ap.add_argument("--selfie-test", default="selfie-test",
                    help="the images selfie's IoU is measured on (selfie-val: to choose settings, never the test)")
    ap.add_argument("--mobilenet-calib", default="photos",
                    help="MobileNetV2's calibration folder under assets/calib (photos-fit: to choose settings)")
    ap.add_argument("--mobilenet-test", default="photos-test",
                    help="the photos top-1 agreement is measured on (photos-val: to choose settings)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating latency rounds")
    ap.add_argument("--no-avx512", action="store_true",
                    help="also time as an AVX2-only host would run (NN_NO_AVX512=1, XNNPACK's AVX2 kernels)")
    ap.add_argument("--no-avx512-ours-only", action="store_true",
                    help="with --no-avx512: NN_NO_AVX512=1 only (XNNPACK keeps AVX-512 on an AVX-512 host)")
    ap.add_argument("--all-int8", action="store_true",
                    help="also time models with every op int8 (no error limits: speed only, not accuracy)")
    ap.add_argument("--quantize-args", default="", help="extra nnconvert options, e.g. '--max-output-error 0.01'")
    args = ap.parse_args()
    QUANTIZE_ARGS.extend(args.quantize_args.split())
    results = {}
    if args.what in ("accuracy", "all"):
        results["accuracy"] = accuracy(args)
    if args.what in ("latency", "all"):
        results["latency"] = latency(args)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
