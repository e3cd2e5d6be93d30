// loadAttention(): one idempotent, guarded initialisation shared by every entry point. The entry
// points differ only in how they find files and start Emscripten's JS glue (index.mjs, node.mjs).
//
// The loader picks a build (builds.mjs: SIMD level × threads), compiles its .wasm itself, checks
// that it is that build (a wrong or stale file is named in the error, not left to surface as an
// Emscripten LinkError), and hands the compiled module to the glue (Module.instantiateWasm). The
// glue starts at once, so a threaded build's workers boot while the .wasm compiles.
import { createLibrary } from './api.mjs';
import { BUILDS, buildFor, chooseSimd, hasRelaxedSimd, hasWasmSimd, identify, RELAXED_HINT } from './builds.mjs';
import BUILT from './fingerprints.mjs';
import { describe } from './shapes.mjs';
import { chooseThreads, noThreads } from './threads.mjs';
import { warmUp } from './warmup.mjs';

const OPTIONS = ['wasmUrl', 'wasmBinary', 'baseUrl', 'simd', 'threads', 'maxThreads', 'layers', 'strict', 'warmUp'];
const isUrl = (v) => typeof v === 'string' || v instanceof URL;

// fn: the function the options were given to ('loadAttention' or 'createAttention'), which the
// messages name; it rides along in the result for the checks made later (planPinned, planChoice).
function checkLoadOptions(options, fn) {
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object') throw new TypeError(`${fn}: options must be an object, got ${describe(options)}`);
  for (const name of Object.keys(options)) {
    if (!OPTIONS.includes(name)) throw new TypeError(`${fn}: unknown option '${name}' (known options: ${OPTIONS.join(', ')})`);
  }
  const o = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined && v !== null));
  for (const name of ['wasmUrl', 'baseUrl']) {
    if (o[name] !== undefined && !isUrl(o[name])) {
      throw new TypeError(`${fn}: options.${name} must be a string or a URL, got ${describe(o[name])}`);
    }
  }
  const bytes = o.wasmBinary;
  if (bytes !== undefined && !(bytes instanceof ArrayBuffer) && !ArrayBuffer.isView(bytes) && !(bytes instanceof WebAssembly.Module)) {
    throw new TypeError(`${fn}: options.wasmBinary must be an ArrayBuffer, a typed array or a WebAssembly.Module, got ${describe(bytes)}`);
  }
  const given = ['wasmUrl', 'wasmBinary', 'baseUrl'].filter((name) => o[name] !== undefined);
  if (given.length > 1) {
    throw new TypeError(`${fn}: options.${given[0]} and options.${given[1]} cannot be combined ` +
      '(wasmUrl and wasmBinary name one build\'s .wasm; baseUrl a folder with all of them)');
  }
  const { simd = 'auto', threads = 'auto', maxThreads = 8, layers = false, strict = false, warmUp = true } = o;
  if (!['auto', 'relaxed', 'simd128'].includes(simd)) {
    throw new RangeError(`${fn}: options.simd must be 'auto', 'relaxed' or 'simd128', got ${describe(simd)}`);
  }
  if (threads !== 'auto' && !(Number.isInteger(threads) && threads >= 1 && threads <= 64)) {
    throw new RangeError(`${fn}: options.threads must be 'auto' or an integer from 1 to 64, got ${describe(threads)}`);
  }
  if (!(Number.isInteger(maxThreads) && maxThreads >= 1 && maxThreads <= 64)) {
    throw new RangeError(`${fn}: options.maxThreads must be an integer from 1 to 64, got ${describe(maxThreads)}`);
  }
  for (const [name, value] of [['layers', layers], ['strict', strict], ['warmUp', warmUp]]) {
    if (typeof value !== 'boolean') throw new TypeError(`${fn}: options.${name} must be a boolean, got ${describe(value)}`);
  }
  return { ...o, simd, threads, maxThreads, layers, layersGiven: o.layers !== undefined, strict, warmUp, fn };
}

const loadError = (message, cause) => new Error(`attention-wasm: ${message}`, cause === undefined ? undefined : { cause });
// 'CompileError: …' for the engine's errors, the bare message for plain Errors.
const reason = (error) => (error instanceof Error && error.name !== 'Error' ? `${error.name}: ${error.message}` : error?.message ?? String(error));

// wasmUrl or wasmBinary name one build: which one the module is decides, and options that
// contradict it, or an engine that cannot run it, are errors (nothing else could be loaded).
async function planPinned(opts, env, platform) {
  const source = opts.wasmBinary ? 'options.wasmBinary' : `options.wasmUrl (${opts.wasmUrl})`;
  let module;
  try {
    const bytes = opts.wasmBinary ?? await platform.read(opts.wasmUrl);
    module = bytes instanceof WebAssembly.Module ? bytes : await WebAssembly.compile(bytes);
  } catch (error) {
    // V8: "simd opcode not available, enable with --experimental-relaxed-simd".
    const opcode = error instanceof WebAssembly.CompileError && /opcode/i.test(error.message) && !hasRelaxedSimd();
    const hint = opcode ? ` (if it is a relaxed-SIMD build: this engine does not run relaxed SIMD; ${RELAXED_HINT})` : '';
    throw loadError(`could not load ${source}: ${reason(error)}${hint}`, error);
  }
  const build = identify(module);
  if (!build) {
    throw loadError(`${source} is not one of the builds of attention-wasm ${BUILT.version} ` +
      `(${BUILDS.map((b) => b.wasm).join(', ')}); is it from another version of the package?`);
  }
  const is = `${source} is ${build.wasm}, the ${build.what}`;
  if (!offered(platform).includes(build.wasm)) {
    throw new TypeError(`${opts.fn}: ${is}, which ${platform.entry} does not include (it has ${offered(platform).join(', ')})`);
  }
  if (opts.simd !== 'auto' && (opts.simd === 'relaxed') !== (build.simd === 'relaxed-simd')) {
    throw new TypeError(`${opts.fn}: ${is}, but options.simd is '${opts.simd}'`);
  }
  if (opts.layersGiven && opts.layers !== build.layers) {
    const other = buildFor(build.simd, build.threaded, opts.layers).wasm;
    throw new TypeError(`${opts.fn}: ${is}, but options.layers is ${opts.layers} (that needs ${other})`);
  }
  if (opts.threads !== 'auto' && (opts.threads > 1) !== build.threaded) {
    const other = buildFor(build.simd, !build.threaded, build.layers).wasm;
    throw new TypeError(`${opts.fn}: ${is}, but options.threads is ${opts.threads} (that needs ${other})`);
  }
  const blocked = build.threaded && noThreads(env);
  if (blocked) throw loadError(`${is}, which needs shared memory, but ${blocked.problem}. ${blocked.hint}.`);
  const { threads, reason: threadsReason } = build.threaded ? chooseThreads(opts, env)
    : { threads: 1, reason: `${opts.wasmBinary ? 'wasmBinary' : 'wasmUrl'} is the single-threaded build` };
  return { build, threads, threadsReason, simdReason: `${source} is ${build.wasm}`, module: Promise.resolve(module) };
}

const offered = (platform) => platform.builds ?? BUILDS.map((b) => b.wasm);

// No file given: choose the build, and compile it from the package (or baseUrl). An entry point
// with fewer builds (attention-wasm/simd128) narrows the choice.
function planChoice(opts, env, platform) {
  const has = (simd, threaded) => offered(platform).includes(buildFor(simd, threaded, opts.layers).wasm);
  const only = `${platform.entry} has only ${offered(platform).join(', ')}`;
  if (opts.simd === 'relaxed' && !has('relaxed-simd', false)) {
    throw new TypeError(`${opts.fn}: options.simd is 'relaxed', but ${only}; import 'attention-wasm' for relaxed SIMD`);
  }
  if (opts.threads !== 'auto' && opts.threads > 1 && !has('simd128', true)) {
    throw new TypeError(`${opts.fn}: options.threads is ${opts.threads}, but ${only}; import 'attention-wasm' for threads`);
  }
  const single = !has('simd128', true);
  const { simd, reason: simdReason } = has('relaxed-simd', false) ? chooseSimd(opts, hasRelaxedSimd(), env.isNode)
    : { simd: 'simd128', reason: `${platform.entry} has only simd128` };
  const { threads, reason: threadsReason } = single ? { threads: 1, reason: `${platform.entry} is single-threaded` }
    : chooseThreads(opts, env);
  const build = buildFor(simd, threads > 1, opts.layers);
  const where = platform.locate(build.wasm, opts.baseUrl);
  const module = (async () => {
    let compiled;
    try {
      compiled = await platform.compile(where);
    } catch (error) {
      throw loadError(`could not load ${build.wasm} (the ${build.what}) from ${where}: ${reason(error)}`, error);
    }
    const found = identify(compiled);
    if (found !== build) {
      throw loadError(`${where} should be ${build.wasm} (the ${build.what}) of attention-wasm ${BUILT.version}, but ` +
        `${found ? `it is ${found.wasm}, the ${found.what}` : 'it is none of that version\'s builds (a stale or foreign file?)'}`);
    }
    return compiled;
  })();
  module.catch(() => {});  // awaited below; this only keeps an early failure from being "unhandled"
  return { build, threads, threadsReason, simdReason, module };
}

// Resolves once every worker of the threaded module's pool has loaded the module (Emscripten
// sets worker.loaded on its 'loaded' message); rejects with failure() as soon as it is an Error
// (a worker that cannot start), or after WORKER_TIMEOUT_MS.
const WORKER_TIMEOUT_MS = 30000;
async function workersLoaded(module, build, failure) {
  const start = performance.now();
  while (!module.PThread.unusedWorkers.every((worker) => worker.loaded)) {
    if (failure()) throw failure();
    if (performance.now() - start > WORKER_TIMEOUT_MS) {
      throw loadError(`the ${build.what}'s worker threads did not start within ${WORKER_TIMEOUT_MS / 1000} s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

// platform: entry (its package path, for messages); builds (the .wasm files it offers, default
// all); env() → { isNode, crossOriginIsolated, sharedMemory, cores, coresNote? } (threads.mjs); locate(file, baseUrl) → where that .wasm is;
// compile(where) → WebAssembly.Module; read(url) → bytes (options.wasmUrl); start(build,
// moduleOptions, opts, workerFailed) → Emscripten's module promise, where a platform that can tell
// calls workerFailed(why) when a worker of the pool cannot start, and may set
// moduleOptions.attnUnwatch(quietly) to stop watching (quietly: the load failed, and the workers'
// later errors are to be silenced, not reported); afterThreadsStarted(module) (optional).
// Returns { loadAttention, createAttention }: the first shares one instance, the second makes a
// new one each call.
export function makeLoaders(platform) {
  // A new instance; `fn` names the function called in messages about its options.
  async function create(options, fn) {
    const opts = checkLoadOptions(options, fn);
    if (!hasWasmSimd()) {
      throw new Error('attention-wasm needs WebAssembly SIMD (simd128), which this JavaScript engine does not support ' +
        '(it is in Chrome/Edge 91+, Firefox 89+, Safari 16.4+ and Node.js 16.4+)');
    }
    const env = platform.env();
    const plan = opts.wasmUrl || opts.wasmBinary ? await planPinned(opts, env, platform) : planChoice(opts, env, platform);
    const { build, threads } = plan;
    // The layer's JavaScript (mha.mjs and its modules) is imported only for a layers build, while
    // its .wasm compiles: a bundler splits it into a chunk of its own, out of the default download.
    const layerCode = build.layers ? import('./mha.mjs').then((m) => m.makeMultiHeadAttention, (error) => {
      throw loadError(`could not load the layer's JavaScript (mha.mjs, which loadAttention({ layers: true }) imports): ${reason(error)}`, error);
    }) : Promise.resolve(null);
    layerCode.catch(() => {});  // awaited below; this only keeps an early failure from being "unhandled"

    let fail;
    const failed = new Promise((_, reject) => { fail = reject; });
    // Emscripten would print load failures to the console; they reach the caller instead. Its
    // exit path (quit_, reached only if the C++ side called exit()) would end or mark the host
    // process (process.exit, process.exitCode): throw instead, like any other error of a call.
    const moduleOptions = {
      print: () => {}, printErr: () => {},
      quit: (status, toThrow) => { throw toThrow; },
      instantiateWasm(imports, receiveInstance) {
        plan.module.then((module) => WebAssembly.instantiate(module, imports).then((instance) => receiveInstance(instance, module)))
          .catch(fail);
        return {};
      },
    };
    if (build.threaded) moduleOptions.attnPoolSize = threads - 1;
    // A worker of the pool that cannot start ends the load at once, saying why.
    let workerProblem = null;
    const workerFailed = (why) => {
      workerProblem ??= loadError(`the ${build.what}'s worker threads cannot start: ${why}`);
      fail(workerProblem);
    };
    let module, makeMultiHeadAttention;
    try {
      const started = Promise.resolve().then(() => platform.start(build, moduleOptions, opts, workerFailed)).catch((error) => {
        throw loadError(`could not start the ${build.what}: ${reason(error)}`, error);
      });
      module = await Promise.race([started, failed]);
      makeMultiHeadAttention = await layerCode;
    } catch (error) {
      moduleOptions.attnUnwatch?.(true);
      moduleOptions.PThread?.terminateAllThreads();
      throw error.message?.startsWith('attention-wasm') ? error : loadError(`could not instantiate ${build.wasm}: ${reason(error)}`, error);
    }
    // The pool's workers boot while the kernel warms up (single-threaded); the threads start
    // once every worker has the module, so no call ever waits on a worker that is still booting.
    const lib = createLibrary(module, {
      threads, threadsReason: plan.threadsReason, simdReason: plan.simdReason, onDispose: () => forget(lib), makeMultiHeadAttention,
    });
    let started = false;
    try {
      if (opts.warmUp) await warmUp(lib);
      if (build.threaded) {
        await workersLoaded(module, build, () => workerProblem);
        module.setNumThreads(threads);
        platform.afterThreadsStarted?.(module);
      }
      started = true;
    } catch (error) {
      lib.dispose();
      throw error;
    } finally {
      moduleOptions.attnUnwatch?.(!started);
    }
    return lib;
  }

  // One shared instance per feature set: loadAttention() shares the inference build's, and
  // loadAttention({ layers: true }) the layers build's, each loaded by the first call that asks for
  // it (a page that asks for both holds both). Within a feature set, the first call's options hold.
  const shared = new Map();  // layers → { loading, loaded, firstOptions, warned }
  function forget(lib) {  // after dispose(), loadAttention() starts afresh
    for (const [layers, slot] of shared) if (slot.loaded === lib) shared.delete(layers);
  }
  function loadAttention(options) {
    const layers = options?.layers === true;  // any other value than true, false or none is refused below
    const slot = shared.get(layers);
    if (slot) {
      // Options a first call would refuse are refused here too, the same way (a rejection).
      try {
        checkLoadOptions(options, 'loadAttention');
      } catch (error) {
        return Promise.reject(error);
      }
      const changed = differences(slot.firstOptions, options);
      if (changed && !slot.warned) {
        slot.warned = true;
        console.warn(`attention-wasm: loadAttention() was called again with other options than the first call (${changed}); ` +
          `it returns the instance the first call loaded${layers ? ' (with layers: true)' : ''}. createAttention(options) makes a new ` +
          'instance with these options.');
      }
      return slot.loading;
    }
    const fresh = { loading: create(options, 'loadAttention'), loaded: null, firstOptions: options, warned: false };
    shared.set(layers, fresh);
    fresh.loading.then((lib) => { fresh.loaded = lib; }, () => {  // a failed load may be retried
      if (shared.get(layers) === fresh) shared.delete(layers);
    });
    return fresh.loading;
  }

  const createAttention = (options) => create(options, 'createAttention');
  return { loadAttention, createAttention };
}

// 'threads: 1 (first call: not given)' for the options that differ, or '' when none do (layers
// is the same in both: it chose the shared instance).
function differences(first, later) {
  const a = first ?? {};
  const b = later ?? {};
  const same = (x, y) => Object.is(x, y) || (isUrl(x) && isUrl(y) && String(x) === String(y)) || (x == null && y == null);
  const show = (v) => (v == null ? 'not given' : isUrl(v) ? String(v) : typeof v === 'object' ? describe(v) : JSON.stringify(v));
  return [...new Set([...Object.keys(a), ...Object.keys(b)])]
    .filter((k) => k !== 'layers' && !same(a[k], b[k]))
    .map((k) => `${k}: ${show(b[k])} (first call: ${show(a[k])})`)
    .join(', ');
}
