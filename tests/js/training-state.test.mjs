// Training state: a weight change invalidates the training tape (backward
// then throws instead of returning gradients that match neither the old nor the new weights);
// gradients accumulate over several forward/backward pairs; getWeights() and the optimizer state
// round-trip exactly, so training stopped and resumed follows the uninterrupted run bit for bit.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { assertClose, loadAttention, randomTensor, rng } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention({ layers: true }); });

const CONFIG = { embedDim: 8, numHeads: 2, numKvHeads: 1 };

function randomWeights(config, seed) {
  const r = rng(seed);
  const e = config.embedDim;
  const kv = (config.numKvHeads ?? config.numHeads) * (e / config.numHeads);
  const w = { wq: randomTensor(e * e, r, 0.5), wk: randomTensor(kv * e, r, 0.5), wv: randomTensor(kv * e, r, 0.5), wo: randomTensor(e * e, r, 0.5) };
  if (config.bias !== false) Object.assign(w, { bq: randomTensor(e, r, 0.3), bk: randomTensor(kv, r, 0.3), bv: randomTensor(kv, r, 0.3), bo: randomTensor(e, r, 0.3) });
  return w;
}

function layer(config = CONFIG, seed = 1) {
  const mha = new lib.MultiHeadAttention(config);
  mha.setWeights(randomWeights(config, seed));
  return mha;
}

const x = randomTensor(2 * 5 * 8, rng(2));     // batch 2, seq 5, embedDim 8
const dOut = randomTensor(2 * 5 * 8, rng(3));
const bitEqual = (a, b) => a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

test('every weight change invalidates the tape; backward then throws and says why', () => {
  const grads = () => {
    const m = layer();
    m.forward(x, null, null, { batch: 2, train: true });
    const g = m.backward(dOut).weights;
    m.dispose();
    return g;
  };
  const g = grads();
  const changes = {
    setWeights: (m) => m.setWeights(randomWeights(CONFIG, 9)),
    sgdStep: (m) => m.sgdStep(g, { lr: 0.01 }),
    adamStep: (m) => m.adamStep(g),
    setOptimizerState: (m) => m.setOptimizerState(m.getOptimizerState()),
  };
  for (const [name, change] of Object.entries(changes)) {
    const mha = layer();
    mha.forward(x, null, null, { batch: 2, train: true });
    const first = mha.backward(dOut);
    assert.deepEqual(mha.backward(dOut), first, `${name}: backward twice on one tape gives the same gradients`);
    change(mha);
    assert.throws(() => mha.backward(dOut), new RegExp(`^Error: MultiHeadAttention\\.backward: the weights changed \\(${name}\\(\\)\\) after the ` +
      'forward\\(\\.\\.\\., \\{ train: true \\}\\) this backward would be for, so its gradients would match neither the old nor the new weights; ' +
      'run the training forward again\\. To accumulate gradients'), name);
    mha.forward(x, null, null, { batch: 2, train: true });  // a new training forward makes it valid again
    assert.ok(mha.backward(dOut).dQuery.every(Number.isFinite), `${name}: backward after a new training forward`);
    mha.dispose();
  }
});

test('a weight change that fails validation keeps the tape valid', () => {
  const mha = layer();
  mha.forward(x, null, null, { batch: 2, train: true });
  const want = mha.backward(dOut);
  assert.throws(() => mha.setWeights({ ...randomWeights(CONFIG, 4), wq: new Float32Array(3) }), RangeError);
  assert.throws(() => mha.sgdStep({ ...want.weights, wk: undefined }, { lr: 0.1 }), TypeError);
  assert.throws(() => mha.adamStep(want.weights, { beta2: 2 }), RangeError);
  assert.deepEqual(mha.backward(dOut), want);
  assert.equal(mha.getOptimizerState().step, 0, 'a rejected adamStep is not counted');
  mha.dispose();
});

// PyTorch's Adam takes 1 − β and 1 − β^step in double (Python floats): a β2 within 2^−25 of 1,
// which float32 rounds to 1, must still give 1 − β2 > 0 and a finite step, not 0/0.
test('Adam with beta2 = 0.99999999 (1 in float32) steps as in double: finite weights matching a reference', () => {
  const mha = layer();
  mha.forward(x, null, null, { batch: 2, train: true });
  const g = mha.backward(dOut).weights;
  const before = mha.getWeights();
  const [lr, beta1, beta2, eps, steps] = [0.01, 0.9, 0.99999999, 1e-8, 2];
  for (let s = 0; s < steps; s++) mha.adamStep(g, { lr, beta1, beta2, eps });
  const after = mha.getWeights();
  for (const [name, w] of Object.entries(before)) {
    const want = Float64Array.from(w);
    const m = new Float64Array(w.length), v = new Float64Array(w.length);
    for (let t = 1; t <= steps; t++) {
      for (let j = 0; j < w.length; j++) {
        m[j] = beta1 * m[j] + (1 - beta1) * g[name][j];
        v[j] = beta2 * v[j] + (1 - beta2) * g[name][j] ** 2;
        want[j] -= (lr * (m[j] / (1 - beta1 ** t))) / (Math.sqrt(v[j] / (1 - beta2 ** t)) + eps);
      }
    }
    assertClose(after[name], want, `${name} after ${steps} steps`, 1e-5);
  }
  mha.dispose();
});

// PyTorch's Adam (foreach or single-tensor) moves the first moment with exp_avg.lerp_(grad, 1 − β1):
// ATen's lerp of float tensors, from the nearer end, w = float(1 − β1), every operation rounded to
// float. β·m + (1 − β)·g is the same in exact arithmetic but not in float: from the second step
// on, many moments differ in their last bits.
test('Adam\'s first moment is PyTorch\'s exp_avg.lerp_(grad, 1 - beta1), bit for bit, on both of lerp\'s branches', () => {
  const f = Math.fround;
  for (const beta1 of [0.9, 0.3]) {  // w = 0.1 (from m) and 0.7 (from g)
    const mha = layer();
    const w = f(1 - beta1);
    const names = Object.keys(mha.getWeights());
    const m = Object.fromEntries(names.map((name) => [name, new Float32Array(mha.getWeights()[name].length)]));
    const exact = Object.fromEntries(names.map((name) => [name, new Float64Array(m[name].length)]));
    const random = rng(40);
    for (let step = 1; step <= 4; step++) {
      const grads = Object.fromEntries(names.map((name) => [name, randomTensor(m[name].length, random)]));
      mha.adamStep(grads, { lr: 0.01, beta1 });
      for (const name of names) {
        m[name].forEach((mj, j) => {
          const g = grads[name][j];
          m[name][j] = Math.abs(w) < 0.5 ? f(mj + f(w * f(g - mj))) : f(g - f(f(g - mj) * f(1 - w)));
          exact[name][j] = beta1 * exact[name][j] + (1 - beta1) * g;
        });
      }
      const got = mha.getOptimizerState().m;
      for (const name of names) {
        assert.deepEqual(got[name], m[name], `beta1 ${beta1}, step ${step}: ${name} as PyTorch's lerp_ rounds it`);
        assertClose(got[name], exact[name], `beta1 ${beta1}, step ${step}: ${name} against the double reference`, 1e-6);
      }
    }
    mha.dispose();
  }
});

test('gradients accumulate over several forward/backward pairs before one step', () => {
  // Three batches one at a time, gradients summed, equal the gradients of one forward over the
  // three as batch entries (the loss is a sum over batch entries).
  const mha = layer();
  const parts = [0, 1, 2].map((i) => ({ x: randomTensor(5 * 8, rng(10 + i)), dy: randomTensor(5 * 8, rng(20 + i)) }));
  const sum = {};
  for (const { x: xi, dy } of parts) {
    mha.forward(xi, null, null, { train: true });
    for (const [name, g] of Object.entries(mha.backward(dy).weights)) {
      sum[name] ??= new Float32Array(g.length);
      g.forEach((v, i) => { sum[name][i] += v; });
    }
  }
  const all = new Float32Array(3 * 5 * 8);
  const allDy = new Float32Array(3 * 5 * 8);
  parts.forEach(({ x: xi, dy }, i) => { all.set(xi, i * 40); allDy.set(dy, i * 40); });
  mha.forward(all, null, null, { batch: 3, train: true });
  const batched = mha.backward(allDy).weights;
  for (const name of Object.keys(batched)) {
    batched[name].forEach((v, i) => assert.ok(Math.abs(v - sum[name][i]) <= 1e-5 + 1e-5 * Math.abs(v), `${name}[${i}]: ${sum[name][i]} vs ${v}`));
  }
  mha.sgdStep(sum, { lr: 0.05 });
  assert.throws(() => mha.backward(allDy), /weights changed \(sgdStep\(\)\)/);
  mha.dispose();
});

test('getWeights returns the setWeights layout as fresh arrays; a new layer set from it computes the same', () => {
  for (const config of [CONFIG, { embedDim: 6, numHeads: 3, kdim: 4, vdim: 5, bias: false }]) {
    const weights = randomWeights({ ...config, kdim: undefined, vdim: undefined }, 5);
    const e = config.embedDim, kv = e;
    if (config.kdim) {
      const r = rng(6);
      weights.wk = randomTensor(kv * config.kdim, r);
      weights.wv = randomTensor(kv * config.vdim, r);
    }
    const mha = new lib.MultiHeadAttention(config);
    assert.throws(() => mha.getWeights(), /^Error: MultiHeadAttention\.getWeights: call setWeights\(\) first$/);
    mha.setWeights(weights);
    const got = mha.getWeights();
    assert.deepEqual(Object.keys(got).sort(), Object.keys(weights).sort());
    for (const name of Object.keys(weights)) {
      assert.ok(bitEqual(got[name], weights[name]), `${name} round-trips bit for bit`);
      assert.notEqual(got[name], weights[name]);
    }
    got.wq.fill(0);  // caller-owned: changing it changes nothing in the layer
    assert.ok(bitEqual(mha.getWeights().wq, weights.wq));

    // After training steps, a layer made from getWeights() gives identical outputs.
    const r = rng(7);
    const q = randomTensor(2 * 3 * e, r), k = config.kdim ? randomTensor(2 * 4 * config.kdim, r) : null;
    const v = config.kdim ? randomTensor(2 * 4 * config.vdim, r) : null;
    for (let step = 0; step < 3; step++) {
      mha.forward(q, k, v, { batch: 2, train: true });
      mha.adamStep(mha.backward(randomTensor(2 * 3 * e, r)).weights, { lr: 0.05 });
    }
    const copy = new lib.MultiHeadAttention(config);
    copy.setWeights(mha.getWeights());
    assert.ok(bitEqual(copy.forward(q, k, v, { batch: 2 }), mha.forward(q, k, v, { batch: 2 })), 'identical outputs');
    copy.dispose();
    mha.dispose();
  }
});

// Adam on a small regression task; returns the loss of every step.
function train(mha, steps, seed) {
  const r = rng(seed);
  const losses = [];
  for (let s = 0; s < steps; s++) {
    const xs = randomTensor(2 * 4 * 8, r);
    const y = mha.forward(xs, null, null, { batch: 2, train: true });
    let loss = 0;
    const dy = y.map((v, i) => { const d = v - xs[i]; loss += d * d; return (2 * d) / y.length; });
    losses.push(loss);
    mha.adamStep(mha.backward(dy).weights, { lr: 0.02, beta1: 0.8 });
  }
  return losses;
}

test('training stopped and resumed from getWeights + getOptimizerState follows the uninterrupted run bit for bit', () => {
  const whole = layer(CONFIG, 11);
  const wholeLosses = [...train(whole, 4, 100), ...train(whole, 6, 200)];

  const first = layer(CONFIG, 11);
  const firstLosses = train(first, 4, 100);
  const saved = { weights: first.getWeights(), state: first.getOptimizerState() };
  first.dispose();
  assert.equal(saved.state.step, 4);

  const resumed = new lib.MultiHeadAttention(CONFIG);
  resumed.setWeights(saved.weights);
  resumed.setOptimizerState(saved.state);
  const resumedLosses = [...firstLosses, ...train(resumed, 6, 200)];
  assert.deepEqual(resumedLosses, wholeLosses);
  const a = whole.getWeights(), b = resumed.getWeights();
  for (const name of Object.keys(a)) assert.ok(bitEqual(a[name], b[name]), `${name} bit-identical`);
  const sa = whole.getOptimizerState(), sb = resumed.getOptimizerState();
  assert.equal(sb.step, 10);
  for (const name of Object.keys(a)) assert.ok(bitEqual(sa.m[name], sb.m[name]) && bitEqual(sa.v[name], sb.v[name]), `moments of ${name}`);

  // Without the optimizer state the trajectory differs (so the state is what makes it match).
  const weightsOnly = new lib.MultiHeadAttention(CONFIG);
  weightsOnly.setWeights(saved.weights);
  assert.notDeepEqual([...firstLosses, ...train(weightsOnly, 6, 200)], wholeLosses);
  for (const m of [whole, resumed, weightsOnly]) m.dispose();
});

test('getOptimizerState before any step, and setOptimizerState checks what it is given', () => {
  const mha = layer();
  const fresh = mha.getOptimizerState();
  assert.equal(fresh.step, 0);
  assert.deepEqual(Object.keys(fresh.m), ['wq', 'wk', 'wv', 'wo', 'bq', 'bk', 'bv', 'bo']);
  assert.ok(Object.values(fresh.v).every((a) => a instanceof Float32Array && a.every((x) => x === 0)));
  const good = { step: 3, m: fresh.m, v: fresh.v };
  const err = (state) => () => mha.setOptimizerState(state);
  assert.throws(err(null), /^TypeError: MultiHeadAttention\.setOptimizerState: state must be an object \{ step, m, v \} from getOptimizerState\(\), got null$/);
  assert.throws(err({ ...good, lr: 1 }), /^TypeError: MultiHeadAttention\.setOptimizerState: unknown state key 'lr' \(known keys: step, m, v\)$/);
  assert.throws(err({ ...good, step: -1 }), /^RangeError: MultiHeadAttention\.setOptimizerState: state\.step must be an integer from 0 to 2147483647, got number -1$/);
  assert.throws(err({ ...good, step: 1.5 }), /^RangeError: MultiHeadAttention\.setOptimizerState: state\.step must be an integer/);
  assert.throws(err({ ...good, m: undefined }), /^TypeError: MultiHeadAttention\.setOptimizerState: state\.m must be an object in setWeights layout, from getOptimizerState\(\), got undefined$/);
  assert.throws(err({ ...good, m: { ...fresh.m, bo: undefined } }), /^TypeError: MultiHeadAttention\.setOptimizerState: state\.m\.bo is required \(a Float32Array of 8\)$/);
  assert.throws(err({ ...good, v: { ...fresh.v, wk: new Float32Array(5) } }), /^RangeError: MultiHeadAttention\.setOptimizerState: state\.v\.wk has length 5, expected 32 \(32 values\)$/);
  assert.throws(err({ ...good, v: { ...fresh.v, wq: new Float64Array(64) } }), /^TypeError: MultiHeadAttention\.setOptimizerState: state\.v\.wq must be a Float32Array, got Float64Array\(64\)$/);
  assert.throws(err({ ...good, v: { ...fresh.v, bq: new Float32Array(8).fill(-1) } }),
    /^RangeError: MultiHeadAttention\.setOptimizerState: state\.v\.bq\[0\] must be finite and >= 0 \(a second moment\), got -1$/);
  assert.throws(err({ ...good, m: { ...fresh.m, wo: new Float32Array(64).fill(NaN) } }), /^RangeError: MultiHeadAttention\.setOptimizerState: state\.m\.wo\[0\] must be finite, got NaN$/);
  assert.equal(mha.getOptimizerState().step, 0, 'nothing was set');
  mha.setOptimizerState(good);
  assert.equal(mha.getOptimizerState().step, 3);
  const unset = new lib.MultiHeadAttention(CONFIG);
  assert.throws(() => unset.setOptimizerState(good), /^Error: MultiHeadAttention\.setOptimizerState: call setWeights\(\) first$/);
  unset.dispose();
  mha.dispose();
  assert.throws(() => mha.getOptimizerState(), /^Error: MultiHeadAttention\.getOptimizerState: this layer was disposed$/);
});
