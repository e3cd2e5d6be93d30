// "Benchmark in your browser": the panel of bench/panel.mjs on the page, in the page's language
// (its strings and shape labels from i18n.mjs; English falls back to the panel's own TEXT).
import { DEFAULT_SHAPES, TEXT, mountBenchPanel } from './bench/panel.mjs';

export function startBench(strings) {
  const text = () => ({ ...TEXT, ...strings().benchPanel });
  const shapes = () => DEFAULT_SHAPES.map((shape, i) => ({ ...shape, label: strings().benchShapes[i] }));
  const panel = mountBenchPanel(document.getElementById('bench-panel'), { text: text(), shapes: shapes() });
  window.attentionDemo.benchPanel = panel;
  return () => panel.update({ text: text(), shapes: shapes() });
}
