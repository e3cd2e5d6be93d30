// Starts benchmark hosts as Node child processes (scripts/bench/node-host.mjs) and gives each the
// interface the scheduler uses: { label, engines, call(method, ...args), close() }.
import { fork } from 'node:child_process';
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
