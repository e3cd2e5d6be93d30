// The few DOM helpers every module of the page uses. Elements are built with DOM calls, never
// from HTML strings of data, and styled through classes or the CSSOM (the page runs under a
// strict Content-Security-Policy).
export const $ = (id) => document.getElementById(id);

// el('p', { className: 'note', textContent: 'hi' }, child, 'text', …): properties, then children.
export function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

// svg('line', { x1: 0, … }, text?): SVG elements take attributes, not properties.
const SVG_NS = 'http://www.w3.org/2000/svg';
export function svg(tag, attributes = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attributes)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

// Calls `then` once, when `node` comes within half a screen of the viewport: what only a later
// section needs (the benchmark panel, the playground and its worker) is loaded when a reader
// gets near it, not with the page.
export function whenNear(node, then) {
  const near = new IntersectionObserver((entries) => {
    if (!entries.some((e) => e.isIntersecting)) return;
    near.disconnect();
    then();
  }, { rootMargin: '50% 0px' });
  near.observe(node);
}
