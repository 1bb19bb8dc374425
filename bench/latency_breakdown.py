#!/usr/bin/python3
"""Where the latency nnsegment + nnbackground add goes, frame by frame.

The pipeline_bench.py source (paced_source.py: by default a loop of Megamind frames decoded
and scaled once, pushed at 30 fps, one copy each, paced by identity sync=true, a leaky
two-frame queue; --source decode for the live decoder) feeds
nnsegment ! nnbackground mode=blur ! fakesink sync=true.
Buffer probes on nnsegment's sink pad, nnbackground's sink pad and the sink's pad run in the
streaming thread and read its /proc/thread-self/schedstat (time on a CPU, time runnable but
waiting in a run queue), so each element's wall time per frame splits into:
  cpu       the streaming thread on a CPU (nnsegment: pre-processing, the meta; nnbackground:
            compositing, without its helper threads' share)
  runqueue  the streaming thread ready to run but not given a CPU (preempted by other work)
  sleep     the rest: nnsegment waiting for its mask (bounded by latency-budget),
            nnbackground waiting for its helper threads
The probes are Python: each takes the GIL on the streaming thread, so a stall behind a
preempted GIL holder shows up as "sleep" (pipeline_bench.py keeps Python off that path).
Printed: added-latency p50/p99 and the split, averaged over all frames and over the slowest
5% (the tail that sets p99), and the frames lost on the way (the leaky queue's overruns,
nnsegment's QoS drops).

  /usr/bin/python3 bench/latency_breakdown.py --size 3840x2160 --seconds 20 --isa avx2 [--format I420]
      [--thread-priority realtime]
"""
import argparse
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--budget", type=int, default=30, help="nnsegment latency-budget (ms)")
    ap.add_argument("--threads", type=int, default=1, help="nnsegment inference threads (pipeline_bench's 1)")
    ap.add_argument("--format", default="RGBA", choices=["RGBA", "BGRx", "RGB", "I420", "NV12"])
    ap.add_argument("--source", choices=["frames", "decode"], default="frames",
                    help="frames: decoded and scaled once before timing, pushed at 30 fps; decode: live")
    ap.add_argument("--source-frames", type=int, default=30)
    ap.add_argument("--source-start", type=int, default=30)
    ap.add_argument("--adaptive", choices=["true", "false"], default="true", help="nnbackground adaptive")
    ap.add_argument("--isa", choices=["native", "avx2"], default="native",
                    help="avx2: NN_NO_AVX512=1 and OPENCV_CPU_DISABLE=AVX512-SKX (an AVX2-only host)")
    ap.add_argument("--thread-priority", choices=["normal", "low-latency", "realtime"], default="normal")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build dir holding plugins/")
    ap.add_argument("--skip", type=int, default=30, help="first frames left out (start-up)")
    args = ap.parse_args()
    w, h = (int(v) for v in args.size.split("x"))
    os.environ["GST_PLUGIN_PATH"] = os.path.join(args.build, "plugins")
    if args.isa == "avx2":  # before OpenCV and the engine load (with the plugin)
        os.environ["NN_NO_AVX512"] = "1"
        os.environ["OPENCV_CPU_DISABLE"] = "AVX512-SKX"
    video = os.path.join(ROOT, "assets", "media", "Megamind.avi")
    model = os.path.join(ROOT, "assets", "models", "selfie_segmentation.nnapi")
    if not os.path.exists(model):
        model = os.path.join(ROOT, "assets", "models", "selfie_segmentation.tflite")
    for path in (video, model):
        if not os.path.exists(path):
            sys.exit(f"bench/latency_breakdown.py: {path} not found (scripts/fetch-assets.sh)")

    import gi
    gi.require_version("Gst", "1.0")
    from gi.repository import GLib, Gst
    Gst.init(None)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import paced_source
    frames_dir = paced_source.frames_dir()
    frames_path = os.path.join(frames_dir.name, "frames.raw")
    frame_size = 0
    if args.source == "frames":
        frame_size = paced_source.prepare_frames(video, w, h, args.format, args.source_frames,
                                                 args.source_start, frames_path)
    desc = (paced_source.description(args.source, w, h, args.format, video) +
            f"nnsegment name=seg model={model} threads={args.threads} latency-budget={args.budget} "
            f"thread-priority={args.thread_priority} ! nnbackground name=bg mode=blur adaptive={args.adaptive} ! "
            f"fakesink name=sink sync=true qos=true")
    pipe = Gst.parse_launch(desc)
    if args.source == "frames":
        paced_source.attach(pipe, frames_path, frame_size, realtime=args.thread_priority == "realtime")
    overruns = [0]
    pipe.get_by_name("camq").connect("overrun", lambda q: overruns.__setitem__(0, overruns[0] + 1))

    def sched():
        with open("/proc/thread-self/schedstat") as f:
            cpu_ns, runq_ns, _ = f.read().split()
        return time.monotonic_ns(), int(cpu_ns), int(runq_ns)

    marks, rows = {}, []  # rows: nnsegment wall, cpu, runqueue; nnbackground wall, cpu, runqueue (ms)

    def probe_at(name):
        def probe(pad, info):
            marks[name] = sched()
            if name == "out" and "in" in marks and "mid" in marks:
                a, b, c = marks["in"], marks["mid"], marks["out"]
                rows.append([(b[i] - a[i]) / 1e6 for i in range(3)] + [(c[i] - b[i]) / 1e6 for i in range(3)])
            return Gst.PadProbeReturn.OK
        return probe

    pipe.get_by_name("seg").get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, probe_at("in"))
    pipe.get_by_name("bg").get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, probe_at("mid"))
    pipe.get_by_name("sink").get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, probe_at("out"))
    loop = GLib.MainLoop()
    error = []

    def on_message(bus, msg):
        if msg.type == Gst.MessageType.ERROR:
            error.append(msg.parse_error()[0].message)
            loop.quit()
        elif msg.type == Gst.MessageType.EOS:
            loop.quit()

    bus = pipe.get_bus()
    bus.add_signal_watch()
    bus.connect("message", on_message)
    pipe.set_state(Gst.State.PLAYING)
    GLib.timeout_add(int(args.seconds * 1000), lambda: (pipe.send_event(Gst.Event.new_eos()), False)[1])
    load = os.getloadavg()[0]
    loop.run()
    stats = pipe.get_by_name("seg").get_property("stats")
    pipe.set_state(Gst.State.NULL)
    frames_dir.cleanup()
    if error:
        sys.exit(f"bench/latency_breakdown.py: {error[0]}")
    rows = rows[args.skip:]
    if not rows:
        sys.exit("bench/latency_breakdown.py: no frames measured")

    def pct(values, p):
        v = sorted(values)
        return v[min(len(v) - 1, int(p / 100 * (len(v) - 1) + 0.5))]

    added = [r[0] + r[3] for r in rows]

    def split(sel):
        n = len(sel)
        mean = [sum(r[i] for r in sel) / n for i in range(6)]
        out = {"frames": n, "added_ms": round(mean[0] + mean[3], 2)}
        for name, (wall, cpu, runq) in (("nnsegment", mean[0:3]), ("nnbackground", mean[3:6])):
            out[name] = {"wall_ms": round(wall, 2), "cpu_ms": round(cpu, 2), "runqueue_ms": round(runq, 2),
                         "sleep_ms": round(max(0.0, wall - cpu - runq), 2)}
        return out

    tail = [r for r, a in zip(rows, added) if a >= pct(added, 95)]
    print(json.dumps({
        "size": args.size, "format": args.format, "source": args.source, "isa": args.isa,
        "thread_priority": args.thread_priority, "budget_ms": args.budget,
        "load_average_1min": round(load, 1), "frames": len(rows),
        "queue_overruns": overruns[0], "frames_in": stats.get_value("frames-in"),
        "qos_dropped": stats.get_value("frames-dropped"), "inferences_skipped": stats.get_value("inferences-skipped"),
        "added_p50_ms": round(pct(added, 50), 2), "added_p99_ms": round(pct(added, 99), 2),
        "all_frames": split(rows), "slowest_5_percent": split(tail)}, indent=1))


if __name__ == "__main__":
    main()
