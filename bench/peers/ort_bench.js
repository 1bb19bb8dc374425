// Times ONNX Runtime (CPU EP) on one ONNX model: node ort_bench.js MODEL THREADS RUNS WARMUP
// Prints one JSON line {median_ms, p90_ms, p99_ms, runs, threads}.
'use strict';
// NN_ORT_MODULE: another copy of the package, e.g. the one ort_no_avx512.py makes.
const ort = require(process.env.NN_ORT_MODULE || 'onnxruntime-node');

function percentile(sorted, p) {
  const idx = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(idx), hi = Math.ceil(idx);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - lo);
}

async function main() {
  const [model, threads = '1', runs = '50', warmup = '10'] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const name of session.inputNames) {
    const meta = session.inputMetadata ? session.inputMetadata.find((m) => m.name === name) : null;
    const dims = meta && meta.shape ? meta.shape.map((d) => (typeof d === 'number' ? d : 1)) : null;
    if (!dims) throw new Error(`cannot read the shape of input ${name}`);
    const n = dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = Math.sin(i * 0.37) * 0.5 + 0.5;
    feeds[name] = new ort.Tensor('float32', data, dims);
  }
  for (let i = 0; i < Number(warmup); i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < Number(runs); i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({
    peer: 'onnxruntime', version: ort.env.versions ? ort.env.versions.common : '1.30.0',
    median_ms: percentile(times, 50), p90_ms: percentile(times, 90), p99_ms: percentile(times, 99),
    runs: times.length, threads: Number(threads),
  }));
}

main().catch((e) => { console.error(`ort_bench: ${e.message}`); process.exit(1); });
