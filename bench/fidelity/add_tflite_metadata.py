#!/usr/bin/env python3
"""Writes a copy of a .tflite model with TFLite metadata that says how its float input is
normalised (NormalizationOptions mean/std), which MediaPipe Tasks requires of a float model.
MediaPipe's legacy selfie models ship without metadata; their own graph feeds them [0,1]
(ImageToTensor output_tensor_float_range 0..1), i.e. mean 0, std 255.

The model is not re-serialised (no TFLite schema needed): a new root Model table, with the
metadata buffer and a "TFLITE_METADATA" entry, is put in front of the unchanged original
bytes, whose tables it points into (flatbuffer offsets are relative and point forward).

  /usr/bin/python3 bench/fidelity/add_tflite_metadata.py IN.tflite OUT.tflite [--mean 0] [--std 255]
"""
import argparse
import struct
import sys

import flatbuffers

ALIGN = 16  # TFLite buffers are 16-byte aligned: the original bytes move by a multiple of it


def model_metadata(name, mean, std, n_inputs, n_outputs):
    """A ModelMetadata flatbuffer ("M001") with one NormalizationOptions for input 0."""
    b = flatbuffers.Builder(256)

    def floats(values):
        b.StartVector(4, len(values), 4)
        for v in reversed(values):
            b.PrependFloat32(v)
        return b.EndVector()

    def table(fields):  # fields: list of (slot, kind, value)
        b.StartObject(max(s for s, _, _ in fields) + 1)
        for slot, kind, value in fields:
            {"off": b.PrependUOffsetTRelativeSlot, "u8": b.PrependUint8Slot}[kind](slot, value, 0)
        return b.EndObject()

    def offsets(items):
        b.StartVector(4, len(items), 4)
        for o in reversed(items):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    norm = table([(0, "off", floats(mean)), (1, "off", floats(std))])
    unit = table([(0, "u8", 1), (1, "off", norm)])  # ProcessUnitOptions.NormalizationOptions = 1
    inputs = [table([(0, "off", b.CreateString("image")), (4, "off", offsets([unit]))])]
    inputs += [table([(0, "off", b.CreateString(f"input_{i}"))]) for i in range(1, n_inputs)]
    outputs = [table([(0, "off", b.CreateString(f"output_{i}"))]) for i in range(n_outputs)]
    subgraph = table([(2, "off", offsets(inputs)), (3, "off", offsets(outputs))])
    name_s, parser = b.CreateString(name), b.CreateString("1.0.0")
    root = table([(0, "off", name_s), (3, "off", offsets([subgraph])), (7, "off", parser)])
    b.Finish(root, file_identifier=b"M001")
    return bytes(b.Output())


class Table:
    """Reads a flatbuffer table's fields: absolute positions, scalars, offsets."""

    def __init__(self, buf, pos):
        self.buf, self.pos = buf, pos
        vt = pos - struct.unpack_from("<i", buf, pos)[0]
        vt_len = struct.unpack_from("<H", buf, vt)[0]
        self.slots = [struct.unpack_from("<H", buf, vt + 4 + 2 * i)[0] for i in range((vt_len - 4) // 2)]

    def field(self, slot):
        return self.pos + self.slots[slot] if slot < len(self.slots) and self.slots[slot] else None

    def target(self, slot):  # absolute position an offset field points to
        f = self.field(slot)
        return None if f is None else f + struct.unpack_from("<I", self.buf, f)[0]

    def vector(self, slot):  # absolute positions of the tables an offset vector points to
        v = self.target(slot)
        if v is None:
            return []
        n = struct.unpack_from("<I", self.buf, v)[0]
        return [v + 4 + 4 * i + struct.unpack_from("<I", self.buf, v + 4 + 4 * i)[0] for i in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--mean", type=float, nargs="+", default=[0.0])
    ap.add_argument("--std", type=float, nargs="+", default=[255.0])
    args = ap.parse_args()
    old = open(args.input, "rb").read()
    if len(old) < 8 or old[4:8] != b"TFL3":
        sys.exit(f"add_tflite_metadata: {args.input}: not a TFLite flatbuffer (no TFL3 identifier)")
    model = Table(old, struct.unpack_from("<I", old, 0)[0])
    # Model: version 0, operator_codes 1, subgraphs 2, description 3, buffers 4,
    # metadata_buffer 5, metadata 6, signature_defs 7. Buffer: data 0. Metadata: name 0, buffer 1.
    for pos in model.vector(6):
        name_at = Table(old, pos).target(0)
        n = struct.unpack_from("<I", old, name_at)[0]
        if old[name_at + 4:name_at + 4 + n] == b"TFLITE_METADATA":
            sys.exit(f"add_tflite_metadata: {args.input} already has TFLITE_METADATA")
    subgraph = Table(old, model.vector(2)[0])
    # SubGraph: tensors 0, inputs 1, outputs 2.
    n_in = struct.unpack_from("<I", old, subgraph.target(1))[0]
    n_out = struct.unpack_from("<I", old, subgraph.target(2))[0]
    meta = model_metadata("selfie_segmentation", args.mean, args.std, n_in, n_out)
    buffers, metadata = model.vector(4), model.vector(6)

    # The prefix, laid out by hand: header, Model vtable + table, new vectors, the new Buffer
    # and Metadata tables, the metadata bytes; then padding and the original file.
    out = bytearray()

    def put(fmt, *v):
        at = len(out)
        out.extend(struct.pack(fmt, *v))
        return at

    def pad(to):
        while len(out) % to:
            out.append(0)

    put("<I", 0)  # root offset, patched below
    out.extend(b"TFL3")
    slots = 8
    vtable = put("<HH" + "H" * slots, 4 + 2 * slots, 4 + 4 * slots, *range(4, 4 + 4 * slots, 4))
    pad(4)
    root = put("<i", 0)
    struct.pack_into("<i", out, root, root - vtable)
    struct.pack_into("<I", out, 0, root)
    fields = [put("<I", 0) for _ in range(slots)]  # slot i at root + 4 + 4 i, all present
    links = []  # (field position in the prefix, absolute target: ("old", pos) or ("new", pos))

    def vec_of(targets):
        pad(4)
        at = put("<I", len(targets))
        for t in targets:
            links.append((put("<I", 0), t))
        return at

    version_f = model.field(0)
    struct.pack_into("<I", out, fields[0], struct.unpack_from("<I", old, version_f)[0] if version_f else 3)
    for slot in (1, 2, 3, 5, 7):  # unchanged: point at the original objects
        t = model.target(slot)
        if t is None:  # absent: an empty vector (description: an empty string)
            t_new = vec_of([]) if slot != 3 else (pad(4), put("<IB", 0, 0))[1]
            links.append((fields[slot], ("new", t_new)))
        else:
            links.append((fields[slot], ("old", t)))
    meta_buffer_index = len(buffers)
    buffers_vec = vec_of([("old", p) for p in buffers] + [("new", None)])  # last: patched below
    links.append((fields[4], ("new", buffers_vec)))
    metadata_vec = vec_of([("old", p) for p in metadata] + [("new", None)])
    links.append((fields[6], ("new", metadata_vec)))
    # Buffer { data } and Metadata { name, buffer } tables with their vtables.
    pad(4)
    buf_vt = put("<HHH", 6, 8, 4)
    pad(4)
    buf_tab = put("<iI", 0, 0)
    struct.pack_into("<i", out, buf_tab, buf_tab - buf_vt)
    md_vt = put("<HHHH", 8, 12, 4, 8)
    pad(4)
    md_tab = put("<iII", 0, 0, meta_buffer_index)
    struct.pack_into("<i", out, md_tab, md_tab - md_vt)
    name_at = put("<I", 15)
    out.extend(b"TFLITE_METADATA\0")
    pad(ALIGN)
    # data vector: length then bytes, the bytes 16-byte aligned.
    while (len(out) + 4) % ALIGN:
        out.append(0)
    data_at = put("<I", len(meta))
    out.extend(meta)
    links.append((buf_tab + 4, ("new", data_at)))
    links.append((md_tab + 4, ("new", name_at)))
    # The two "new" vector entries.
    links = [(f, ("new", buf_tab)) if t == ("new", None) and f < metadata_vec else
             (f, ("new", md_tab)) if t == ("new", None) else (f, t) for f, t in links]
    pad(ALIGN)
    shift = len(out)
    out.extend(old)
    for f, (where, pos) in links:
        target = pos + shift if where == "old" else pos
        if target <= f:
            sys.exit("add_tflite_metadata: internal error: backward offset")
        struct.pack_into("<I", out, f, target - f)
    open(args.output, "wb").write(bytes(out))
    print(f"add_tflite_metadata: {args.output}: input normalisation mean {args.mean} std {args.std}")


if __name__ == "__main__":
    main()
