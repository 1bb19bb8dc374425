#!/usr/bin/python3
"""Pipeline benchmark: background blur on a live-paced 30 fps source.

The source (paced_source.py) costs what a camera's does: by default a loop of Megamind
frames (--source-frames from --source-start, at 30 fps) is decoded and scaled to the target
size and format once, before any timing, and pushed at 30 fps from an appsrc, each frame
copied into a pooled buffer of its own (one memcpy) and paced to the clock by identity
sync=true, into a leaky two-frame queue. --source decode keeps the earlier source (the file
decoded, brought to 30 fps and scaled live; at 4K it cannot keep up on two cores). Then
  nnsegment ! nnbackground mode=blur ! fakesink sync=true
Reported per run: frames delivered and dropped, inferences run and skipped (nnsegment's
stats), frames nnbackground composited on its fast path (adaptive=true, its stats), the
latency our two elements add per frame (GstTracer "latency" with flags=element: p50/p99 of
nnsegment + nnbackground per buffer), process CPU time per frame (all threads, all
elements, the source included; "source alone" is the same source into a fakesink) and each element's own CPU time per frame (its "frame-cpu-ms"
stats: nnsegment's streaming thread plus its inference worker's CPU per inference times
inferences per frame; nnbackground's streaming thread plus its compositing helpers).
--overload adds CPU contention (a busy process on every core: twice the work the cores
can do) to show the latency budget holding while inferences are skipped. --isa avx2 runs
the pipeline with AVX-512 disabled (NN_NO_AVX512=1 for the engine's kernels,
OPENCV_CPU_DISABLE=AVX512-SKX for OpenCV 4.6's dispatch) to stand for an AVX2-only host;
the ISA used is printed.

Usage: /usr/bin/python3 bench/pipeline_bench.py [--sizes 720,1080,2160] [--seconds 20]
       [--budget 30] [--overload] [--repeat 3] [--isa native|avx2] [--thread-priority normal]
       [--format RGBA|I420|...] [--source frames|decode] [--source-frames 30] [--json OUT]
"""
import argparse
import json
import multiprocessing
import os
import re
import resource
import subprocess
import sys
import tempfile

import paced_source

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r'''
import json, os, sys, time, resource
import gi
gi.require_version("Gst", "1.0")
from gi.repository import Gst, GLib
Gst.init(None)
cfg = json.loads(sys.argv[1])
w, h = cfg["width"], cfg["height"]
sys.path.insert(0, cfg["bench_dir"])
import paced_source
desc = paced_source.description(cfg["source"], w, h, cfg["format"], cfg["video"])
if cfg.get("baseline"):  # the same source, decoding and pacing without our elements
    desc += "fakesink name=sink sync=true qos=true"
else:
    prio = f" thread-priority={cfg['priority']}" if cfg.get("priority") else ""
    desc += (f"nnsegment name=seg model={cfg['model']} threads={cfg['threads']} latency-budget={cfg['budget']}{prio} ! "
             f"nnbackground name=bg mode=blur adaptive={str(cfg.get('adaptive', True)).lower()} ! "
             f"fakesink name=sink sync=true qos=true")
pipe = Gst.parse_launch(desc)
if cfg["source"] == "frames":
    paced_source.attach(pipe, cfg["frames_path"], cfg["frame_size"], realtime=cfg.get("priority") == "realtime")
# No Python runs on the frames' path (no pad probe, no bus signal watch): a streaming
# thread that needs the GIL waits for whichever thread holds it, and under load that thread
# may itself wait for a core -- the benchmark's stall, not the elements'. Frames out are the
# sink's own count; the main thread waits on the bus in C.
camq_drops = {"n": 0, "times": []}
def on_overrun(q):  # only when the queue drops a frame
    camq_drops["n"] += 1
    camq_drops["times"].append(time.monotonic())
pipe.get_by_name("camq").connect("overrun", on_overrun)
err = {}
bus = pipe.get_bus()
pipe.set_state(Gst.State.PLAYING)
r0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.monotonic()
stop_at = t0 + cfg["seconds"]
eos_sent = False
while True:
    timeout = max(0.0, stop_at - time.monotonic()) if not eos_sent else 30.0
    msg = bus.timed_pop_filtered(int(timeout * Gst.SECOND), Gst.MessageType.ERROR | Gst.MessageType.EOS)
    if msg is None:
        if eos_sent:
            err["e"] = "no EOS 30 s after it was sent"
            break
        pipe.send_event(Gst.Event.new_eos())
        eos_sent = True
        continue
    if msg.type == Gst.MessageType.ERROR:
        e, dbg = msg.parse_error(); err["e"] = f"{e.message} ({dbg})"
    break
wall = time.monotonic() - t0; r1 = resource.getrusage(resource.RUSAGE_SELF)
sink_stats = pipe.get_by_name("sink").get_property("stats")
frames = {"n": sink_stats.get_value("rendered") + sink_stats.get_value("dropped")}
seg = pipe.get_by_name("seg")
stats = seg.get_property("stats") if seg else None
bg = pipe.get_by_name("bg")
bg_stats = bg.get_property("stats") if bg else None
pipe.set_state(Gst.State.NULL)
s = {stats.nth_field_name(i): stats.get_value(stats.nth_field_name(i)) for i in range(stats.n_fields())} if stats else {}
if bg_stats:
    s["bg-fast-frames"] = bg_stats.get_value("fast-frames")
    s["bg-frame-cpu-ms"] = bg_stats.get_value("frame-cpu-ms")
    s["bg-serial-frames"] = bg_stats.get_value("serial-frames")
    s["bg-frames"] = bg_stats.get_value("frames")
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(json.dumps({"error": err.get("e"), "frames_out": frames["n"], "wall_s": wall, "cpu_s": cpu,
                  "sys_s": r1.ru_stime - r0.ru_stime, "minflt": r1.ru_minflt - r0.ru_minflt,
                  "camq_overruns": camq_drops["n"],
                  "camq_overruns_after_2s": sum(1 for t in camq_drops["times"] if t - t0 > 2.0),
                  "stats": {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in s.items()}}))
'''

LATENCY_RE = re.compile(r"element-latency.*?element=\(string\)(\w+).*?time=\(guint64\)(\d+).*?ts=\(guint64\)(\d+)")


VIDEO = os.path.join(ROOT, "assets", "media", "Megamind.avi")
MODEL = os.path.join(ROOT, "assets", "models", "selfie_segmentation.nnapi")
if not os.path.exists(MODEL):
    MODEL = os.path.join(ROOT, "assets", "models", "selfie_segmentation.tflite")


def percentile(v, p):
    if not v:
        return float("nan")
    v = sorted(v)
    idx = p / 100 * (len(v) - 1)
    lo, hi = int(idx), min(int(idx) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (idx - lo)


def burn():
    while True:
        pass


def host_isa():
    """The vector ISA the host has, and the one this run's environment lets the code use."""
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    has = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    avx512_off = os.environ.get("NN_NO_AVX512") and "AVX512-SKX" in os.environ.get("OPENCV_CPU_DISABLE", "")
    used = "AVX2 (AVX-512 disabled: NN_NO_AVX512=1, OPENCV_CPU_DISABLE=AVX512-SKX)" if has == "AVX-512" and avx512_off else has
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpu": model, "cores": os.cpu_count(), "host_isa": has, "isa_used": used}


def run_one(width, height, seconds, budget, threads, overload, source, baseline=False, priority=None, fmt="RGBA",
            adaptive=True):
    """source: {"source": "frames", "frames_path": ..., "frame_size": ...} or {"source": "decode"}."""
    cfg = dict(width=width, height=height, seconds=seconds, budget=budget, threads=threads, priority=priority,
               format=fmt, adaptive=adaptive, video=VIDEO, model=MODEL, baseline=baseline,
               bench_dir=os.path.dirname(os.path.abspath(__file__)), **source)
    env = dict(os.environ, GST_PLUGIN_PATH=os.path.join(os.environ.get("NN_BUILD_DIR", os.path.join(ROOT, "build")), "plugins"),
               GST_TRACERS="latency(flags=element)", GST_DEBUG="*:1,GST_TRACER:7", GST_DEBUG_NO_COLOR="1")
    burners = []
    if overload:
        burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(os.cpu_count() or 2)]
        for b in burners:
            b.start()
    with tempfile.TemporaryFile("w+") as log:
        p = subprocess.run(["/usr/bin/python3", "-c", CHILD, json.dumps(cfg)], env=env, stdout=subprocess.PIPE,
                           stderr=log, text=True, timeout=seconds * 4 + 60)
        log.seek(0)
        lines = log.read().splitlines()
    for b in burners:
        b.terminate()
    load_after = os.getloadavg()[0]
    if p.returncode != 0 or not p.stdout.strip():
        raise SystemExit(f"pipeline_bench: the pipeline failed: {' '.join(lines[-3:])}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    if res["error"]:
        raise SystemExit(f"pipeline_bench: {res['error']}")
    # Both elements push the same buffers in the same order (frames nnsegment drops never
    # reach either measurement), so the n-th records of each belong to the same frame.
    per_element = {"seg": [], "bg": []}
    for line in lines:
        m = LATENCY_RE.search(line)
        if m and m.group(1) in per_element:
            per_element[m.group(1)].append(int(m.group(2)) / 1e6)
    added = [a + b for a, b in zip(per_element["seg"], per_element["bg"])]
    st = res["stats"]
    frames_in = st.get("frames-in", 0)
    return {
        "size": f"{width}x{height}", "format": fmt, "source": source["source"], "priority": priority or "normal", "overload": overload, "budget_ms": budget, "threads": threads,
        "load_1min": round(load_after, 1),
        "seconds": round(res["wall_s"], 1), "frames_out": res["frames_out"], "fps": res["frames_out"] / res["wall_s"],
        "frames_in": frames_in,
        # nnsegment's QoS drops, and the frames nnbackground's own QoS (GstVideoFilter's) dropped.
        "frames_dropped": st.get("frames-dropped", 0) + max(0, st.get("frames-out", 0) - st.get("bg-frames", 0)),
        "segment_frames_out": st.get("frames-out", 0), "background_frames": st.get("bg-frames", 0),
        "inferences_run": st.get("inferences-run", 0), "inferences_skipped": st.get("inferences-skipped", 0),
        "fast_composites": st.get("bg-fast-frames", 0),
        "serial_composites": st.get("bg-serial-frames", 0),
        "inference_p50_ms": st.get("inference-p50-ms"), "inference_p99_ms": st.get("inference-p99-ms"),
        "added_latency_p50_ms": percentile(added, 50), "added_latency_p99_ms": percentile(added, 99),
        # nnsegment alone: what its latency-budget bounds (nnbackground's compositing follows).
        "segment_latency_p99_ms": percentile(per_element["seg"], 99),
        "segment_latency_p50_ms": percentile(per_element["seg"], 50),
        "composite_latency_p50_ms": percentile(per_element["bg"], 50),
        "composite_latency_p99_ms": percentile(per_element["bg"], 99),
        "cpu_ms_per_frame": 1000 * res["cpu_s"] / max(res["frames_out"], 1),
        "sys_ms_per_frame": 1000 * res["sys_s"] / max(res["frames_out"], 1),
        "page_faults_per_frame": res["minflt"] / max(res["frames_out"], 1),
        "queue_overruns": res["camq_overruns"],
        "queue_overruns_after_2s": res["camq_overruns_after_2s"],
        # Each element's own CPU per frame: nnsegment's streaming thread, plus its worker's
        # CPU per inference times the inferences per frame; nnbackground's (with helpers).
        "segment_cpu_ms_per_frame": st.get("frame-cpu-ms", 0) +
            st.get("inference-cpu-ms", 0) * st.get("inferences-run", 0) / max(frames_in, 1),
        "background_cpu_ms_per_frame": st.get("bg-frame-cpu-ms", 0),
    }


def combine(runs):
    """One row from repeated runs: the median of each figure, the worst run's drops."""
    if len(runs) == 1:
        return runs[0]
    row = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            vals = sorted(r[key] for r in runs if r.get(key) is not None)
            row[key] = vals[len(vals) // 2] if len(vals) % 2 else (vals[len(vals) // 2 - 1] + vals[len(vals) // 2]) / 2
    row["frames_dropped"] = max(r["frames_dropped"] for r in runs)
    row["queue_overruns"] = max(r["queue_overruns"] for r in runs)
    row["repeats"] = len(runs)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="720,1080")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--budget", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--overload", action="store_true", help="also run each size under CPU contention")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per row, each with its own baseline run just before; the row reports the "
                         "median of every figure, and the worst run's dropped frames")
    ap.add_argument("--thread-priority", choices=["normal", "low-latency", "realtime"],
                    help="nnsegment's thread-priority (default: the element's, normal)")
    ap.add_argument("--format", default="RGBA", choices=["RGBA", "BGRx", "RGB", "I420", "NV12"],
                    help="the frames' format (I420, NV12: nnbackground composites the planes)")
    ap.add_argument("--no-adaptive", action="store_true",
                    help="nnbackground adaptive=false: every frame at full quality (for CPU comparisons)")
    ap.add_argument("--isa", choices=["native", "avx2"], default="native",
                    help="avx2: disable AVX-512 in the engine's kernels and OpenCV (an AVX2-only host)")
    ap.add_argument("--source", choices=["frames", "decode"], default="frames",
                    help="frames: a loop of frames decoded and scaled once before timing, pushed at 30 fps "
                         "(one copy each, as a camera's); decode: the file decoded and scaled live")
    ap.add_argument("--source-frames", type=int, default=30, help="frames in the loop (--source frames)")
    ap.add_argument("--source-start", type=int, default=30, help="the loop's first frame at 30 fps")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    if args.isa == "avx2":
        os.environ["NN_NO_AVX512"] = "1"
        os.environ["OPENCV_CPU_DISABLE"] = "AVX512-SKX"  # OpenCV 4.6's name (AVX512_SKX is refused)
    isa = host_isa()
    print(json.dumps(isa))
    dims = {"480": (854, 480), "720": (1280, 720), "1080": (1920, 1080), "2160": (3840, 2160)}
    rows = []
    for s in args.sizes.split(","):
        if s not in dims:
            raise SystemExit(f"pipeline_bench: unknown size {s} (one of {', '.join(dims)})")
    frames_dir = paced_source.frames_dir()
    for s in args.sizes.split(","):
        source = {"source": args.source}
        if args.source == "frames":
            path = os.path.join(frames_dir.name, f"{s}-{args.format}.raw")
            size = paced_source.prepare_frames(VIDEO, *dims[s], args.format, args.source_frames,
                                               args.source_start, path)
            source.update(frames_path=path, frame_size=size)
        runs = {False: [], True: []}
        for _ in range(args.repeat):
            # CPU our two elements cost per frame = the whole process's minus that of the same
            # pipeline without them (decoding, scaling, pacing), measured just before.
            base = run_one(*dims[s], args.seconds, args.budget, args.threads, False, source, baseline=True,
                           fmt=args.format)
            for overload in ([False, True] if args.overload else [False]):
                r = run_one(*dims[s], args.seconds, args.budget, args.threads, overload, source,
                            priority=args.thread_priority, fmt=args.format, adaptive=not args.no_adaptive)
                r["baseline_cpu_ms_per_frame"] = base["cpu_ms_per_frame"]
                r["elements_cpu_ms_per_frame"] = r["cpu_ms_per_frame"] - base["cpu_ms_per_frame"]
                runs[overload].append(r)
                print(json.dumps(r))
        for overload in ([False, True] if args.overload else [False]):
            rows.append(combine(runs[overload]))
        if args.source == "frames":
            os.remove(source["frames_path"])  # 1 GB for 30 4K RGBA frames
    frames_dir.cleanup()
    print()
    print(f"Host: {isa['cpu']}, {isa['cores']} cores, {isa['host_isa']}; ISA used: {isa['isa_used']}; "
          f"source: {args.source}; load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    print()
    print("| size | format | load (thread priority) | fps out | frames in/out | dropped: QoS / source queue | inferences run/skipped | inference p50/p99 ms | "
          "added latency p50/p99 ms (nnsegment / nnbackground p99) | fast composites | "
          "CPU ms/frame: process / source alone / our elements | CPU ms/frame: nnsegment / nnbackground (own stats) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['size']} | {r['format']} | {'overload' if r['overload'] else 'idle'} ({r['priority']}) | {r['fps']:.1f} "
              f"| {r['frames_in']}/{r['frames_out']} | {r['frames_dropped']} / {r['queue_overruns']} | {r['inferences_run']}/{r['inferences_skipped']} | "
              f"{r['inference_p50_ms']:.1f}/{r['inference_p99_ms']:.1f} | "
              f"{r['added_latency_p50_ms']:.1f}/{r['added_latency_p99_ms']:.1f} "
              f"({r['segment_latency_p99_ms']:.1f} / {r['composite_latency_p99_ms']:.1f}) | "
              f"{r['fast_composites']:.0f} | "
              f"{r['cpu_ms_per_frame']:.1f} / "
              f"{r['baseline_cpu_ms_per_frame']:.1f} / {r['elements_cpu_ms_per_frame']:.1f} | "
              f"{r['segment_cpu_ms_per_frame']:.1f} / {r['background_cpu_ms_per_frame']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"isa": isa, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
