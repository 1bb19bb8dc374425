#!/usr/bin/env python3
"""A/B: two builds (or two environments) of the engine on one model, interleaved.

Shared machines drift by 30% within minutes, so a before/after pair taken minutes apart
says little. This alternates A and B for several rounds and prints, per side, the median of
the per-round medians and the minimum.

    cp build/engine/nnbench_quick /tmp/nnb_before      # before the change
    ... change, rebuild ...
    /usr/bin/python3 bench/ab.py --a /tmp/nnb_before --b build/engine/nnbench_quick \\
        assets/models/selfie_segmentation.tflite --threads 1 --rounds 8
    /usr/bin/python3 bench/ab.py --a-env NN_NO_NATIVE_CONV=1 model.onnx   # same binary, A with env
"""
import argparse
import os
import re
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BIN = os.path.join(ROOT, "build", "engine", "nnbench_quick")


def median_ms(binary, model, threads, runs, env):
    out = subprocess.run([binary, model, "--delegates", "cpu", "--threads", str(threads), "--runs", str(runs),
                          "--warmup", "5"], capture_output=True, text=True, env=dict(os.environ, **env), check=True)
    m = re.search(r"^latency over \d+ runs: median ([0-9.]+) ms", out.stdout + out.stderr, re.M)
    if not m:
        raise SystemExit(f"ab.py: no latency line from {binary}:\n{out.stdout}{out.stderr}")
    return float(m.group(1))


def parse_env(items):
    env = {}
    for item in items or []:
        key, _, value = item.partition("=")
        env[key] = value
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--a", default=DEFAULT_BIN, help="binary A (nnbench_quick)")
    ap.add_argument("--b", default=DEFAULT_BIN, help="binary B (nnbench_quick)")
    ap.add_argument("--a-env", action="append", help="VAR=value for A only (repeatable)")
    ap.add_argument("--b-env", action="append", help="VAR=value for B only (repeatable)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30, help="timed runs per round")
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    sides = {"A": (args.a, parse_env(args.a_env)), "B": (args.b, parse_env(args.b_env))}
    results = {"A": [], "B": []}
    for i in range(args.rounds):
        # A B, B A, A B, ...: neither side always runs first after the other's warm caches.
        for side in ("A", "B") if i % 2 == 0 else ("B", "A"):
            binary, env = sides[side]
            results[side].append(median_ms(binary, args.model, args.threads, args.runs, env))
    for side, values in results.items():
        print(f"{side}: median of medians {statistics.median(values):.3f} ms, min {min(values):.3f} ms  "
              f"({' '.join(f'{v:.2f}' for v in values)})")
    a, b = statistics.median(results["A"]), statistics.median(results["B"])
    print(f"B / A = {b / a:.3f}")


if __name__ == "__main__":
    main()
