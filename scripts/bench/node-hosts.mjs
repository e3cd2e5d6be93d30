// Starts benchmark hosts as Node child processes (scripts/bench/node-host.mjs) and gives each the
// interface the scheduler uses: { label, engines, call(method, ...args), close() }.
import { execFile, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const HOST = fileURLToPath(new URL('./node-host.mjs', import.meta.url));

// Resolves to the host, or to { label, failed } when its engines could not load.
export function startNodeHost(spec, { label = JSON.stringify(spec), execArgv = [] } = {}) {
  const child = fork(HOST, [JSON.stringify(spec)], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const pending = new Map();
  let nextId = 0;
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => {
      reject(new Error(`bench host ${label} exited (${code}) before it was ready`));
      for (const { fail } of pending.values()) fail(new Error(`bench host ${label} exited (${code})`));
    });
    child.on('message', (m) => {
      if (m.ready) {
        resolve({
          label, spec, engines: m.ready,
          call: (method, ...args) => new Promise((ok, fail) => {
            const id = nextId++;
            pending.set(id, { ok, fail });
            child.send({ id, method, args });
          }),
          close: () => new Promise((done) => {
            if (child.exitCode !== null) return done();
            child.once('exit', done);
            child.send({ method: 'exit' });
          }),
        });
      } else if (m.failed) {
        resolve({ label, spec, failed: m.failed });
      } else {
        const { ok, fail } = pending.get(m.id);
        pending.delete(m.id);
        if (m.error) fail(new Error(`${label}: ${m.error}`));
        else ok(m.result);
      }
    });
  });
}

// Starts one host per { label, spec, execArgv } in turn: { hosts, failed: [{ label, reason }], close() }.
export async function startNodeHosts(list) {
  const hosts = [], failed = [];
  for (const { label, spec, execArgv } of list) {
    const h = await startNodeHost(spec, { label, execArgv });
    if (h.failed) failed.push({ label, reason: h.failed });
    else hosts.push(h);
  }
  return { hosts, failed, close: async () => { for (const h of hosts) await h.close(); } };
}

// The same kernel compiled natively by g++ for 128-bit SSE (scripts/bench/native-bench.cpp) as a
// host, so it takes its turns with the others: a turn runs the binary for that long (its own
// warm-up is the settle time) and yields the turn's median. It returns no outputs to cross-check.
export async function startNativeHost(exe) {
  const name = 'native SSE 1T (g++)';
  const runExe = (spec, warmMs, budgetMs) => new Promise((ok, fail) => {
    execFile(exe, ['--warm-ms', String(Math.round(warmMs)), '--budget-ms', String(Math.round(budgetMs)), spec], { encoding: 'utf8' },
      (error, stdout) => (error ? fail(error) : ok(JSON.parse(stdout))));
  });
  const { simd } = await runExe('1,1,1,1,8', 0, 0);
  let spec = null;
  return {
    label: `process: ${exe.replace(/^.*\/build\//, 'build/')}`,
    engines: [{ name, config: { code: `the same C++ by g++ -O3 -msse4.1 (xsimd ${simd}), called directly: no copies in or out` } }],
    async call(method, ...args) {
      if (method === 'prepare') {
        const { batch, heads, seqQ, seqK, headDim, causal } = args[0];
        spec = `${batch},${heads},${seqQ},${seqK},${headDim},${causal ? 1 : 0}`;
        return { [name]: { firstCall: (await runExe(spec, 0, 0)).ms } };
      }
      if (method === 'turn') {
        const { ms = 0, settleMs = 0 } = args[1] ?? {};
        return [(await runExe(spec, settleMs, ms)).ms];
      }
      return undefined;  // release
    },
    close: async () => {},
  };
}
