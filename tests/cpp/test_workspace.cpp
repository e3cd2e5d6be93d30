// The sizes the JS side checks wasm memory with before a call, exported from C++
// (attention_workspace_bytes, linear_workspace_bytes, MultiHeadAttention::forward_workspace_bytes),
// against what the calls really allocate. Test builds count the bytes held (ATTN_FAULT_INJECTION,
// src/buffer.h): with a budget of exactly the estimate every call succeeds (an estimate that
// undercounts what is held at once fails), and on one thread the estimate is the peak itself (one
// that overcounts fails too). On more threads the peak depends on the schedule; the estimate
// must cover every schedule and stay within threads × the one-thread peak.
//
// In every build (wasm32 too): sizes past 4 GiB come out whole, never wrapped in a 32-bit size_t.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "attention.h"
#include "attention_blocks.h"
#include "attention_case.h"
#include "buffer.h"
#include "kv_cache.h"
#include "linear.h"
#include "mha.h"
#include "parallel.h"

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

#if ATTN_FAULT_INJECTION

// Runs call() with a budget of `estimate` bytes beyond what is held already (a layer's weights,
// a cache); returns the most bytes it held at once beyond those.
template <class Call>
double peak_within(double estimate, Call&& call) {
  const std::size_t held = attn::fault::live_bytes;
  attn::fault::peak_bytes = held;
  attn::fault::budget_bytes = held + static_cast<std::size_t>(estimate);
  const char* err = call();
  attn::fault::budget_bytes = 0;
  INFO("estimate " << estimate << " bytes; error: " << (err ? err : "none"));
  REQUIRE(err == nullptr);
  REQUIRE(attn::fault::live_bytes == held);
  return double(attn::fault::peak_bytes.load() - held);
}

// The estimate of `run` on 1, 2 and 3 threads: each within budget, exact on one thread.
template <class Estimate, class Run>
void check_threads(Estimate&& estimate, Run&& run) {
  double one = 0;
  for (int threads : {1, 2, 3}) {
    attn::set_num_threads(threads);
    const double est = estimate();
    INFO("threads " << threads);
    const double peak = peak_within(est, run);
    CHECK(peak <= est);
    if (threads == 1) {
      CHECK(peak == est);
      one = est;
    } else {
      CHECK(est >= one);
      CHECK(est <= threads * one);
    }
  }
  attn::set_num_threads(1);
}

tcase::Case random_case(std::mt19937& rng, bool backward) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  tcase::Case c;
  c.seed = rng();
  c.batch = pick(1, 3);
  c.kv_heads = pick(1, 3);
  c.heads = c.kv_heads * pick(1, 4);
  // Few rows (decode, a short verify) or blocked; keys up to past two chunks of kSplitKeys.
  const int group = c.heads / c.kv_heads;
  c.seq_q = pick(0, 1) ? pick(1, std::max(1, attn::blocks::kFewRows / group)) : pick(1, 70);
  c.seq_k = std::max(c.seq_q, pick(0, 2) ? pick(1, 200) : pick(1000, 2600));
  c.head_dim = pick(1, 40);
  c.value_dim = pick(0, 1) ? c.head_dim : pick(1, 40);
  c.causal = pick(0, 1);
  if (pick(0, 3) == 0) c.window_left = pick(0, 1500);
  c.sinks = pick(0, 2) == 0;
  if (!backward) {
    c.weights_only = pick(0, 5) == 0;
    c.lse = pick(0, 1);
    const attn::KvType types[4] = {attn::KvType::f32, attn::KvType::f16, attn::KvType::bf16, attn::KvType::i8};
    c.kv_type = types[pick(0, 3)];
  }
  return c;
}

TEST_CASE("attention's exported workspace is what it allocates at most", "[workspace]") {
  std::mt19937 rng(20261202);
  for (int trial = 0; trial < 40; ++trial) {
    const tcase::Case c = random_case(rng, false);
    tcase::Run r = tcase::make_run(c);
    INFO(c.describe() << (attn::blocks::takes_few_rows(r.p) ? " (few rows)" : " (blocked)"));
    check_threads([&] { return attn::attention_workspace_bytes(r.p); }, [&] { return attn::attention(r.p); });
  }
}

TEST_CASE("attention's workspace over a split of the keys counts each chunk's statistics", "[workspace]") {
  tcase::Case c;  // a decode step of 8 query heads over 3000 keys: 3 chunks of 1024
  c.heads = 8;
  c.kv_heads = 2;
  c.seq_k = 3000;
  c.head_dim = 24;
  tcase::Run r = tcase::make_run(c);
  const attn::blocks::FewRowsSplit split = attn::blocks::few_rows_split(r.p);
  REQUIRE(split.chunks == 3);
  attn::set_num_threads(1);
  const double one_chunk = attn::attention_workspace_bytes(r.p);
  r.p.seq_k = 1000;  // one chunk: no statistics kept
  const double no_split = attn::attention_workspace_bytes(r.p);
  // 2 kv heads × 3 chunks × 4 rows × (2 + value_dim padded to the tile), beyond one chunk's.
  const double stats = 4.0 * 2 * 3 * 4 * (2 + attn::blocks::round_up(24, attn::blocks::kTileCols));
  CHECK(one_chunk - no_split == stats);
  r.p.seq_k = 3000;
  check_threads([&] { return attn::attention_workspace_bytes(r.p); }, [&] { return attn::attention(r.p); });
}

TEST_CASE("attention_backward's exported workspace is what it allocates at most", "[workspace]") {
  std::mt19937 rng(20261203);
  for (int trial = 0; trial < 25; ++trial) {
    const tcase::Case c = random_case(rng, true);
    INFO(c.describe());
    tcase::Run r = tcase::make_run(c);
    std::vector<float> d_out(r.out.size(), 0.5f), dq(r.q.size()), dk(r.k.size()), dv(r.v.size()), d_sinks(c.heads);
    attn::AttentionGrads g;
    g.d_out = d_out.data();
    g.d_query = dq.data();
    g.d_key = dk.data();
    g.d_value = dv.data();
    g.d_sinks = c.sinks ? d_sinks.data() : nullptr;
    g.d_o = r.p.o;
    g.d_q = r.p.q;
    g.d_k = r.p.k;
    g.d_v = r.p.v;
    check_threads([&] { return attn::attention_workspace_bytes(r.p, true); },
                  [&] { return attn::attention_backward(r.p, g); });
  }
}

TEST_CASE("linear's exported workspace is what it allocates", "[workspace]") {
  std::mt19937 rng(20261204);
  for (int trial = 0; trial < 20; ++trial) {
    const int rows = int(rng() % 40) + 1, in = int(rng() % 300) + 1, out = int(rng() % 70) + 1;
    INFO("rows " << rows << " in " << in << " out " << out);
    const std::vector<float> x(std::size_t(rows) * in, 0.25f), w(std::size_t(out) * in, 0.5f), b(out, 1.0f);
    std::vector<float> y(std::size_t(rows) * out);
    check_threads([&] { return attn::linear_workspace_bytes(rows, in, out); },
                  [&] { return attn::linear(x.data(), w.data(), b.data(), y.data(), rows, in, out); });
  }
}

TEST_CASE("the layer's exported forward workspace is what its forward allocates", "[workspace]") {
  std::mt19937 rng(20261205);
  for (int trial = 0; trial < 12; ++trial) {
    const int kv_heads = int(rng() % 2) + 1, heads = kv_heads * (int(rng() % 3) + 1), hd = int(rng() % 6) + 1;
    const int e = heads * hd, kdim = trial % 2 ? e : int(rng() % 20) + 1, vdim = trial % 2 ? e : int(rng() % 20) + 1;
    attn::MhaConfig config{e, heads, kv_heads, kdim, vdim, true};
    if (trial % 3 == 0) config.window_left = 5;
    config.sinks = trial % 4 == 1;
    attn::MultiHeadAttention layer;
    REQUIRE(layer.configure(config) == nullptr);
    const int kv = kv_heads * hd, outs[4] = {e, kv, kv, e}, ins[4] = {e, kdim, vdim, e};
    std::vector<float> w[4], sinks(heads, 0.5f);
    attn::ProjectionArrays a;
    for (int i = 0; i < 4; ++i) {
      w[i].assign(std::size_t(outs[i]) * ins[i] + outs[i], 0.01f * float(i + 1));
      a.w[i] = w[i].data();
      a.b[i] = w[i].data() + std::size_t(outs[i]) * ins[i];
    }
    if (config.sinks) a.sinks = sinks.data();
    REQUIRE(layer.set_weights(a) == nullptr);

    const int batch = int(rng() % 2) + 1, seq_q = int(rng() % 40) + 1, seq_k = int(rng() % 1500) + 1;
    const bool cached = trial % 2 == 1;
    INFO("trial " << trial << " batch " << batch << " seq " << seq_q << "x" << seq_k << (cached ? " cached" : ""));
    attn::KvCache cache;
    const std::vector<float> xq(std::size_t(batch) * seq_q * e, 0.1f), xk(std::size_t(batch) * seq_k * kdim, 0.2f),
        xv(std::size_t(batch) * seq_k * vdim, 0.3f);
    std::vector<float> out(std::size_t(batch) * seq_q * e);
    attn::MhaForward f;
    f.query = xq.data();
    f.out = out.data();
    f.batch = batch;
    f.seq_q = seq_q;
    f.causal = trial % 3 != 2;
    if (cached) {  // the cache already holds seq_k positions
      REQUIRE(cache.allocate(layer.cache_config(batch, seq_k + seq_q)) == nullptr);
      const std::vector<float> held(std::size_t(batch) * kv_heads * seq_k * hd, 0.4f);
      REQUIRE(cache.append(held.data(), attn::dense_bhsd(kv_heads, seq_k, hd), held.data(),
                           attn::dense_bhsd(kv_heads, seq_k, hd), seq_k) == nullptr);
      f.cache = &cache;
    } else {
      f.key = xk.data();
      f.value = xv.data();
      f.seq_k = seq_k;
    }
    check_threads([&] { return layer.forward_workspace_bytes(f); },
                  [&] {
                    const char* err = layer.forward(f);
                    if (cached) REQUIRE(cache.truncate(seq_k) == nullptr);  // room for the next run
                    return err;
                  });
  }
}

#endif  // ATTN_FAULT_INJECTION

TEST_CASE("workspace sizes past 4 GiB are whole, never wrapped in a 32-bit size_t", "[workspace]") {
  attn::AttentionParams p;  // sizes only: nothing is read
  p.seq_q = 64;
  p.seq_k = 1 << 22;
  p.head_dim = p.value_dim = 1024;
  p.value = &p;  // given
  attn::set_num_threads(1);
  // Kᵀ and V packed: 2^22 keys × 1024 × 2 floats = 32 GiB, whose float count alone wraps 32 bits.
  const double bytes = attn::attention_workspace_bytes(p);
  CHECK(bytes > 32 * kGiB);
  CHECK(bytes < 33 * kGiB);
  CHECK(double(attn::blocks::workspace_layout(p, false).floats()) * 4 == bytes);
  CHECK(attn::attention_workspace_bytes(p, true) > bytes);
  // wasm32: the workspace refuses the size whole (before, its size_t sum wrapped to a small one).
  if (sizeof(std::size_t) == 4) {
    attn::blocks::Workspace ws;
    CHECK_FALSE(ws.reserve(p));
    CHECK(attn::g_last_failed_allocation == std::numeric_limits<std::size_t>::max());
  }
  CHECK(attn::linear_workspace_bytes(1 << 20, 1 << 12, 16) > 16 * kGiB);
}

TEST_CASE("the exported workspace of a call the kernel refuses is 0", "[workspace]") {
  attn::AttentionParams p;
  p.heads = 3;
  p.kv_heads = 2;  // not a divisor
  CHECK(attn::attention_workspace_bytes(p) == 0);
  p.kv_heads = 0;
  CHECK(attn::attention_workspace_bytes(p, true) == 0);
}

}  // namespace
