#!/usr/bin/python3
"""Latency under CPU contention: threads 1/2/4, with 0, 1 and 2 busy processes beside it.

A busy process is `yes > /dev/null` (one core's worth of work that never sleeps). For each
load, the thread counts alternate for --rounds rounds (nnrun, CPU delegate, random input);
the table gives the median of the per-round medians in ms, and the ratios the targets speak
of: threads=2 / threads=1 (target <= 1.5 under load) and threads=4 / threads=2 (<= 1.0).

Usage: /usr/bin/python3 bench/contention.py [--models selfie_segmentation.tflite,...]
           [--rounds 5] [--runs 50] [--nnrun build/engine/nnrun] [--markdown]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "assets", "models")


def median_ms(nnrun, model, threads, runs):
    out = subprocess.run([nnrun, model, "--random", "-d", "cpu", "--threads", str(threads), "--runs", str(runs),
                          "--warmup", "5", "--json"], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"contention.py: {model} at {threads} threads: {out.stderr.strip()}")
    return json.loads(out.stdout)["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="selfie_segmentation.tflite,mobilenet_v2.onnx")
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--loads", default="0,1,2", help="numbers of busy processes")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--nnrun", default=os.path.join(ROOT, "build", "engine", "nnrun"))
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    rows = []
    for name in a.models.split(","):
        model = name if os.path.exists(name) else os.path.join(MODELS, name)
        for load in (int(x) for x in a.loads.split(",")):
            hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(load)]
            try:
                per = {t: [] for t in threads}
                for _ in range(a.rounds):
                    for t in threads:
                        per[t].append(median_ms(a.nnrun, model, t, a.runs))
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
            med = {t: statistics.median(v) for t, v in per.items()}
            rows.append((os.path.basename(model), load, med))
            print(f"{os.path.basename(model)} busy={load}: " +
                  "  ".join(f"t{t} {med[t]:.3f} ms" for t in threads), file=sys.stderr)
    head = "| model | busy processes | " + " | ".join(f"threads {t} (ms)" for t in threads)
    ratio = 1 in threads and 2 in threads
    if ratio:
        head += " | t2 / t1"
    if 4 in threads and 2 in threads:
        head += " | t4 / t2"
    print(head + " |")
    print("|" + "---|" * (head.count("|")))
    for model, load, med in rows:
        line = f"| {model} | {load} | " + " | ".join(f"{med[t]:.3f}" for t in threads)
        if ratio:
            line += f" | {med[2] / med[1]:.2f}"
        if 4 in threads and 2 in threads:
            line += f" | {med[4] / med[2]:.2f}"
        print(line + " |")


if __name__ == "__main__":
    main()
