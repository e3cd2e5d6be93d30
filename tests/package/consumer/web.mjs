// A web app that imports the package by name, bundled by Vite and by webpack: the default build
// computes, listing the scripts the page fetched until then (the layer's JavaScript must not be
// among them: the loader imports it only for a layers build); then the layers build's layer runs
// one forward (identity projections, so it computes what the attention call did).
import { loadAttention } from 'attention-wasm';

const scripts = () => performance.getEntriesByType('resource').map((entry) => new URL(entry.name).pathname)
  .filter((path) => /\.m?js$/.test(path));

(async () => {
  const lib = await loadAttention();
  const q = new Float32Array([1, 0, 0, 1]);
  const out = lib.attention(q, q, new Float32Array([1, 2, 3, 4]), { heads: 1, seqQ: 2, headDim: 2 });
  const firstLoad = scripts();
  const withLayers = await loadAttention({ layers: true });
  const layer = new withLayers.MultiHeadAttention({ embedDim: 2, numHeads: 1, bias: false });
  layer.setWeights({ wq: q, wk: q, wv: q, wo: q });
  const layerOut = layer.forward(q);
  layer.dispose();
  const result = { info: lib.info, out: [...out], firstLoad, layers: { info: withLayers.info, out: [...layerOut] } };
  document.getElementById('result').textContent = JSON.stringify(result);
})().catch((error) => {
  document.getElementById('result').textContent = `error: ${error.message}`;
});
