// Mounts the panel with a small shape and a short schedule, so a test run takes seconds.
import { mountBenchPanel } from '/web/bench/panel.mjs';

window.panel = mountBenchPanel(document.querySelector('#panel'), {
  shapes: [
    { label: 'small (1, 4, 64, 64, 32)', batch: 1, heads: 4, seqQ: 64, seqK: 64, headDim: 32 },
    { label: 'small causal (1, 4, 64, 64, 32)', batch: 1, heads: 4, seqQ: 64, seqK: 64, headDim: 32, causal: true },
  ],
  timing: { warmMs: 100, rounds: 3, turnMs: 100, settleMs: 20 },
});
