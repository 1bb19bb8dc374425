#!/usr/bin/python3
"""Golden cases for the quantized reference kernels, from PyTorch's quantized ops with the
qnnpack engine (uint8 activations, int8 weights: symmetric per-channel or per-tensor).

    /usr/bin/python3 tests/ops/data/make_quant_golden.py OUT_DIR

Run by tests/ops/quant_test.cpp at test time (the goldens are not committed). Every
tensor is written as int32 .npy already in the IR's layout (NHWC activations, OHWI conv
filters, [1,H,W,Cout] depthwise filters, int32 bias); OUT_DIR/cases.json gives each
case's op, parameters, scales and zero points. Exit 77 when torch is missing.
"""
import json
import os
import sys

import numpy as np

try:
    import torch
    import torch.nn.functional as F
    import torch.ao.nn.quantized as nnq
except ImportError as e:  # the test reports a skip
    print(f"torch not available: {e}", file=sys.stderr)
    sys.exit(77)

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
torch.backends.quantized.engine = "qnnpack"
torch.manual_seed(18)
cases = []


def save(name, key, array):
    np.save(os.path.join(OUT, f"{name}_{key}.npy"), np.ascontiguousarray(array).astype(np.int32))
    return f"{name}_{key}.npy"


def nhwc(q):
    r = q.int_repr()
    return r.permute(0, 2, 3, 1).numpy() if r.dim() == 4 else r.numpy()


def qinput(shape, scale, zp, lo=-3.0, hi=3.0):
    x = torch.rand(*shape) * (hi - lo) + lo
    return torch.quantize_per_tensor(x, scale, zp, torch.quint8)


def act(name, key, q):
    return {"file": save(name, key, nhwc(q)), "dims": list(nhwc(q).shape), "scale": float(q.q_scale()),
            "zp": int(q.q_zero_point())}


def conv_case(name, n, cin, h, w, cout, k, stride, pad, dil, groups, per_channel, relu=False):
    x = qinput((n, cin, h, w), 0.027, 121)
    wf = torch.randn(cout, cin // groups, k, k) * 0.3
    if per_channel:
        scales = (wf.abs().amax(dim=(1, 2, 3)) / 127).double()
        qw = torch.quantize_per_channel(wf, scales, torch.zeros(cout, dtype=torch.long), 0, torch.qint8)
        wscales = [float(s) for s in scales]
    else:
        s = float(wf.abs().max() / 127)
        qw = torch.quantize_per_tensor(wf, s, 0, torch.qint8)
        wscales = [s] * cout
    bq = torch.randint(-3000, 3000, (cout,), dtype=torch.int32)
    bias = torch.tensor([float(bq[c]) * x.q_scale() * wscales[c] for c in range(cout)], dtype=torch.float32)
    mod = nnq.Conv2d(cin, cout, k, stride=stride, padding=pad, dilation=dil, groups=groups)
    mod.set_weight_bias(qw, bias)
    mod.scale, mod.zero_point = 0.061, 119
    y = mod(x)
    if relu:
        y = F.relu(y)
    depthwise = groups == cin and groups > 1
    wr = qw.int_repr()
    filt = wr.permute(1, 2, 3, 0).numpy() if depthwise else wr.permute(0, 2, 3, 1).numpy()
    cases.append({"name": name, "op": "DEPTHWISE_CONV_2D" if depthwise else "CONV_2D", "x": act(name, "x", x),
                  "filter": {"file": save(name, "w", filt), "dims": list(filt.shape), "per_channel": per_channel,
                             "scales": wscales, "channel_dim": 3 if depthwise else 0},
                  "bias": save(name, "b", bq.numpy()), "stride": stride, "pad": pad, "dil": dil,
                  "multiplier": cout // cin if depthwise else 1, "fuse": 1 if relu else 0, "y": act(name, "y", y)})


conv_case("conv_pc_s2", 1, 13, 9, 7, 11, 3, 2, 1, 1, 1, True)
conv_case("conv_pc_dil2_relu", 2, 7, 11, 9, 13, 3, 1, 2, 2, 1, True, relu=True)
conv_case("conv_pt_1x1", 1, 13, 7, 9, 17, 1, 1, 0, 1, 1, False)
conv_case("depthwise_pc_s2", 1, 13, 9, 11, 13, 3, 2, 1, 1, 13, True)
conv_case("depthwise_pc_dil2", 1, 7, 11, 9, 7, 3, 1, 2, 2, 7, True)
conv_case("depthwise_pt_mult2", 1, 5, 7, 9, 10, 3, 1, 1, 1, 5, False)

# Transposed conv: PyTorch weight [Cin, Cout, k, k], per-tensor (NNAPI OHWI filter).
for name, cin, cout, k, s, p, op in [("tconv_s2", 7, 5, 3, 2, 1, 1), ("tconv_s1", 5, 9, 3, 1, 1, 0)]:
    x = qinput((1, cin, 7, 9), 0.031, 117)
    wf = torch.randn(cin, cout, k, k) * 0.3
    sw = float(wf.abs().max() / 127)
    qw = torch.quantize_per_tensor(wf, sw, 0, torch.qint8)
    bq = torch.randint(-2000, 2000, (cout,), dtype=torch.int32)
    bias = bq.float() * x.q_scale() * sw
    mod = nnq.ConvTranspose2d(cin, cout, k, stride=s, padding=p, output_padding=op)
    mod.set_weight_bias(qw, bias)
    mod.scale, mod.zero_point = 0.047, 131
    y = mod(x)
    filt = qw.int_repr().permute(1, 2, 3, 0).numpy()
    cases.append({"name": name, "op": "TRANSPOSE_CONV_2D", "x": act(name, "x", x),
                  "filter": {"file": save(name, "w", filt), "dims": list(filt.shape), "per_channel": False,
                             "scales": [sw] * cout},
                  "bias": save(name, "b", bq.numpy()), "stride": s, "pads": [p, p - op], "y": act(name, "y", y)})

# Fully connected (per-tensor weights).
for name, batch, fin, fout in [("fc_13_7", 3, 13, 7), ("fc_65_11", 2, 65, 11)]:
    x = torch.quantize_per_tensor(torch.rand(batch, fin) * 4 - 2, 0.019, 103, torch.quint8)
    wf = torch.randn(fout, fin) * 0.2
    sw = float(wf.abs().max() / 127)
    qw = torch.quantize_per_tensor(wf, sw, 0, torch.qint8)
    bq = torch.randint(-3000, 3000, (fout,), dtype=torch.int32)
    mod = nnq.Linear(fin, fout)
    mod.set_weight_bias(qw, bq.float() * x.q_scale() * sw)
    mod.scale, mod.zero_point = 0.043, 125
    y = mod(x)
    cases.append({"name": name, "op": "FULLY_CONNECTED", "x": act(name, "x", x),
                  "filter": {"file": save(name, "w", qw.int_repr().numpy()), "dims": [fout, fin],
                             "per_channel": False, "scales": [sw] * fout},
                  "bias": save(name, "b", bq.numpy()), "fuse": 0, "y": act(name, "y", y)})

# Binary ops, inputs and output with three different scales; one case broadcasts.
for name, op, fn in [("add", "ADD", torch.ops.quantized.add), ("mul", "MUL", torch.ops.quantized.mul)]:
    for suffix, bshape in [("", (1, 13, 7, 9)), ("_bcast", (1, 13, 1, 1))]:
        a = qinput((1, 13, 7, 9), 0.025, 128)
        b = qinput(bshape, 0.017, 99, -2, 2)
        out_scale = 0.05 if op == "ADD" else 0.09
        y = fn(a, b, out_scale, 127)
        cases.append({"name": name + suffix, "op": op, "x": act(name + suffix, "a", a),
                      "x2": act(name + suffix, "b", b), "fuse": 0, "y": act(name + suffix, "y", y)})

# Pools (output keeps the input's scale and zero point). PyTorch's quantized avg_pool2d
# counts the padding in the divisor whatever count_include_pad says, so the padded average
# is PyTorch's float op on the dequantized input, quantized (NNAPI excludes the padding).
x = qinput((1, 13, 11, 9), 0.03, 125)


def requantized(y, like):
    return torch.quantize_per_tensor(y, like.q_scale(), like.q_zero_point(), torch.quint8)


for name, op, k, s, p, y in [
        ("avgpool_k3s2p1", "AVERAGE_POOL_2D", 3, 2, 1,
         requantized(F.avg_pool2d(x.dequantize(), 3, 2, 1, count_include_pad=False), x)),
        ("avgpool_k2s2", "AVERAGE_POOL_2D", 2, 2, 0, F.avg_pool2d(x, 2, 2)),
        ("maxpool_k3s2p1", "MAX_POOL_2D", 3, 2, 1, F.max_pool2d(x, 3, 2, 1))]:
    cases.append({"name": name, "op": op, "x": act(name, "x", x), "k": k, "stride": s, "pad": p,
                  "y": act(name, "y", y)})

# Global average (MobileNetV2's head): MEAN over H, W.
x = qinput((1, 13, 7, 9), 0.03, 125)
cases.append({"name": "mean_hw", "op": "MEAN", "x": act("mean_hw", "x", x),
              "y": act("mean_hw", "y", torch.mean(x, (2, 3), keepdim=True))})

# Concatenation along channels, inputs with other scales than the output (ratios that make
# no exact ties: PyTorch rounds ties to even, NNAPI away from zero).
a = qinput((1, 7, 5, 9), 0.0213, 110)
b = qinput((1, 13, 5, 9), 0.0347, 140)
y = torch.ops.quantized.cat([a, b], 1, 0.04, 128)
cases.append({"name": "concat_requant", "op": "CONCATENATION", "x": act("concat_requant", "a", a),
              "x2": act("concat_requant", "b", b), "y": act("concat_requant", "y", y)})

# Bilinear resize (PyTorch align_corners=False is half-pixel centres).
x = qinput((1, 13, 7, 9), 0.03, 125)
for name, size, align in [("bilinear_up", (15, 17), False), ("bilinear_up_align", (13, 19), True)]:
    y = F.interpolate(x, size=size, mode="bilinear", align_corners=align)
    cases.append({"name": name, "op": "RESIZE_BILINEAR", "x": act(name, "x", x), "size": list(size),
                  "align_corners": align, "y": act(name, "y", y)})

# Activations.
x = qinput((1, 13, 7, 9), 0.05, 128, -6.5, 6.5)
for name, op, y in [
        ("hardswish", "HARD_SWISH", torch.ao.nn.quantized.functional.hardswish(x, 0.025, 20)),
        ("logistic", "LOGISTIC", torch.sigmoid(x)),
        ("relu", "RELU", F.relu(x)),
        ("relu6", "RELU6", torch.ao.nn.quantized.ReLU6()(x))]:
    cases.append({"name": name, "op": op, "x": act(name, "x", x), "y": act(name, "y", y)})

# QUANTIZE / DEQUANTIZE: the float side is exported as float32 .npy.
xf = torch.rand(1, 13, 7, 9) * 6 - 3
q = torch.quantize_per_tensor(xf, 0.023, 131, torch.quint8)
np.save(os.path.join(OUT, "quantize_xf.npy"), xf.permute(0, 2, 3, 1).numpy().astype(np.float32))
cases.append({"name": "quantize", "op": "QUANTIZE", "xf": "quantize_xf.npy", "dims": [1, 7, 9, 13],
              "y": act("quantize", "y", q)})

with open(os.path.join(OUT, "cases.json"), "w") as f:
    json.dump({"torch": torch.__version__, "engine": torch.backends.quantized.engine, "cases": cases}, f, indent=1)
print(f"{len(cases)} cases in {OUT}")
