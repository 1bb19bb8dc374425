#!/usr/bin/python3
"""A copy of onnxruntime-node that runs ONNX Runtime's AVX2 kernels on an AVX-512 host.

ONNX Runtime has no switch to leave AVX-512: MLAS (and the cpuinfo library inside it) pick
their kernels from CPUID and from XCR0, the register in which the OS says which vector
state it saves. This script copies bench/peers/node_modules/onnxruntime-node (and
onnxruntime-common) to bench/peers/ort-no-avx512/node_modules/ and rewrites every XGETBV
instruction in the copy's libonnxruntime.so.1 as `push 7; pop rax` (3 bytes each, the
same length): XCR0 then reads x87 | SSE | AVX state and no opmask / ZMM state, so every
AVX-512 check in the library fails while AVX2 and FMA still pass - what ONNX Runtime does
on an AVX2-only host. The original package is left untouched.

Usage: /usr/bin/python3 bench/peers/ort_no_avx512.py    (prints the module path to require)
Then:  NN_ORT_MODULE=$(that path) node bench/peers/ort_bench.js MODEL THREADS RUNS WARMUP
"""
import os
import shutil
import struct
import subprocess
import sys

PEERS = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(PEERS, "node_modules")
DST = os.path.join(PEERS, "ort-no-avx512", "node_modules")
LIB = os.path.join("onnxruntime-node", "bin", "napi-v6", "linux", "x64", "libonnxruntime.so.1")
XGETBV = b"\x0f\x01\xd0"
PUSH7_POPRAX = b"\x6a\x07\x58"


def text_section(data):
    """(virtual address, file offset, size) of .text in a little-endian ELF64 file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise SystemExit("ort_no_avx512: %s is not a little-endian ELF64 file" % LIB)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def section(i):
        return struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
    _, _, _, _, stroff, _ = section(shstrndx)
    for i in range(shnum):
        name, _, _, addr, off, size = section(i)
        end = data.index(b"\0", stroff + name)
        if data[stroff + name:end] == b".text":
            return addr, off, size
    raise SystemExit("ort_no_avx512: no .text section in %s" % LIB)


def xgetbv_offsets(path, data):
    """File offsets of the XGETBV instructions, from objdump's disassembly (not a byte search,
    which could hit the same bytes inside another instruction or in data)."""
    addr, off, _ = text_section(data)
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-j", ".text", path],
                         check=True, capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[-1].strip() == "xgetbv":
            found.append(int(parts[0].strip().rstrip(":"), 16) - addr + off)
    return found


def main():
    src_lib = os.path.join(SRC, LIB)
    if not os.path.isfile(src_lib):
        raise SystemExit("ort_no_avx512: %s missing (npm install --ignore-scripts in bench/peers)" % src_lib)
    dst_lib = os.path.join(DST, LIB)
    stamp = dst_lib + ".patched-from"
    key = "%d %d" % (os.path.getsize(src_lib), int(os.path.getmtime(src_lib)))
    if os.path.isfile(stamp) and open(stamp).read() == key:
        print(os.path.join(DST, "onnxruntime-node"))
        return
    shutil.rmtree(os.path.join(PEERS, "ort-no-avx512"), ignore_errors=True)
    for pkg in ("onnxruntime-node", "onnxruntime-common"):
        shutil.copytree(os.path.join(SRC, pkg), os.path.join(DST, pkg), symlinks=True)
    data = bytearray(open(dst_lib, "rb").read())
    offsets = xgetbv_offsets(dst_lib, data)
    if not offsets:
        raise SystemExit("ort_no_avx512: no XGETBV found in %s: cannot hide AVX-512" % dst_lib)
    for o in offsets:
        if data[o:o + 3] != XGETBV:
            raise SystemExit("ort_no_avx512: offset 0x%x is not an XGETBV" % o)
        data[o:o + 3] = PUSH7_POPRAX
    open(dst_lib, "wb").write(data)
    open(stamp, "w").write(key)
    print("ort_no_avx512: %d XGETBV rewritten in %s" % (len(offsets), dst_lib), file=sys.stderr)
    print(os.path.join(DST, "onnxruntime-node"))


if __name__ == "__main__":
    main()
