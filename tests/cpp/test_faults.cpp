// Allocation-failure injection, the way SQLite tests itself: every public entry point of the C++
// core runs with its 1st, 2nd, 3rd … allocation failing (ATTN_FAULT_INJECTION in src/runtime/buffer.h)
// until it succeeds. Each failure must
//   - come back as an "out of memory" error message (no crash), counted in g_failed_allocations
//     (what the JS boundary reads as out of memory; a call that succeeds moves no count),
//   - leave every object exactly as it was (state() is the same before and after),
//   - keep nothing allocated (and LSan checks the whole run for leaks at exit),
// and the next call must work and give exactly what a call that never failed gives. Under ASan
// it also checks that the core allocates nothing except through src/runtime/buffer.h (so no allocation
// escapes the injection, and none can abort on failure).
//
// Adding an entry point (the standalone KV cache, say) is one more row in
// entry_points(): a name, what the Fixture needs before the call (Needs flags; add a member to
// Fixture if the new object is not there yet) and the call itself, returning the entry point's
// error or nullptr. Write its outputs into Fixture buffers that outputs() reads, and make state()
// read any object it may change (its observable state only), then the row is checked like all.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cache/cache_rule.h"
#include "kernel/attention.h"
#include "kernel/half.h"
#include "layer/linear.h"
#include "layer/mha.h"
#include "layer/rotary.h"
#include "pool_for_every_call.h"
#include "runtime/buffer.h"
#include "runtime/parallel.h"

#if ATTN_FAULT_INJECTION

namespace {

// Every malloc of the process, counted by ASan's allocator hooks (when built with ASan).
#if defined(__SANITIZE_ADDRESS__)
#define ATTN_COUNT_MALLOCS 1
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*)(const volatile void*, std::size_t),
                                                         void (*)(const volatile void*));
std::atomic<long> g_mallocs{0};
void on_malloc(const volatile void*, std::size_t) { ++g_mallocs; }
void on_free(const volatile void*) {}
const bool g_hooks_installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) > 0;
#endif

constexpr int E = 8, H = 2, KVH = 1, HD = E / H, KV = KVH * HD;  // the layer
constexpr int B = 2, SQ = 5, SK = 7, MAX_SEQ = 12, CACHED = 3;  // the calls
constexpr int KDIM = 6, VDIM = 5;                                 // cross-attention inputs

std::vector<float> random_vec(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& e : v) e = uni(rng);
  return v;
}

enum Needs : unsigned {
  kNothing = 0,
  kWeights = 1,  // the layer's weights are set
  kTape = 2,     // a training forward filled the tape
  kCache = 4,    // the cache holds CACHED positions
  kAdam = 8,     // one Adam step was taken (the moments exist)
  kCross = 16,   // the layer's cross-attention cache holds its keys and values of xk, xv
};

// Everything an entry point may read or change. Built without injected failures.
struct Fixture {
  attn::MultiHeadAttention layer;  // configured with kdim KDIM, vdim VDIM (a cross layer)
  attn::MultiHeadAttention self;   // a self-attention layer (kdim = vdim = E), for the cache
  attn::MhaTape tape;
  attn::KvCache cache;
  attn::KvCache cross;  // the layer's cross-attention cache (int8), of SK positions
  // Inputs: weights for the layer and a second set, activations, masks, attention tensors.
  std::vector<float> w[4], b[4], w2[4], b2[4], sw[4], sb[4];
  std::vector<float> x = random_vec(B * SQ * E, 1), x2 = random_vec(B * SQ * E, 2);
  std::vector<float> xk = random_vec(B * SK * KDIM, 3), xv = random_vec(B * SK * VDIM, 4);
  std::vector<float> dy = random_vec(B * SQ * E, 5), step_x = random_vec(B * 2 * E, 6);
  std::vector<std::uint8_t> mask, padding;
  std::vector<float> q = random_vec(B * H * SQ * HD, 7), k = random_vec(B * KVH * SK * HD, 8);
  std::vector<float> v = random_vec(B * KVH * SK * HD, 9), d_out = random_vec(B * H * SQ * HD, 10);
  std::vector<float> saved_lse = std::vector<float>(B * H * SQ), saved_out = std::vector<float>(B * H * SQ * HD);
  std::vector<std::uint16_t> k16, v16;  // k and v as float16
  std::vector<float> slopes = random_vec(H, 12), sinks = random_vec(H, 13), d_sinks = std::vector<float>(H);
  // Outputs.
  std::vector<float> out = std::vector<float>(B * H * SQ * SK * 2);
  std::vector<float> aux = std::vector<float>(B * H * SQ * SK);
  std::vector<float> lse = std::vector<float>(B * H * SQ);
  std::vector<float> dq = std::vector<float>(B * H * SQ * HD), dk = std::vector<float>(B * SK * KDIM * 2);
  std::vector<float> dv = std::vector<float>(B * SK * VDIM * 2), gw[4], gb[4];

  explicit Fixture(unsigned needs) {
    const int outs[4] = {E, KV, KV, E}, ins[4] = {E, KDIM, VDIM, E}, self_ins[4] = {E, E, E, E};
    for (int i = 0; i < 4; ++i) {
      w[i] = random_vec(std::size_t(outs[i]) * ins[i], 20 + i);
      b[i] = random_vec(outs[i], 30 + i);
      w2[i] = random_vec(w[i].size(), 40 + i);
      b2[i] = random_vec(outs[i], 50 + i);
      sw[i] = random_vec(std::size_t(outs[i]) * self_ins[i], 60 + i);
      sb[i] = random_vec(outs[i], 70 + i);
      gw[i].resize(w[i].size());
      gb[i].resize(b[i].size());
    }
    for (float e : k) k16.push_back(attn::half::from_float(e));
    for (float e : v) v16.push_back(attn::half::from_float(e));
    for (int i = 0; i < SQ * SK; ++i) mask.push_back(i % 4 != 1);
    for (int i = 0; i < B * SK; ++i) padding.push_back(i % 5 == 2);
    REQUIRE(layer.configure({E, H, KVH, KDIM, VDIM, true}) == nullptr);
    REQUIRE(self.configure({E, H, KVH, E, E, true}) == nullptr);
    for (int i = 0; i < 4; ++i)
      REQUIRE(self.set_weight(static_cast<attn::Projection>(i), sw[i].data(), sb[i].data()) == nullptr);
    if (needs & (kWeights | kTape | kAdam | kCross)) REQUIRE(layer.set_weights(arrays(w, b)) == nullptr);
    REQUIRE(cross.allocate(layer.cache_config(B, SK, attn::KvType::i8)) == nullptr);
    if (needs & kCross) REQUIRE(layer.fill_cross_cache(cross, xk.data(), xv.data(), B, SK) == nullptr);
    if (needs & kAdam) {  // one real training step
      REQUIRE(layer.forward(forward(x, &tape)) == nullptr);
      REQUIRE(layer.backward(tape, dy.data(), grads()) == nullptr);
      REQUIRE(layer.adam_step(grads(), 0.01f, 0.9f, 0.999f, 1e-8f, 1) == nullptr);
      tape = attn::MhaTape();
    }
    if (needs & kTape) REQUIRE(layer.forward(forward(x, &tape)) == nullptr);
    if (needs & kCache) {
      REQUIRE(cache.allocate(self.cache_config(B, MAX_SEQ)) == nullptr);
      std::vector<float> y(B * CACHED * E), xs = random_vec(B * CACHED * E, 11);
      attn::MhaForward f;
      f.query = xs.data();
      f.out = y.data();
      f.batch = B;
      f.seq_q = CACHED;
      f.cache = &cache;
      REQUIRE(self.forward(f) == nullptr);
    }
    // The attention forward's lse and output, for the backward from saved statistics.
    attn::AttentionParams p = attention_params(SQ);
    p.out = saved_out.data();
    p.lse = saved_lse.data();
    REQUIRE(attn::attention(p) == nullptr);
  }

  static attn::ProjectionArrays arrays(const std::vector<float> (&w)[4], const std::vector<float> (&b)[4]) {
    attn::ProjectionArrays a;
    for (int i = 0; i < 4; ++i) {
      a.w[i] = w[i].data();
      a.b[i] = b[i].data();
    }
    return a;
  }

  // A cross-attention training (or plain) forward of the layer with a mask and key padding.
  attn::MhaForward forward(const std::vector<float>& query, attn::MhaTape* t) {
    attn::MhaForward f;
    f.query = query.data();
    f.key = xk.data();
    f.value = xv.data();
    f.out = out.data();
    f.batch = B;
    f.seq_q = SQ;
    f.seq_k = SK;
    f.mask = mask.data();
    f.mask_type = attn::MaskType::boolean;
    f.key_padding = padding.data();
    f.tape = t;
    return f;
  }

  attn::MhaGrads grads() {
    attn::MhaGrads g;
    g.d_query = dq.data();
    g.d_key = dk.data();
    g.d_value = dv.data();
    for (int i = 0; i < 4; ++i) {
      g.d_w[i] = gw[i].data();
      g.d_b[i] = gb[i].data();
    }
    return g;
  }

  // Kernel params on q, k, v ([B, H or KVH, seq, HD]) with `seq_q` query rows (1: the direct
  // path, SQ: the blocked one).
  attn::AttentionParams attention_params(int seq_q) {
    attn::AttentionParams p;
    p.query = q.data();
    p.key = k.data();
    p.value = v.data();
    p.out = out.data();
    p.batch = B;
    p.heads = H;
    p.kv_heads = KVH;
    p.seq_q = seq_q;
    p.seq_k = SK;
    p.head_dim = p.value_dim = HD;
    p.q = p.o = attn::dense_bhsd(H, seq_q, HD);
    p.k = p.v = attn::dense_bhsd(KVH, SK, HD);
    p.w = attn::dense_bhsd(H, seq_q, SK);
    p.l = attn::dense_bhsd(H, seq_q, 1);
    p.scale = 0.5f;
    p.causal = true;
    return p;
  }
};

std::string text(const char* error) { return error ? error : "(no error)"; }

void append(std::vector<float>& to, const std::vector<float>& from) { to.insert(to.end(), from.begin(), from.end()); }

// Everything observable about the fixture's objects (not their outputs).
std::vector<float> state(Fixture& f) {
  std::vector<float> s;
  for (attn::MultiHeadAttention* m : {&f.layer, &f.self}) {
    s.push_back(m->ready());
    for (int i = 0; i < 4; ++i) {
      std::vector<float> w(f.w[i].size() + f.sw[i].size()), b(f.b[i].size());
      s.push_back(m->get_weight(static_cast<attn::Projection>(i), w.data(), b.data()) == nullptr);
      append(s, w);
      append(s, b);
    }
    s.push_back(m->has_adam_state());
    if (m->has_adam_state()) {
      for (int i = 0; i < 4; ++i) {
        std::vector<float> mw(f.w[i].size()), mb(f.b[i].size()), vw(mw.size()), vb(mb.size());
        REQUIRE(m->get_adam_state(static_cast<attn::Projection>(i), mw.data(), mb.data(), vw.data(), vb.data()) ==
                nullptr);
        for (const auto* a : {&mw, &mb, &vw, &vb}) append(s, *a);
      }
    }
  }
  // The tape, through what backward() makes of it.
  s.push_back(f.tape.filled());
  if (f.tape.filled() && f.layer.ready()) {
    Fixture& g = f;
    std::vector<float> dq(g.dq.size()), dk(g.dk.size()), dv(g.dv.size()), gw[4], gb[4];
    attn::MhaGrads grads;
    grads.d_query = dq.data();
    grads.d_key = dk.data();
    grads.d_value = dv.data();
    for (int i = 0; i < 4; ++i) {
      gw[i].resize(f.gw[i].size());
      gb[i].resize(f.gb[i].size());
      grads.d_w[i] = gw[i].data();
      grads.d_b[i] = gb[i].data();
    }
    const bool ok = f.layer.backward(f.tape, f.dy.data(), grads) == nullptr;
    s.push_back(ok);
    if (ok) {
      for (const auto* a : {&dq, &dk, &dv}) append(s, *a);
      for (int i = 0; i < 4; ++i) {
        append(s, gw[i]);
        append(s, gb[i]);
      }
    }
  }
  // The cache: its sizes, and what it holds, through a decode step over it (every position held
  // shapes its output).
  s.push_back(static_cast<float>(f.cache.length()));
  s.push_back(static_cast<float>(f.cache.config().batch));
  s.push_back(static_cast<float>(f.cache.config().max_seq));
  s.push_back(static_cast<float>(f.cache.held()));
  s.push_back(static_cast<float>(f.cross.length()));
  if (f.cache.allocated() && f.cache.length() > 0) {
    const int batch = f.cache.config().batch;
    const std::vector<float> q = random_vec(std::size_t(batch) * H * HD, 14);
    std::vector<float> o(q.size());
    attn::AttentionParams p;
    attn::CacheCall call;
    call.heads = H;
    REQUIRE(attn::resolve(call, f.cache, p).ok());
    p.heads = H;
    p.query = q.data();
    p.out = o.data();
    p.q = p.o = attn::dense_bhsd(H, 1, HD);
    p.scale = 0.5f;
    REQUIRE(attn::attention(p) == nullptr);
    append(s, o);
  }
  return s;
}

// What the entry points write.
std::vector<float> outputs(const Fixture& f) {
  std::vector<float> o;
  for (const auto* a : {&f.out, &f.aux, &f.lse, &f.dq, &f.dk, &f.dv, &f.d_sinks}) append(o, *a);
  for (int i = 0; i < 4; ++i) {
    append(o, f.gw[i]);
    append(o, f.gb[i]);
  }
  return o;
}

struct EntryPoint {
  const char* name;
  unsigned needs;
  std::function<const char*(Fixture&)> call;  // must not allocate except inside the core
  bool allocates = true;                      // false: nothing to inject (checked)
};

std::vector<EntryPoint> entry_points() {
  return {
      {"attention, blocked path, with weights and lse", kNothing,
       [](Fixture& f) {
         attn::AttentionParams p = f.attention_params(SQ);
         p.weights = f.aux.data();
         p.lse = f.lse.data();
         return attn::attention(p);
       }},
      {"attention, few-rows path", kNothing, [](Fixture& f) { return attn::attention(f.attention_params(1)); }},
      {"attention with float16 K/V in a ring, window, softcap, ALiBi and sinks", kNothing,
       [](Fixture& f) {
         attn::AttentionParams p = f.attention_params(SQ);
         p.kv_type = attn::KvType::f16;
         p.key = f.k16.data();
         p.value = f.v16.data();
         p.seq_k = SK + 2;  // the first two positions have left the ring of SK slots
         p.kv_ring = SK;
         p.w = attn::dense_bhsd(H, SQ, SK + 2);
         p.weights = nullptr;
         p.window_left = 4;
         p.softcap = 5.0f;
         p.alibi_slopes = f.slopes.data();
         p.sinks = f.sinks.data();
         p.lse = f.lse.data();
         return attn::attention(p);
       }},
      {"attention weights (no value)", kNothing,
       [](Fixture& f) {
         attn::AttentionParams p = f.attention_params(SQ);
         p.value = nullptr;
         p.out = nullptr;
         p.weights = f.aux.data();
         return attn::attention(p);
       }},
      {"attention_backward, recomputing the statistics", kNothing,
       [](Fixture& f) {
         attn::AttentionGrads g;
         g.d_out = f.d_out.data();
         g.d_query = f.dq.data();
         g.d_key = f.dk.data();
         g.d_value = f.dv.data();
         const attn::AttentionParams p = f.attention_params(SQ);
         g.d_o = g.d_q = p.q;
         g.d_k = g.d_v = p.k;
         return attn::attention_backward(p, g);
       }},
      {"attention_backward from the saved lse and output", kNothing,
       [](Fixture& f) {
         attn::AttentionGrads g;
         g.d_out = f.d_out.data();
         g.d_query = f.dq.data();
         g.d_key = f.dk.data();
         g.d_value = f.dv.data();
         g.lse = f.saved_lse.data();
         g.out = f.saved_out.data();
         const attn::AttentionParams p = f.attention_params(SQ);
         g.d_o = g.d_q = p.q;
         g.d_k = g.d_v = p.k;
         return attn::attention_backward(p, g);
       }},
      {"attention_backward with sinks, window and ALiBi", kNothing,
       [](Fixture& f) {
         attn::AttentionParams p = f.attention_params(SQ);
         p.window_left = 3;
         p.alibi_slopes = f.slopes.data();
         p.sinks = f.sinks.data();
         attn::AttentionGrads g;
         g.d_out = f.d_out.data();
         g.d_query = f.dq.data();
         g.d_key = f.dk.data();
         g.d_value = f.dv.data();
         g.d_sinks = f.d_sinks.data();
         g.d_o = g.d_q = p.q;
         g.d_k = g.d_v = p.k;
         return attn::attention_backward(p, g);
       }},
      {"linear (one-off)", kNothing,
       [](Fixture& f) { return attn::linear(f.x.data(), f.w2[3].data(), f.b2[3].data(), f.out.data(), B * SQ, E, E); }},
      {"layer set_weight on a layer without weights", kNothing,
       [](Fixture& f) { return f.layer.set_weight(attn::Projection::k, f.w2[1].data(), f.b2[1].data()); }},
      {"layer set_weight replacing weights", kWeights | kTape,
       [](Fixture& f) { return f.layer.set_weight(attn::Projection::v, f.w2[2].data(), f.b2[2].data()); }},
      {"layer set_weights (all four) replacing weights", kWeights | kTape,
       [](Fixture& f) { return f.layer.set_weights(Fixture::arrays(f.w2, f.b2)); }},
      {"layer forward", kWeights,
       [](Fixture& f) {
         attn::MhaForward fw = f.forward(f.x2, nullptr);
         fw.mask = nullptr;
         fw.mask_type = attn::MaskType::none;
         fw.key_padding = nullptr;
         return f.layer.forward(fw);
       }},
      {"layer forward with weights out, mask and key padding", kWeights,
       [](Fixture& f) {
         attn::MhaForward fw = f.forward(f.x2, nullptr);
         fw.weights = f.aux.data();
         return f.layer.forward(fw);
       }},
      {"layer forward, training, refilling a filled tape", kTape,
       [](Fixture& f) { return f.layer.forward(f.forward(f.x2, &f.tape)); }},
      {"layer forward, cached: appends to a cache holding positions", kCache,
       [](Fixture& f) {
         attn::MhaForward fw;
         fw.query = f.step_x.data();
         fw.out = f.out.data();
         fw.batch = B;
         fw.seq_q = 2;
         fw.cache = &f.cache;
         return f.self.forward(fw);
       }},
      {"layer fill_cross_cache (int8)", kWeights,
       [](Fixture& f) { return f.layer.fill_cross_cache(f.cross, f.xk.data(), f.xv.data(), B, SK); }},
      {"layer forward over a cross-attention cache, the heads' mean weights, mask and key padding", kCross,
       [](Fixture& f) {
         attn::MhaForward fw = f.forward(f.x2, nullptr);
         fw.key = fw.value = nullptr;
         fw.cross = &f.cross;
         fw.weights = f.aux.data();
         fw.average_weights = true;
         return f.layer.forward(fw);
       }},
      {"layer backward", kTape, [](Fixture& f) { return f.layer.backward(f.tape, f.dy.data(), f.grads()); }},
      {"layer sgd_step", kTape,
       [](Fixture& f) {
         f.layer.sgd_step(f.grads(), 0.1f);
         return static_cast<const char*>(nullptr);
       },
       false},
      {"layer adam_step, the first (allocates the moments)", kTape,
       [](Fixture& f) { return f.layer.adam_step(f.grads(), 0.01f, 0.9f, 0.999f, 1e-8f, 1); }},
      {"layer adam_step, a later one", kTape | kAdam,
       [](Fixture& f) { return f.layer.adam_step(f.grads(), 0.01f, 0.9f, 0.999f, 1e-8f, 2); }},
      {"layer set_adam_state", kTape | kAdam,
       [](Fixture& f) { return f.layer.set_adam_state(Fixture::arrays(f.w2, f.b2), Fixture::arrays(f.w, f.b)); }},
      {"rotary, from base, in place", kNothing,
       [](Fixture& f) {
         std::copy(f.q.begin(), f.q.end(), f.out.begin());
         attn::RotaryParams p;
         p.in = p.out = f.out.data();
         p.x = p.o = attn::dense_bhsd(H, SQ, HD);
         p.batch = B;
         p.heads = H;
         p.seq = SQ;
         p.head_dim = p.rotary_dim = HD;
         p.position_offset = 3;
         return attn::rotary(p);
       }},
      {"cache allocate, new", kNothing, [](Fixture& f) { return f.cache.allocate(f.self.cache_config(B, MAX_SEQ)); }},
      {"cache reorder, an entry repeated", kCache,
       [](Fixture& f) {
         const int indices[B] = {1, 1};
         return f.cache.reorder(indices);
       }},
      {"cache allocate, replacing a cache holding positions", kCache,
       [](Fixture& f) { return f.cache.allocate(f.self.cache_config(1, MAX_SEQ + 3, attn::KvType::i8)); }},
  };
}

// Returns how many allocations were made to fail.
int check(const EntryPoint& e, int threads) {
  const PoolForEveryCall every_call;  // failures inside the workers too
  attn::set_num_threads(threads);
  INFO(e.name << ", " << threads << " thread(s)");
  Fixture pristine(e.needs);
  REQUIRE(e.call(pristine) == nullptr);
  std::vector<float> want = outputs(pristine);
  append(want, state(pristine));
  auto everything = [](Fixture& f) {
    std::vector<float> all = outputs(f);
    append(all, state(f));
    return all;
  };
  // Memory compare: NaN-safe and bit-exact.
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };

  int failures = 0;
  for (long n = 1;; ++n) {
    INFO("allocation " << n << " fails");
    Fixture f(e.needs);
    const std::vector<float> before = state(f);
    const long live = attn::fault::live, made = attn::fault::made;
    const std::uint64_t failed = attn::g_failed_allocations;
#if ATTN_COUNT_MALLOCS
    const long mallocs = g_mallocs;
#endif
    attn::fault::fail_after = n;
    const char* err = e.call(f);
    const bool fired = attn::fault::fail_after.exchange(0) <= 0;
#if ATTN_COUNT_MALLOCS
    // Every malloc in the call was one of the core's, through buffer.h.
    CHECK(g_mallocs - mallocs == attn::fault::made - made);
#endif
    if (!fired) {  // the call made fewer than n allocations: it ran to the end
      REQUIRE(err == nullptr);
      CHECK(attn::g_failed_allocations == failed);
      CHECK(same(everything(f), want));
      break;
    }
    ++failures;
    REQUIRE(err != nullptr);
    CHECK_THAT(text(err), Catch::Matchers::Contains("out of memory"));
    CHECK(attn::g_failed_allocations > failed);
    CHECK(same(state(f), before));
    CHECK(attn::fault::live == live);
    REQUIRE(e.call(f) == nullptr);
    CHECK(same(everything(f), want));
  }
  if (e.allocates) {
    CHECK(failures > 0);
  } else {
    CHECK(failures == 0);
  }
  attn::set_num_threads(1);
  return failures;
}

}  // namespace

TEST_CASE("every entry point survives each of its allocations failing", "[faults]") {
#if ATTN_COUNT_MALLOCS
  REQUIRE(g_hooks_installed);
#endif
  std::string summary = "allocations failed in turn (1 thread / 2 threads):";
  for (const EntryPoint& e : entry_points()) {
    summary += "\n  " + std::string(e.name) + ": " + std::to_string(check(e, 1));
    summary += " / " + std::to_string(check(e, 2));
  }
  WARN(summary);
}

TEST_CASE("a stale or foreign tape is refused by backward", "[faults][mha]") {
  Fixture f(kTape);
  REQUIRE(f.layer.backward(f.tape, f.dy.data(), f.grads()) == nullptr);
  SECTION("another layer's tape") {
    attn::MultiHeadAttention other;
    REQUIRE(other.configure({E, H, KVH, KDIM, VDIM, true}) == nullptr);
    REQUIRE(other.set_weights(Fixture::arrays(f.w, f.b)) == nullptr);
    CHECK_THAT(text(other.backward(f.tape, f.dy.data(), f.grads())), Catch::Matchers::Contains("another layer"));
  }
  SECTION("after each kind of weight change") {
    const std::function<const char*(Fixture&)> changes[] = {
        [](Fixture& g) { return g.layer.set_weight(attn::Projection::o, g.w[3].data(), g.b[3].data()); },
        [](Fixture& g) { return g.layer.set_weights(Fixture::arrays(g.w, g.b)); },
        [](Fixture& g) {
          g.layer.sgd_step(g.grads(), 0.0f);
          return static_cast<const char*>(nullptr);
        },
        [](Fixture& g) { return g.layer.adam_step(g.grads(), 0.01f, 0.9f, 0.999f, 1e-8f, 1); },
        [](Fixture& g) { return g.layer.set_adam_state({}, {}); },
    };
    for (const auto& change : changes) {
      Fixture g(kTape);
      REQUIRE(g.layer.backward(g.tape, g.dy.data(), g.grads()) == nullptr);  // twice is fine
      REQUIRE(change(g) == nullptr);
      CHECK_THAT(text(g.layer.backward(g.tape, g.dy.data(), g.grads())), Catch::Matchers::Contains("weights changed"));
      REQUIRE(g.layer.forward(g.forward(g.x, &g.tape)) == nullptr);  // a new training forward
      CHECK(g.layer.backward(g.tape, g.dy.data(), g.grads()) == nullptr);
    }
  }
}

#endif  // ATTN_FAULT_INJECTION
