// One worker of probes.mjs: a Node worker thread or a browser module worker that holds one probe
// — a streaming read of its own buffer (bandwidth.mjs) or the multiply-add peak (peak.mjs) —
// and runs it whenever it is told to.
//   → { kind: 'read', bytes } | { kind: 'peak', simd, iterations }   ← { bytes } (read; rounded up
//                                                                       to STEP), { } or { error }
//   → { run: true }                                                   ← { done: checksum }
import { createReader } from './bandwidth.mjs';
import { peakModule } from './peak.mjs';

const node = typeof WorkerGlobalScope === 'undefined' ? await import('node:worker_threads') : null;
const send = (message) => (node ? node.parentPort.postMessage(message) : self.postMessage(message));
let run = null;

async function handle(message) {
  try {
    if (message.run) return send({ done: run() });
    if (message.kind === 'read') {
      const reader = await createReader(message.bytes);
      run = () => reader.run();
      return send({ bytes: reader.bytes });
    }
    const { instance } = await WebAssembly.instantiate(peakModule(message.simd).bytes, {});
    run = () => instance.exports.peak(message.iterations);
    return send({});
  } catch (error) {
    return send({ error: String(error?.message ?? error) });
  }
}

if (node) node.parentPort.on('message', handle);
else self.onmessage = (event) => handle(event.data);
