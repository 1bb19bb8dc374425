#!/usr/bin/python3
"""Converts a TensorFlow.js layers model (Keras model.json + weight shards) to ONNX.

    /usr/bin/python3 scripts/convert_tfjs_keras.py MODEL_DIR -o OUT.onnx [--keep-softmax]
    /usr/bin/python3 scripts/convert_tfjs_keras.py MODEL_DIR --check IMAGE... [--tfjs NODE_DIR]

MODEL_DIR holds model.json and the shard files its weightsManifest names. The Keras graph
(functional model: InputLayer, ZeroPadding2D, Conv2D, DepthwiseConv2D, BatchNormalization,
ReLU, Activation, Add, AveragePooling2D, GlobalAveragePooling2D, Flatten, Dense, Dropout) is
written as an ONNX graph (opset 13, batch 1, NCHW) with the shards' weights, dequantized as
TensorFlow.js does (uint8/uint16: min + scale * q; float16). Batch norm after a convolution
folds into its filter and bias; ZeroPadding2D (Keras pads stride-2 convolutions at the
bottom/right only) becomes the convolution's asymmetric pads. The output layer's softmax is
left out unless --keep-softmax: the ONNX output is the logits (argmax unchanged), which is
what int8 agreement is measured on.

--check runs each image through a PyTorch rebuild of the Keras graph (layer by layer, no
folding: an independent reading of model.json) and, when NODE_DIR has node_modules with
@tensorflow/tfjs-core, -layers and -backend-cpu, through TensorFlow.js itself (the original
runtime), on the same pre-processed input (RGB / 255, INTER_AREA resize), and prints both
top-1 classes and the largest difference of the probabilities. --save-inputs DIR also writes
each input as .npy (NCHW) for `nnrun --input`, to hold the ONNX file to the same numbers.

Used for nsfwjs's MobileNetV2 (scripts/fetch-assets.sh): the only pretrained MobileNetV2 found
in the npm registry or Debian; Keras MobileNetV2 1.0/224 with ImageNet weights in its first 98
layers (frozen when it was fine-tuned), the rest and a 256-128-5 head fine-tuned to 5 classes.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 13
DTYPE_BYTES = {"float32": 4, "int32": 4, "uint8": 1, "uint16": 2, "float16": 2}


def load_weights(model_dir, manifest):
    """{name: float32 array} from the shards, dequantized like tf.io.decodeWeights."""
    weights = {}
    for group in manifest:
        blob = b"".join(open(os.path.join(model_dir, p), "rb").read() for p in group["paths"])
        offset = 0
        for w in group["weights"]:
            count = int(np.prod(w["shape"])) if w["shape"] else 1
            q = w.get("quantization")
            dtype = q["dtype"] if q else w["dtype"]
            size = count * DTYPE_BYTES[dtype]
            if offset + size > len(blob):
                sys.exit(f"convert_tfjs_keras: {w['name']} runs past the end of the shards ({len(blob)} bytes)")
            raw = np.frombuffer(blob, dtype=dtype, count=count, offset=offset)
            offset += size
            if q and dtype in ("uint8", "uint16"):
                values = raw.astype(np.float64) * q["scale"] + q["min"]
            else:
                values = raw
            weights[w["name"]] = values.astype(np.float32).reshape(w["shape"])
        if offset != len(blob):
            sys.exit(f"convert_tfjs_keras: the shards hold {len(blob)} bytes, the manifest {offset}")
    return weights


def same_padding(size, kernel, stride, dilation=1):
    """TensorFlow's SAME padding of one axis: (before, after)."""
    k = (kernel - 1) * dilation + 1
    total = max((-(-size // stride) - 1) * stride + k - size, 0)
    return total // 2, total - total // 2


class KerasGraph(nn.Module):
    """The Keras functional graph as a PyTorch module (NCHW inside, layer by layer)."""

    def __init__(self, config, weights, keep_softmax):
        super().__init__()
        self.layers = config["layers"]
        self.outputs = [o[0] for o in config["output_layers"]]
        self.keep_softmax = keep_softmax
        self.params = nn.ParameterDict()
        used = set()

        def param(layer, key):
            name = f"{layer}/{key}"
            if name not in weights:
                sys.exit(f"convert_tfjs_keras: weight {name} is not in the manifest")
            used.add(name)
            self.params[name.replace("/", "__")] = nn.Parameter(torch.from_numpy(weights[name].copy()),
                                                                requires_grad=False)

        for layer in self.layers:
            cls, cfg, name = layer["class_name"], layer["config"], layer["name"]
            if cls == "Conv2D":
                param(name, "kernel")
                if cfg.get("use_bias", True):
                    param(name, "bias")
            elif cls == "DepthwiseConv2D":
                param(name, "depthwise_kernel")
                if cfg.get("use_bias", True):
                    param(name, "bias")
            elif cls == "BatchNormalization":
                if cfg.get("scale", True):
                    param(name, "gamma")
                if cfg.get("center", True):
                    param(name, "beta")
                param(name, "moving_mean")
                param(name, "moving_variance")
            elif cls == "Dense":
                param(name, "kernel")
                if cfg.get("use_bias", True):
                    param(name, "bias")
            elif cls not in ("InputLayer", "ZeroPadding2D", "ReLU", "Activation", "Add", "AveragePooling2D",
                             "GlobalAveragePooling2D", "Flatten", "Dropout"):
                sys.exit(f"convert_tfjs_keras: layer {name}: {cls} is not supported")
        unused = set(weights) - used
        if unused:
            sys.exit(f"convert_tfjs_keras: weights no layer reads: {sorted(unused)[:5]}")

    def p(self, layer, key):
        return self.params[f"{layer}__{key}"]

    @staticmethod
    def activation(x, name):
        if name in (None, "linear"):
            return x
        if name == "relu":
            return F.relu(x)
        if name == "relu6":
            return torch.clamp(x, 0, 6)
        if name == "sigmoid":
            return torch.sigmoid(x)
        if name == "softmax":
            return F.softmax(x, dim=1)
        sys.exit(f"convert_tfjs_keras: activation {name} is not supported")

    def conv(self, x, layer, depthwise):
        cfg, name = layer["config"], layer["name"]
        if depthwise:
            k = self.p(name, "depthwise_kernel")  # [kh, kw, C, M]
            kh, kw, c, m = k.shape
            w = k.permute(2, 3, 0, 1).reshape(c * m, 1, kh, kw)
            groups = c
        else:
            k = self.p(name, "kernel")  # [kh, kw, in, out]
            kh, kw = k.shape[:2]
            w = k.permute(3, 2, 0, 1)
            groups = 1
        stride, dilation = cfg["strides"], cfg.get("dilation_rate", [1, 1])
        if cfg["data_format"] != "channels_last":
            sys.exit(f"convert_tfjs_keras: {name}: data_format {cfg['data_format']}")
        if cfg["padding"] == "same":
            top, bottom = same_padding(x.shape[2], kh, stride[0], dilation[0])
            left, right = same_padding(x.shape[3], kw, stride[1], dilation[1])
            if top == bottom and left == right:
                pad = (top, left)
            else:
                x, pad = F.pad(x, (left, right, top, bottom)), (0, 0)
        elif cfg["padding"] == "valid":
            pad = (0, 0)
        else:
            sys.exit(f"convert_tfjs_keras: {name}: padding {cfg['padding']}")
        bias = self.p(name, "bias") if cfg.get("use_bias", True) else None
        y = F.conv2d(x, w, bias, stride=tuple(stride), padding=pad, dilation=tuple(dilation), groups=groups)
        return self.activation(y, cfg.get("activation"))

    def forward(self, x):
        values = {}
        for layer in self.layers:
            cls, cfg, name = layer["class_name"], layer["config"], layer["name"]
            ins = [values[i[0]] for i in layer["inbound_nodes"][0]] if layer["inbound_nodes"] else [x]
            h = ins[0]
            if cls in ("InputLayer", "Dropout"):
                y = h
            elif cls == "ZeroPadding2D":
                (top, bottom), (left, right) = cfg["padding"]
                y = F.pad(h, (left, right, top, bottom))
            elif cls in ("Conv2D", "DepthwiseConv2D"):
                y = self.conv(h, layer, cls == "DepthwiseConv2D")
            elif cls == "BatchNormalization":
                c = h.shape[1]
                gamma = self.p(name, "gamma") if cfg.get("scale", True) else torch.ones(c)
                beta = self.p(name, "beta") if cfg.get("center", True) else torch.zeros(c)
                y = F.batch_norm(h, self.p(name, "moving_mean"), self.p(name, "moving_variance"), gamma, beta,
                                 training=False, eps=cfg["epsilon"])
            elif cls == "ReLU":
                if cfg.get("negative_slope", 0) != 0 or cfg.get("threshold", 0) != 0:
                    sys.exit(f"convert_tfjs_keras: {name}: leaky or thresholded ReLU")
                y = torch.clamp(h, 0, cfg["max_value"]) if cfg.get("max_value") is not None else F.relu(h)
            elif cls == "Activation":
                y = self.activation(h, cfg["activation"])
            elif cls == "Add":
                y = ins[0]
                for other in ins[1:]:
                    y = y + other
            elif cls == "AveragePooling2D":
                if cfg["padding"] != "valid":
                    sys.exit(f"convert_tfjs_keras: {name}: padding {cfg['padding']}")
                y = F.avg_pool2d(h, tuple(cfg["pool_size"]), tuple(cfg["strides"]))
            elif cls == "GlobalAveragePooling2D":
                y = h.mean(dim=(2, 3))
            elif cls == "Flatten":
                # Keras flattens NHWC: the same order as NCHW only when the map is 1x1.
                y = h.flatten(1) if h.dim() == 2 or h.shape[2] * h.shape[3] == 1 else h.permute(0, 2, 3, 1).flatten(1)
            elif cls == "Dense":
                y = h @ self.p(name, "kernel")
                if cfg.get("use_bias", True):
                    y = y + self.p(name, "bias")
                act = cfg.get("activation")
                if name in self.outputs and act == "softmax" and not self.keep_softmax:
                    act = None
                y = self.activation(y, act)
            values[name] = y
        return values[self.outputs[0]]


class OnnxWriter:
    """The Keras graph as ONNX nodes: NCHW tensors named after the layers that make them."""

    def __init__(self, config, weights, keep_softmax):
        from onnx import helper, numpy_helper
        self.helper, self.numpy_helper = helper, numpy_helper
        self.config, self.w, self.keep_softmax = config, weights, keep_softmax
        self.nodes, self.inits, self.shapes = [], [], {}
        self.outputs = [o[0] for o in config["output_layers"]]
        self.readers = {}
        for layer in config["layers"]:
            for i in (layer["inbound_nodes"][0] if layer["inbound_nodes"] else []):
                self.readers.setdefault(i[0], []).append(layer)

    def const(self, name, array):
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name))
        return name

    def node(self, op, inputs, output, **attrs):
        self.nodes.append(self.helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def activation(self, x, name, out):
        if name in (None, "linear"):
            return x
        if name == "relu":
            return self.node("Relu", [x], out)
        if name == "relu6":
            return self.node("Clip", [x, self.const(out + "_lo", np.array(0)), self.const(out + "_hi", np.array(6))], out)
        if name == "sigmoid":
            return self.node("Sigmoid", [x], out)
        if name == "softmax":
            return self.node("Softmax", [x], out, axis=1)
        sys.exit(f"convert_tfjs_keras: activation {name} is not supported")

    def folded_bn(self, layer):
        """The BatchNormalization that alone reads this conv's output, to fold into it."""
        readers = self.readers.get(layer["name"], [])
        if layer["config"].get("activation") not in (None, "linear") or len(readers) != 1:
            return None
        return readers[0] if readers[0]["class_name"] == "BatchNormalization" else None

    def bn_scale_shift(self, bn, channels):
        cfg, name = bn["config"], bn["name"]
        gamma = self.w[f"{name}/gamma"] if cfg.get("scale", True) else np.ones(channels, np.float32)
        beta = self.w[f"{name}/beta"] if cfg.get("center", True) else np.zeros(channels, np.float32)
        scale = gamma.astype(np.float64) / np.sqrt(self.w[f"{name}/moving_variance"].astype(np.float64) + cfg["epsilon"])
        return scale, beta - self.w[f"{name}/moving_mean"] * scale

    def conv(self, layer, x, pads):
        cfg, name = layer["config"], layer["name"]
        c, h, w = self.shapes[x]
        if cfg["data_format"] != "channels_last":
            sys.exit(f"convert_tfjs_keras: {name}: data_format {cfg['data_format']}")
        if layer["class_name"] == "DepthwiseConv2D":
            k = self.w[f"{name}/depthwise_kernel"]  # [kh, kw, C, M]
            kh, kw, _, m = k.shape
            filt, groups = k.transpose(2, 3, 0, 1).reshape(c * m, 1, kh, kw), c
        else:
            k = self.w[f"{name}/kernel"]  # [kh, kw, in, out]
            kh, kw = k.shape[:2]
            filt, groups = k.transpose(3, 2, 0, 1), 1
        out_c = filt.shape[0]
        bias = self.w[f"{name}/bias"] if cfg.get("use_bias", True) else np.zeros(out_c, np.float32)
        stride, dilation = cfg["strides"], cfg.get("dilation_rate", [1, 1])
        top, left, bottom, right = pads
        if cfg["padding"] == "same":
            t, b = same_padding(h + top + bottom, kh, stride[0], dilation[0])
            l, r = same_padding(w + left + right, kw, stride[1], dilation[1])
            top, bottom, left, right = top + t, bottom + b, left + l, right + r
        elif cfg["padding"] != "valid":
            sys.exit(f"convert_tfjs_keras: {name}: padding {cfg['padding']}")
        out, bn = name, self.folded_bn(layer)
        if bn is not None:
            scale, shift = self.bn_scale_shift(bn, out_c)
            filt = filt * scale.reshape(-1, 1, 1, 1)
            bias = bias * scale + shift
            out = bn["name"]
        y = self.node("Conv", [x, self.const(name + "_W", filt), self.const(name + "_B", bias)], out,
                      kernel_shape=[kh, kw], strides=list(stride), dilations=list(dilation),
                      pads=[top, left, bottom, right], group=groups)
        oh = (h + top + bottom - (kh - 1) * dilation[0] - 1) // stride[0] + 1
        ow = (w + left + right - (kw - 1) * dilation[1] - 1) // stride[1] + 1
        self.shapes[y] = (out_c, oh, ow)
        act = cfg.get("activation")
        if act not in (None, "linear"):
            y = self.activation(y, act, name + "_act")
            self.shapes[y] = (out_c, oh, ow)
        return y

    def build(self, input_shape):
        h, w, c = input_shape
        value = {}  # Keras layer -> ONNX tensor
        pending_pad = {}  # ZeroPadding2D layer -> (its input tensor, pads) for the conv that reads it
        skip = set()  # batch norms folded into their conv
        for layer in self.config["layers"]:
            cls, cfg, name = layer["class_name"], layer["config"], layer["name"]
            if name in skip:
                continue
            ins = [i[0] for i in layer["inbound_nodes"][0]] if layer["inbound_nodes"] else []
            x = value.get(ins[0]) if ins else None
            if cls == "InputLayer":
                value[name] = "input"
                self.shapes["input"] = (c, h, w)
            elif cls == "Dropout":
                value[name] = x
            elif cls == "ZeroPadding2D":
                (top, bottom), (left, right) = cfg["padding"]
                readers = self.readers.get(name, [])
                if all(r["class_name"] in ("Conv2D", "DepthwiseConv2D") for r in readers) and readers:
                    pending_pad[name] = (value[ins[0]], (top, left, bottom, right))
                    value[name] = None
                else:
                    y = self.node("Pad", [x, self.const_int(name + "_pads", [0, 0, top, left, 0, 0, bottom, right])],
                                  name)
                    cc, hh, ww = self.shapes[x]
                    self.shapes[y] = (cc, hh + top + bottom, ww + left + right)
                    value[name] = y
            elif cls in ("Conv2D", "DepthwiseConv2D"):
                pads = (0, 0, 0, 0)
                if ins[0] in pending_pad:
                    x, pads = pending_pad[ins[0]]
                y = self.conv(layer, x, pads)
                bn = self.folded_bn(layer)
                if bn is not None:
                    skip.add(bn["name"])
                    value[bn["name"]] = y
                value[name] = y
            elif cls == "BatchNormalization":
                cc = self.shapes[x][0]
                scale, shift = self.bn_scale_shift(layer, cc)
                s = self.node("Mul", [x, self.const(name + "_scale", scale.reshape(cc, 1, 1))], name + "_mul")
                y = self.node("Add", [s, self.const(name + "_shift", shift.reshape(cc, 1, 1))], name)
                self.shapes[y] = self.shapes[x]
                value[name] = y
            elif cls in ("ReLU", "Activation"):
                if cls == "ReLU":
                    if cfg.get("negative_slope", 0) != 0 or cfg.get("threshold", 0) != 0:
                        sys.exit(f"convert_tfjs_keras: {name}: leaky or thresholded ReLU")
                    mx = cfg.get("max_value")
                    act = "relu" if mx is None else ("relu6" if mx == 6 else None)
                    if act is None:
                        sys.exit(f"convert_tfjs_keras: {name}: ReLU max_value {mx}")
                else:
                    act = cfg["activation"]
                y = self.activation(x, act, name)
                self.shapes[y] = self.shapes[x]
                value[name] = y
            elif cls == "Add":
                y = value[ins[0]]
                for k, other in enumerate(ins[1:]):
                    y = self.node("Add", [y, value[other]], name if k == len(ins) - 2 else f"{name}_{k}")
                self.shapes[y] = self.shapes[value[ins[0]]]
                value[name] = y
            elif cls in ("AveragePooling2D", "GlobalAveragePooling2D"):
                cc, hh, ww = self.shapes[x]
                if cls == "GlobalAveragePooling2D" or (cfg["pool_size"] == [hh, ww] and cfg["padding"] == "valid"):
                    y = self.node("GlobalAveragePool", [x], name)
                    self.shapes[y] = (cc, 1, 1)
                    if cls == "GlobalAveragePooling2D":
                        y = self.node("Flatten", [y], name + "_flat", axis=1)
                        self.shapes[y] = (cc,)
                else:
                    if cfg["padding"] != "valid":
                        sys.exit(f"convert_tfjs_keras: {name}: padding {cfg['padding']}")
                    ph, pw = cfg["pool_size"]
                    sh, sw = cfg["strides"]
                    y = self.node("AveragePool", [x], name, kernel_shape=[ph, pw], strides=[sh, sw])
                    self.shapes[y] = (cc, (hh - ph) // sh + 1, (ww - pw) // sw + 1)
                value[name] = y
            elif cls == "Flatten":
                shape = self.shapes[x]
                if len(shape) == 3 and shape[1] * shape[2] != 1:
                    # Keras flattens NHWC.
                    x = self.node("Transpose", [x], name + "_nhwc", perm=[0, 2, 3, 1])
                y = self.node("Flatten", [x], name, axis=1)
                self.shapes[y] = (int(np.prod(shape)),)
                value[name] = y
            elif cls == "Dense":
                k = self.w[f"{name}/kernel"]
                bias = self.w[f"{name}/bias"] if cfg.get("use_bias", True) else np.zeros(k.shape[1], np.float32)
                act = cfg.get("activation")
                if name in self.outputs and act == "softmax" and not self.keep_softmax:
                    act = None
                out = name if act in (None, "linear") else name + "_linear"
                y = self.node("Gemm", [x, self.const(name + "_W", k.T), self.const(name + "_B", bias)], out, transB=1)
                y = self.activation(y, act, name)
                self.shapes[y] = (k.shape[1],)
                value[name] = y
            else:
                sys.exit(f"convert_tfjs_keras: layer {name}: {cls} is not supported")
        return value[self.outputs[0]]

    def const_int(self, name, values):
        self.inits.append(self.numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name

    def model(self, input_shape, output_name):
        h, w, c = input_shape
        out = self.build(input_shape)
        self.nodes.append(self.helper.make_node("Identity", [out], [output_name], name=output_name))
        n_out = self.shapes[out][0]
        graph = self.helper.make_graph(
            self.nodes, "keras_from_tfjs",
            [self.helper.make_tensor_value_info("input", 1, [1, c, h, w])],
            [self.helper.make_tensor_value_info(output_name, 1, [1, n_out])], self.inits)
        model = self.helper.make_model(graph, producer_name="nnpipe convert_tfjs_keras",
                                       opset_imports=[self.helper.make_opsetid("", OPSET)])
        import onnx
        onnx.checker.check_model(model)
        return model


def read_model(model_dir):
    spec = json.load(open(os.path.join(model_dir, "model.json")))
    topology = spec["modelTopology"]
    config = topology.get("model_config", topology)["config"]
    if len(config["output_layers"]) != 1 or len(config["input_layers"]) != 1:
        sys.exit("convert_tfjs_keras: one input and one output only")
    shape = next(l for l in config["layers"] if l["class_name"] == "InputLayer")["config"]["batch_input_shape"]
    return config, load_weights(model_dir, spec["weightsManifest"]), shape[1:]  # H, W, C


def load(model_dir, keep_softmax=False):
    config, weights, shape = read_model(model_dir)
    return KerasGraph(config, weights, keep_softmax).eval(), shape


def preprocess(path, size):
    """RGB / 255 at size x size (INTER_AREA, as nnpipe's tools resize), NHWC float32 [1,H,W,3]."""
    import cv2
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    if img is None:
        sys.exit(f"convert_tfjs_keras: cannot read {path}")
    x = cv2.resize(img, (size[1], size[0]), interpolation=cv2.INTER_AREA)[:, :, ::-1].astype(np.float32) / 255.0
    return np.ascontiguousarray(x[None])


TFJS_RUN = r"""
const fs = require('fs'), path = require('path');
const tf = require('@tensorflow/tfjs-core');
require('@tensorflow/tfjs-backend-cpu');
const tfl = require('@tensorflow/tfjs-layers');
const [dir, list] = process.argv.slice(2);
(async () => {
  await tf.setBackend('cpu');
  const spec = JSON.parse(fs.readFileSync(path.join(dir, 'model.json')));
  const specs = [].concat(...spec.weightsManifest.map(g => g.weights));
  const bufs = [].concat(...spec.weightsManifest.map(g => g.paths.map(p => fs.readFileSync(path.join(dir, p)))));
  const all = Buffer.concat(bufs);
  const data = all.buffer.slice(all.byteOffset, all.byteOffset + all.length);
  const model = await tfl.loadLayersModel(tf.io.fromMemory(spec.modelTopology, specs, data));
  for (const line of fs.readFileSync(list, 'utf8').trim().split('\n')) {
    const [input, output, h, w] = line.split('\t');
    const b = fs.readFileSync(input);
    const x = tf.tensor4d(new Float32Array(b.buffer, b.byteOffset, b.length / 4), [1, +h, +w, 3]);
    fs.writeFileSync(output, Buffer.from(model.predict(x).dataSync().buffer));
  }
})().catch(e => { console.error(e); process.exit(1); });
"""


def tfjs_outputs(model_dir, inputs, node_dir):
    """The model's outputs under TensorFlow.js (cpu backend) for each NHWC input."""
    with tempfile.TemporaryDirectory() as tmp:
        lines = []
        for i, x in enumerate(inputs):
            x.tofile(os.path.join(tmp, f"x{i}.f32"))
            lines.append(f"{tmp}/x{i}.f32\t{tmp}/y{i}.f32\t{x.shape[1]}\t{x.shape[2]}")
        with open(os.path.join(tmp, "list.txt"), "w") as fh:
            fh.write("\n".join(lines) + "\n")
        with open(os.path.join(tmp, "run.js"), "w") as fh:
            fh.write(TFJS_RUN)
        env = dict(os.environ, NODE_PATH=os.path.join(os.path.abspath(node_dir), "node_modules"))
        r = subprocess.run(["node", os.path.join(tmp, "run.js"), os.path.abspath(model_dir),
                            os.path.join(tmp, "list.txt")], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            sys.exit(f"convert_tfjs_keras: TensorFlow.js failed:\n{r.stderr}")
        return [np.fromfile(os.path.join(tmp, f"y{i}.f32"), dtype=np.float32) for i in range(len(inputs))]


def check(model_dir, images, node_dir, labels, save_inputs):
    model, shape = load(model_dir, keep_softmax=True)
    inputs = [preprocess(f, shape) for f in images]
    with torch.no_grad():
        ours = [model(torch.from_numpy(x).permute(0, 3, 1, 2)).numpy().ravel() for x in inputs]
    if save_inputs:
        os.makedirs(save_inputs, exist_ok=True)
        for f, x, y in zip(images, inputs, ours):
            stem = os.path.splitext(os.path.basename(f))[0]
            np.save(os.path.join(save_inputs, stem + ".npy"), np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
            np.save(os.path.join(save_inputs, stem + "_probabilities.npy"), y)
    theirs = tfjs_outputs(model_dir, inputs, node_dir) if node_dir else [None] * len(inputs)
    agree, worst = 0, 0.0
    name = lambda i: labels[i] if labels and i < len(labels) else str(i)
    for f, a, b in zip(images, ours, theirs):
        line = f"{os.path.basename(f)}: PyTorch rebuild {name(int(np.argmax(a)))} ({a.max():.3f})"
        if b is not None:
            agree += int(np.argmax(a)) == int(np.argmax(b))
            worst = max(worst, float(np.abs(a - b).max()))
            line += f", TensorFlow.js {name(int(np.argmax(b)))} ({b.max():.3f}), max |diff| {np.abs(a - b).max():.2e}"
        print(line)
    if node_dir:
        print(f"top-1 equal on {agree}/{len(images)} images; largest probability difference {worst:.2e}")
        return agree == len(images)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("-o", "--output", help="the ONNX file to write")
    ap.add_argument("--keep-softmax", action="store_true", help="keep the output layer's softmax")
    ap.add_argument("--check", nargs="+", metavar="IMAGE", help="classify these images (no export)")
    ap.add_argument("--tfjs", metavar="NODE_DIR", help="with --check: also run TensorFlow.js from NODE_DIR/node_modules")
    ap.add_argument("--labels", help="with --check: comma-separated class names")
    ap.add_argument("--save-inputs", metavar="DIR", help="with --check: write each input (NCHW .npy) and the "
                    "rebuild's probabilities (_probabilities.npy) to DIR")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.check:
        labels = args.labels.split(",") if args.labels else None
        return 0 if check(args.model_dir, args.check, args.tfjs, labels, args.save_inputs) else 1
    if not args.output:
        ap.error("-o OUT.onnx or --check IMAGE...")
    import onnx
    config, weights, shape = read_model(args.model_dir)
    model = OnnxWriter(config, weights, args.keep_softmax).model(shape, "probabilities" if args.keep_softmax else "logits")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    onnx.save(model, args.output)
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"convert_tfjs_keras: {args.output}: input [1,{shape[2]},{shape[0]},{shape[1]}], "
          f"{len(model.graph.node)} nodes ({', '.join(ops)}) from {args.model_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
