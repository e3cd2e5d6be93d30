// What the loader needs to know about a browser (or a Web Worker): where each build's files are,
// how to fetch and compile a .wasm, and how to start a threaded build's workers when its files
// are not where a bundler put them.
import { browserCores } from './threads.mjs';

const here = () => globalThis.location?.href;

// `folder` as a URL that ends with '/', relative to the page.
function folderUrl(folder) {
  const url = new URL(String(folder), here());
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  return url;
}

async function compile(where) {
  const response = await fetch(where).catch((error) => {
    throw sameOrigin(new URL(where, here())) ? error : new TypeError(`${error.message} ${FROM_ELSEWHERE}`, { cause: error });
  });
  if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`.trim());
  // Streaming compilation needs the application/wasm type; other servers still get a load.
  if (typeof WebAssembly.compileStreaming === 'function' && response.headers.get('Content-Type')?.startsWith('application/wasm')) {
    return WebAssembly.compileStreaming(response);
  }
  return WebAssembly.compile(await response.arrayBuffer());
}

// A fetch from another origin that fails says only "Failed to fetch" (Chromium) or "NetworkError
// when attempting to fetch resource." (Firefox), whatever the cause.
const FROM_ELSEWHERE = '(a file from another origin: a network error, a server that sends no Access-Control-Allow-Origin ' +
  'header (CORS), or a Content-Security-Policy whose connect-src does not allow it)';

// A worker script must be same-origin: one from elsewhere (a CDN) is started through a small
// blob: script that imports it (the page's CSP then needs worker-src blob:). A script that did not
// import is reported as the worker's own script reports a glue that did not (worker-import.mjs): so
// a blob: the policy allowed is never blamed for it.
const sameOrigin = (url) => url.origin === new URL(here()).origin;
function workerScript(url) {
  if (sameOrigin(url)) return url.href;
  const href = JSON.stringify(url.href);
  return URL.createObjectURL(new Blob([`try { importScripts(${href}); } catch (error) { ` +
    `throw new Error('attention-wasm worker: could not import or run ' + ${href} + ': ' + error); }`], { type: 'text/javascript' }));
}

// Emscripten's threaded glue starts its workers from new URL('attn-mt.worker.js',
// import.meta.url), which bundlers rewrite, and posts each the URL of the glue to import
// (Module.mainScriptUrlOrBlob; scripts/build.sh makes the worker import only that URL, so
// bundlers see no worker ↔ glue cycle): the glue the page imported (`imported`, its module) where
// that can be (ownFile), else `workerGlue()`, the copy the bundler emitted as an asset.
// When the files live elsewhere — options.baseUrl, or the package imported as it is from another
// origin (a CDN), where that URL is cross-origin — the worker and the glue are both taken from
// there, unrenamed. Returns { options } for the glue and the worker script's URL when known
// (`script`; for one from another origin, what the blob: script imports).
function threadFiles(build, baseUrl, workerGlue, imported) {
  const glue = workerGlue();
  let folder;
  if (baseUrl !== undefined) folder = folderUrl(baseUrl);
  else if (here() && !sameOrigin(glue)) folder = new URL('./', glue);
  else return { options: { mainScriptUrlOrBlob: ownFile(imported) ?? glue.href } };
  const name = build.glue;
  return {
    options: {
      mainScriptUrlOrBlob: new URL(`${name}.mjs`, folder).href,
      locateFile: (path) => (path.endsWith('.worker.js') ? workerScript(new URL(path, folder)) : new URL(path, folder).href),
    },
    script: new URL(`${name}.worker.js`, folder),
  };
}

// The URL of the glue the page imported (its module's `glueUrl`, import.meta.url there: see
// scripts/build.sh) when its workers can import that same file, so that it is downloaded once:
// the glue's own chunk (Vite's ES output) or file (no bundler). Not when a bundler put the glue
// inside another script (Vite's 'iife' workers: then it has this module's URL) or gave it a
// build-time file: URL (webpack): the workers then import the copy the bundler emitted as an
// asset (workerGlue), the glue a second time.
function ownFile({ glueUrl }) {
  if (typeof glueUrl !== 'string' || glueUrl === import.meta.url) return null;
  return new URL(glueUrl).protocol === new URL(here()).protocol ? glueUrl : null;
}

// A worker's error event, kept from the page or worker (the glue would rethrow it).
function silence(event) {
  event.stopImmediatePropagation();
  event.preventDefault();
}

// Until the returned stop(quietly): the pool's workers that Emscripten's glue has just made (from
// `script`, a URL when known), and the Content-Security-Policy reports of this page or worker. A
// worker that cannot start gets an error event without a message, which the glue would rethrow
// (an uncaught "[object Event]" that ends a calling worker's script, while the load waits for the
// worker in vain); here every worker's error event stops (when one cannot start, they all fail
// alike), and failed(why) says why at once, for the first: from the policy's own report of which
// directive refused which URL, which may come just after the error (hence the short wait) or not
// at all (Firefox reports none to a worker), or from the worker's own report of a glue it could
// not import or run (scripts/worker-import.mjs: an error event, and a message that no browser mutes).
function watchWorkers(workers, script, failed) {
  let violation = null;
  let told = false;
  const onViolation = (event) => { violation ??= event; };
  const tell = (message) => {
    if (told) return;
    told = true;
    const own = OWN_REPORT.exec(message ?? '');
    setTimeout(async () => failed(violation ? refused(violation) : own ? await notImported(own[1], own[2]) : unexplained(script, message)), 50);
  };
  const onError = (event) => {
    silence(event);
    tell(event.message);
  };
  const onMessage = ({ data }) => { if (typeof data?.attnWorkerFailed === 'string') tell(data.attnWorkerFailed); };
  // The pool's list, as it is now: the glue empties it as it hands the workers out.
  const watched = [...workers];
  globalThis.addEventListener?.('securitypolicyviolation', onViolation);
  for (const worker of watched) {
    worker.addEventListener('error', onError);
    worker.addEventListener('message', onMessage);
  }
  // quietly: the load failed and is said; a worker's error after it (its script failing a moment
  // later) is that failure's, and unheard it would be an uncaught error of the page or worker.
  return (quietly) => {
    globalThis.removeEventListener?.('securitypolicyviolation', onViolation);
    for (const worker of watched) {
      worker.removeEventListener('error', onError);
      worker.removeEventListener('message', onMessage);
      if (quietly) worker.addEventListener('error', silence);
    }
  };
}

const BLOB_WHY = ' (the package comes from another origin, so its workers start from a blob: URL that imports their script)';

// What a CSP report of a refused worker script says, and what the policy needs.
function refused({ effectiveDirective, blockedURI }) {
  const blob = /^blob(:|$)/.test(blockedURI);
  return `the Content-Security-Policy refused their script (${effectiveDirective}, ${blob ? 'blob:' : blockedURI})` +
    `${blob ? BLOB_WHY : ''}; add ${blob ? 'blob:' : new URL(blockedURI).origin} to worker-src, or load with threads: 1`;
}

// A worker's report of a script (its own, or the glue) it could not import or run:
// 'attention-wasm worker: could not import or run URL: why'.
const OWN_REPORT = /attention-wasm worker: could not import or run (\S+): (.*)$/s;
// The browsers' reasons say only that the import failed (Chromium "Failed to fetch dynamically
// imported module", Firefox "error loading dynamically imported module", "NetworkError: A network
// error occurred.") whether the file is missing, refused by a policy or blocked for its headers:
// fetching it from here tells the first (and the third's CORS part) from the second.
async function notImported(url, why) {
  const said = `a worker could not import or run ${url} (${why}); `;
  let response;
  try {
    response = await fetch(url, { cache: 'no-store' });
    response.body?.cancel().catch(() => {});
  } catch (error) {
    return `${said}fetching it from here fails too (${error.name}: ${error.message})` +
      `${sameOrigin(new URL(url)) ? '' : `: ${FROM_ELSEWHERE.slice(1, -1)}`}`;
  }
  if (!response.ok) return `${said}the server answers HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}: is the file there?`;
  return `${said}the server sends it (HTTP ${response.status}), so the browser refused it or it failed to run: a ` +
    'Content-Security-Policy whose script-src does not allow it (in a worker, Firefox checks worker-src)' +
    `${sameOrigin(new URL(url)) ? '' : ', or, in a cross-origin-isolated page, a script from another origin sent without ' +
      'Cross-Origin-Resource-Policy: cross-origin'}`;
}

// A worker's error without a report: its script failed to load or run. A blob: script the policy
// refuses never runs (an error without a message); one that runs and fails has a message, which a
// browser may mute to "Script error." for a script from another origin, hiding the cause.
function unexplained(script, message) {
  const what = message ? `an error (${message})` : 'an error without a message';
  if (script && !sameOrigin(script)) {
    const start = `a worker reported ${what} loading its blob: script, which imports ${script.href}${BLOB_WHY}; `;
    if (!message) return `${start}a Content-Security-Policy whose worker-src does not allow blob: gives this: add blob: to worker-src, or load with threads: 1`;
    return `${start}the browser does not say why; a missing file, a Content-Security-Policy (script-src, worker-src) or ` +
      'missing CORS or Cross-Origin-Resource-Policy headers on that origin give this (or load with threads: 1)';
  }
  return `a worker reported ${what} loading its script${script ? ` ${script.href}` : ''} (a Content-Security-Policy whose ` +
    'worker-src does not allow it gives this, as does a script the server does not send)';
}

// files: { 'attn.wasm': { url: () => URL, glue: () => import(...), workerGlue?: () => URL }, ... }
// for the builds this entry point offers; entry: its package path.
export function browserPlatform(files, entry) {
  return {
    entry,
    builds: Object.keys(files),
    env: () => ({
      isNode: false,
      crossOriginIsolated: globalThis.crossOriginIsolated === true,
      sharedMemory: typeof SharedArrayBuffer === 'function',
      ...browserCores(globalThis.navigator),
    }),
    locate: (file, baseUrl) => (baseUrl === undefined ? files[file].url() : new URL(file, folderUrl(baseUrl))).href,
    read: compile,
    compile,
    async start(build, moduleOptions, { baseUrl }, workerFailed) {
      const glue = await files[build.wasm].glue();
      if (!build.threaded) return glue.default(moduleOptions);
      const { options, script } = threadFiles(build, baseUrl, files[build.wasm].workerGlue, glue);
      Object.assign(moduleOptions, options);
      const started = glue.default(moduleOptions);  // makes the pool's workers
      moduleOptions.attnUnwatch = watchWorkers(moduleOptions.PThread.unusedWorkers, script, workerFailed);
      return started;
    },
  };
}
