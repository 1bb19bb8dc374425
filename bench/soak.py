#!/usr/bin/python3
"""Soak test: the background-blur pipeline on the sample video, looped, while everything a
long-running app does to a pipeline happens to it, under GStreamer's leaks tracer.

  filesrc ! decodebin ! videoconvert ! videoscale ! capsfilter(size) ! videoconvert
    ! capsfilter(format) ! nnsegment ! nnbackground mode=blur ! videoconvert ! fakesink

(the graphs/background-blur.toml chain, with the size and format capsfilters the test drives).
The main loop takes one action every --interval seconds, in a fixed rotation:
  size      new frame size (the capsfilter changes: renegotiation while PLAYING)
  format    new packed format for nnsegment/nnbackground (RGBA, BGRx, RGB, BGRA)
  pause     PLAYING -> PAUSED -> PLAYING
  delegate  PLAYING -> READY, nnsegment's delegate (and threads) switched, -> PLAYING
  restart   PLAYING -> NULL -> PLAYING
  seek      flushing seek back to the start (EOS also loops back to the start)
while another thread changes nnbackground's blur-strength/feather and nnsegment's
threshold/smoothing every 20 ms.

Every --checkpoint-every actions the soak stops the rotation for an RSS checkpoint, one
fixed configuration each time so that checkpoints compare like with like:
  the pipeline to NULL; the largest size, RGBA, the cpu delegate with 2 threads, fixed
  property values; PLAYING from the start of the video for --checkpoint-settle seconds of
  frames; PAUSED (the sink holds its preroll frame, no frame is being made); Python's gc,
  then glibc's malloc_trim(0), which hands freed pages of every arena back to the kernel, so
  memory that is free but kept by the allocator does not count; then the sample: VmRSS,
  RssAnon, and mallinfo2's heap bytes in use (allocated chunks, mmapped ones included) - the
  heap in use is what a leak grows, RSS is what the user sees; READY and the same samples
  again (what a stopped pipeline keeps). Then the rotation's configuration again.

Checks (exit 1 when one fails):
  leaks    objects (GstObject and mini objects: buffers, caps, events...) alive after the
           pipeline is gone, minus those alive after a warm-up pipeline was created and
           destroyed the same way (plugin, type and delegate one-time state): must be 0.
  rss      PAUSED VmRSS: the median of the last --checkpoint-window checkpoints minus the
           median of the first ones after --warmup seconds: <= --max-rss-growth-mib; also
           reported: the heap in use the same way, and each one's least-squares slope over
           every checkpoint after warm-up (MiB/hour). Judged when the run has twice the window
           of checkpoints after warm-up; shorter runs report the checkpoints and check the rest.
  frames   every checkpoint saw frames (a stalled pipeline fails), and the run did.
  errors   ERROR messages on the bus: must be 0 (warnings are counted, not failed).

  bench/soak.py                       # an hour
  bench/soak.py --duration 60 --interval 1 --checkpoint-every 12   # CI's minute (ctest soak_slice)
Env: GST_TRACERS=leaks and GST_DEBUG=GST_TRACER:7 are set here unless already set; the
leaks tracer's own report at exit goes to stderr. Uses Debian's python3 (python3-gst-1.0).
"""
import argparse
import collections
import ctypes
import gc
import json
import math
import os
import random
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Two glibc settings make RSS measure leaks rather than the allocator's bookkeeping:
# - MALLOC_ARENA_MAX=2: glibc gives each new thread its own malloc arena (up to 8 per core)
#   and keeps what is freed in it; every restart makes new streaming and inference threads,
#   so without a cap RSS climbs ~1.3 MiB per nnsegment restart until the arenas are all made
#   (measured: flat with the cap, 0 leaked objects either way).
# - MALLOC_MMAP_THRESHOLD_=131072: glibc's default threshold moves up to the size of the
#   largest block freed (a frame: 3.5 MiB at 720p RGBA), after which frames come from the
#   heap and, freed, stay in it, where malloc_trim cannot give all of it back (a non-main
#   arena's top); RSS at identical checkpoints then spread over 7 MiB. Fixed, blocks above
#   128 KiB are mapped and unmapped, and checkpoint RSS follows the heap in use.
# glibc reads them at the first malloc, so the script re-executes itself with them set.
# --glibc-arenas default keeps glibc's own settings.
GLIBC_ENV = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "131072"}
if "--glibc-arenas" not in sys.argv and any(k not in os.environ for k in GLIBC_ENV):
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(GLIBC_ENV, **os.environ))
os.environ.setdefault("GST_TRACERS", "leaks")
os.environ.setdefault("GST_DEBUG", "GST_TRACER:7")
# The tracer's reports (live objects on demand, leaks at exit) are read back from this file.
os.environ.setdefault("GST_DEBUG_FILE", f"/tmp/nnpipe-soak-{os.getpid()}.gstlog")

import gi  # noqa: E402

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402

SIZES = [(640, 360), (320, 240), (1280, 720), (480, 272), (256, 256)]
FORMATS = ["RGBA", "BGRx", "RGB", "BGRA"]
ACTIONS = ["size", "format", "pause", "delegate", "restart", "seek"]


def combination_cycle(args):
    """Seconds until the (size, format, delegate) combination repeats."""
    combos = math.lcm(len(SIZES), len(FORMATS), len(args.delegates))
    return combos * len(args.actions) * args.interval


def rss_kib(field="VmRSS"):
    """VmRSS: all resident memory; RssAnon: its anonymous part (heap, stacks, anonymous maps),
    without the pages of mapped files (code, the model), which come and go with page cache
    pressure."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost")]


LIBC = ctypes.CDLL("libc.so.6")
LIBC.mallinfo2.restype = MallInfo2
LIBC.malloc_trim.argtypes = [ctypes.c_size_t]


def heap_mib():
    """glibc's heap over every arena: bytes in allocated chunks (mmapped ones included), and
    bytes the allocator holds from the kernel (in use + free but kept)."""
    m = LIBC.mallinfo2()
    return (m.uordblks + m.hblkhd) / 2**20, (m.arena + m.hblkhd) / 2**20


def median_growth(values, window):
    return statistics.median(values[-window:]) - statistics.median(values[:window])


def slope_per_hour(times, values):
    """Least-squares slope, per hour of `times` (seconds)."""
    n = len(times)
    if n < 2:
        return 0.0
    mt, mv = sum(times) / n, sum(values) / n
    var = sum((t - mt) ** 2 for t in times)
    return 3600 * sum((t - mt) * (v - mv) for t, v in zip(times, values)) / var if var else 0.0


def live_objects(tracer, log_path):
    """Type name -> count of the objects the leaks tracer sees alive. The tracer writes them
    ("object-alive, type-name=(string)GstCaps, ...") to the GStreamer log, which goes to
    log_path (GST_DEBUG_FILE); its get-live-objects signal is not used: taking its objects
    into Python unbalances their reference counts."""
    offset = os.path.getsize(log_path)
    tracer.emit("log-live-objects")
    counts = collections.Counter()
    with open(log_path, errors="replace") as f:
        f.seek(offset)
        for line in f:
            start = line.find("object-alive, type-name=(string)")
            if start >= 0:
                rest = line[start + len("object-alive, type-name=(string)"):]
                counts[rest.split(",", 1)[0]] += 1
    return counts


class Soak:
    def __init__(self, args):
        self.args = args
        self.errors = []
        self.warnings = 0
        self.actions = collections.Counter()
        self.loops = 0
        self.frames = 0
        self.size_i = 0
        self.format_i = 0
        self.delegate_i = 0
        self.pipeline = None
        self.lock = threading.Lock()  # the property thread vs. pipeline rebuilds
        self.props_paused = threading.Event()  # set during checkpoints: fixed property values
        self.checkpoints = []  # dicts: t, rss_mib, heap_in_use_mib, heap_held_mib, settle_frames
        self.checkpoint_t0 = None  # time.monotonic() the soak's checkpoint times count from

    def build(self):
        # caps-change-mode=delayed: a capsfilter whose caps change while PLAYING takes the frame
        # already on its way with the old caps (upstream renegotiates at its next frame) instead
        # of refusing it, which stops the stream with not-negotiated (seen once in ~200 size
        # changes with the default, immediate).
        a = self.args
        w, h = SIZES[0]
        desc = (f'filesrc location="{a.video}" ! decodebin name=dec '
                f'videoconvert name=in ! videoscale ! '
                f'capsfilter name=size caps-change-mode=delayed caps="video/x-raw,width={w},height={h}" ! '
                f'videoconvert ! capsfilter name=format caps-change-mode=delayed caps="video/x-raw,format={FORMATS[0]}" ! '
                f'nnsegment name=seg model="{a.model}" delegate={a.delegates[0]} threads=2 '
                f'thread-priority=normal ! '
                f'nnbackground name=bg mode=blur blur-strength=16 ! videoconvert ! '
                f'fakesink name=sink sync=false')
        pipeline = Gst.parse_launch(desc)
        bus = pipeline.get_bus()
        bus.add_signal_watch()
        bus.connect("message", self.on_message)
        # decodebin makes new pads after every NULL -> PLAYING: link each video one (parse's
        # delayed link does it once), leave audio unlinked (decodebin then drops it).
        pipeline.get_by_name("dec").connect("pad-added", self.on_decoded_pad, pipeline.get_by_name("in"))
        sink = pipeline.get_by_name("sink")
        sink.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, self.on_frame)
        del sink
        return pipeline

    @staticmethod
    def on_decoded_pad(dec, pad, convert):
        caps = pad.get_current_caps() or pad.query_caps(None)
        sink = convert.get_static_pad("sink")
        if caps.get_structure(0).get_name().startswith("video/") and not sink.is_linked():
            pad.link(sink)

    def on_frame(self, pad, info):
        self.frames += 1
        return Gst.PadProbeReturn.OK

    def on_message(self, bus, msg):
        if msg.type == Gst.MessageType.ERROR:
            err, debug = msg.parse_error()
            self.errors.append(f"{msg.src.get_name()}: {err.message} ({debug})")
            print(f"[soak] ERROR {self.errors[-1]}", file=sys.stderr)
            # Recover the way an app would: restart the pipeline.
            GLib.idle_add(self.restart_after_error)
        elif msg.type == Gst.MessageType.WARNING:
            self.warnings += 1
            err, debug = msg.parse_warning()
            if self.warnings <= 10:
                print(f"[soak] warning {msg.src.get_name()}: {err.message}", file=sys.stderr)
        elif msg.type == Gst.MessageType.EOS:
            self.loops += 1
            GLib.idle_add(self.seek_start)

    def restart_after_error(self):
        self.pipeline.set_state(Gst.State.NULL)
        self.pipeline.set_state(Gst.State.PLAYING)
        return False

    def seek_start(self):
        self.pipeline.seek_simple(Gst.Format.TIME, Gst.SeekFlags.FLUSH | Gst.SeekFlags.KEY_UNIT, 0)
        return False

    def wait_state(self, state):
        ret, cur, _ = self.pipeline.get_state(10 * Gst.SECOND)
        if ret == Gst.StateChangeReturn.FAILURE or (ret == Gst.StateChangeReturn.SUCCESS and cur != state):
            self.errors.append(f"state change to {state.value_nick} failed ({ret.value_nick})")
            print(f"[soak] ERROR {self.errors[-1]}", file=sys.stderr)

    def set_state(self, state):
        self.pipeline.set_state(state)
        self.wait_state(state)

    def configure(self, size, fmt):
        w, h = size
        self.pipeline.get_by_name("size").set_property(
            "caps", Gst.Caps.from_string(f"video/x-raw,width={w},height={h}"))
        self.pipeline.get_by_name("format").set_property("caps", Gst.Caps.from_string(f"video/x-raw,format={fmt}"))

    def set_delegate(self, delegate, threads):
        seg = self.pipeline.get_by_name("seg")
        seg.set_property("delegate", delegate)
        seg.set_property("threads", threads)

    def run_main_context(self, seconds):
        """Lets bus messages (EOS -> seek) and timeouts run for `seconds` inside an action."""
        ctx = GLib.MainContext.default()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if not ctx.iteration(False):
                time.sleep(0.01)

    def checkpoint(self):
        """The fixed configuration, K seconds of frames, PAUSED, trim, sample; then back to the
        rotation's configuration."""
        a = self.args
        self.actions["checkpoint"] += 1
        self.props_paused.set()
        with self.lock:  # the property thread has finished its round and holds off
            bg, seg = self.pipeline.get_by_name("bg"), self.pipeline.get_by_name("seg")
            bg.set_property("blur-strength", 16.0)
            bg.set_property("feather", 2.0)
            seg.set_property("threshold", 0.5)
            seg.set_property("smoothing", 0.5)
            del bg, seg
        self.set_state(Gst.State.NULL)
        self.configure(max(SIZES, key=lambda s: s[0] * s[1]), "RGBA")
        self.set_delegate(a.checkpoint_delegate, 2)
        self.set_state(Gst.State.PLAYING)
        frames = self.frames
        self.run_main_context(a.checkpoint_settle)
        settle_frames = self.frames - frames
        c = {"t": round(time.monotonic() - self.checkpoint_t0, 1), "settle_frames": settle_frames}
        for state, prefix in ((Gst.State.PAUSED, ""), (Gst.State.READY, "ready_")):
            self.set_state(state)
            gc.collect()
            if not a.no_trim:
                LIBC.malloc_trim(0)
            in_use, held = heap_mib()
            c.update({prefix + "rss_mib": round(rss_kib() / 1024, 3),
                      prefix + "rss_anon_mib": round(rss_kib("RssAnon") / 1024, 3),
                      prefix + "heap_in_use_mib": round(in_use, 3),
                      prefix + "heap_held_mib": round(held, 3)})
        self.checkpoints.append(c)
        print(f"[soak] checkpoint {len(self.checkpoints)} at {c['t']:.0f} s: PAUSED rss {c['rss_mib']:.2f} MiB, "
              f"heap in use {c['heap_in_use_mib']:.2f} MiB (held {c['heap_held_mib']:.2f}); READY rss "
              f"{c['ready_rss_mib']:.2f}, heap in use {c['ready_heap_in_use_mib']:.2f} (held "
              f"{c['ready_heap_held_mib']:.2f}); {settle_frames} frames", file=sys.stderr)
        if settle_frames == 0:
            self.errors.append(f"checkpoint {len(self.checkpoints)}: no frame in {a.checkpoint_settle} s")
            print(f"[soak] ERROR {self.errors[-1]}", file=sys.stderr)
        self.set_state(Gst.State.NULL)
        self.configure(SIZES[self.size_i], FORMATS[self.format_i])
        self.set_delegate(a.delegates[self.delegate_i], 1 + self.delegate_i % 2)
        self.set_state(Gst.State.PLAYING)
        self.props_paused.clear()

    def act(self, action):
        self.actions[action] += 1
        if action == "size":
            self.size_i = (self.size_i + 1) % len(SIZES)
            self.configure(SIZES[self.size_i], FORMATS[self.format_i])
        elif action == "format":
            self.format_i = (self.format_i + 1) % len(FORMATS)
            self.configure(SIZES[self.size_i], FORMATS[self.format_i])
        elif action == "pause":
            self.set_state(Gst.State.PAUSED)
            time.sleep(0.2)
            self.set_state(Gst.State.PLAYING)
        elif action == "delegate":
            self.set_state(Gst.State.READY)
            self.delegate_i = (self.delegate_i + 1) % len(self.args.delegates)
            self.set_delegate(self.args.delegates[self.delegate_i], 1 + self.delegate_i % 2)
            self.set_state(Gst.State.PLAYING)
        elif action == "restart":
            self.set_state(Gst.State.NULL)
            self.set_state(Gst.State.PLAYING)
        elif action == "seek":
            self.seek_start()

    def property_thread(self, stop):
        rng = random.Random(1)
        while not stop.is_set():
            with self.lock:
                p = self.pipeline
                if p is not None and not self.props_paused.is_set():
                    bg, seg = p.get_by_name("bg"), p.get_by_name("seg")
                    bg.set_property("blur-strength", rng.uniform(2.0, 30.0))
                    bg.set_property("feather", rng.uniform(0.0, 4.0))
                    seg.set_property("threshold", rng.uniform(0.2, 0.8))
                    seg.set_property("smoothing", rng.uniform(0.0, 0.9))
                    del bg, seg, p
            stop.wait(0.02)

    def run_pipeline(self, seconds, on_tick=None, checkpoints=False):
        """Builds the pipeline, drives it for `seconds` (with RSS checkpoints if asked), then NULL
        and drops every reference."""
        loop = GLib.MainLoop()
        with self.lock:
            self.pipeline = self.build()
        self.set_state(Gst.State.PLAYING)
        stop = threading.Event()
        props = threading.Thread(target=self.property_thread, args=(stop,), daemon=True)
        props.start()
        start = time.monotonic()
        state = {"next_action": start + self.args.interval, "i": 0, "next_tick": start + 1}

        def tick():
            now = time.monotonic()
            if now - start >= seconds:
                loop.quit()
                return False
            if now >= state["next_action"]:
                self.act(self.args.actions[state["i"] % len(self.args.actions)])
                state["i"] += 1
                if checkpoints and state["i"] % self.args.checkpoint_every == 0:
                    self.checkpoint()
                state["next_action"] = time.monotonic() + self.args.interval
            if on_tick and now >= state["next_tick"]:
                on_tick(now - start)
                state["next_tick"] = max(state["next_tick"] + 1, now + 0.5)  # no catch-up burst after a slow action
            return True

        GLib.timeout_add(50, tick)
        loop.run()
        stop.set()
        props.join()
        with self.lock:
            self.pipeline.set_state(Gst.State.NULL)
            self.pipeline.get_bus().remove_signal_watch()
            self.pipeline = None
        # Let queued idle callbacks (seeks after EOS) run against nothing, then collect.
        ctx = GLib.MainContext.default()
        while ctx.iteration(False):
            pass
        gc.collect()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=3600, help="seconds of soak (default: an hour)")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds of the run before the RSS reference (default: 10%% of it, at least "
                         "one rotation through every frame size, at most 300 s)")
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between actions")
    ap.add_argument("--video", default=os.path.join(ROOT, "assets/media/Megamind.avi"))
    ap.add_argument("--model", default=os.path.join(ROOT, "assets/models/selfie_segmentation.tflite"))
    ap.add_argument("--actions", default=",".join(ACTIONS), help="actions to rotate through, comma separated")
    ap.add_argument("--delegates", default="cpu,auto", help="delegates to switch between, comma separated")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build dir holding plugins/")
    ap.add_argument("--checkpoint-every", type=int, default=30, metavar="N",
                    help="actions between RSS checkpoints (default 30: about a minute at 2 s)")
    ap.add_argument("--checkpoint-settle", type=float, default=5.0, metavar="K",
                    help="seconds of frames in the checkpoint configuration before the sample")
    ap.add_argument("--checkpoint-window", type=int, default=10, metavar="M",
                    help="checkpoints whose median is compared, first after warm-up vs last")
    ap.add_argument("--checkpoint-delegate", default="cpu")
    ap.add_argument("--no-trim", action="store_true",
                    help="sample without malloc_trim(0) (RSS then also counts freed pages glibc keeps)")
    ap.add_argument("--max-rss-growth-mib", type=float, default=1.0)
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--glibc-arenas", choices=["default"],
                    help="leave MALLOC_ARENA_MAX and MALLOC_MMAP_THRESHOLD_ unset (RSS then also counts "
                         "per-thread arenas and heap glibc keeps)")
    args = ap.parse_args()
    args.delegates = args.delegates.split(",")
    args.actions = args.actions.split(",")
    unknown = set(args.actions) - set(ACTIONS)
    if unknown:
        sys.exit(f"bench/soak.py: unknown actions {sorted(unknown)} (known: {ACTIONS})")
    if args.checkpoint_every < 1 or args.checkpoint_window < 1:
        sys.exit("bench/soak.py: --checkpoint-every and --checkpoint-window must be at least 1")
    if args.warmup is None:
        # At least one full cycle through every combination (the largest frames' buffers).
        args.warmup = min(300.0, max(combination_cycle(args), args.duration * 0.1))
    os.environ["GST_PLUGIN_PATH"] = os.path.join(args.build, "plugins") + (
        ":" + os.environ["GST_PLUGIN_PATH"] if os.environ.get("GST_PLUGIN_PATH") else "")
    for path in (args.video, args.model):
        if not os.path.exists(path):
            sys.exit(f"bench/soak.py: {path} not found (scripts/fetch-assets.sh)")

    Gst.init(None)
    tracers = [t for t in Gst.tracing_get_active_tracers() if type(t).__name__ == "GstLeaksTracer"]
    if not tracers:
        sys.exit("bench/soak.py: the leaks tracer is not active (GST_TRACERS must include leaks)")
    tracer = tracers[0]
    soak = Soak(args)

    # Warm-up pipeline: every delegate once, every size and format once, then destroyed.
    # What stays alive after it is one-time state (types, plugin features, delegate
    # singletons); the baseline the soak's own leftovers are counted against.
    print(f"[soak] warm-up pipeline ({len(args.delegates)} delegates)", file=sys.stderr)
    soak.run_pipeline(max(6.0, args.interval * len(args.actions) * 1.5))
    baseline = live_objects(tracer, os.environ["GST_DEBUG_FILE"])
    warm_errors = len(soak.errors)

    # RSS once a second, for progress and the maximum only: no list of samples, which would
    # itself grow the process by ~0.4 MiB an hour.
    rss_max = [0]
    t0 = time.monotonic()

    def on_tick(elapsed):
        rss = rss_kib()
        rss_max[0] = max(rss_max[0], rss)
        if int(elapsed) % 60 == 0:
            print(f"[soak] {elapsed:6.0f} s  rss {rss / 1024:.1f} MiB  frames {soak.frames}  "
                  f"loops {soak.loops}  errors {len(soak.errors)}", file=sys.stderr)

    print(f"[soak] soak: {args.duration:.0f} s, action every {args.interval} s, checkpoint every "
          f"{args.checkpoint_every} actions, warm-up {args.warmup:.0f} s", file=sys.stderr)
    soak.frames = 0
    soak.loops = 0
    soak.actions.clear()
    soak.checkpoint_t0 = t0
    soak.run_pipeline(args.duration, on_tick, checkpoints=True)
    wall = time.monotonic() - t0
    final = live_objects(tracer, os.environ["GST_DEBUG_FILE"])
    leaked = {k: v - baseline.get(k, 0) for k, v in final.items() if v > baseline.get(k, 0)}

    # Growth: the median of the last M checkpoints after warm-up minus the median of the first M.
    measured = [c for c in soak.checkpoints if c["t"] >= args.warmup]
    window = args.checkpoint_window
    rss_judged = len(measured) >= 2 * window
    memory = {}
    for key in ("rss_mib", "rss_anon_mib", "heap_in_use_mib", "heap_held_mib", "ready_rss_mib",
                "ready_rss_anon_mib", "ready_heap_in_use_mib", "ready_heap_held_mib"):
        values = [c[key] for c in measured]
        memory[key] = {
            "first": values[0] if values else None, "last": values[-1] if values else None,
            "median": round(statistics.median(values), 3) if values else None,
            "min": min(values, default=None), "max": max(values, default=None),
            "growth": round(median_growth(values, window), 3) if rss_judged else None,
            "slope_per_hour": round(slope_per_hour([c["t"] for c in measured], values), 3),
        }
    growth_mib = memory["rss_mib"]["growth"] or 0.0
    errors = len(soak.errors)
    figures = {
        "duration_s": round(wall, 1), "frames": soak.frames, "loops": soak.loops,
        "actions": dict(soak.actions), "delegates": args.delegates,
        "leaked_objects": sum(leaked.values()), "leaked_by_type": leaked,
        "baseline_live_objects": sum(baseline.values()),
        "warmup_s": args.warmup, "checkpoint_every": args.checkpoint_every,
        "checkpoint_settle_s": args.checkpoint_settle, "checkpoint_window": window,
        "malloc_trim": not args.no_trim, "rss_judged": rss_judged,
        "checkpoints_after_warmup": len(measured), "memory_after_warmup": memory,
        "rss_max_mib": round(rss_max[0] / 1024, 2),
        "checkpoints": soak.checkpoints,
        "glibc_env": {k: os.environ.get(k, "glibc default") for k in GLIBC_ENV},
        "errors": errors, "warm_up_errors": warm_errors, "warnings": soak.warnings,
        "error_messages": soak.errors[:10],
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    failures = []
    if leaked:
        failures.append(f"{sum(leaked.values())} leaked objects: {leaked}")
    if not rss_judged:
        print(f"[soak] RSS not judged: {len(measured)} checkpoints after the {args.warmup:.0f} s warm-up, "
              f"{2 * window} needed", file=sys.stderr)
    if growth_mib > args.max_rss_growth_mib:
        failures.append(f"RSS grew {growth_mib:.2f} MiB (limit {args.max_rss_growth_mib})")
    if errors:
        failures.append(f"{errors} errors: {soak.errors[:3]}")
    if soak.frames == 0:
        failures.append("no frames reached the sink")
    for f in failures:
        print(f"[soak] FAIL {f}", file=sys.stderr)
    if not failures:
        rss = (f"RSS {growth_mib:+.2f} MiB ({memory['rss_mib']['slope_per_hour']:+.2f} MiB/h), heap in use "
               f"{memory['heap_in_use_mib']['growth']:+.2f} MiB" if rss_judged else "RSS not judged")
        print(f"[soak] ok: {soak.frames} frames, {soak.loops} loops, {sum(soak.actions.values())} actions, "
              f"0 leaked objects, {rss}, 0 errors", file=sys.stderr)
    if not failures:
        os.remove(os.environ["GST_DEBUG_FILE"])  # kept when something failed, for the tracer's lines
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
