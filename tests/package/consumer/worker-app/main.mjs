// The page of the worker recipe: starts worker.mjs and shows what it sends back.
const worker = new Worker(new URL('./worker.mjs', import.meta.url), { type: 'module' });
worker.onmessage = ({ data }) => { document.getElementById('result').textContent = data.error ? `error: ${data.error}` : JSON.stringify(data); };
const q = new Float32Array([1, 0, 0, 1]);
worker.postMessage({ q, k: q, v: new Float32Array([1, 2, 3, 4]), options: { heads: 1, seqQ: 2, headDim: 2 } });
