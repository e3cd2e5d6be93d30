// Every bad argument throws the documented error type with a message that names the argument
// and gives expected vs actual, before any work; the library keeps working afterwards.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { loadAttention, makeInputs } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention(); });

const opts = { batch: 1, heads: 8, kvHeads: 8, seqQ: 2, seqK: 2, headDim: 64 };
const inputs = makeInputs(opts);

function throwsFrom(call, type, message) {
  assert.throws(call, (e) => {
    assert.equal(e.constructor, type, `error type for ${message}: got ${e.constructor.name}: ${e.message}`);
    assert.match(e.message, message);
    return true;
  });
}

const attention = (changes = {}, arrays = {}) => () => {
  const a = { ...inputs, ...arrays };
  return lib.attention(a.query, a.key, a.value, { ...opts, ...changes });
};

describe('attention() argument errors', () => {
  test('tensor types', () => {
    throwsFrom(attention({}, { query: [1, 2, 3] }), TypeError, /^attention: query must be a Float32Array, got Array\(3\)$/);
    throwsFrom(attention({}, { key: new Float64Array(1024) }), TypeError, /^attention: key must be a Float32Array, got Float64Array\(1024\)$/);
    throwsFrom(attention({}, { value: undefined }), TypeError, /^attention: value must be a Float32Array, got undefined$/);
    throwsFrom(attention({}, { value: null }), TypeError, /^attention: value must be a Float32Array, got null$/);
  });

  test('tensor lengths, with the formula', () => {
    throwsFrom(attention({}, { key: new Float32Array(1000) }), RangeError,
      /^attention: key has length 1000, expected 1024 \(batch 1 × kvHeads 8 × seqK 2 × headDim 64\)$/);
    throwsFrom(attention({}, { query: new Float32Array(5) }), RangeError,
      /^attention: query has length 5, expected 1024 \(batch 1 × heads 8 × seqQ 2 × headDim 64\)$/);
    throwsFrom(attention({ valueDim: 3 }), RangeError,
      /^attention: value has length 1024, expected 48 \(batch 1 × kvHeads 8 × seqK 2 × valueDim 3\)$/);
    throwsFrom(attention({ layout: 'bshd' }, { query: new Float32Array(4) }), RangeError,
      /^attention: query has length 4, expected 1024 \(batch 1 × seqQ 2 × heads 8 × headDim 64\)$/);
  });

  test('grouped-query keys without kvHeads: the key\'s length error says which kvHeads it fits', () => {
    const key = new Float32Array(2 * 2 * 64);  // 2 kv heads of the 8 query heads
    throwsFrom(attention({ kvHeads: undefined }, { key, value: key }), RangeError,
      new RegExp('^attention: key has length 256, expected 1024 \\(batch 1 × kvHeads 8 × seqK 2 × headDim 64\\); its length fits ' +
        'kvHeads 2 \\(grouped-query attention; options\\.kvHeads was not given, so it defaults to heads 8\\): pass it$'));
    // Both defaulted sizes can explain a length: each is named.
    const query = new Float32Array(8 * 4 * 16), k2 = new Float32Array(2 * 8 * 16);
    throwsFrom(() => lib.attention(query, k2, k2, { heads: 8, seqQ: 4, headDim: 16 }), RangeError,
      /^attention: key has length 256, expected 512 \(.*\); its length fits kvHeads 4 \(grouped-query attention; .*\), or seqK 2 \(options\.seqK was not given, so it defaults to seqQ 4\): pass it$/);
  });

  test('cross-attention without seqK: the key\'s length error says seqK defaults to seqQ', () => {
    const query = new Float32Array(4 * 16), key = new Float32Array(6 * 16);
    const hint = '; its length fits seqK 6 \\(options\\.seqK was not given, so it defaults to seqQ 4\\): pass it$';
    throwsFrom(() => lib.attention(query, key, key, { heads: 1, seqQ: 4, headDim: 16 }), RangeError,
      new RegExp(`^attention: key has length 96, expected 64 \\(batch 1 × kvHeads 1 × seqK 4 × headDim 16\\)${hint}`));
    throwsFrom(() => lib.attentionWeights(query, key, { heads: 1, seqQ: 4, headDim: 16 }), RangeError,
      new RegExp(`^attentionWeights: key has length 96, expected 64 .*${hint}`));
    // No hint where seqK was given, or where the tensor's size does not involve seqK.
    throwsFrom(() => lib.attention(query, key, key, { heads: 1, seqQ: 4, seqK: 5, headDim: 16 }), RangeError,
      /^attention: key has length 96, expected 80 \(batch 1 × kvHeads 1 × seqK 5 × headDim 16\)$/);
    throwsFrom(() => lib.attention(key, key, key, { heads: 1, seqQ: 4, headDim: 16 }), RangeError,
      /^attention: query has length 96, expected 64 \(batch 1 × heads 1 × seqQ 4 × headDim 16\)$/);
  });

  test('options object and unknown options', () => {
    throwsFrom(() => lib.attention(inputs.query, inputs.key, inputs.value), TypeError, /^attention: options must be an object.*got undefined$/);
    throwsFrom(() => lib.attention(inputs.query, inputs.key, inputs.value, 7), TypeError, /^attention: options must be an object.*got number 7$/);
    throwsFrom(attention({ headdim: 64 }), TypeError, /^attention: unknown option 'headdim' \(known options: batch, heads, .*\)$/);
  });

  test('required and integer dims', () => {
    for (const name of ['heads', 'seqQ', 'headDim']) {
      throwsFrom(attention({ [name]: undefined }), TypeError, new RegExp(`^attention: options\\.${name} is required \\(a positive integer\\)$`));
    }
    for (const name of ['batch', 'heads', 'kvHeads', 'seqQ', 'seqK', 'headDim', 'valueDim']) {
      throwsFrom(attention({ [name]: '8' }), TypeError, new RegExp(`^attention: options\\.${name} must be a number, got string "8"$`));
      for (const bad of [0, -1, 2.5, NaN, Infinity]) {
        throwsFrom(attention({ [name]: bad }), RangeError, new RegExp(`^attention: options\\.${name} must be a positive integer, got ${bad}$`));
      }
      // A size past a C++ int says the limit.
      throwsFrom(attention({ [name]: 2 ** 31 }), RangeError,
        new RegExp(`^attention: options\\.${name} must be at most 2147483647 \\(2\\^31 − 1: sizes are 32-bit integers\\), got 2147483648$`));
    }
  });

  test('heads must be a multiple of kvHeads', () => {
    throwsFrom(attention({ kvHeads: 3 }), RangeError, /^attention: options\.heads \(8\) must be a multiple of options\.kvHeads \(3\)$/);
  });

  test('layout, scale, causal', () => {
    throwsFrom(attention({ layout: 'bsdh' }), RangeError, /^attention: options\.layout must be 'bhsd' or 'bshd', got string "bsdh"$/);
    throwsFrom(attention({ scale: '0.1' }), TypeError, /^attention: options\.scale must be a number, got string "0\.1"$/);
    throwsFrom(attention({ scale: NaN }), RangeError, /^attention: options\.scale must be finite, got NaN$/);
    throwsFrom(attention({ scale: -Infinity }), RangeError, /^attention: options\.scale must be finite, got -Infinity$/);
    throwsFrom(attention({ causal: 1 }), TypeError, /^attention: options\.causal must be false, true, 'lower-right' or 'upper-left', got number 1$/);
  });

  test('mask types and lengths: the option names the meaning, the shape is never guessed', () => {
    throwsFrom(attention({ mask: new Int32Array(4) }), TypeError,
      /^attention: options\.mask must be a Float32Array \(added to the scores; -Infinity masks\), got Int32Array\(4\)$/);
    throwsFrom(attention({ mask: [0, 1, 1, 0] }), TypeError, /^attention: options\.mask must be .* got Array\(4\)$/);
    throwsFrom(attention({ mask: new Uint8Array(4) }), TypeError, new RegExp('^attention: options\\.mask is a Uint8Array, but a boolean mask ' +
      'means opposite things in PyTorch, so its option says which: options\\.attendMask \\(1 = may attend, as torch\\.nn\\.functional\\.' +
      "scaled_dot_product_attention's boolean attn_mask and Hugging Face's 4-D boolean masks\\) or options\\.blockMask \\(1 = masked, as " +
      "torch\\.nn\\.MultiheadAttention's boolean attn_mask\\); options\\.mask is an additive Float32Array$"));
    throwsFrom(attention({ attendMask: new Float32Array(4) }), TypeError,
      /^attention: options\.attendMask must be a Uint8Array \(1 = may attend, .*\), got Float32Array\(4\); an additive Float32Array goes in options\.mask$/);
    throwsFrom(attention({ attendMask: new Uint8Array(4), blockMask: new Uint8Array(4) }), TypeError,
      /^attention: options\.attendMask and options\.blockMask: give one mask/);
    throwsFrom(attention({ attendMask: new Uint8Array(5) }), RangeError, new RegExp('^attention: options\\.attendMask has length 5, expected the ' +
      'length of a mask that broadcasts to \\[batch, heads, seqQ, seqK\\] as PyTorch\'s do: 2 \\(\\[1, 1, 1, seqK 2\\]\\), 4 \\(\\[1, 1, seqQ 2, seqK 2\\]\\), ' +
      '16 \\(\\[1, heads 8, 1, seqK 2\\]\\), 32 \\(\\[1, heads 8, seqQ 2, seqK 2\\]\\)$'));
    // batch equals heads: a [heads, seqQ, seqK] position bias has the length of a [batch, 1, seqQ, seqK] mask.
    const two = { batch: 2, heads: 2, kvHeads: 2, seqQ: 3, seqK: 3, headDim: 4 };
    const x = new Float32Array(2 * 2 * 3 * 4);
    throwsFrom(() => lib.attention(x, x, x, { ...two, mask: new Float32Array(18) }), RangeError, new RegExp('^attention: options\\.mask has ' +
      'length 18, which fits \\[batch 2, 1, seqQ 3, seqK 3\\] and \\[1, heads 2, seqQ 3, seqK 3\\] alike: say which with options\\.maskShape, ' +
      'its shape as PyTorch gives it \\(mask\\.shape\\), e\\.g\\. \\[2, 1, 3, 3\\] or \\[2, 3, 3\\]$'));
    assert.equal(lib.attention(x, x, x, { ...two, mask: new Float32Array(18), maskShape: [2, 3, 3] }).length, x.length, 'stated, it runs');
    throwsFrom(attention({ mask: new Float32Array(4), maskShape: [2, 2, 1] }), RangeError,
      /^attention: options\.maskShape \[2, 2, 1\] must end with seqK \(2\): a mask has an entry for every key/);
    throwsFrom(attention({ mask: new Float32Array(6), maskShape: [3, 2] }), RangeError,
      /^attention: options\.maskShape \[3, 2\] does not broadcast to \[batch 1, heads 8, seqQ 2, seqK 2\]: maskShape\[0\] is 3, expected seqQ 2 or 1/);
    throwsFrom(attention({ mask: new Float32Array(4), maskShape: '2x2' }), TypeError,
      /^attention: options\.maskShape must be the mask's shape as an array of 1 to 4 positive integers .*, got string "2x2"$/);
    throwsFrom(attention({ maskShape: [2, 2] }), TypeError, /^attention: options\.maskShape is the shape of a mask, but no mask was given/);
    throwsFrom(attention({ attentionMask: new Uint8Array(3) }), RangeError,
      /^attention: options\.attentionMask has length 3, expected 2 \(batch 1 × seqK 2\)$/);
  });

  test('out and weightsOut', () => {
    throwsFrom(attention({ out: new Float32Array(3) }), RangeError,
      /^attention: options\.out has length 3, expected 1024 \(batch 1 × heads 8 × seqQ 2 × valueDim 64\)$/);
    throwsFrom(attention({ out: new Float64Array(1024) }), TypeError, /^attention: options\.out must be a Float32Array, got Float64Array\(1024\)$/);
    throwsFrom(attention({ weightsOut: new Float32Array(3) }), RangeError,
      /^attention: options\.weightsOut has length 3, expected 32 \(batch 1 × heads 8 × seqQ 2 × seqK 2\)$/);
  });

  test('a result too large for wasm32 memory throws a RangeError before allocating', () => {
    const seq = 2 ** 15;  // weights: 2^30 floats = 4 GiB, from 128 KiB inputs
    const x = new Float32Array(seq);
    const usage = lib.memoryUsage();
    throwsFrom(() => lib.attentionWeights(x, x, { heads: 1, seqQ: seq, headDim: 1 }), RangeError,
      /^attentionWeights: this call needs 4097 MiB of wasm memory, more than the 4064 MiB a wasm32 module can use; split the batch or the heads$/);
    assert.deepEqual(lib.memoryUsage(), usage, 'nothing was allocated');
  });

  test('arguments and results too large for one block of wasm memory throw a RangeError before allocating', () => {
    const seq = 25000;  // weights: 2.3 GiB in one block (all of a call's arguments and results are one)
    const x = new Float32Array(seq);
    const usage = lib.memoryUsage();
    throwsFrom(() => lib.attentionWeights(x, x, { heads: 1, seqQ: seq, headDim: 1 }), RangeError,
      /^attentionWeights: this call needs 2385 MiB in one block of wasm memory, more than the 2047 MiB one wasm32 allocation can hold; split the batch or the heads$/);
    assert.deepEqual(lib.memoryUsage(), usage, 'nothing was allocated');
  });

  test('an error leaves inputs untouched and the library working', () => {
    const before = inputs.query.slice();
    assert.throws(attention({ kvHeads: 3 }));
    assert.deepEqual(inputs.query, before);
    const out = lib.attention(inputs.query, inputs.key, inputs.value, opts);
    assert.ok(out.every(Number.isFinite));
  });
});

describe('attentionWeights() argument errors', () => {
  const wopts = { heads: 8, seqQ: 2, headDim: 64 };

  test('its own option set', () => {
    throwsFrom(() => lib.attentionWeights(inputs.query, inputs.key, { ...wopts, valueDim: 4 }), TypeError,
      /^attentionWeights: unknown option 'valueDim'/);
    throwsFrom(() => lib.attentionWeights(inputs.query, inputs.key, { ...wopts, weightsOut: new Float32Array(32) }), TypeError,
      /^attentionWeights: unknown option 'weightsOut'/);
    throwsFrom(() => lib.attentionWeights(inputs.query, inputs.key, { ...wopts, lseOut: new Float32Array(16) }), TypeError,
      /^attentionWeights: unknown option 'lseOut'/);
    throwsFrom(() => lib.attentionWeights(inputs.query, inputs.key, { ...wopts, out: new Float32Array(31) }), RangeError,
      /^attentionWeights: options\.out has length 31, expected 32 \(batch 1 × heads 8 × seqQ 2 × seqK 2\)$/);
    throwsFrom(() => lib.attentionWeights(inputs.query, 'key', wopts), TypeError, /^attentionWeights: key must be a Float32Array, got string "key"$/);
  });
});
