// ONNX models for the onnxruntime-web engines of the benchmark and the demo's benchmark panel,
// generated at run time with a minimal protobuf writer (field numbers from onnx/onnx.proto), so
// no model files are committed:
//   standardAttention: Transpose → MatMul → Mul(scale) [→ Add(causal mask)] → Softmax → MatMul
//   msMultiHeadAttention: the com.microsoft MultiHeadAttention contrib op
//   msGroupQueryAttention: the com.microsoft GroupQueryAttention contrib op, a decode step over a past
const FLOAT = 1;  // TensorProto.DataType.FLOAT
const INT32 = 6;  // TensorProto.DataType.INT32

// Appends protobuf fields to a list of byte chunks (large tensors are kept as one chunk).
class Writer {
  constructor() { this.chunks = []; this.length = 0; }
  push(bytes) { this.chunks.push(bytes); this.length += bytes.length; return this; }
  varint(n) {
    const out = [];
    let v = BigInt(n);
    if (v < 0n) v += 1n << 64n;
    do {
      let b = Number(v & 0x7fn);
      v >>= 7n;
      if (v) b |= 0x80;
      out.push(b);
    } while (v);
    return this.push(Uint8Array.from(out));
  }

  key(field, wire) { return this.varint((field << 3) | wire); }
  int(field, n) { return this.key(field, 0).varint(n); }
  bytesField(field, data) { return this.key(field, 2).varint(data.length).push(data); }
  string(field, s) { return this.bytesField(field, new TextEncoder().encode(s)); }
  message(field, build) { const w = new Writer(); build(w); return this.bytesField(field, w.toUint8Array()); }
  float(field, x) { return this.key(field, 5).push(new Uint8Array(new Float32Array([x]).buffer)); }
  toUint8Array() {
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const c of this.chunks) { out.set(c, at); at += c.length; }
    return out;
  }
}

function valueInfo(w, field, name, dims, elemType = FLOAT) {
  w.message(field, (v) => {
    v.string(1, name);
    v.message(2, (type) => type.message(1, (tensor) => {
      tensor.int(1, elemType);
      if (dims) tensor.message(2, (shape) => { for (const d of dims) shape.message(1, (dim) => dim.int(1, d)); });
    }));
  });
}

function node(w, { op, inputs, outputs, domain, attrs = [] }) {
  w.message(1, (n) => {
    for (const i of inputs) n.string(1, i);
    for (const o of outputs) n.string(2, o);
    n.string(3, `${op}_${outputs[0]}`);
    n.string(4, op);
    for (const a of attrs) {
      n.message(5, (attr) => {
        attr.string(1, a.name);
        if (a.ints) {
          attr.int(20, 7);
          for (const x of a.ints) attr.int(8, x);
        } else if (a.float !== undefined) {
          attr.int(20, 1);
          attr.float(2, a.float);
        } else {
          attr.int(20, 2);
          attr.int(3, a.int);
        }
      });
    }
    if (domain) n.string(7, domain);
  });
}

function initializer(w, name, dims, values) {
  w.message(5, (t) => {
    for (const d of dims) t.int(1, d);
    t.int(2, FLOAT);
    t.string(8, name);
    t.bytesField(9, new Uint8Array(Float32Array.from(values).buffer));
  });
}

function model(buildGraph, opsets) {
  const w = new Writer();
  w.int(1, 8);  // ir_version
  w.string(2, 'attention-wasm bench');
  w.message(7, buildGraph);
  for (const [domain, version] of opsets) w.message(8, (o) => { o.string(1, domain); o.int(2, version); });
  return w.toUint8Array();
}

// Q [B,H,Sq,D], K [B,H,Sk,D], V [B,H,Sk,D] → O [B,H,Sq,D].
export function standardAttention({ batch, heads, seqQ, seqK, headDim, causal }) {
  return model((g) => {
    g.string(2, 'attention');
    node(g, { op: 'Transpose', inputs: ['K'], outputs: ['Kt'], attrs: [{ name: 'perm', ints: [0, 1, 3, 2] }] });
    node(g, { op: 'MatMul', inputs: ['Q', 'Kt'], outputs: ['S'] });
    node(g, { op: 'Mul', inputs: ['S', 'scale'], outputs: ['S2'] });
    if (causal) node(g, { op: 'Add', inputs: ['S2', 'mask'], outputs: ['S3'] });
    node(g, { op: 'Softmax', inputs: [causal ? 'S3' : 'S2'], outputs: ['P'], attrs: [{ name: 'axis', int: -1 }] });
    node(g, { op: 'MatMul', inputs: ['P', 'V'], outputs: ['O'] });
    initializer(g, 'scale', [], [1 / Math.sqrt(headDim)]);
    if (causal) {
      const mask = new Float32Array(seqQ * seqK);
      for (let i = 0; i < seqQ; i++) for (let j = 0; j < seqK; j++) mask[i * seqK + j] = j <= i + seqK - seqQ ? 0 : -Infinity;
      initializer(g, 'mask', [seqQ, seqK], mask);
    }
    valueInfo(g, 11, 'Q', [batch, heads, seqQ, headDim]);
    valueInfo(g, 11, 'K', [batch, heads, seqK, headDim]);
    valueInfo(g, 11, 'V', [batch, heads, seqK, headDim]);
    valueInfo(g, 12, 'O', [batch, heads, seqQ, headDim]);
  }, [['', 17]]);
}

// query [B,Sq,H·D], key/value [B,Sk,H·D] → output [B,Sq,H·D].
export function msMultiHeadAttention({ batch, heads, seqQ, seqK, headDim, causal }) {
  const hidden = heads * headDim;
  return model((g) => {
    g.string(2, 'mha');
    const attrs = [{ name: 'num_heads', int: heads }];
    if (causal) attrs.push({ name: 'unidirectional', int: 1 });
    node(g, { op: 'MultiHeadAttention', domain: 'com.microsoft', inputs: ['query', 'key', 'value'], outputs: ['output'], attrs });
    valueInfo(g, 11, 'query', [batch, seqQ, hidden]);
    valueInfo(g, 11, 'key', [batch, seqK, hidden]);
    valueInfo(g, 11, 'value', [batch, seqK, hidden]);
    valueInfo(g, 12, 'output', [batch, seqQ, hidden]);
  }, [['', 17], ['com.microsoft', 1]]);
}

// One decode step the way onnxruntime's own decoders run it: query [B,1,H·D] and this step's
// key/value [B,1,Hkv·D] (BSH) with the past [B,Hkv,S−1,D] (BNSH), seqlens_k [B] = S − 1 and
// total_sequence_length = S (int32) → output [B,1,H·D]. present_key/present_value [B,Hkv,S,D]
// are outputs too, declared without a shape (onnxruntime infers the past's length for them);
// a caller can leave them unfetched.
export function msGroupQueryAttention({ batch, heads, kvHeads, seqK, headDim }) {
  return model((g) => {
    g.string(2, 'gqa');
    node(g, {
      op: 'GroupQueryAttention', domain: 'com.microsoft',
      inputs: ['query', 'key', 'value', 'past_key', 'past_value', 'seqlens_k', 'total_sequence_length'],
      outputs: ['output', 'present_key', 'present_value'],
      attrs: [{ name: 'num_heads', int: heads }, { name: 'kv_num_heads', int: kvHeads }],
    });
    valueInfo(g, 11, 'query', [batch, 1, heads * headDim]);
    valueInfo(g, 11, 'key', [batch, 1, kvHeads * headDim]);
    valueInfo(g, 11, 'value', [batch, 1, kvHeads * headDim]);
    valueInfo(g, 11, 'past_key', [batch, kvHeads, seqK - 1, headDim]);
    valueInfo(g, 11, 'past_value', [batch, kvHeads, seqK - 1, headDim]);
    valueInfo(g, 11, 'seqlens_k', [batch], INT32);
    valueInfo(g, 11, 'total_sequence_length', [], INT32);
    valueInfo(g, 12, 'output', [batch, 1, heads * headDim]);
    valueInfo(g, 12, 'present_key', null);
    valueInfo(g, 12, 'present_value', null);
  }, [['', 17], ['com.microsoft', 1]]);
}
