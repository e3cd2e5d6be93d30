// A MultiHeadAttention's training tape: what forward(..., { train: true }) keeps for backward()
// (the C++ MhaTapeCore, made on the first training forward, and the shapes of that forward), and
// whether the weights changed since, which makes its gradients wrong.
import { checkFloat32, given } from './shapes.mjs';
import { copyAllOut, projectionAddresses, weightSizes } from './mha-weights.mjs';

const FN = 'MultiHeadAttention.backward';

export class TrainingTape {
  #M;
  #arena;
  #tape = null;
  #trained = null;       // shapes of the training forward: { batch, seqQ, seqK, keyGiven, valueGiven }
  #staleBecause = null;  // the call that changed the weights after that forward, if any

  constructor(M, arena) {
    this.#M = M;
    this.#arena = arena;
  }

  // The training forward (C++ args as for forward); returns the core's error, if any. A failed
  // one leaves the tape (and what it was for) as it was.
  forward(core, args, { batch, seqQ, seqK, key, value }) {
    this.#tape ??= new this.#M.MhaTapeCore();
    const error = core.forwardTrain(args, this.#tape);
    if (!error) {
      this.#trained = { batch, seqQ, seqK, keyGiven: given(key), valueGiven: given(value) };
      this.#staleBecause = null;
    }
    return error;
  }

  // Called by everything that changes the weights (`by` names it).
  weightsChanged(by) {
    if (this.#trained) this.#staleBecause = by;
  }

  // backward(dOut) of the layer `config`.
  backward(core, config, dOut) {
    if (!this.#trained) throw new Error(`${FN}: call forward(..., { train: true }) first`);
    if (this.#staleBecause) {
      throw new Error(`${FN}: the weights changed (${this.#staleBecause}()) after the forward(..., { train: true }) ` +
        'this backward would be for, so its gradients would match neither the old nor the new weights; run the training forward ' +
        'again. To accumulate gradients over several batches, run forward and backward for each batch, then step once.');
    }
    const { batch, seqQ, seqK, keyGiven, valueGiven } = this.#trained;
    const { embedDim: e, kdim, vdim } = config;
    checkFloat32('dOut', dOut, batch * seqQ * e, `batch ${batch} × seqQ ${seqQ} × embedDim ${e}`, FN);
    const sizes = { dQuery: batch * seqQ * e };
    if (keyGiven) sizes.dKey = batch * seqK * kdim;
    if (valueGiven) sizes.dValue = batch * seqK * vdim;
    const gradSizes = weightSizes(config);
    const outputs = { ...sizes };
    for (const [name, n] of Object.entries(gradSizes)) outputs[`g_${name}`] = n;
    // The C++ entry checks its work buffer and the kernel's workspace against the call's budget.
    return this.#arena.call(FN, { dOut }, outputs, (call) => {
      const grads = { dOut: call.address('dOut'), dQuery: call.address('dQuery'), dKey: call.address('dKey'), dValue: call.address('dValue') };
      const error = core.backward(this.#tape, grads, projectionAddresses(call, 'g_'), call.budget);
      if (error) throw call.error(error);
      return { ...copyAllOut(call, sizes), weights: copyAllOut(call, gradSizes, 'g_') };
    });
  }

  dispose() {
    this.#tape?.delete();
    this.#tape = this.#trained = null;
  }
}
