// Shared test helpers: the built library, seeded random tensors, and tolerant comparison.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createLibrary } from '../../dist/api.mjs';
import createAttnModule from '../../dist/attn.mjs';
import { makeMultiHeadAttention } from '../../dist/mha.mjs';
import { createAttention as create, loadAttention as load } from '../../dist/node.mjs';

// ATTN_TEST_SIMD=relaxed pins every suite to the relaxed-SIMD builds (scripts/test.sh runs
// tests/js a second time so, under node --experimental-wasm-relaxed-simd); `strict` makes a
// missing flag fail the run instead of falling back to SIMD128. Unset: the default choice.
export const pinned = process.env.ATTN_TEST_SIMD ? { simd: process.env.ATTN_TEST_SIMD, strict: true } : {};
export const EXPECTED_SIMD = process.env.ATTN_TEST_SIMD === 'relaxed' ? 'relaxed-simd' : 'simd128';
// The suites load what users load by default (the inference builds); those that need the layer or
// the backward pass ask for it (layers: true); tests/js/inference.test.mjs compares the two.
export const loadAttention = (options) => load({ ...pinned, ...options });
export const createAttention = (options) => create({ ...pinned, ...options });

// The single-threaded SIMD128 layers module itself (started by its glue, attn.mjs, which it shares
// with the inference build), for the suites that call its entries directly, and a library over
// it: { M, lib }.
export async function moduleAndLibrary() {
  const M = await createAttnModule({ wasmBinary: await readFile(new URL('../../dist/attn-layers.wasm', import.meta.url)) });
  return { M, lib: createLibrary(M, { makeMultiHeadAttention }) };
}

// mulberry32: a small seeded PRNG so every run sees the same tensors.
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function randomTensor(n, random, scale = 1) {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = (random() * 2 - 1) * scale;
  return a;
}

// Inputs are in [-1, 1) and outputs are convex combinations of value rows: float32 results
// match the double reference to |got − want| <= 2e-5 + 1e-4·|want|.
export function assertClose(got, want, what, atol = 2e-5) {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < got.length; i++) {
    const err = Math.abs(got[i] - want[i]);
    if (!(err <= atol + 1e-4 * Math.abs(want[i]))) {
      assert.fail(`${what}[${i}] = ${got[i]}, want ${want[i]} (error ${err})`);
    }
  }
}

// Random q, k, v for a shape given as attention() options.
export function makeInputs(opts, seed = 1) {
  const random = rng(seed);
  const batch = opts.batch ?? 1;
  const kvHeads = opts.kvHeads ?? opts.heads;
  const seqK = opts.seqK ?? opts.seqQ;
  const valueDim = opts.valueDim ?? opts.headDim;
  return {
    query: randomTensor(batch * opts.heads * opts.seqQ * opts.headDim, random),
    key: randomTensor(batch * kvHeads * seqK * opts.headDim, random),
    value: randomTensor(batch * kvHeads * seqK * valueDim, random),
  };
}
