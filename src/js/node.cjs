// Entry point for Node.js CommonJS: require('attention-wasm'). It shares the ESM entry's single
// instance, so mixing require and import in one process loads the module once.
'use strict';

exports.loadAttention = function loadAttention(options) {
  return import('./node.mjs').then((m) => m.loadAttention(options));
};

exports.createAttention = function createAttention(options) {
  return import('./node.mjs').then((m) => m.createAttention(options));
};
