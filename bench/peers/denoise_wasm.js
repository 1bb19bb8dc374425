// Runs a WebAssembly noise suppressor from npm headless over raw float32 files.
//
//   node denoise_wasm.js rnnoise|gtcrn IN.f32 OUT.f32 [RATE]
//
// rnnoise: @jitsi/rnnoise-wasm 0.2.1 (RNNoise 0.1), 48 kHz, 480-sample frames,
//   samples scaled to the 16-bit range as rnnoise_process_frame expects.
// gtcrn:   @sapphi-red/web-noise-suppressor 0.4.1's gtcrn.wasm, 16 kHz, 256-sample frames,
//   samples in [-1, 1] (as its AudioWorklet passes them).
// IN/OUT are raw little-endian float32 mono at the suppressor's rate (the bench resamples).
// The .wasm files are Emscripten builds with minified export names; the mapping below is
// the one each package's own JS glue uses (rnnoise.js, gtcrn/workletProcessor.js). Prints
// one JSON line: {frames, seconds (CPU time of the processing loop only), frame}.
'use strict';
const fs = require('fs');
const path = require('path');

const [, , which, inPath, outPath] = process.argv;
const modules = path.join(__dirname, 'node_modules');
const SPECS = {
  rnnoise: {
    wasm: path.join(modules, '@jitsi/rnnoise-wasm/dist/rnnoise.wasm'),
    // a: emscripten_resize_heap, b: emscripten_memcpy_big
    imports: (mem) => ({ a: { a: (size) => grow(mem(), size), b: (d, s, n) => u8(mem()).copyWithin(d, s, s + n) } }),
    names: { memory: 'c', ctors: 'd', create: 'f', malloc: 'g', destroy: 'h', free: 'i', process: 'j' },
    frame: 480, scale: 32768,
    run: (e, st, outp, inp) => e.process(st, outp, inp),
  },
  gtcrn: {
    wasm: path.join(modules, '@sapphi-red/web-noise-suppressor/dist/gtcrn.wasm'),
    // a: __assert_fail, b: emscripten_resize_heap
    imports: (mem) => ({ a: { a: () => { throw new Error('gtcrn: assertion failed'); }, b: (size) => grow(mem(), size) } }),
    names: { memory: 'c', ctors: 'd', create: 'e', free: 'f', destroy: 'g', process: 'i', malloc: 'k' },
    frame: 256, scale: 1,
    run: (e, st, outp, inp) => e.process(st, inp, outp),
  },
};

function u8(mem) { return new Uint8Array(mem.buffer); }
function grow(mem, size) {
  const need = size - mem.buffer.byteLength;
  if (need <= 0) return 1;
  try { mem.grow(Math.ceil(need / 65536)); return 1; } catch (err) { return 0; }
}

function main() {
  const spec = SPECS[which];
  if (!spec || !inPath || !outPath) {
    console.error('usage: node denoise_wasm.js rnnoise|gtcrn IN.f32 OUT.f32');
    process.exit(2);
  }
  if (!fs.existsSync(spec.wasm)) {
    console.error(`${spec.wasm}: missing (npm install --ignore-scripts in bench/peers)`);
    process.exit(1);
  }
  let memory = null;
  const module = new WebAssembly.Module(fs.readFileSync(spec.wasm));
  const inst = new WebAssembly.Instance(module, spec.imports(() => memory));
  const ex = {};
  for (const [k, v] of Object.entries(spec.names)) ex[k] = inst.exports[v];
  memory = ex.memory;
  ex.ctors();
  const st = which === 'rnnoise' ? ex.create(0) : ex.create();
  if (!st) throw new Error(`${which}: create failed`);
  const N = spec.frame;
  const inp = ex.malloc(N * 4), outp = ex.malloc(N * 4);
  const buf = fs.readFileSync(inPath);
  const x = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  const frames = Math.ceil(x.length / N);
  const y = new Float32Array(frames * N);
  // CPU time, not wall-clock: the machines are shared
  const t0 = process.cpuUsage();
  for (let f = 0; f < frames; f++) {
    const heap = new Float32Array(memory.buffer);  // the heap may have grown
    for (let i = 0; i < N; i++) heap[inp / 4 + i] = (f * N + i < x.length ? x[f * N + i] : 0) * spec.scale;
    spec.run(ex, st, outp, inp);
    const h2 = new Float32Array(memory.buffer);
    for (let i = 0; i < N; i++) y[f * N + i] = h2[outp / 4 + i] / spec.scale;
  }
  const used = process.cpuUsage(t0);
  const seconds = (used.user + used.system) / 1e6;
  ex.destroy(st);
  fs.writeFileSync(outPath, Buffer.from(y.buffer, 0, x.length * 4));
  console.log(JSON.stringify({ frames, seconds, frame: N }));
}

main();
