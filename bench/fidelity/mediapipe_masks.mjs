// Runs MediaPipe's own runtime (@mediapipe/tasks-vision ImageSegmenter, CPU delegate) on the
// frames of bench/fidelity/frames.py in headless Chromium, served from 127.0.0.1 only, and
// saves its confidence masks at frame size as float32 .npy (assets/fidelity/mediapipe/).
//
//   node bench/fidelity/mediapipe_masks.mjs [--model assets/fidelity/selfie_segmentation_meta.tflite]
//        [--frames assets/fidelity/frames] [--out assets/fidelity/mediapipe] [--browser /usr/bin/chromium]
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const args = {model: "assets/fidelity/selfie_segmentation_meta.tflite", frames: "assets/fidelity/frames",
              out: "assets/fidelity/mediapipe", browser: "/usr/bin/chromium"};
for (let i = 2; i < process.argv.length; i += 2) {
  const key = process.argv[i].replace(/^--/, "");
  if (!(key in args) || i + 1 >= process.argv.length) {
    console.error(`mediapipe_masks: unknown or incomplete option ${process.argv[i]}`);
    process.exit(2);
  }
  args[key] = process.argv[i + 1];
}
const abs = (p) => path.resolve(root, p);
const npmDir = abs("assets/fidelity/npm");
for (const need of [path.join(npmDir, "tasks-vision/vision_bundle.mjs"), path.join(npmDir, "playwright-core/index.mjs"),
                    abs(args.model), path.join(abs(args.frames), "frames.txt"), args.browser]) {
  if (!fs.existsSync(need)) {
    console.error(`mediapipe_masks: ${need} is missing (run bench/fidelity/fetch.sh, frames.py, ` +
                  `and install chromium: scripts/install-deps.sh --fidelity)`);
    process.exit(1);
  }
}
const {chromium} = await import(pathToFileURL(path.join(npmDir, "playwright-core/index.mjs")).href);

const [size, ...names] = fs.readFileSync(path.join(abs(args.frames), "frames.txt"), "utf8").trim().split("\n");
const [width, height] = size.split(" ").map(Number);

// The server: the page, the npm packages, the model and the frames; nothing else.
const routes = [["/harness.html", path.join(here, "harness.html")], ["/model.tflite", abs(args.model)]];
const types = {".html": "text/html", ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm"};
const server = http.createServer((req, res) => {
  const url = decodeURIComponent(new URL(req.url, "http://x").pathname);
  let file = null;
  for (const [prefix, target] of routes) if (url === prefix) file = target;
  if (url.startsWith("/npm/")) file = path.join(npmDir, url.slice(5));
  if (url.startsWith("/frames/")) file = path.join(abs(args.frames), url.slice(8));
  if (!file || file.includes("..") || !fs.existsSync(file)) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, {"Content-Type": types[path.extname(file)] || "application/octet-stream"});
  fs.createReadStream(file).pipe(res);
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const origin = `http://127.0.0.1:${server.address().port}`;

const browser = await chromium.launch({executablePath: args.browser, headless: true,
                                       args: ["--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader"]});
let failed = false;
try {
  const page = await browser.newPage();
  // Offline by construction: any request that is not to our server fails the run.
  await page.route("**/*", (route) => {
    if (route.request().url().startsWith(origin + "/")) return route.continue();
    console.error(`mediapipe_masks: blocked request to ${route.request().url()}`);
    failed = true;
    return route.abort();
  });
  page.on("console", (m) => { if (m.type() === "error") console.error(`[page] ${m.text()}`); });
  await page.goto(`${origin}/harness.html`);
  await page.waitForFunction(() => typeof window.openSegmenter === "function");
  await page.evaluate((u) => window.openSegmenter(u), `${origin}/model.tflite`);
  fs.mkdirSync(abs(args.out), {recursive: true});
  for (const name of names) {
    const r = await page.evaluate(([u, w, h]) => window.segmentRaw(u, w, h), [`${origin}/frames/${name}.rgb`, width, height]);
    if (r.width !== width || r.height !== height) throw new Error(`${name}: mask is ${r.width}x${r.height}, frame ${width}x${height}`);
    const data = Buffer.from(r.data, "base64");
    // .npy v1.0, little-endian float32 [height, width]; header padded to 64 bytes.
    let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${height}, ${width}), }`;
    header += " ".repeat(64 - ((10 + header.length + 1) % 64)) + "\n";
    const pre = Buffer.alloc(10);
    Buffer.from("\x93NUMPY", "latin1").copy(pre, 0);
    pre[6] = 1; pre[7] = 0; pre.writeUInt16LE(header.length, 8);
    fs.writeFileSync(path.join(abs(args.out), `${name}.npy`), Buffer.concat([pre, Buffer.from(header, "latin1"), data]));
  }
  fs.writeFileSync(path.join(abs(args.out), "source.txt"),
                   `@mediapipe/tasks-vision ${JSON.parse(fs.readFileSync(path.join(npmDir, "tasks-vision/package.json"))).version}` +
                   ` ImageSegmenter, delegate CPU, confidence masks; model ${path.relative(root, abs(args.model))}; chromium ${browser.version()}\n`);
  console.log(`mediapipe_masks: ${names.length} masks (${width}x${height}) -> ${abs(args.out)}`);
} catch (e) {
  console.error(`mediapipe_masks: ${e.message || e}`);
  failed = true;
} finally {
  await browser.close();
  server.close();
}
process.exit(failed ? 1 : 0);
