#!/usr/bin/python3
"""PyTorch's NNAPI MobileNetV2 both ways, against eager PyTorch (max abs error <= 1e-4).

  import         nnconvert model_nnapi.pt -> .nnapi (NCHW and NHWC variants), then nnrun on
                 cpu, reference, vulkan (when a device is there) and nnapi (our driver)
  torch_runtime  torch.jit.load(model_nnapi.pt)(x) in this python with our
                 libneuralnetworks.so on LD_LIBRARY_PATH (torch's own NNAPI runtime)
The qnnpack-quantized MobileNetV2 (QUANT8 ops, int32 bias) takes both paths too, in both of
the engine's requantization modes (engine/ops/OPS.md, "Quantized arithmetic"):
- nnapi (the default, NNAPI's fixed point): same top-1 as eager quantized PyTorch, torch's
  runtime on our driver bit-equal to nnrun, the logits within QUANT_MAX_STEPS output steps
  (mean within QUANT_MEAN_STEPS): NNAPI rounds twice where qnnpack multiplies in fp32 once, so
  ~0.3% of each conv's outputs differ by one step and the differences grow through 53 layers;
- fp32 (qnnpack's arithmetic: `nnrun --requantize fp32`, and the driver with
  NNPIPE_NNAPI_REQUANTIZE=fp32): same top-1 and within FP32_MAX_STEPS of eager.
Usage: torch_nnapi_test.py PART OUT_DIR NNCONVERT NNRUN DRIVER_DIR
Exit 77 (skipped) when the fixture's files are missing because torch is not installed.
"""
import os
import subprocess
import sys

import numpy as np

TOLERANCE = 1e-4
QUANT_MAX_STEPS = 32
QUANT_MEAN_STEPS = 8
FP32_MAX_STEPS = 1


def check_quantized(name, got, out, max_steps=QUANT_MAX_STEPS, mean_steps=QUANT_MEAN_STEPS):
    """Quantized logits against eager quantized PyTorch, in output quantization steps."""
    want = np.load(os.path.join(out, "mobilenet_v2_q_eager.npy"))
    step = float(open(os.path.join(out, "mobilenet_v2_q_scale.txt")).read())
    steps = np.abs(got - want) / step
    same_top1 = int(got.argmax()) == int(want.argmax())
    print(f"{name}: max {steps.max():.1f} steps, mean {steps.mean():.2f} steps (step {step:.4g}) vs eager "
          f"quantized PyTorch, top-1 {'same' if same_top1 else 'DIFFERENT'} ({int(got.argmax())})")
    return same_top1 and steps.max() <= max_steps and steps.mean() <= mean_steps


def run_import_quantized(out, nnconvert, nnrun, driver_dir):
    pt = os.path.join(out, "mobilenet_v2_q_nnapi.pt")
    if not os.path.exists(pt):
        print("no quantized model (the fixture found too few photos); quantized part skipped")
        return True
    converted = os.path.join(out, "mobilenet_v2_q.nnapi")
    proc = subprocess.run([nnconvert, pt, "-o", converted], capture_output=True, text=True)
    print(proc.stdout.strip())
    if proc.returncode != 0 or "QUANTIZE" not in proc.stdout or "CONV_2D" not in proc.stdout:
        print(f"nnconvert of the quantized model: exit {proc.returncode}, {proc.stderr}")
        return False
    ok = True
    outputs = {}
    for mode in ("nnapi", "fp32"):
        bounds = (QUANT_MAX_STEPS, QUANT_MEAN_STEPS) if mode == "nnapi" else (FP32_MAX_STEPS, FP32_MAX_STEPS)
        for delegate in ("reference", "cpu", "nnapi"):
            # nnrun's --requantize sets the engine's kernels; the driver (-d nnapi) takes its own
            # arithmetic from its environment, as a phone's driver would have its own.
            env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(driver_dir, "fl30"), NNPIPE_NNAPI_REQUANTIZE=mode)
            save = os.path.join(out, f"outputs_q_{mode}_{delegate}")
            proc = subprocess.run([nnrun, converted, "-d", delegate, "--strict-delegates", "--requantize", mode,
                                   "--input", os.path.join(out, "mobilenet_v2_q_input.npy"), "--runs", "1",
                                   "--warmup", "0", "--save-outputs", save], env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"nnrun -d {delegate} --requantize {mode} (quantized) failed: {proc.stderr}")
                ok = False
                continue
            outputs[mode, delegate] = np.load(os.path.join(save, "output_0.npy"))
            ok = check_quantized(f"quantized, {mode} arithmetic: nnconvert + nnrun -d {delegate}",
                                 outputs[mode, delegate], out, *bounds) and ok
        np.save(os.path.join(out, f"quantized_reference_{mode}.npy"), outputs.get((mode, "reference"), np.zeros(1)))
    return ok


def check(name, got, want):
    err = float(np.abs(got - want).max())
    same_top1 = int(got.argmax()) == int(want.argmax())
    print(f"{name}: max abs error {err:.3g} vs eager PyTorch, top-1 {'same' if same_top1 else 'DIFFERENT'}")
    return err <= TOLERANCE and same_top1


def refuses_broken_files(out, nnconvert):
    """Truncated and foreign files: a clear error naming the file, never a crash."""
    ok = True
    data = open(os.path.join(out, "mobilenet_v2_nnapi.pt"), "rb").read()
    cases = {"truncated.pt": data[: len(data) // 2], "not_a_zip.pt": b"not a zip file" * 10,
             "tail_only.pt": data[-4096:]}
    for name, content in cases.items():
        path = os.path.join(out, name)
        with open(path, "wb") as f:
            f.write(content)
        proc = subprocess.run([nnconvert, path, "-o", path + ".nnapi"], capture_output=True, text=True)
        if proc.returncode not in (1, 2) or path not in proc.stderr:
            print(f"nnconvert {name}: exit {proc.returncode}, stderr {proc.stderr!r}")
            ok = False
        else:
            print(f"nnconvert {name}: refused: {proc.stderr.strip()[:160]}")
    return ok


def run_import(out, nnconvert, nnrun, driver_dir):
    ok = run_import_quantized(out, nnconvert, nnrun, driver_dir)
    ok = refuses_broken_files(out, nnconvert) and ok
    x = os.path.join(out, "mobilenet_v2_input.npy")
    eager = np.load(os.path.join(out, "mobilenet_v2_eager.npy"))
    for variant in ("", "_nhwc"):
        pt = os.path.join(out, f"mobilenet_v2_nnapi{variant}.pt")
        converted = os.path.join(out, f"mobilenet_v2{variant}.nnapi")
        subprocess.run([nnconvert, pt, "-o", converted, "-q"], check=True)
        for delegate in ("cpu", "reference", "vulkan", "nnapi"):
            env = dict(os.environ)
            if delegate == "nnapi":
                env["LD_LIBRARY_PATH"] = os.path.join(driver_dir, "fl30")
            save = os.path.join(out, f"outputs{variant}_{delegate}")
            proc = subprocess.run([nnrun, converted, "-d", delegate, "--strict-delegates", "--input", x, "--runs", "1",
                                   "--warmup", "0", "--save-outputs", save], env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                if delegate == "vulkan" and "unavailable" in proc.stderr:
                    print(f"vulkan: no device here ({proc.stderr.strip()}), skipped")
                    continue
                print(f"nnrun -d {delegate} failed: {proc.stderr}")
                ok = False
                continue
            got = np.load(os.path.join(save, "output_0.npy"))
            ok = check(f"nnconvert{variant} + nnrun -d {delegate}", got, eager) and ok
    return ok


def run_torch_runtime(out, driver_dir):
    # A fresh interpreter: the library path must be set before torch first dlopens it.
    code = """
import sys, numpy as np, torch
out, nhwc = sys.argv[1], sys.argv[2] == "1"
model = torch.jit.load(out + ("/mobilenet_v2_nnapi_nhwc.pt" if nhwc else "/mobilenet_v2_nnapi.pt"))
x = torch.from_numpy(np.load(out + "/mobilenet_v2_input.npy"))
if nhwc:
    x = x.contiguous(memory_format=torch.channels_last)
y = model(x)
y = y[0] if isinstance(y, (list, tuple)) else y
np.save(out + ("/torch_runtime_nhwc.npy" if nhwc else "/torch_runtime.npy"), y.detach().numpy())
"""
    ok = True
    eager = np.load(os.path.join(out, "mobilenet_v2_eager.npy"))
    for level in ("fl29", "fl30"):
        for nhwc in ("0", "1"):
            env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(driver_dir, level))
            proc = subprocess.run([sys.executable, "-c", code, out, nhwc], env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"torch.jit.load on {level}: {proc.stderr[-2000:]}")
                ok = False
                continue
            got = np.load(os.path.join(out, "torch_runtime_nhwc.npy" if nhwc == "1" else "torch_runtime.npy"))
            ok = check(f"torch.jit.load(...)(x) on libneuralnetworks.so {level}{' nhwc' if nhwc == '1' else ''}",
                       got, eager) and ok
    ok = run_torch_runtime_quantized(out, driver_dir) and ok
    # Level 27 has no BOOL operands (the NCHW layout flags): the driver refuses the model
    # with BAD_DATA (4) while torch loads it.
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(driver_dir, "fl27"))
    proc = subprocess.run([sys.executable, "-c", code, out, "0"], env=env, capture_output=True, text=True)
    if proc.returncode == 0 or "NNAPI returned error: 4" not in proc.stderr:
        print(f"level 27: expected BAD_DATA while loading the model, got: {proc.stderr[-500:]}")
        ok = False
    # Without the driver, torch's runtime must fail to load it: proof the runs above used ours.
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    proc = subprocess.run([sys.executable, "-c", code, out, "0"], env=env, capture_output=True, text=True)
    if proc.returncode == 0 or "libneuralnetworks.so" not in proc.stderr:
        print("torch ran an NNAPI model without our libneuralnetworks.so on the path")
        ok = False
    return ok


def run_torch_runtime_quantized(out, driver_dir):
    """torch's NNAPI runtime on our driver runs the quantized model: the engine's integer kernels,
    so the logits equal nnrun's bit for bit (when the import part ran first) and eager's within
    the bounds above."""
    if not os.path.exists(os.path.join(out, "mobilenet_v2_q_nnapi.pt")):
        print("no quantized model; quantized part skipped")
        return True
    code = """
import sys, numpy as np, torch
out = sys.argv[1]
model = torch.jit.load(out + "/mobilenet_v2_q_nnapi.pt")
x = torch.from_numpy(np.load(out + "/mobilenet_v2_q_input.npy")).contiguous(memory_format=torch.channels_last)
y = model(x)
y = y[0] if isinstance(y, (list, tuple)) else y
np.save(out + "/torch_runtime_q.npy", y.detach().numpy())
"""
    ok = True
    for mode in ("nnapi", "fp32"):
        bounds = (QUANT_MAX_STEPS, QUANT_MEAN_STEPS) if mode == "nnapi" else (FP32_MAX_STEPS, FP32_MAX_STEPS)
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(driver_dir, "fl30"))
        if mode == "fp32":
            env["NNPIPE_NNAPI_REQUANTIZE"] = "fp32"
        else:
            env.pop("NNPIPE_NNAPI_REQUANTIZE", None)  # the driver's default
        proc = subprocess.run([sys.executable, "-c", code, out], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"torch.jit.load of the quantized model on fl30 ({mode}): {proc.stderr[-2000:]}")
            ok = False
            continue
        got = np.load(os.path.join(out, "torch_runtime_q.npy"))
        ok = check_quantized(f"quantized: torch.jit.load(...)(x) on libneuralnetworks.so fl30, {mode} arithmetic",
                             got, out, *bounds) and ok
        ref = os.path.join(out, f"quantized_reference_{mode}.npy")
        if os.path.exists(ref) and np.load(ref).shape == got.shape:
            diff = float(np.abs(np.load(ref) - got).max())
            print(f"quantized: torch runtime on our driver vs nnrun -d reference --requantize {mode}: "
                  f"max abs difference {diff}")
            ok = ok and diff == 0.0
    # A value the driver does not know is said on stderr and fails the compilation.
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(driver_dir, "fl30"), NNPIPE_NNAPI_REQUANTIZE="fp16")
    proc = subprocess.run([sys.executable, "-c", code, out], env=env, capture_output=True, text=True)
    if proc.returncode == 0 or "NNPIPE_NNAPI_REQUANTIZE=fp16: expected nnapi or fp32" not in proc.stderr:
        print(f"NNPIPE_NNAPI_REQUANTIZE=fp16: expected a refusal naming it, got exit {proc.returncode}: "
              f"{proc.stderr[-500:]}")
        ok = False
    return ok


def main():
    part, out, nnconvert, nnrun, driver_dir = sys.argv[1:6]
    if not os.path.exists(os.path.join(out, "mobilenet_v2_nnapi.pt")):
        print(f"{out}: no PyTorch NNAPI model (the fixture needs /usr/bin/python3 with torch)")
        return 77
    ok = run_import(out, nnconvert, nnrun, driver_dir) if part == "import" else run_torch_runtime(out, driver_dir)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
