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
  const response = await fetch(where);
  if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`.trim());
  // Streaming compilation needs the application/wasm type; other servers still get a load.
  if (typeof WebAssembly.compileStreaming === 'function' && response.headers.get('Content-Type')?.startsWith('application/wasm')) {
    return WebAssembly.compileStreaming(response);
  }
  return WebAssembly.compile(await response.arrayBuffer());
}

// A worker script must be same-origin: one from elsewhere (a CDN) is started through a small
// blob: script that imports it (the page's CSP then needs worker-src blob:).
function workerScript(url) {
  if (url.origin === new URL(here()).origin) return url.href;
  return URL.createObjectURL(new Blob([`importScripts(${JSON.stringify(url.href)});`], { type: 'text/javascript' }));
}

// Emscripten's threaded glue starts its workers from new URL('attn-mt.worker.js',
// import.meta.url), which bundlers rewrite, and posts each the URL of the glue to import
// (Module.mainScriptUrlOrBlob; scripts/build.sh makes the worker import only that URL, so
// bundlers see no worker ↔ glue cycle). `workerGlue()` is that URL as the bundler emitted it.
// When the files live elsewhere — options.baseUrl, or the package imported as it is from another
// origin (a CDN), where that URL is cross-origin — the worker and the glue are both taken from
// there, unrenamed.
function threadFiles(build, baseUrl, workerGlue) {
  const glue = workerGlue();
  let folder;
  if (baseUrl !== undefined) folder = folderUrl(baseUrl);
  else if (here() && glue.origin !== new URL(here()).origin) folder = new URL('./', glue);
  else return { mainScriptUrlOrBlob: glue.href };
  const name = build.wasm.replace(/\.wasm$/, '');
  return {
    mainScriptUrlOrBlob: new URL(`${name}.mjs`, folder).href,
    locateFile: (path) => (path.endsWith('.worker.js') ? workerScript(new URL(path, folder)) : new URL(path, folder).href),
  };
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
    async start(build, moduleOptions, { baseUrl }) {
      if (build.threaded) Object.assign(moduleOptions, threadFiles(build, baseUrl, files[build.wasm].workerGlue));
      return (await files[build.wasm].glue()).default(moduleOptions);
    },
  };
}
