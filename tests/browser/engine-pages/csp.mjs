// The package under the Content-Security-Policy the server sends (docs/api.md's policies, from
// tests/browser/engines.test.mjs): imported from ?base= (this origin's /dist/ or another origin's,
// a CDN), with the createAttention options of ?options= (JSON), on the page or, with ?in=worker,
// in a module worker (csp-worker.mjs; its uncaught errors go to this page's console). Leaves
// { info, out, ms } or { error, ms } in window.__result (ms: from the start of the load to its end).
import { attend } from './csp-worker.mjs';

const params = new URLSearchParams(location.search);
const base = params.get('base');
const options = JSON.parse(params.get('options') ?? '{}');
if (params.get('in') === 'worker') {
  const worker = new Worker(new URL(`./csp-worker.mjs?base=${encodeURIComponent(base)}`, import.meta.url), { type: 'module' });
  worker.onmessage = ({ data }) => {
    if (data.problem) console.error(data.problem);
    else window.__result = data;
  };
  worker.onerror = (event) => { window.__result = { error: `the worker ended: ${event.message}` }; };
  worker.postMessage(options);
} else {
  window.__result = await attend(base, options);
}
