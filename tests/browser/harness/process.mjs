// A browser or its driver for the harness: in a process group of its own, so that stop() ends it
// and all it started, and stopped when the test process exits without the driver's close().
import { spawn } from 'node:child_process';
import { once } from 'node:events';

// name: how errors call it; onStop: run (synchronously) after the group is signalled.
export function startGroup(name, command, args, { onStop } = {}) {
  const child = spawn(command, args, { detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const gone = once(child, 'exit');
  const exited = gone.then(([code]) => { throw new Error(`${name} exited (${code}): ${stderr.trim()}`); });
  exited.catch(() => {});
  const stop = () => {
    process.off('exit', stop);
    try { process.kill(-child.pid, 'SIGTERM'); } catch { /* already gone */ }
    onStop?.();
  };
  process.on('exit', stop);
  return {
    stop,
    gone,
    // Polls ready() every 100 ms until it gives a value, and returns that; if the process exits or
    // 30 s pass first, stops it and throws with its stderr.
    async started(ready) {
      try {
        const deadline = Date.now() + 30000;
        for (;;) {
          const value = await Promise.race([exited, ready()]);
          if (value) return value;
          if (Date.now() > deadline) throw new Error(`${name} did not start within 30 s: ${stderr.trim()}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      } catch (error) {
        stop();
        throw error;
      }
    },
  };
}
