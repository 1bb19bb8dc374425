#!/usr/bin/python3
"""The model zoo: models users bring, on the CPU delegate, checked and timed beside ONNX Runtime.

Models (made or fetched into bench/zoo/, git-ignored, nothing committed):
  - torchvision classification and segmentation models, random weights (seed 0, no network),
    exported to ONNX (opset 13) by torch 1.13, with a fixed input and PyTorch's output;
  - TFLite models from npm (MediaPipe face detection, hands, pose) and the two selfie models
    in assets/models.
For each: our CPU output against the reference (PyTorch for ONNX models, our reference
kernels for TFLite files, on a fixed uniform [-1, 1] input), as max |ours - ref| / max |ref|,
judged against 1e-4 or, where larger, 10x the model's own float sensitivity: float32 vs
float64 PyTorch for ONNX models; for TFLite models how far the reference kernels' output
moves when each input value moves by one ulp (pose_landmark_*'s 256x256 segmentation logits
move by 1e-4 to 7e-4: every float32 kernel order lands that far apart); the ops left
on reference kernels inside the CPU delegate (nnrun --explain); our latency and ONNX
Runtime's on the same ONNX file (for TFLite models, the file nnexport writes) at 1 and 2 threads, alternating for --rounds rounds (median
of the rounds' medians).

Usage: /usr/bin/python3 bench/zoo.py [--models resnet18,hand_landmark_full,...] [--families tflite]
           [--rounds 3] [--runs 20] [--no-ort] [--readme] [--env NN_NO_AVX512=1 --tag avx2]
           [--ort-no-avx512]
--env sets a variable for our runs only (ORT runs its best); --ort-no-avx512 also times ORT
on its AVX2 kernels, as an AVX2-only host runs it (bench/peers/ort_no_avx512.py), in four more
columns; --tag names the results file,
the README section (<!-- zoo-TAG:begin -->) and the chart, so the AVX2 table sits beside
the default one.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = os.path.join(ROOT, "bench", "zoo")
NNRUN = os.path.join(ROOT, "build", "engine", "nnrun")
PEERS = os.path.join(ROOT, "bench", "peers")
README = os.path.join(ROOT, "bench", "README.md")

# name -> (family, torchvision constructor or npm file, input size)
TORCHVISION = {
    "resnet18": 224, "resnet50": 224, "regnet_x_400mf": 224, "densenet121": 224, "googlenet": 224,
    "inception_v3": 299, "efficientnet_b0": 224, "mnasnet1_0": 224, "shufflenet_v2_x1_0": 224,
    "squeezenet1_1": 224, "mobilenet_v2": 224, "mobilenet_v3_small": 224, "mobilenet_v3_large": 224,
    "convnext_tiny": 224, "vgg11": 224,
}
SEGMENTATION = {"fcn_resnet50": 256, "deeplabv3_mobilenet_v3_large": 256, "lraspp_mobilenet_v3_large": 256}
# npm package@version, its tarball's sha256, the .tflite files used from it
NPM = {
    "@mediapipe/face_detection@0.4.1657300184": [
        "face_detection_short_range.tflite", "face_detection_full_range.tflite",
        "face_detection_full_range_sparse.tflite"],
    "@mediapipe/hands@0.4.1675469240": ["hand_landmark_lite.tflite", "hand_landmark_full.tflite"],
    "@mediapipe/pose@0.5.1675469404": ["pose_landmark_lite.tflite", "pose_landmark_full.tflite",
                                       "pose_landmark_heavy.tflite"],
}
ASSET_TFLITE = ["selfie_segmentation.tflite", "selfie_segmentation_landscape.tflite"]


def all_models():
    m = {}
    for name, size in TORCHVISION.items():
        m[name] = ("torchvision", size)
    for name, size in SEGMENTATION.items():
        m[name] = ("segmentation", size)
    for pkg, files in NPM.items():
        for f in files:
            m[f[:-len(".tflite")]] = ("tflite-npm", pkg)
    for f in ASSET_TFLITE:
        m[f[:-len(".tflite")]] = ("tflite-asset", f)
    return m


# Bumped when the torchvision models or their references change: prepare() remakes them.
TORCH_RECIPE = "bn-calibrated-on-photos-1"

# Random weights (torch.manual_seed(0)) with the batch-norm statistics measured on real photos
# (scripts/make_reference_models.py's calibrate_batchnorm: with the default statistics
# activations fade and an output can be the same for every input, deeplabv3's was), the
# input a real photo; input_dependence.txt: how much the output moves for another photo.
MAKE_TORCH = r'''
import sys, numpy as np, torch, torchvision
name, family, size, out, scripts = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
sys.path.insert(0, scripts)
from make_reference_models import calibrate_batchnorm, photos
torch.manual_seed(0)
if family == "segmentation":
    base = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None).eval()
    class Seg(torch.nn.Module):
        def __init__(self, m):
            super().__init__(); self.m = m
        def forward(self, x):
            return self.m(x)["out"]
    model = Seg(base).eval()
else:
    kw = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") else {}
    model = getattr(torchvision.models, name)(weights=None, **kw).eval()
images = photos(size)
calibrate_batchnorm(model, images[:16], 1)
x = images[16:17].numpy().copy()
with torch.no_grad():
    ref = model(torch.from_numpy(x)).numpy()
    other = model(images[17:18]).numpy()
    ref64 = model.double()(torch.from_numpy(x).double()).numpy()
    model.float()
sens = float(np.abs(ref - ref64).max() / max(np.abs(ref64).max(), 1e-30))
torch.onnx.export(model, torch.from_numpy(x), out + "/model.onnx", opset_version=13,
                  input_names=["input"], output_names=["output"])
np.save(out + "/input.npy", x)
np.save(out + "/reference.npy", ref)
open(out + "/sensitivity.txt", "w").write(repr(sens))
dep = float(np.abs(ref - other).max() / max(np.abs(ref).max(), 1e-30))
open(out + "/input_dependence.txt", "w").write(repr(dep))
open(out + "/recipe.txt", "w").write(sys.argv[6])
'''


def tflite_input_shapes(model):
    """The input shapes of a .tflite file (flatc's JSON dump with the importer's schema)."""
    import tempfile
    schema = os.path.join(ROOT, "engine", "import", "tflite", "tflite_schema.fbs")
    with tempfile.TemporaryDirectory() as tmp:
        r = sh(["flatc", "-t", "--strict-json", "--raw-binary", "-o", tmp, schema, "--", model])
        if r.returncode != 0:
            raise RuntimeError("flatc: " + r.stderr.strip()[-200:])
        dump = json.load(open(os.path.join(tmp, os.path.basename(model)[:-len(".tflite")] + ".json")))
    graph = dump["subgraphs"][0]
    return [graph["tensors"][i]["shape"] for i in graph["inputs"]]


def sh(cmd, timeout=1800, env=None, cwd=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


def fetch_npm(pkg):
    """The package's tarball in bench/zoo/npm, unpacked; returns its folder."""
    dest = os.path.join(ZOO, "npm", pkg.replace("/", "_").replace("@", ""))
    if os.path.isdir(dest):
        return dest
    os.makedirs(os.path.join(ZOO, "npm"), exist_ok=True)
    r = sh(["npm", "pack", pkg, "--json"], cwd=os.path.join(ZOO, "npm"))
    if r.returncode != 0:
        raise RuntimeError(f"npm pack {pkg}: {r.stderr.strip()}")
    tgz = os.path.join(ZOO, "npm", json.loads(r.stdout)[0]["filename"])
    digest = hashlib.sha256(open(tgz, "rb").read()).hexdigest()
    with tarfile.open(tgz) as t:
        t.extractall(dest)
    open(os.path.join(dest, "sha256.txt"), "w").write(digest + "  " + os.path.basename(tgz) + "\n")
    return dest


def prepare(name, family, arg):
    """Makes or fetches the model; returns (model file, input .npy or None, reference .npy or None, sens)."""
    d = os.path.join(ZOO, name)
    os.makedirs(d, exist_ok=True)
    if family in ("torchvision", "segmentation"):
        recipe = os.path.join(d, "recipe.txt")
        if not os.path.exists(recipe) or open(recipe).read() != TORCH_RECIPE:
            r = sh(["/usr/bin/python3", "-c", MAKE_TORCH, name, family, str(arg), d,
                    os.path.join(ROOT, "scripts"), TORCH_RECIPE], timeout=3600)
            if r.returncode != 0:
                raise RuntimeError("export: " + (r.stderr.strip().splitlines() or ["?"])[-1])
        sens = float(open(os.path.join(d, "sensitivity.txt")).read())
        return os.path.join(d, "model.onnx"), os.path.join(d, "input.npy"), os.path.join(d, "reference.npy"), sens
    if family == "tflite-npm":
        src = os.path.join(fetch_npm(arg), "package", name + ".tflite")
    else:
        src = os.path.join(ROOT, "assets", "models", arg)
    if not os.path.exists(src):
        raise RuntimeError(f"{src} missing")
    inp = os.path.join(d, "input.npy")
    if not os.path.exists(inp):
        import numpy as np
        shapes = tflite_input_shapes(src)
        if len(shapes) != 1:
            raise RuntimeError(f"{len(shapes)} inputs: the zoo feeds one")
        np.save(inp, np.random.default_rng(0).uniform(-1, 1, shapes[0]).astype(np.float32))
    return src, inp, None, None


OUR_ENV = {}  # --env: for our runs only


def nnrun(model, args, threads=1, env=None):
    cmd = [NNRUN, model, "--json", "--threads", str(threads)] + args
    r = sh(cmd, env=dict(os.environ, **OUR_ENV, **(env or {})))
    if r.returncode != 0:
        raise RuntimeError((r.stderr.strip().splitlines() or ["nnrun failed"])[-1])
    out = r.stdout
    return json.loads(out[out.find("{"):])


def export_onnx(name, model):
    """A TFLite model as ONNX (nnexport: the same graph, NCHW inside) for ORT; None if it cannot."""
    out = os.path.join(ZOO, name, "model.onnx")
    if not os.path.exists(out):
        r = sh([os.path.join(ROOT, "build", "engine", "nnexport"), model, "-o", out, "-q"])
        if r.returncode != 0:
            print(f"  {name}: nnexport failed, no ORT figure: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
            return None
    return out


def round_trip_ns():
    """The two vCPUs' cache-line round trip now (build/bench/nncores): ~120 ns when the host
    has them near each other, ~410 ns far; 2-thread times follow it (bench/README.md)."""
    r = sh([os.path.join(ROOT, "build", "bench", "nncores")])
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])["round_trip_ns"]
    except (ValueError, KeyError, IndexError):
        return None


FAR_NS = 250  # between the near (~120 ns) and far (~410 ns) placements


def placement(r):
    v = [x for x in r.get("round_trip_ns") or [] if x]
    if not v:
        return "n/a"
    kinds = {"far" if x > FAR_NS else "near" for x in v}
    return (kinds.pop() if len(kinds) == 1 else "mixed") + f" ({min(v):.0f}-{max(v):.0f} ns)"


ORT_AVX2_ENV = {}  # --ort-no-avx512: NN_ORT_MODULE, the copy of ORT that sees no AVX-512


def ort_ms(onnx, threads, runs, avx2=False):
    r = sh(["node", os.path.join(PEERS, "ort_bench.js"), onnx, str(threads), str(runs), "5"],
           env=dict(os.environ, **ORT_AVX2_ENV) if avx2 else None)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])["median_ms"]


def load_outputs(folder):
    import numpy as np
    files = sorted(f for f in os.listdir(folder) if f.startswith("output_"))
    return [np.load(os.path.join(folder, f)) for f in files]


def rel_error(a, b):
    import numpy as np
    return float(np.abs(a.astype(np.float64) - b).max() / max(np.abs(b).max(), 1e-30))


def model_gflop(model, io):
    """The model's multiply-adds x 2 as nnrun --profile counts them (its 'total (X GFLOP)' line)."""
    r = sh([NNRUN, model, "-d", "cpu", "--threads", "1", "--runs", "1", "--warmup", "0", "--profile"] + io)
    m = re.search(r"total \(([0-9.]+) GFLOP\)", r.stdout + r.stderr)
    return float(m.group(1)) if m else None


def reference_ops(plan):
    """Ops the CPU delegate left on reference kernels, from --explain's 'cpu kernels' lines."""
    for line in plan.splitlines():
        m = re.match(r"\s+reference \((\d+)\): (.*)", line)
        if m:
            return int(m.group(1)), m.group(2)
    return 0, ""


def check_and_time(name, family, arg, a):
    row = {"model": name, "family": family}
    model, inp, ref, sens = prepare(name, family, arg)
    if sens is None:  # TFLite: the reference kernels on the input moved by one ulp, both ways at random
        import numpy as np
        x = np.load(inp)
        moved = x * (1 + np.random.default_rng(1).choice([-1.0, 1.0], x.shape) * 2.0 ** -23)
        np.save(os.path.join(ZOO, name, "input_ulp.npy"), moved.astype(np.float32))
        base = os.path.join(ZOO, name, "out")
        for tag, path in (("ref", inp), ("ref_ulp", os.path.join(ZOO, name, "input_ulp.npy"))):
            shutil.rmtree(f"{base}/{tag}", ignore_errors=True)
            nnrun(model, ["--input", path, "-d", "reference", "--runs", "1", "--warmup", "0",
                          "--save-outputs", f"{base}/{tag}"])
        sens = max(rel_error(a, b) for a, b in zip(load_outputs(f"{base}/ref_ulp"), load_outputs(f"{base}/ref")))
    row["sensitivity"] = sens
    row["tolerance"] = max(1e-4, 10 * sens)
    dep = os.path.join(ZOO, name, "input_dependence.txt")
    if os.path.exists(dep):  # torchvision, random weights: an output the input hardly moves proves little
        row["input_dependence"] = float(open(dep).read())
    out_dir = os.path.join(ZOO, name, "out")
    shutil.rmtree(out_dir + "/cpu", ignore_errors=True)
    io = ["--input", inp] if inp else ["--random"]
    info = nnrun(model, io + ["-d", "cpu", "--runs", "1", "--warmup", "0", "--explain", "--save-outputs",
                              out_dir + "/cpu"])
    row["ops"] = info["plan"].count("\n")  # replaced below
    m = re.search(r"partition 0: \w+, (\d+) ops", info["plan"])
    row["ops"] = int(m.group(1)) if m else None
    row["ref_ops"], row["ref_list"] = reference_ops(info["plan"])
    row["gflop"] = model_gflop(model, io)
    ours = load_outputs(out_dir + "/cpu")
    if ref:
        import numpy as np
        refs = [np.load(ref)]
    else:  # made above, with the sensitivity
        refs = load_outputs(out_dir + "/ref")
    row["rel_error"] = max(rel_error(o, r) for o, r in zip(ours, refs))
    row["ok"] = row["rel_error"] <= row["tolerance"]
    onnx = model if model.endswith(".onnx") else export_onnx(name, model)
    times = {("nn", 1): [], ("nn", 2): [], ("ort", 1): [], ("ort", 2): []}
    if ORT_AVX2_ENV:
        times.update({("ortavx2_", 1): [], ("ortavx2_", 2): []})
    row["round_trip_ns"] = []
    for _ in range(a.rounds):
        for t in (1, 2):
            if t == 2:
                row["round_trip_ns"].append(round_trip_ns())
            times[("nn", t)].append(nnrun(model, io + ["-d", "cpu", "--runs", str(a.runs), "--warmup", "3"], t)
                                    ["median_ms"])
            if onnx and not a.no_ort:
                for who in [w for w in ("ort", "ortavx2_") if (w, t) in times]:
                    ms = ort_ms(onnx, t, a.runs, avx2=who != "ort")
                    if ms is not None:
                        times[(who, t)].append(ms)
    for (who, t), v in times.items():
        row[f"{who}{t}_ms"] = statistics.median(v) if v else None
    return row


def summarize(ref_list):
    """'2 CONCATENATION, 8 TRANSPOSE, 12 CONCATENATION' -> 'CONCATENATION x2, TRANSPOSE x1'"""
    counts = {}
    for item in filter(None, (x.strip() for x in ref_list.split(","))):
        if item.startswith("..."):  # "... 12 more": not listed by type
            continue
        t = item.split(" ", 1)[-1].split("+")[0]
        counts[t] = counts.get(t, 0) + 1
    return ", ".join(f"{t} x{n}" for t, n in counts.items())


def where(r, threads):
    """', far placement' after a 2-thread figure taken (partly) with the vCPUs far apart."""
    kind = placement(r).split(" ")[0]
    return f", {kind} placement" if threads == 2 and kind in ("far", "mixed") else ""


def fmt(v, spec):
    return format(v, spec) if v is not None else "n/a"


def speedup(r):
    return fmt(r["nn1_ms"] / r["nn2_ms"], ".2f") + "x" if r.get("nn1_ms") and r.get("nn2_ms") else "n/a"


def table(rows):
    avx2 = any(r.get("ortavx2_1_ms") for r in rows)  # a run with --ort-no-avx512: both ORTs' columns
    extra = " ORT-AVX2 1T ms | ours/ORT-AVX2 1T | ORT-AVX2 2T ms | ours/ORT-AVX2 2T |" if avx2 else ""
    lines = ["| model | family | ops | GFLOP | max rel. error (tolerance) | ops on reference kernels | "
             "ours 1T ms | ORT 1T ms | ours/ORT 1T | ours 2T ms | ORT 2T ms | ours/ORT 2T | ours 1T/2T | "
             "vCPU placement at 2T |" + extra,
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" * 4 if avx2 else "")]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['family']} | FAILED: {r['error']} ||||||||||||" + ("||||" if avx2 else ""))
            continue
        ratio = lambda t, who="ort": (fmt(r[f"nn{t}_ms"] / r[f"{who}{t}_ms"], ".2f")
                                      if r.get(f"{who}{t}_ms") and r.get(f"nn{t}_ms") else "n/a")
        lines.append(
            f"| {r['model']} | {r['family']} | {r['ops']} | {fmt(r.get('gflop'), '.2f')} | {r['rel_error']:.1e} ({r['tolerance']:.0e})"
            f"{'' if r['ok'] else ' **over**'} | {r['ref_ops']}{' (' + summarize(r['ref_list']) + ')' if r['ref_ops'] else ''} | "
            f"{fmt(r['nn1_ms'], '.2f')} | {fmt(r['ort1_ms'], '.2f')} | {ratio(1)} | "
            f"{fmt(r['nn2_ms'], '.2f')} | {fmt(r['ort2_ms'], '.2f')} | {ratio(2)} | {speedup(r)} | {placement(r)} |"
            + (f" {fmt(r.get('ortavx2_1_ms'), '.2f')} | {ratio(1, 'ortavx2_')} |"
               f" {fmt(r.get('ortavx2_2_ms'), '.2f')} | {ratio(2, 'ortavx2_')} |" if avx2 else ""))
    ratios = {t: [r[f"nn{t}_ms"] / r[f"ort{t}_ms"] for r in rows
                  if "error" not in r and r.get(f"ort{t}_ms") and r.get(f"nn{t}_ms")] for t in (1, 2)}
    if ratios[1]:
        import math
        gm = {t: math.exp(sum(map(math.log, v)) / len(v)) for t, v in ratios.items() if v}
        lines.append("")
        lines.append(f"Geometric mean of ours/ORT over the {len(ratios[1])} models ORT runs: "
                     + ", ".join(f"{gm[t]:.2f} at {t} thread{'s' if t > 1 else ''}" for t in gm) + ".")
        over = [f"{r['model']} ({t}T {r[f'nn{t}_ms'] / r[f'ort{t}_ms']:.2f}{where(r, t)})" for r in rows if "error" not in r
                for t in (1, 2) if r.get(f"ort{t}_ms") and r.get(f"nn{t}_ms") and r[f"nn{t}_ms"] > r[f"ort{t}_ms"]]
        lines.append("")
        lines.append("Slower than ORT: " + (", ".join(over) if over else "none") + ".")
    if avx2:
        import math
        v2 = {t: [r[f"nn{t}_ms"] / r[f"ortavx2_{t}_ms"] for r in rows
                  if "error" not in r and r.get(f"ortavx2_{t}_ms") and r.get(f"nn{t}_ms")] for t in (1, 2)}
        gm = {t: math.exp(sum(map(math.log, v)) / len(v)) for t, v in v2.items() if v}
        over = [f"{r['model']} ({t}T {r[f'nn{t}_ms'] / r[f'ortavx2_{t}_ms']:.2f})" for r in rows if "error" not in r
                for t in (1, 2) if r.get(f"ortavx2_{t}_ms") and r.get(f"nn{t}_ms") and r[f"nn{t}_ms"] > r[f"ortavx2_{t}_ms"]]
        lines += ["", "Against ORT on its AVX2 kernels (--ort-no-avx512: what an AVX2-only host runs), geometric mean of "
                  "ours/ORT-AVX2: " + ", ".join(f"{gm[t]:.2f} at {t} thread{'s' if t > 1 else ''}" for t in gm) + ".",
                  "", "Slower than ORT-AVX2: " + (", ".join(over) if over else "none") + "."]
    slow = [f"{r['model']} ({speedup(r)}{where(r, 2)})" for r in rows if "error" not in r and (r.get("gflop") or 0) > 0.3
            and r.get("nn1_ms") and r.get("nn2_ms") and r["nn1_ms"] / r["nn2_ms"] < 1.7]
    lines.append("")
    lines.append("Over 0.3 GFLOP with 2 threads less than 1.7x faster than 1: " + (", ".join(slow) if slow else "none") + ".")
    deps = [r["input_dependence"] for r in rows if "input_dependence" in r]
    flat = [r["model"] for r in rows if r.get("input_dependence", 1) < 1e-3]
    if deps:
        lines.append("")
        lines.append(f"Random-weight models (batch norm calibrated on photos): another photo moves the output by "
                     f"{min(deps):.2g}-{max(deps):.2g} of its largest value; under 1e-3: "
                     + (", ".join(flat) if flat else "none") + ".")
    return "\n".join(lines)


def chart(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in rows if "error" not in r and r.get("ort1_ms")]
    if not rows:
        return False
    names = [r["model"] for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(rows) + 1.5))
    ys = range(len(rows))
    for off, t, color in ((-0.2, 1, "#3465a4"), (0.2, 2, "#f57900")):
        ax.barh([y + off for y in ys], [r[f"nn{t}_ms"] / r[f"ort{t}_ms"] for r in rows], height=0.4, color=color,
                label=f"{t} thread{'s' if t > 1 else ''}")
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_yticks(list(ys))
    ax.set_yticklabels(names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("nnpipe CPU latency / ONNX Runtime latency (same ONNX file; < 1 = nnpipe faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return True


def host_isa():
    flags = set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    name = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    isa = "AVX-512 (" + ", ".join(sorted(f for f in flags if f.startswith("avx512"))) + ")" if "avx512f" in flags \
        else ("AVX2 + FMA" if "avx2" in flags else "SSE")
    return f"{name}, {os.cpu_count()} cores, {isa}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="", help="comma-separated names (default: all)")
    ap.add_argument("--families", default="", help="torchvision,segmentation,tflite-npm,tflite-asset")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--readme", action="store_true", help="write the table and chart into bench/README.md")
    ap.add_argument("--from-results", action="store_true", help="render bench/zoo/results.json, run nothing")
    ap.add_argument("--env", action="append", default=[], help="VAR=value for our runs only (repeatable)")
    ap.add_argument("--ort-no-avx512", action="store_true",
                    help="also time ORT on its AVX2 kernels (bench/peers/ort_no_avx512.py): an AVX2-only host's ORT")
    ap.add_argument("--tag", default="", help="results_TAG.json, README section zoo-TAG, chart zoo-latency-TAG.png")
    a = ap.parse_args()
    for item in a.env:
        key, _, value = item.partition("=")
        OUR_ENV[key] = value
    suffix = "_" + a.tag if a.tag else ""
    if a.ort_no_avx512 and not a.no_ort and not a.from_results:
        module = subprocess.run([sys.executable, os.path.join(PEERS, "ort_no_avx512.py")], check=True,
                                capture_output=True, text=True).stdout.strip().splitlines()[-1]
        ORT_AVX2_ENV["NN_ORT_MODULE"] = module
    results = os.path.join(ZOO, f"results{suffix}.json")
    models = all_models()
    names = [n for n in (a.models.split(",") if a.models else models) if n]
    for n in names:
        if n not in models:
            sys.exit(f"zoo.py: unknown model {n}; known: {', '.join(models)}")
    if a.families:
        names = [n for n in names if models[n][0] in a.families.split(",")]
    if not a.no_ort and not os.path.isdir(os.path.join(PEERS, "node_modules", "onnxruntime-node")):
        sh(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=PEERS)
    rows = []
    os.makedirs(ZOO, exist_ok=True)
    if a.from_results:
        names = []
        rows = json.load(open(results))
    for n in names:
        family, arg = models[n]
        t0 = time.time()
        try:
            row = check_and_time(n, family, arg, a)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            row = {"model": n, "family": family, "error": str(e).replace("|", "/")[:200]}
        rows.append(row)
        print(f"{n}: {json.dumps(row)} ({time.time() - t0:.0f} s)", file=sys.stderr)
    if not a.from_results:
        json.dump(rows, open(results, "w"), indent=1)
    text = table(rows)
    print(text)
    failed = [r["model"] for r in rows if "error" in r or not r["ok"]]
    with_ref = [r["model"] for r in rows if r.get("ref_ops")]
    print(f"\n{len(rows)} models, {len(failed)} failing ({', '.join(failed)}), "
          f"{len(with_ref)} with ops on reference kernels ({', '.join(with_ref)})")
    if a.readme:
        png = f"zoo-latency{suffix.replace('_', '-')}.png"
        has_chart = chart(rows, os.path.join(ROOT, "bench", png))
        env = "".join(f"{k}={v} " for k, v in OUR_ENV.items())
        flags = ("".join(f" --env {k}={v}" for k, v in OUR_ENV.items())
                 + (" --ort-no-avx512" if a.ort_no_avx512 else "") + (f" --tag {a.tag}" if a.tag else ""))
        section = (f"Host: {host_isa()}; load average {os.getloadavg()[0]:.0f} at the end. Command: "
                   f"`/usr/bin/python3 bench/zoo.py --rounds {a.rounds} --runs {a.runs}"
                   f"{' --models ' + a.models if a.models else ''}{flags}`"
                   f"{' (ours with ' + env.strip() + ')' if env else ''}.\n\n{text}\n")
        if has_chart:
            section += f"\n![zoo latency against ONNX Runtime]({png})\n"
        readme = open(README).read()
        marker = "zoo-" + a.tag if a.tag else "zoo"
        begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
        if begin in readme:
            readme = readme[:readme.index(begin) + len(begin)] + "\n" + section + readme[readme.index(end):]
        else:
            at = readme.index("<!-- zoo:end -->") + len("<!-- zoo:end -->") if "<!-- zoo:end -->" in readme \
                else len(readme)
            readme = readme[:at] + f"\n\n{begin}\n{section}{end}" + readme[at:]
        open(README, "w").write(readme)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
