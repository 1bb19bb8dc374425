"""The pipeline benchmarks' video sources, as a description to put before the elements.

"frames" (the default): a camera's cost. A loop of Megamind frames is decoded and scaled to
the target size and format ONCE, before any timing (prepare_frames, to a raw file), read
into memory, and pushed at 30 fps from a live appsrc: each frame is copied into a buffer
from a pool (one memcpy, a fresh buffer every frame as a camera's are, never the same
GstBuffer twice) and paced to the clock by `identity sync=true`. Live, as a camera is: the
sink renders each frame at its timestamp plus the latency the elements declare (nnsegment:
its budget), so a frame is late only when it misses that, not whenever it took any time.
"decode": the file decoded, brought to 30 fps and scaled frame by frame, not live (the
earlier source; at 4K on two cores it cannot keep 30 fps by itself, and a non-live sink
counts every frame late by the elements' whole processing time).
Both end in a leaky two-frame queue, the element a camera source's consumer would see.
"""
import os
import sys

FPS = 30


def _gst():
    import gi
    gi.require_version("Gst", "1.0")
    from gi.repository import Gst
    Gst.init(None)
    return Gst


def caps_string(width, height, fmt):
    return f"video/x-raw,format={fmt},width={width},height={height},framerate={FPS}/1"


def decode_chain(video, width, height, fmt):
    # videorate (24 -> 30 fps) before the scaler, so every frame is a buffer of its own
    # (videorate's repeated frames are shared buffers, which the first element writing into
    # the frame would have to copy).
    return (f"filesrc location={video} ! decodebin ! videorate ! video/x-raw,framerate={FPS}/1 ! "
            f"videoconvert ! videoscale ! {caps_string(width, height, fmt)}")


def prepare_frames(video, width, height, fmt, count, start_frame, path):
    """Decode frames [start_frame, start_frame + count) of the 30 fps stream into `path`
    (raw frames back to back, GStreamer's default layout). Returns the size of a frame."""
    Gst = _gst()
    pipe = Gst.parse_launch(decode_chain(video, width, height, fmt) +
                            " ! appsink name=out sync=false max-buffers=2")
    sink = pipe.get_by_name("out")
    pipe.set_state(Gst.State.PLAYING)
    kept, index, frame_size = 0, 0, 0
    try:
        with open(path, "wb") as f:
            while kept < count:
                sample = sink.emit("try-pull-sample", 30 * Gst.SECOND)
                if sample is None:
                    break
                if index >= start_frame:
                    buf = sample.get_buffer()
                    data = buf.extract_dup(0, buf.get_size())
                    frame_size = frame_size or len(data)
                    if len(data) != frame_size:
                        raise SystemExit(f"paced_source: frame {index} of {video} is {len(data)} bytes, "
                                         f"not {frame_size}")
                    f.write(data)
                    kept += 1
                index += 1
    finally:
        pipe.set_state(Gst.State.NULL)
    if kept < count:
        raise SystemExit(f"paced_source: {video} gave {kept} frames after frame {start_frame}, {count} wanted")
    return frame_size


def description(kind, width, height, fmt, video):
    """The source part of a pipeline description, up to and including its leaky queue
    (named camq) and a trailing '! '."""
    if kind == "frames":
        head = (f"appsrc name=camsrc format=time is-live=true do-timestamp=false "
                f"caps=\"{caps_string(width, height, fmt)}\"")
    elif kind == "decode":
        head = decode_chain(video, width, height, fmt)
    else:
        raise ValueError(f"unknown source {kind!r}")
    return head + " ! identity sync=true name=pace ! queue max-size-buffers=2 leaky=downstream name=camq ! "


def attach(pipe, frames_path, frame_size, realtime=False):
    """Feed the appsrc of a 'frames' description from the raw file: the frames are read into
    memory here, before the pipeline runs; each push then costs one copy into a pooled
    buffer. realtime: the source's thread (the copy, the pacing) gets SCHED_RR 10, as a
    real-time camera application's capture thread would (nnsegment thread-priority=realtime
    gives the frame thread the same): a camera delivers on time whatever the CPU load, and a
    starved source would make every frame late before it reaches the elements."""
    Gst = _gst()
    src = pipe.get_by_name("camsrc")
    if src is None:
        return
    total = os.path.getsize(frames_path)
    if frame_size <= 0 or total % frame_size:
        raise SystemExit(f"paced_source: {frames_path} ({total} bytes) is not whole frames of {frame_size}")
    with open(frames_path, "rb") as f:
        frames = [f.read(frame_size) for _ in range(total // frame_size)]
    pool = Gst.BufferPool.new()
    config = pool.get_config()
    # No upper bound: a frame still held downstream never stalls the source (a camera
    # drops, it does not wait); released buffers come back to the pool.
    Gst.BufferPool.config_set_params(config, src.get_property("caps"), frame_size, 4, 0)
    if not pool.set_config(config) or not pool.set_active(True):
        raise SystemExit("paced_source: could not set up the buffer pool")
    state = {"n": 0}

    def need_data(appsrc, _length):
        if state["n"] == 0 and realtime:  # the appsrc's streaming thread, once
            try:
                os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(10))
            except OSError as e:
                print(f"paced_source: no real-time priority for the source thread: {e}", file=sys.stderr)
        ok, buf = pool.acquire_buffer(None)
        if ok != Gst.FlowReturn.OK:
            appsrc.emit("end-of-stream")
            return
        n = state["n"]
        buf.fill(0, frames[n % len(frames)])
        buf.pts = Gst.util_uint64_scale(n, Gst.SECOND, FPS)
        buf.duration = Gst.util_uint64_scale(n + 1, Gst.SECOND, FPS) - buf.pts
        buf.offset = n
        state["n"] = n + 1
        appsrc.emit("push-buffer", buf)

    src.connect("need-data", need_data)  # the handler holds the frames and the pool


def frames_dir():
    """A temporary directory for prepare_frames: in memory (/dev/shm) where there is one, so
    writing a GB of 4K frames costs no disk writeback while the benchmark runs."""
    import tempfile
    shm = "/dev/shm"
    return tempfile.TemporaryDirectory(prefix="nnpipe-bench-frames-",
                                       dir=shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None)
