// ONNX Runtime peer for bench/predict: node ort_predict.js MODEL.onnx TEST.csv OUT.txt THREADS
// Reads TEST.csv (header; column 0 = label, the rest = the model's inputs in
// order, blank = NaN) into one float32 [N, F] tensor, scores it with
// onnxruntime-node (intraOpNumThreads THREADS, interOpNumThreads 1,
// sequential execution) once to warm up, then best of 3 timed runs of the
// whole batch. Prints predict_s=, rows=; writes the scores to OUT.txt.
const ort = require('onnxruntime-node');
const fs = require('fs');
const [model, testPath, outPath, thr] = process.argv.slice(2);
const lines = fs.readFileSync(testPath, 'utf8').trim().split('\n').slice(1);
const F = lines[0].split(',').length - 1;
const x = new Float32Array(lines.length * F);
lines.forEach((r, i) => {
  const c = r.split(',');
  for (let j = 0; j < F; j++) x[i * F + j] = c[j + 1] === '' ? NaN : parseFloat(c[j + 1]);
});
(async () => {
  const s = await ort.InferenceSession.create(model, {
    intraOpNumThreads: parseInt(thr, 10), interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all' });
  const feeds = { input: new ort.Tensor('float32', x, [lines.length, F]) };
  let out = await s.run(feeds);
  let best = 1e9;
  for (let k = 0; k < 3; k++) {
    const t = process.hrtime.bigint();
    out = await s.run(feeds);
    best = Math.min(best, Number(process.hrtime.bigint() - t) / 1e9);
  }
  console.log(`predict_s=${best.toFixed(6)}`);
  console.log(`rows=${lines.length}`);
  fs.writeFileSync(outPath, Array.from(out.score.data, v => v.toPrecision(9)).join('\n') + '\n');
})().catch(e => { console.error(String(e)); process.exit(1); });
