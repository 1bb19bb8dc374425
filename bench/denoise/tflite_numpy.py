"""A small numpy interpreter of float32 TFLite files, independent of the engine.

The flatbuffer is read with Python classes that `flatc --python` generates at run time
from the schema nnpipe's importer uses (engine/import/tflite/tflite_schema.fbs), so the
only shared piece with the engine is the public schema. Ops are written from the TFLite
reference semantics in numpy, float32 throughout (as TFLite's reference kernels), and
cover what the DTLN stages use; any other op is refused by name.
"""
import importlib
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

_REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCHEMA = os.path.join(_REPO, "engine", "import", "tflite", "tflite_schema.fbs")
_schema_mod = None


def _schema():
    """Generates the Python schema classes once per process, in a temp dir."""
    global _schema_mod
    if _schema_mod is not None:
        return _schema_mod
    try:
        import flatbuffers  # noqa: F401  (the generated classes import it)
    except ImportError:
        sys.exit("tflite_numpy: python3-flatbuffers is missing (apt-get install python3-flatbuffers)")
    flatc = shutil.which("flatc")
    if not flatc:
        sys.exit("tflite_numpy: flatc is missing (apt-get install flatbuffers-compiler)")
    out = tempfile.mkdtemp(prefix="tflite_py_")
    subprocess.run([flatc, "--python", "-o", out, SCHEMA], check=True)
    sys.path.insert(0, out)
    mods = {}
    for name in ("Model", "BuiltinOperator", "BuiltinOptions", "TensorType",
                 "FullyConnectedOptions", "Conv2DOptions", "AddOptions", "SubOptions", "MulOptions",
                 "PackOptions", "SplitOptions", "StridedSliceOptions",
                 "ReducerOptions", "ReshapeOptions", "Padding"):
        mods[name] = importlib.import_module(f"tflite.{name}")
    _schema_mod = mods
    return mods


def _enum_names(cls):
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


_DTYPES = {0: np.float32, 2: np.int32, 4: np.int64, 9: np.int8, 3: np.uint8, 7: np.int16, 6: np.bool_}


def _act(x, code):
    if code == 0:
        return x
    if code == 1:
        return np.maximum(x, 0)
    if code == 2:
        return np.clip(x, -1, 1)
    if code == 3:
        return np.clip(x, 0, 6)
    if code == 4:
        return np.tanh(x)
    raise NotImplementedError(f"fused activation {code}")


class _UnpackOptions:
    """Upstream TFLite schema: table UnpackOptions { num:int; axis:int; } (builtin options 64)."""

    def Init(self, buf, pos):
        import flatbuffers
        self._tab = flatbuffers.table.Table(buf, pos)

    def _int(self, slot):
        import flatbuffers
        o = self._tab.Offset(4 + 2 * slot)
        return self._tab.Get(flatbuffers.number_types.Int32Flags, o + self._tab.Pos) if o else 0

    def Num(self):
        return self._int(0)

    def Axis(self):
        return self._int(1)


class TFLiteModel:
    def __init__(self, path):
        s = _schema()
        with open(path, "rb") as f:
            self.buf = f.read()
        if len(self.buf) < 8 or self.buf[4:8] != b"TFL3":
            raise ValueError(f"{path}: not a TFLite file (no TFL3 identifier)")
        self.path = path
        m = s["Model"].Model.GetRootAsModel(self.buf, 0)
        if m.SubgraphsLength() != 1:
            raise ValueError(f"{path}: {m.SubgraphsLength()} subgraphs, expected 1")
        g = m.Subgraphs(0)
        op_names = _enum_names(s["BuiltinOperator"].BuiltinOperator)
        self.tensors = []
        self.consts = {}
        for i in range(g.TensorsLength()):
            t = g.Tensors(i)
            shape = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []
            if t.Type() not in _DTYPES:
                raise ValueError(f"{path}: tensor {t.Name().decode()} has type {t.Type()}")
            dtype = _DTYPES[t.Type()]
            self.tensors.append((t.Name().decode(), shape, dtype))
            b = m.Buffers(t.Buffer())
            if b is not None and b.DataLength() > 0:
                raw = b.DataAsNumpy().tobytes()
                self.consts[i] = np.frombuffer(raw, dtype).reshape(shape).copy()
            elif b is not None and b.Offset() > 1:
                raw = self.buf[b.Offset(): b.Offset() + b.Size()]
                self.consts[i] = np.frombuffer(raw, dtype).reshape(shape).copy()
        self.inputs = [int(i) for i in g.InputsAsNumpy()]
        self.outputs = [int(i) for i in g.OutputsAsNumpy()]
        self.ops = []
        for k in range(g.OperatorsLength()):
            op = g.Operators(k)
            oc = m.OperatorCodes(op.OpcodeIndex())
            code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
            name = op_names.get(code, str(code))
            if not hasattr(self, "_op_" + name):
                raise NotImplementedError(f"{path}: operator {k} is {name}, which tflite_numpy does not implement")
            opts = self._options(name, op)
            self.ops.append((name, [int(i) for i in op.InputsAsNumpy()], [int(i) for i in op.OutputsAsNumpy()], opts))

    def _options(self, name, op):
        s = _schema()
        table = op.BuiltinOptions()
        cls = {"FULLY_CONNECTED": "FullyConnectedOptions", "CONV_2D": "Conv2DOptions", "ADD": "AddOptions",
               "SUB": "SubOptions", "MUL": "MulOptions", "PACK": "PackOptions", "UNPACK": "_UnpackOptions",
               "SPLIT": "SplitOptions", "STRIDED_SLICE": "StridedSliceOptions", "MEAN": "ReducerOptions",
               "RESHAPE": "ReshapeOptions"}.get(name)
        if cls is None or table is None:
            return None
        if cls.startswith("_"):  # not in nnpipe's trimmed schema: read the upstream layout here
            o = globals()[cls]()
            o.Init(table.Bytes, table.Pos)
            return o
        o = getattr(s[cls], cls)()
        o.Init(table.Bytes, table.Pos)
        return o

    def input_shapes(self):
        return [(self.tensors[i][0], self.tensors[i][1]) for i in self.inputs]

    def run(self, *inputs):
        if len(inputs) != len(self.inputs):
            raise ValueError(f"{self.path}: {len(self.inputs)} inputs, got {len(inputs)}")
        vals = dict(self.consts)
        for i, x in zip(self.inputs, inputs):
            shape = self.tensors[i][1]
            x = np.asarray(x, np.float32)
            if list(x.shape) != shape:
                raise ValueError(f"{self.path}: input {self.tensors[i][0]} wants {shape}, got {list(x.shape)}")
            vals[i] = x
        for name, ins, outs, opts in self.ops:
            args = [vals[i] if i >= 0 else None for i in ins]
            res = getattr(self, "_op_" + name)(args, opts, [self.tensors[o][1] for o in outs])
            if not isinstance(res, list):
                res = [res]
            for o, r in zip(outs, res):
                r = np.asarray(r, self.tensors[o][2])
                want = self.tensors[o][1]
                if list(r.shape) != want:
                    if int(np.prod(want)) != r.size:
                        raise RuntimeError(f"{name}: output {self.tensors[o][0]} is {list(r.shape)}, file says {want}")
                    r = r.reshape(want)
                vals[o] = r
        return [vals[o] for o in self.outputs]

    # --- ops (TFLite reference semantics) ---
    @staticmethod
    def _op_FULLY_CONNECTED(a, o, out_shapes):
        x, w = a[0], a[1]
        y = x.reshape(-1, w.shape[1]) @ w.T
        if len(a) > 2 and a[2] is not None:
            y = y + a[2]
        y = _act(y.astype(np.float32), o.FusedActivationFunction() if o else 0)
        if o and o.KeepNumDims():
            y = y.reshape(list(x.shape[:-1]) + [w.shape[0]])
        return y

    @staticmethod
    def _op_CONV_2D(a, o, out_shapes):
        x, w = a[0], a[1]  # x NHWC, w OHWI
        if w.shape[1] != 1 or w.shape[2] != 1 or o.StrideH() != 1 or o.StrideW() != 1:
            raise NotImplementedError("CONV_2D: only 1x1 kernels with stride 1 (what DTLN uses)")
        if o.DilationHFactor() not in (0, 1) or o.DilationWFactor() not in (0, 1):
            raise NotImplementedError("CONV_2D: dilation")
        y = np.einsum("nhwi,oi->nhwo", x, w[:, 0, 0, :])
        if len(a) > 2 and a[2] is not None:
            y = y + a[2]
        return _act(y.astype(np.float32), o.FusedActivationFunction())

    @staticmethod
    def _op_ADD(a, o, _):
        return _act(a[0] + a[1], o.FusedActivationFunction() if o else 0)

    @staticmethod
    def _op_SUB(a, o, _):
        return _act(a[0] - a[1], o.FusedActivationFunction() if o else 0)

    @staticmethod
    def _op_MUL(a, o, _):
        return _act(a[0] * a[1], o.FusedActivationFunction() if o else 0)

    @staticmethod
    def _op_SQUARED_DIFFERENCE(a, o, _):
        d = a[0] - a[1]
        return d * d

    @staticmethod
    def _op_RSQRT(a, o, _):
        return (1.0 / np.sqrt(a[0])).astype(np.float32)

    @staticmethod
    def _op_LOGISTIC(a, o, _):
        return (1.0 / (1.0 + np.exp(-a[0].astype(np.float64)))).astype(np.float32)

    @staticmethod
    def _op_TANH(a, o, _):
        return np.tanh(a[0])

    @staticmethod
    def _op_ABS(a, o, _):
        return np.abs(a[0])

    @staticmethod
    def _op_RESHAPE(a, o, out_shapes):
        return a[0].reshape(out_shapes[0])

    @staticmethod
    def _op_PAD(a, o, _):
        return np.pad(a[0], [tuple(int(v) for v in p) for p in a[1]])

    @staticmethod
    def _op_MEAN(a, o, _):
        axes = tuple(int(v) % a[0].ndim for v in np.atleast_1d(a[1]))
        return a[0].mean(axis=axes, keepdims=bool(o.KeepDims()), dtype=np.float32)

    @staticmethod
    def _op_SPLIT(a, o, _):
        axis = int(a[0]) % a[1].ndim
        return list(np.split(a[1], o.NumSplits(), axis=axis))

    @staticmethod
    def _op_PACK(a, o, _):
        return np.stack(a, axis=o.Axis())

    @staticmethod
    def _op_UNPACK(a, o, _):
        x = a[0]
        axis = o.Axis() % x.ndim
        if o.Num() not in (0, x.shape[axis]):
            raise ValueError(f"UNPACK: num {o.Num()} but axis {axis} has {x.shape[axis]}")
        return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]

    @staticmethod
    def _op_STRIDED_SLICE(a, o, out_shapes):
        x, begin, end, strides = a
        if o.EllipsisMask() or o.NewAxisMask():
            raise NotImplementedError("STRIDED_SLICE: ellipsis/new-axis masks")
        idx = []
        for d in range(x.ndim):
            b, e, st = int(begin[d]), int(end[d]), int(strides[d])
            if o.ShrinkAxisMask() >> d & 1:
                idx.append(b)
                continue
            idx.append(slice(None if o.BeginMask() >> d & 1 else b, None if o.EndMask() >> d & 1 else e, st))
        return x[tuple(idx)]
