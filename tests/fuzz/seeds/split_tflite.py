#!/usr/bin/env python3
"""Splits a real .tflite model into small one-operation models: fuzz seeds that keep the
real model's operators, options and weights but are a few KB, so the fuzzer mutates
structure at thousands of executions a second instead of a 250 KB file at a few hundred.

For each operator: the operator, the DEQUANTIZE ops that produce its constant inputs (the
FP16 weights path), their tensors and buffers. Each one is written twice: with the model's
shapes, and with the spatial dims of activations divided by 16 (so the fuzz target's
reference run executes it; shape-changing ops may come out inconsistent, which is a seed
for the importer's refusals). Uses flatc (Debian: flatbuffers-compiler) and the schema.

usage: split_tflite.py SCHEMA.fbs MODEL.tflite OUT_DIR [MAX_BYTES]
"""
import copy
import json
import os
import subprocess
import sys
import tempfile


def main():
    schema, model_path, out_dir = sys.argv[1:4]
    max_bytes = int(sys.argv[4]) if len(sys.argv) > 4 else 16384
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(model_path))[0]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["flatc", "--json", "--strict-json", "--raw-binary", "-o", tmp, schema, "--",
                        model_path], check=True)
        model = json.load(open(os.path.join(tmp, stem + ".json")))
        graph = model["subgraphs"][0]
        tensors, ops, buffers = graph["tensors"], graph["operators"], model["buffers"]
        producer = {o: i for i, op in enumerate(ops) for o in op.get("outputs", [])}
        codes = model["operator_codes"]

        def is_const(t):
            b = tensors[t].get("buffer", 0)
            return b > 0 and len(buffers[b].get("data", [])) > 0

        def dequantize_of(t):  # the DEQUANTIZE op that turns a constant into tensor t
            p = producer.get(t)
            if p is None:
                return None
            code = codes[ops[p].get("opcode_index", 0)].get("builtin_code")
            if code == "DEQUANTIZE" and all(is_const(i) for i in ops[p]["inputs"] if i >= 0):
                return p
            return None

        written, seen = 0, set()
        for index, op in enumerate(ops):
            if codes[op.get("opcode_index", 0)].get("builtin_code") == "DEQUANTIZE":
                continue
            members = [dequantize_of(t) for t in op["inputs"] if t >= 0]
            members = [m for m in members if m is not None] + [index]
            used = []
            for m in members:
                for t in ops[m]["inputs"] + ops[m]["outputs"]:
                    if t >= 0 and t not in used:
                        used.append(t)
            produced = {o for m in members for o in ops[m]["outputs"]}
            inputs = [t for t in used if t not in produced and not is_const(t)]
            remap = {t: i for i, t in enumerate(used)}
            new_buffers, new_tensors = [{}], []
            for t in used:
                tensor = copy.deepcopy(tensors[t])
                b = tensor.get("buffer", 0)
                if b > 0 and buffers[b].get("data"):
                    new_buffers.append(buffers[b])
                    tensor["buffer"] = len(new_buffers) - 1
                else:
                    tensor["buffer"] = 0
                new_tensors.append(tensor)
            new_ops = []
            for m in members:
                o = copy.deepcopy(ops[m])
                o["inputs"] = [remap[t] if t >= 0 else -1 for t in o["inputs"]]
                o["outputs"] = [remap[t] for t in o["outputs"]]
                new_ops.append(o)
            sub = {"version": model.get("version", 3), "operator_codes": codes,
                   "subgraphs": [{"tensors": new_tensors, "inputs": [remap[t] for t in inputs],
                                  "outputs": [remap[t] for t in op["outputs"]], "operators": new_ops,
                                  "name": "main"}],
                   "description": "fuzz seed", "buffers": new_buffers}
            small = copy.deepcopy(sub)
            for t, tensor in zip(used, small["subgraphs"][0]["tensors"]):
                shape = tensor.get("shape", [])
                if not is_const(t) and len(shape) == 4:
                    tensor["shape"] = [shape[0], max(1, -(-shape[1] // 16)), max(1, -(-shape[2] // 16)), shape[3]]
            code = codes[op.get("opcode_index", 0)]
            name = (code.get("custom_code") or code.get("builtin_code") or "op").lower()
            for variant, data in (("", sub), ("_small", small)):
                text = json.dumps(data, sort_keys=True)
                if text in seen:
                    continue
                seen.add(text)
                js = os.path.join(tmp, f"{stem}_{index:03d}_{name}{variant}.json")
                with open(js, "w") as f:
                    f.write(text)
                subprocess.run(["flatc", "-b", "-o", tmp, schema, js], check=True)
                binary = js[:-5] + ".tflite"  # flatc names it by the schema's file_extension
                if os.path.getsize(binary) <= max_bytes:
                    os.replace(binary, os.path.join(out_dir, os.path.basename(binary)))
                    written += 1
        print(f"{model_path}: {written} one-op seeds in {out_dir}")


if __name__ == "__main__":
    main()
