// Loads the package from `base` and runs one call; in a module worker (see csp.mjs), on a message
// with the options, posting the result back.
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
  self.onmessage = async ({ data: options }) => postMessage(await attend(base, options));
}
