#!/usr/bin/python3
"""Engine benchmark beside its peers, in one run on one machine.

For every model x threads {1, 2}: nnpipe (nnbench, .nnapi files, CPU delegate), ONNX Runtime
(onnxruntime-node, CPU EP), PyTorch 1.13 (optimize_for_mobile, channels_last,
OMP_WAIT_POLICY=PASSIVE) and OpenCV DNN 4.6, on the same ONNX files where a peer can read
them; nnpipe and ONNX Runtime alternate for --rounds rounds (median of the rounds'
medians). Prints one table (ms, GFLOP/s, % of a measured one-core peak), writes
bench/results/engine.{csv,json} and a PNG chart, and with --readme rewrites the table in
bench/README.md.

Usage: /usr/bin/python3 bench/run.py [--runs 100] [--models selfie_segmentation,...] [--readme]
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import platform
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
MODELS = os.path.join(ROOT, "assets", "models")
RESULTS = os.path.join(ROOT, "bench", "results")
PEERS = os.path.join(ROOT, "bench", "peers")

# name -> (source file, the ONNX file peers run or None, PyTorch source or None)
ALL_MODELS = {
    "selfie_segmentation": ("selfie_segmentation.tflite", "selfie_segmentation.onnx", None),
    "selfie_segmentation_landscape": ("selfie_segmentation_landscape.tflite", "selfie_segmentation_landscape.onnx", None),
    "mobilenet_v2": ("mobilenet_v2.onnx", "mobilenet_v2.onnx", "mobilenet_v2"),
    "lraspp_mobilenet_v3_large": ("lraspp_mobilenet_v3_large.onnx", "lraspp_mobilenet_v3_large.onnx",
                                  "lraspp_mobilenet_v3_large"),
}


def run_json(cmd, env=None, timeout=900):
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, timeout=timeout).stdout
    except subprocess.CalledProcessError as e:
        print(f"  ! {' '.join(cmd[:3])}...: {e.stderr.strip().splitlines()[-1] if e.stderr.strip() else e}",
              file=sys.stderr)
        return None
    except subprocess.TimeoutExpired:
        print(f"  ! {' '.join(cmd[:3])}...: timed out", file=sys.stderr)
        return None
    start = out.find("{") if out.lstrip().startswith("{") else out.find("[")
    return json.loads(out[start:])


def ensure_peers_installed():
    if not os.path.isdir(os.path.join(PEERS, "node_modules", "onnxruntime-node")):
        # Its install script would download GPU files: the CPU library ships in the package.
        subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=PEERS, check=True,
                       capture_output=True)


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", default=",".join(ALL_MODELS))
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--readme", action="store_true", help="rewrite the table in bench/README.md")
    ap.add_argument("--rounds", type=int, default=5,
                    help="nnpipe and ONNX Runtime alternate this many times per model and thread count; "
                         "the table takes the median of the rounds' medians")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    os.makedirs(RESULTS, exist_ok=True)
    if not args.no_peers:
        ensure_peers_installed()

    peak = run_json([os.path.join(BUILD, "bench", "nnpeak")]) or {"gflops": float("nan"), "isa": "?"}
    print(f"one-core fp32 peak: {peak['gflops']:.1f} GFLOP/s ({peak['isa']}), CPU: {cpu_name()}, "
          f"{os.cpu_count()} cores")
    # The cost of handing data to the other core bounds how well small models scale.
    cores = run_json([os.path.join(BUILD, "bench", "nncores")]) or {}
    if cores.get("round_trip_ns"):
        print(f"core-to-core: round trip {cores['round_trip_ns']:.0f} ns, reading 1 MiB the other core wrote "
              f"{cores['cross_read_gbps']:.0f} GB/s (own: {cores['local_read_gbps']:.0f} GB/s), "
              f"a 2-thread pthreadpool job of 20 us serial work {cores['pool_job_20us_us']:.1f} us")

    rows = []
    for name in args.models.split(","):
        source, onnx_name, torch_name = ALL_MODELS[name]
        src_path = os.path.join(MODELS, source)
        nnapi = os.path.join(MODELS, name + ".nnapi")
        if not os.path.exists(src_path):
            print(f"  ! {src_path} missing: run scripts/setup.sh", file=sys.stderr)
            continue
        subprocess.run([os.path.join(BUILD, "engine", "nnconvert"), "-q", src_path, "-o", nnapi], check=True)
        onnx_path = os.path.join(MODELS, onnx_name) if onnx_name else None
        if onnx_path and not os.path.exists(onnx_path) and source.endswith(".tflite"):
            # MediaPipe ships only .tflite: the peers run our ONNX export of the same IR.
            subprocess.run([os.path.join(BUILD, "engine", "nnexport"), src_path, "-o", onnx_path], check=True,
                           capture_output=True)
        for t in threads:
            row = {"model": name, "threads": t}
            # Shared machines drift within minutes: nnpipe and ONNX Runtime alternate round by
            # round so both see the same conditions, and each reports its median round.
            mine, ort = [], []
            have_onnx = not args.no_peers and onnx_path and os.path.exists(onnx_path)
            for _ in range(max(args.rounds, 1)):
                # Where the host put the two vCPUs this round (it moves them every few tens
                # of seconds here): probed before and after, "mixed" when they disagree.
                before = placement() if t > 1 else None
                r = run_json([os.path.join(BUILD, "bench", "nnbench"), nnapi, "--threads", str(t), "--delegates",
                              "cpu", "--runs", str(args.runs), "--warmup", str(args.warmup), "--json"])
                if r:
                    mine.append(r[0])
                if have_onnx:
                    r = run_json(["node", os.path.join(PEERS, "ort_bench.js"), onnx_path, str(t), str(args.runs),
                                  str(args.warmup)])
                    if r:
                        ort.append(r)
                if t > 1:
                    after = placement()
                    where = before if before == after else "mixed"
                    row.setdefault("placements", []).append(where)
                    if mine:
                        mine[-1]["placement"] = where
                    if ort and have_onnx:
                        ort[-1]["placement"] = where
            if mine:
                med = lambda key: statistics.median(m[key] for m in mine)
                row.update(nnpipe_ms=med("median_ms"), nnpipe_p90=med("p90_ms"), nnpipe_p99=med("p99_ms"),
                           load_ms=statistics.median(m["load_ms"] + m["open_ms"] for m in mine), flops=mine[0]["flops"],
                           nnpipe_rounds=[m["median_ms"] for m in mine])
            if ort:
                row["ort_ms"] = statistics.median(r["median_ms"] for r in ort)
                row["ort_rounds"] = [r["median_ms"] for r in ort]
            for side, runs in (("nnpipe", mine), ("ort", ort)):
                for where in ("shared", "split"):
                    ms = [m["median_ms"] for m in runs if m.get("placement") == where]
                    if ms:
                        row[f"{side}_ms_{where}"] = statistics.median(ms)
                        row[f"{side}_rounds_{where}"] = len(ms)
            if have_onnx:
                r = run_json(["/usr/bin/python3", os.path.join(PEERS, "opencv_bench.py"), onnx_path, str(t),
                              str(max(args.runs // 2, 10)), str(max(args.warmup // 2, 3))])
                if r:
                    row["opencv_ms"] = r["median_ms"]
            if not args.no_peers and torch_name:
                env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(t))
                r = run_json(["/usr/bin/python3", os.path.join(PEERS, "torch_bench.py"), torch_name, str(t),
                              str(max(args.runs // 2, 10)), str(max(args.warmup // 2, 3))], env=env)
                if r:
                    row["torch_ms"] = r["median_ms"]
            if "nnpipe_ms" in row:
                row["gflops"] = row["flops"] / row["nnpipe_ms"] / 1e6
                row["pct_peak"] = 100 * row["gflops"] / (peak["gflops"] * t)
            if "nnpipe_ms" in row and "ort_ms" in row:
                row["vs_ort"] = row["nnpipe_ms"] / row["ort_ms"]
            rows.append(row)
            print(format_row(row))

    machine = {"cpu": cpu_name(), "cores": os.cpu_count(), "peak_gflops_1core": peak["gflops"], "isa": peak["isa"],
               "core_to_core": cores}
    with open(os.path.join(RESULTS, "engine.json"), "w") as f:
        json.dump({"machine": machine, "rows": rows}, f, indent=2)
    keys = ["model", "threads", "nnpipe_ms", "nnpipe_p90", "nnpipe_p99", "ort_ms", "torch_ms", "opencv_ms", "vs_ort",
            "gflops", "pct_peak", "load_ms", "flops"]
    with open(os.path.join(RESULTS, "engine.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    table = markdown_table(rows, machine, args)
    print()
    print(table)
    chart(rows, os.path.join(RESULTS, "engine.png"))
    if args.readme:
        update_readme(table)
        # The chart bench/README.md shows (results/ itself is not kept in git).
        shutil.copyfile(os.path.join(RESULTS, "engine.png"), os.path.join(ROOT, "bench", "engine-latency.png"))


def placement():
    """'shared' when a cache line crosses between the two cores in under 150 ns (both vCPUs
    on one L3), 'split' when it takes longer (different dies: ~350 ns here), else None."""
    c = run_json([os.path.join(BUILD, "bench", "nncores")]) or {}
    rt = c.get("round_trip_ns")
    return None if rt is None else "shared" if rt < 150 else "split"


def fmt(v, spec=".2f"):
    return "—" if v is None else format(v, spec)


def format_row(r):
    return (f"{r['model']:<32} {r['threads']} thr  nnpipe {fmt(r.get('nnpipe_ms'))} ms  ORT {fmt(r.get('ort_ms'))}  "
            f"torch {fmt(r.get('torch_ms'))}  OpenCV {fmt(r.get('opencv_ms'))}  x ORT {fmt(r.get('vs_ort'))}")


def markdown_table(rows, machine, args):
    lines = [f"Machine: {machine['cpu']}, {machine['cores']} cores; measured one-core fp32 peak "
             f"{machine['peak_gflops_1core']:.1f} GFLOP/s ({machine['isa']}). nnpipe and ONNX Runtime: median "
             f"of {args.rounds} alternating rounds of {args.runs} runs after {args.warmup} warm-up runs "
             f"(`/usr/bin/python3 bench/run.py --runs {args.runs} --rounds {args.rounds} --readme`); PyTorch and "
             f"OpenCV: one round.{cores_sentence(machine.get('core_to_core') or {})}", "",
             "| model | threads | nnpipe ms (p90) | ONNX Runtime ms | PyTorch ms | OpenCV DNN ms | nnpipe / ORT | "
             "GFLOP/s | % peak | load+pack ms |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['threads']} | {fmt(r.get('nnpipe_ms'))} ({fmt(r.get('nnpipe_p90'))}) | "
                     f"{fmt(r.get('ort_ms'))} | {fmt(r.get('torch_ms'))} | {fmt(r.get('opencv_ms'))} | "
                     f"{fmt(r.get('vs_ort'))} | {fmt(r.get('gflops'), '.1f')} | {fmt(r.get('pct_peak'), '.0f')} | "
                     f"{fmt(r.get('load_ms'))} |")
    scaling = []
    for model in dict.fromkeys(r["model"] for r in rows):
        by_t = {r["threads"]: r for r in rows if r["model"] == model}
        if 1 in by_t and 2 in by_t and by_t[2].get("nnpipe_ms"):
            line = f"{model} {by_t[1]['nnpipe_ms'] / by_t[2]['nnpipe_ms']:.2f}x"
            if by_t[1].get("ort_ms") and by_t[2].get("ort_ms"):
                line += f" (ONNX Runtime {by_t[1]['ort_ms'] / by_t[2]['ort_ms']:.2f}x)"
            scaling.append(line)
    if scaling:
        lines += ["", "2 threads vs 1 (latency at 1 / at 2): " + ", ".join(scaling) + "."]
    # The same, from only the 2-thread rounds the host ran with both vCPUs on one L3, and
    # from only those it ran on two dies (bench/README.md: the host moves them).
    for where, words in (("shared", "both vCPUs on one L3 (core round trip < 150 ns)"),
                         ("split", "the vCPUs on two dies (round trip > 150 ns)")):
        parts = []
        for model in dict.fromkeys(r["model"] for r in rows):
            by_t = {r["threads"]: r for r in rows if r["model"] == model}
            one, two = by_t.get(1, {}), by_t.get(2, {})
            if one.get("nnpipe_ms") and two.get(f"nnpipe_ms_{where}"):
                part = (f"{model} {one['nnpipe_ms'] / two[f'nnpipe_ms_{where}']:.2f}x "
                        f"({two[f'nnpipe_rounds_{where}']} of {len(two.get('placements', []))} rounds")
                if one.get("ort_ms") and two.get(f"ort_ms_{where}"):
                    part += f"; ONNX Runtime {one['ort_ms'] / two[f'ort_ms_{where}']:.2f}x"
                parts.append(part + ")")
        if parts:
            lines += ["", f"2 threads vs 1, rounds with {words}: " + ", ".join(parts) + "."]
    return "\n".join(lines)


def cores_sentence(c):
    if not c.get("round_trip_ns"):
        return ""
    return (f" Core to core (`build/bench/nncores`): a cache line's round trip {c['round_trip_ns']:.0f} ns; "
            f"1 MiB the other core just wrote reads at {c['cross_read_gbps']:.0f} GB/s, "
            f"{c['local_read_gbps']:.0f} GB/s when this core wrote it; a pthreadpool job of 20 us of serial "
            f"work takes {c['pool_job_20us_us']:.1f} us on 2 threads (10 would be free).")


def chart(rows, path):
    """Latency normalized to ONNX Runtime at one thread, per model (lower is better), in the
    manner of the PyTorch NNAPI announcement's normalized tables."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    models = sorted({r["model"] for r in rows}, key=list(ALL_MODELS).index)
    peers = [("nnpipe_ms", "nnpipe", "tab:blue"), ("ort_ms", "ONNX Runtime", "tab:orange"),
             ("torch_ms", "PyTorch mobile", "tab:green"), ("opencv_ms", "OpenCV DNN", "tab:red")]
    fig, axes = plt.subplots(1, len(models), figsize=(4 * max(len(models), 1), 3.6), squeeze=False)
    for ax, m in zip(axes[0], models):
        mr = {r["threads"]: r for r in rows if r["model"] == m}
        base = (mr.get(1) or {}).get("ort_ms")
        width = 0.2
        for k, (key, label, color) in enumerate(peers):
            xs, ys = [], []
            for i, t in enumerate(sorted(mr)):
                v = mr[t].get(key)
                if v is not None and base:
                    xs.append(i + (k - 1.5) * width)
                    ys.append(v / base)
            ax.bar(xs, ys, width, label=label, color=color)
        ax.set_xticks(range(len(mr)))
        ax.set_xticklabels([f"{t} thread{'s' if t > 1 else ''}" for t in sorted(mr)])
        ax.set_title(m, fontsize=9)
        ax.set_ylabel("latency / ORT 1-thread")
        ax.axhline(1.0, color="gray", lw=0.5)
    from matplotlib.patches import Patch  # one legend for all panels (some lack a peer)
    fig.legend(handles=[Patch(color=c, label=l) for _, l, c in peers], loc="upper center", ncol=len(peers),
               fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=110)


def update_readme(table):
    path = os.path.join(ROOT, "bench", "README.md")
    text = open(path).read() if os.path.exists(path) else ""
    begin, end = "<!-- engine-table-begin -->", "<!-- engine-table-end -->"
    block = f"{begin}\n{table}\n{end}"
    if begin in text and end in text:
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text += "\n" + block + "\n"
    open(path, "w").write(text)


if __name__ == "__main__":
    main()
