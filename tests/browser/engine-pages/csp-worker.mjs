// Loads the package from `base` and runs one call; in a module worker (see csp.mjs), on a message
// with the options, posting the result back, and { problem } for each uncaught error there.
export async function attend(base, options) {
  const start = performance.now();
  try {
    const { createAttention } = await import(`${base}index.mjs`);
    const lib = await createAttention(options);
    const x = new Float32Array(2 * 8 * 16).fill(0.5);
    const out = lib.attention(x, x, x, { heads: 2, seqQ: 8, headDim: 16 });
    lib.dispose();
    return { info: { ...lib.info }, out: out[0], ms: performance.now() - start };
  } catch (error) {
    return { error: `${error.name}: ${error.message}`, ms: performance.now() - start };
  }
}

if (typeof WorkerGlobalScope === 'function' && self instanceof WorkerGlobalScope) {
  const base = new URL(import.meta.url).searchParams.get('base');
  // This worker's uncaught errors go to the page, whose problems the harness sees in every engine.
  const forward = (event, what) => {
    event.preventDefault();
    postMessage({ problem: `${what} in the module worker: ${what === 'error' ? event.message : event.reason}` });
  };
  self.addEventListener('error', (event) => forward(event, 'error'));
  self.addEventListener('unhandledrejection', (event) => forward(event, 'unhandled rejection'));
  self.onmessage = async ({ data: options }) => postMessage(await attend(base, options));
}
