// The limits a token step is held to, measured on as many threads as the step runs on: the
// streaming read of a buffer (bandwidth.mjs) and the multiply-add peak (peak.mjs), each in
// `streams` workers at once (probe-worker.mjs: Node worker threads, or module workers in a
// page), each worker with its own module and memory — so two streams need no shared memory and
// no cross-origin isolation. A call posts "run" to every worker and resolves when all are done:
// the time of the slowest stream, as a threaded step waits for its slowest thread.
const WORKER = new URL('./probe-worker.mjs', import.meta.url);

// A worker as { ask(message) → its next reply, terminate() }.
async function spawn() {
  let pending = null;
  const reply = (m) => {
    const p = pending;
    pending = null;
    if (m.error) p?.fail(new Error(`probe worker: ${m.error}`));
    else p?.ok(m);
  };
  const failed = (error) => pending?.fail(error instanceof Error ? error : new Error(`probe worker: ${error?.message ?? error}`));
  let w;
  if (typeof Worker === 'function') {  // a page
    w = new Worker(WORKER, { type: 'module' });
    w.onmessage = (event) => reply(event.data);
    w.onerror = (event) => { event.preventDefault?.(); failed(event); };
  } else {
    const { Worker: NodeWorker } = await import('node:worker_threads');
    // (V8's flags, such as relaxed SIMD's, are the process's: the worker has them without execArgv)
    w = new NodeWorker(WORKER, { execArgv: [] });
    w.on('message', reply);
    w.on('error', failed);
  }
  return {
    ask: (message) => new Promise((ok, fail) => {
      pending = { ok, fail };
      w.postMessage(message);
    }),
    terminate: () => w.terminate(),
  };
}

// setup: { kind: 'read', bytes } (bytes in all, split evenly between the streams, each a
// multiple of bandwidth.mjs's STEP) or { kind: 'peak', simd, iterations } (per stream) →
// { bytes (read: in all, as the workers hold them), run() → Promise, close() }.
export async function createProbe(streams, setup) {
  const workers = [];
  let bytes = 0;
  try {
    for (let s = 0; s < streams; s++) {
      const w = await spawn();
      workers.push(w);
      bytes += (await w.ask(setup.kind === 'read' ? { ...setup, bytes: Math.ceil(setup.bytes / streams) } : setup)).bytes ?? 0;
    }
  } catch (error) {
    for (const w of workers) await w.terminate();
    throw error;
  }
  return {
    bytes,
    run: () => Promise.all(workers.map((w) => w.ask({ run: true }))),
    close: async () => { for (const w of workers) await w.terminate(); },
  };
}
