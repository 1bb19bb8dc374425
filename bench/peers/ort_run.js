// Runs ONNX Runtime (CPU EP) once: node ort_run.js MODEL INPUT.f32 OUTPUT.f32
// INPUT.f32 is raw float32 in the model's input shape; writes output 0 as raw float32.
'use strict';
const ort = require(process.env.NN_ORT_MODULE || 'onnxruntime-node');  // see ort_bench.js
const fs = require('fs');

async function main() {
  const [model, input, output] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {intraOpNumThreads: 1, interOpNumThreads: 1});
  const meta = session.inputMetadata.find((m) => m.name === session.inputNames[0]);
  const dims = meta.shape.map((d) => (typeof d === 'number' ? d : 1));
  const buf = fs.readFileSync(input);
  const x = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  const r = await session.run({[session.inputNames[0]]: new ort.Tensor('float32', x, dims)});
  const y = r[session.outputNames[0]].data;
  fs.writeFileSync(output, Buffer.from(y.buffer, y.byteOffset, y.byteLength));
}

main().catch((e) => { console.error(`ort_run: ${e.message}`); process.exit(1); });
