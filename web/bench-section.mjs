// "Benchmark in your browser": the panel of bench/panel.mjs on the page, in the page's language
// (its strings and shape labels from the i18n files; English falls back to the panel's own TEXT).
// It is loaded when its section comes near the screen, not with the page: a visitor who never
// scrolls there downloads none of it. window.attentionDemo.benchPanel is the panel once mounted.
import { $, whenNear } from './dom.mjs';

export function startBench(strings) {
  const host = $('bench-panel');
  let panel = null;
  const options = (TEXT, DEFAULT_SHAPES) => ({
    text: { ...TEXT, ...strings().benchPanel },
    shapes: DEFAULT_SHAPES.map((shape, i) => ({ ...shape, label: strings().benchShapes[i] })),
  });
  let module = null;
  const mount = async () => {
    module ??= import('./bench/panel.mjs');
    const { DEFAULT_SHAPES, TEXT, mountBenchPanel } = await module;
    if (panel) return;
    panel = mountBenchPanel(host, options(TEXT, DEFAULT_SHAPES));
    window.attentionDemo.benchPanel = panel;
  };
  whenNear(host, mount);
  return async () => {
    if (!panel) return;
    const { DEFAULT_SHAPES, TEXT } = await module;
    panel.update(options(TEXT, DEFAULT_SHAPES));
  };
}
