#!/usr/bin/python3
"""A copy of libcpuinfo that makes XNNPACK run its AVX2 kernels on an AVX-512 host.

NN_NO_AVX512=1 switches our native kernels to AVX2, but the steps the CPU delegate leaves
to XNNPACK (pools, element-wise ops, some depthwise convs) keep its AVX-512 kernels: it
picks them through cpuinfo, from CPUID and XCR0. This script copies the system's
libcpuinfo.so.0 to build/xnnpack-no-avx512/ with every XGETBV rewritten as in
peers/ort_no_avx512.py (XCR0 then reports no opmask / ZMM state), so with that directory on
LD_LIBRARY_PATH XNNPACK runs what it would on an AVX2-only host. The system library is
left untouched.

Usage: /usr/bin/python3 bench/xnnpack_no_avx512.py    (prints the directory)
Then:  NN_NO_AVX512=1 LD_LIBRARY_PATH=$(that directory) build/engine/nnrun MODEL ...
  or:  bench/zoo.py --env NN_NO_AVX512=1 --env LD_LIBRARY_PATH=$(that directory) ...
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))
import ort_no_avx512 as patch  # noqa: E402  (text_section, xgetbv_offsets, the byte strings)

SRC = "/lib/x86_64-linux-gnu/libcpuinfo.so.0"
DST_DIR = os.path.join(os.path.dirname(HERE), "build", "xnnpack-no-avx512")


def main():
    src = os.path.realpath(SRC)
    if not os.path.isfile(src):
        raise SystemExit("xnnpack_no_avx512: %s missing (apt-get install libcpuinfo0)" % SRC)
    dst = os.path.join(DST_DIR, "libcpuinfo.so.0")
    stamp = dst + ".patched-from"
    key = "%s %d %d" % (src, os.path.getsize(src), int(os.path.getmtime(src)))
    if os.path.isfile(stamp) and open(stamp).read() == key:
        print(DST_DIR)
        return
    os.makedirs(DST_DIR, exist_ok=True)
    data = bytearray(open(src, "rb").read())
    patch.LIB = src  # named in its error messages
    offsets = patch.xgetbv_offsets(src, data)
    if not offsets:
        raise SystemExit("xnnpack_no_avx512: no XGETBV found in %s: cannot hide AVX-512" % src)
    for o in offsets:
        if data[o:o + 3] != patch.XGETBV:
            raise SystemExit("xnnpack_no_avx512: offset 0x%x is not an XGETBV" % o)
        data[o:o + 3] = patch.PUSH7_POPRAX
    open(dst, "wb").write(data)
    open(stamp, "w").write(key)
    print("xnnpack_no_avx512: %d XGETBV rewritten in %s" % (len(offsets), dst), file=sys.stderr)
    print(DST_DIR)


if __name__ == "__main__":
    main()
