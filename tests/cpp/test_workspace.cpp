// The sizes the JS side checks wasm memory with before a call, exported from C++
// (attention_workspace_bytes, linear_workspace_bytes, rotary_workspace_bytes, and the layer's: forward_workspace_bytes,
// with a training forward's tape too, backward_workspace_bytes, set_weights_bytes, rotary_tables_bytes, alibi_bytes,
// adam_step_bytes, set_adam_state_bytes), against what the calls really allocate. Test builds count the bytes held
// (ATTN_FAULT_INJECTION, src/runtime/buffer.h): with a budget of exactly the estimate every call succeeds (an estimate
// that undercounts what is held at once fails), and on one thread the estimate is the peak itself (one that overcounts
// fails too). On more threads the peak depends on the schedule; the estimate must cover every schedule and stay within
// threads × the one-thread peak.
//
// In every build (wasm32 too): sizes past 4 GiB come out whole, never wrapped in a 32-bit size_t.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attention_case.h"
#include "cache/kv_cache.h"
#include "kernel/attention.h"
#include "kernel/attention_blocks.h"
#include "layer/linear.h"
#include "layer/mha.h"
#include "layer/rotary.h"
#include "pool_for_every_call.h"
#include "runtime/buffer.h"
#include "runtime/parallel.h"

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

#if ATTN_FAULT_INJECTION

// Runs call() with a budget of `estimate` bytes beyond what is held already (a layer's weights,
// a cache); returns the most bytes it held at once beyond those. `kept`: what the call holds
// after it returns beyond those (what it keeps less what it gives back).
template <class Call>
double peak_within(double estimate, Call&& call, double kept = 0) {
  const std::size_t held = attn::fault::live_bytes;
  attn::fault::peak_bytes = held;
  attn::fault::budget_bytes = held + static_cast<std::size_t>(estimate);
  const char* err = call();
  attn::fault::budget_bytes = 0;
  INFO("estimate " << estimate << " bytes; error: " << (err ? err : "none"));
  REQUIRE(err == nullptr);
  REQUIRE(double(attn::fault::live_bytes.load()) - double(held) == kept);
  return double(attn::fault::peak_bytes.load() - held);
}

// A layer call that keeps what it allocates, or gives back what it replaces: on one thread its
// estimate is its peak, and it holds `kept` more after it.
template <class Call>
void check_once(double estimate, Call&& call, double kept) {
  attn::set_num_threads(1);
  CHECK(peak_within(estimate, call, kept) == estimate);
}

// The estimate of `run` on 1, 2 and 3 threads: each within budget, exact on one thread.
template <class Estimate, class Run>
void check_threads(Estimate&& estimate, Run&& run) {
  const PoolForEveryCall every_call;  // the workers' workspaces held at once
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
    const attn::KvType types[5] = {attn::KvType::f32, attn::KvType::f16, attn::KvType::bf16, attn::KvType::i8,
                                   attn::KvType::i4};
    c.kv_type = types[pick(0, 4)];
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

TEST_CASE("attention's workspace over the blocked path's split of the keys counts each unit's statistics",
          "[workspace]") {
  tcase::Case c;  // an MQA verify: 32 heads × 4 positions, 8 row blocks, over 5000 keys: 3 chunks of 2048
  c.heads = 32;
  c.seq_q = 4;
  c.seq_k = 5000;
  c.head_dim = 24;
  tcase::Run r = tcase::make_run(c);
  const attn::blocks::BlockedKeySplit split = attn::blocks::blocked_key_split(r.p);
  REQUIRE(split.chunks == 3);
  REQUIRE(split.blocks == 8);
  attn::set_num_threads(1);
  const double with_split = attn::attention_workspace_bytes(r.p);
  // 8 row blocks × 3 chunks × 16 rows × (2 + value_dim padded to the tile), beyond one item's
  // workspace, which packs the 33 key blocks a chunk of 2048 keys may span, not all 79.
  const double stats = 4.0 * 8 * 3 * 16 * (2 + attn::blocks::round_up(24, attn::blocks::kTileCols));
  const attn::blocks::WorkspaceLayout chunk = attn::blocks::workspace_layout(r.p, false, true);
  CHECK(chunk.blocks == 33);
  CHECK(attn::blocks::workspace_layout(r.p, false).blocks == 79);
  CHECK(with_split - 4.0 * double(chunk.floats()) == stats);
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

TEST_CASE("rotary's exported workspace is what it allocates", "[workspace]") {
  std::mt19937 rng(20261206);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 30; ++trial) {
    attn::RotaryParams p;
    p.batch = pick(1, 3);
    p.heads = pick(1, 3);
    p.seq = pick(1, 100);  // up to four blocks of 32 rows
    p.head_dim = 2 * pick(1, 20);
    p.rotary_dim = 2 * pick(1, p.head_dim / 2);
    p.interleaved = pick(0, 1) == 1;
    const int positions = pick(0, 2);  // 0: an offset, 1: one array for the batch, 2: one per batch entry
    const bool tables = pick(0, 1) == 1;
    INFO("batch " << p.batch << " heads " << p.heads << " seq " << p.seq << " head_dim " << p.head_dim << " rotary_dim "
                  << p.rotary_dim << " interleaved " << p.interleaved << " positions " << positions << " tables "
                  << tables);
    p.x = p.o = attn::dense_bhsd(p.heads, p.seq, p.head_dim);
    std::vector<float> x(std::size_t(p.batch) * p.heads * p.seq * p.head_dim, 0.5f);
    p.in = p.out = x.data();
    std::vector<std::int32_t> pos(std::size_t(positions == 2 ? p.batch : 1) * p.seq);
    for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = int(i % 50);
    if (positions) {
      p.positions = pos.data();
      p.positions_batch_stride = positions == 2 ? p.seq : 0;
    } else {
      p.position_offset = 3;
    }
    const std::vector<float> cos(std::size_t(200) * (p.rotary_dim / 2), 0.5f), sin(cos.size(), 0.25f);
    if (tables) {
      p.cos = cos.data();
      p.sin = sin.data();
      p.table_positions = 200;
    }
    check_threads([&] { return attn::rotary_workspace_bytes(p); }, [&] { return attn::rotary(p); });
  }
}

// A configured layer with its weights set (biases and sinks as `config` says); the arrays
// stay in `w` and `sinks`.
struct Layer {
  attn::MultiHeadAttention layer;
  std::vector<float> w[4], sinks;  // w[i]: projection i's weights, then its bias (from bias_at[i])
  std::size_t bias_at[4] = {0, 0, 0, 0};
  attn::ProjectionArrays arrays;
  std::uint64_t params = 0;  // floats of every parameter (weights, biases, sinks)
  std::uint64_t largest = 0;  // of the largest group (a projection's weights and bias, or the sinks)
  std::uint64_t packed = 0;  // floats of the four projections packed (whole panels) and the sinks

  explicit Layer(const attn::MhaConfig& config) {
    REQUIRE(layer.configure(config) == nullptr);
    const int e = config.embed_dim, qf = layer.q_features(), kv = layer.kv_features();
    const int outs[4] = {qf, kv, kv, e}, ins[4] = {e, config.kdim, config.vdim, qf};
    for (int i = 0; i < 4; ++i) {
      bias_at[i] = std::size_t(outs[i]) * ins[i];
      const std::size_t n = bias_at[i] + (config.bias[i] ? outs[i] : 0);
      w[i].assign(n, 0.01f * float(i + 1));
      arrays.w[i] = w[i].data();
      arrays.b[i] = config.bias[i] ? w[i].data() + bias_at[i] : nullptr;
      params += n;
      largest = std::max<std::uint64_t>(largest, n);
      // Packed: out rounded up to whole panels, × in for the weights and × 1 for the bias.
      packed += std::uint64_t(attn::blocks::round_up(outs[i], attn::blocks::kTileCols)) * (ins[i] + 1);
    }
    if (config.sinks) {
      sinks.assign(config.num_heads, 0.5f);
      arrays.sinks = sinks.data();
      params += config.num_heads;
      largest = std::max<std::uint64_t>(largest, config.num_heads);
      packed += config.num_heads;
    }
  }

  // Arrays shaped as the parameters (gradients), each filled with `value`, in `g`.
  void gradients(std::vector<float> (&grads)[4], std::vector<float>& d_sinks, attn::MhaGrads& g, float value) const {
    for (int i = 0; i < 4; ++i) {
      grads[i].assign(w[i].size(), value);
      g.d_w[i] = grads[i].data();
      g.d_b[i] = arrays.b[i] ? grads[i].data() + bias_at[i] : nullptr;
    }
    d_sinks.assign(sinks.size(), value);
    g.d_sinks = sinks.empty() ? nullptr : d_sinks.data();
  }
};

// Odd trials: kdim == vdim == embed_dim. Some are as wide as current models (a head size of their
// own, num_heads · head_dim ≠ embed_dim, and a bias on some projections only); some have a window
// or sinks.
attn::MhaConfig random_config(std::mt19937& rng, int trial) {
  const int kv_heads = int(rng() % 2) + 1, heads = kv_heads * (int(rng() % 3) + 1), hd = int(rng() % 6) + 1;
  const bool wide = trial % 5 >= 3;
  const int e = wide ? int(rng() % 20) + 1 : heads * hd;
  const int kdim = trial % 2 ? e : int(rng() % 20) + 1, vdim = trial % 2 ? e : int(rng() % 20) + 1;
  const bool bias = trial % 3 != 1;
  attn::MhaConfig config{e, heads, kv_heads, kdim, vdim, bias};
  if (wide) {
    config.head_dim = hd;
    config.bias = attn::Biases(bias, !bias, true, trial % 2 == 0);
  }
  if (trial % 3 == 0) config.window_left = 5;
  config.sinks = trial % 4 == 1;
  return config;
}

std::string describe(const attn::MhaConfig& c) {
  std::ostringstream d;
  d << "embed " << c.embed_dim << " heads " << c.num_heads << "/" << c.num_kv_heads << " head_dim " << c.head_dim
    << " kdim " << c.kdim << " vdim " << c.vdim << " bias " << c.bias[0] << c.bias[1] << c.bias[2] << c.bias[3]
    << (c.sinks ? " sinks" : "");
  return d.str();
}

TEST_CASE("the layer's exported forward workspace is what its forward allocates", "[workspace]") {
  std::mt19937 rng(20261205);
  for (int trial = 0; trial < 15; ++trial) {
    // 0: keys and values given; 1: a self-attention cache holding seq_k positions; 2: a
    // cross-attention cache filled with seq_k positions.
    const int mode = trial % 3;
    attn::MhaConfig config = random_config(rng, trial);
    if (mode == 1) config.kdim = config.vdim = config.embed_dim;
    Layer l(config);
    REQUIRE(l.layer.set_weights(l.arrays) == nullptr);
    const int e = config.embed_dim, heads = config.num_heads, hd = l.layer.head_dim(), kv_heads = config.num_kv_heads;
    const int batch = int(rng() % 2) + 1, seq_q = int(rng() % 40) + 1, seq_k = int(rng() % 1500) + 1;
    const bool weights = rng() % 2, average = rng() % 2;
    INFO("trial " << trial << " " << describe(config) << " batch " << batch << " seq " << seq_q << "x" << seq_k
                  << " mode " << mode << (weights ? average ? " mean weights" : " weights" : ""));
    attn::KvCache cache;
    const std::vector<float> xq(std::size_t(batch) * seq_q * e, 0.1f),
        xk(std::size_t(batch) * seq_k * config.kdim, 0.2f), xv(std::size_t(batch) * seq_k * config.vdim, 0.3f);
    std::vector<float> out(std::size_t(batch) * seq_q * e), w(std::size_t(batch) * heads * seq_q * (seq_k + seq_q));
    attn::MhaForward f;
    f.query = xq.data();
    f.out = out.data();
    f.batch = batch;
    f.seq_q = seq_q;
    f.causal = trial % 4 != 2;
    if (weights) {
      f.weights = w.data();
      f.average_weights = average;
    }
    if (mode == 1) {  // the cache already holds seq_k positions
      REQUIRE(cache.allocate(l.layer.cache_config(batch, seq_k + seq_q)) == nullptr);
      const std::vector<float> held(std::size_t(batch) * kv_heads * seq_k * hd, 0.4f);
      REQUIRE(cache.append(held.data(), attn::dense_bhsd(kv_heads, seq_k, hd), held.data(),
                           attn::dense_bhsd(kv_heads, seq_k, hd), seq_k) == nullptr);
      f.cache = &cache;
    } else if (mode == 2) {
      REQUIRE(cache.allocate(l.layer.cache_config(batch, seq_k, attn::KvType(trial % 4))) == nullptr);
      REQUIRE(l.layer.fill_cross_cache(cache, xk.data(), xv.data(), batch, seq_k) == nullptr);
      f.cross = &cache;
    } else {
      f.key = xk.data();
      f.value = xv.data();
      f.seq_k = seq_k;
    }
    check_threads([&] { return l.layer.forward_workspace_bytes(f); },
                  [&] {
                    const char* err = l.layer.forward(f);
                    if (mode == 1) REQUIRE(cache.truncate(seq_k) == nullptr);  // room for the next run
                    return err;
                  });
  }
}

TEST_CASE("the layer's exported cross-attention cache fill size is what the fill allocates", "[workspace]") {
  std::mt19937 rng(20261210);
  for (int trial = 0; trial < 10; ++trial) {
    const attn::MhaConfig config = random_config(rng, trial);
    Layer l(config);
    const int batch = int(rng() % 3) + 1, seq_k = int(rng() % 700) + 1;
    INFO("trial " << trial << " " << describe(config) << " batch " << batch << " seq_k " << seq_k);
    attn::KvCache cache;
    REQUIRE(cache.allocate(l.layer.cache_config(batch, seq_k + trial % 2, attn::KvType(trial % 4))) == nullptr);
    const std::vector<float> xk(std::size_t(batch) * seq_k * config.kdim, 0.2f),
        xv(std::size_t(batch) * seq_k * config.vdim, 0.3f);
    CHECK(l.layer.fill_cross_cache_bytes(cache, batch, seq_k) == 0);  // no weights: refused before allocating
    REQUIRE(l.layer.set_weights(l.arrays) == nullptr);
    const double bytes = l.layer.fill_cross_cache_bytes(cache, batch, seq_k);
    CHECK(bytes > 0);
    // Keeps nothing (the cache was allocated before); threads only split the projections.
    check_threads([&] { return l.layer.fill_cross_cache_bytes(cache, batch, seq_k); },
                  [&] {
                    const char* err = l.layer.fill_cross_cache(cache, xk.data(), xv.data(), batch, seq_k);
                    cache.reset();
                    return err;
                  });
  }
}

TEST_CASE("the layer's exported setWeights size is what it packs", "[workspace]") {
  std::mt19937 rng(20261206);
  for (int trial = 0; trial < 8; ++trial) {
    const attn::MhaConfig config = random_config(rng, trial);
    INFO("trial " << trial << " " << describe(config));
    Layer l(config);
    const double bytes = l.layer.set_weights_bytes();
    CHECK(bytes == 4.0 * double(l.packed));
    // The first weights are kept; later ones replace them (the old held until the new are packed).
    check_once(bytes, [&] { return l.layer.set_weights(l.arrays); }, bytes);
    check_once(bytes, [&] { return l.layer.set_weights(l.arrays); }, 0);
  }
  attn::MultiHeadAttention unconfigured;
  CHECK(unconfigured.set_weights_bytes() == 0);
}

TEST_CASE("the layer's exported sizes of its rotary tables and ALiBi slopes are their copies", "[workspace]") {
  attn::MhaConfig config{24, 4, 2, 24, 24, true};
  config.rotary_dim = 4;
  attn::MultiHeadAttention layer;
  REQUIRE(layer.configure(config) == nullptr);
  const int positions = 37;
  const std::vector<float> cos(positions * 2, 0.5f), sin(positions * 2, 0.25f), slopes(4, 0.125f);
  const double tables = layer.rotary_tables_bytes(cos.data(), sin.data(), positions);
  CHECK(tables == 2.0 * 4 * positions * 2);
  check_once(tables, [&] { return layer.set_rotary_tables(cos.data(), sin.data(), positions); }, tables);
  check_once(tables, [&] { return layer.set_rotary_tables(cos.data(), sin.data(), positions); }, 0);
  CHECK(layer.rotary_tables_bytes(nullptr, nullptr, 0) == 0);  // back to rotary_base: frees them
  check_once(0, [&] { return layer.set_rotary_tables(nullptr, nullptr, 0); }, -tables);
  const double alibi = layer.alibi_bytes(slopes.data());
  CHECK(alibi == 4.0 * 4);
  check_once(alibi, [&] { return layer.set_alibi(slopes.data()); }, alibi);
  check_once(alibi, [&] { return layer.set_alibi(slopes.data()); }, 0);
  CHECK(layer.alibi_bytes(nullptr) == 0);
  check_once(0, [&] { return layer.set_alibi(nullptr); }, -alibi);
  attn::MultiHeadAttention unconfigured;
  CHECK(unconfigured.rotary_tables_bytes(cos.data(), sin.data(), positions) == 0);
  CHECK(unconfigured.alibi_bytes(slopes.data()) == 0);
}

TEST_CASE("the layer's exported optimizer sizes are what its steps and setAdamState allocate", "[workspace]") {
  std::mt19937 rng(20261207);
  for (int trial = 0; trial < 8; ++trial) {
    const attn::MhaConfig config = random_config(rng, trial);
    INFO("trial " << trial << " " << describe(config));
    Layer l(config);
    CHECK(l.layer.adam_step_bytes() == 0);  // no weights: it refuses before allocating
    REQUIRE(l.layer.set_weights(l.arrays) == nullptr);
    std::vector<float> grads[4], d_sinks;
    attn::MhaGrads g;
    l.gradients(grads, d_sinks, g, 0.01f);
    // SGD allocates nothing (so its entry takes no budget): no allocation is made, none held.
    const long made = attn::fault::made;
    const std::size_t held = attn::fault::live_bytes;
    attn::fault::peak_bytes = held;
    l.layer.sgd_step(g, 0.01f);
    CHECK(attn::fault::made == made);
    CHECK(attn::fault::peak_bytes == held);
    // The first Adam step makes both moments (kept) and one group's update; later steps only the update.
    const double first = l.layer.adam_step_bytes(), moments = 4.0 * 2 * double(l.params);
    CHECK(first == moments + 4.0 * double(l.largest));
    check_once(first, [&] { return l.layer.adam_step(g, 1e-3f, 0.9f, 0.999f, 1e-8f, 1); }, moments);
    const double later = l.layer.adam_step_bytes();
    CHECK(later == 4.0 * double(l.largest));
    check_once(later, [&] { return l.layer.adam_step(g, 1e-3f, 0.9f, 0.999f, 1e-8f, 2); }, 0);
    // setAdamState: both new moments of every group, then the old are given back.
    attn::ProjectionArrays none;
    CHECK(l.layer.set_adam_state_bytes(none) == 0);
    check_once(0, [&] { return l.layer.set_adam_state(none, none); }, -moments);  // a fresh optimizer
    CHECK(l.layer.set_adam_state_bytes(l.arrays) == moments);
    check_once(moments, [&] { return l.layer.set_adam_state(l.arrays, l.arrays); }, moments);
    check_once(moments, [&] { return l.layer.set_adam_state(l.arrays, l.arrays); }, 0);
  }
}

TEST_CASE("the layer's exported backward workspace is what its backward allocates", "[workspace]") {
  std::mt19937 rng(20261208);
  for (int trial = 0; trial < 10; ++trial) {
    const attn::MhaConfig config = random_config(rng, trial);
    Layer l(config);
    REQUIRE(l.layer.set_weights(l.arrays) == nullptr);
    const int e = config.embed_dim;
    const int batch = int(rng() % 2) + 1, seq_q = int(rng() % 30) + 1;
    const bool self = trial % 2 == 1;  // self-attention (kdim == vdim == embed_dim): key and value default to the query
    const int seq_k = self ? seq_q : int(rng() % 300) + 1;
    INFO("trial " << trial << " batch " << batch << " seq " << seq_q << "x" << seq_k << (self ? " self" : "")
                  << (config.sinks ? " sinks" : ""));
    const std::vector<float> xq(std::size_t(batch) * seq_q * e, 0.1f),
        xk(std::size_t(batch) * seq_k * config.kdim, 0.2f), xv(std::size_t(batch) * seq_k * config.vdim, 0.3f),
        d_out(std::size_t(batch) * seq_q * e, 0.05f);
    std::vector<float> out(xq.size()), dq(xq.size()), dk(xk.size()), dv(xv.size()), grads[4], d_sinks;
    attn::MhaTape tape;
    attn::MhaForward f;
    f.query = xq.data();
    f.key = self ? nullptr : xk.data();
    f.value = self ? nullptr : xv.data();
    f.out = out.data();
    f.batch = batch;
    f.seq_q = seq_q;
    f.seq_k = seq_k;
    f.causal = trial % 3 != 2;
    f.tape = &tape;
    CHECK(l.layer.backward_workspace_bytes(tape) == 0);  // not filled: it refuses before allocating
    REQUIRE(l.layer.forward(f) == nullptr);
    attn::MhaGrads g;
    l.gradients(grads, d_sinks, g, 0.0f);
    g.d_query = dq.data();
    g.d_key = self ? nullptr : dk.data();
    g.d_value = self ? nullptr : dv.data();
    check_threads([&] { return l.layer.backward_workspace_bytes(tape); },
                  [&] { return l.layer.backward(tape, d_out.data(), g); });
  }
}

TEST_CASE("the layer's exported training forward size counts the tape it fills", "[workspace]") {
  std::mt19937 rng(20261209);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int copies_larger = 0, kernel_larger = 0;  // which of the two the tape's copies are held with wins
  for (int trial = 0; trial < 16; ++trial) {
    const attn::MhaConfig config = random_config(rng, trial);  // odd trials: kdim == vdim == embed_dim
    Layer l(config);
    REQUIRE(l.layer.set_weights(l.arrays) == nullptr);
    const int e = config.embed_dim, heads = config.num_heads, qf = l.layer.q_features(), kv = l.layer.kv_features();
    // 0: key and value given; 1: the value defaults to the key; 2: both default to the query.
    const int inputs = trial % 2 ? pick(0, 2) : 0;
    const int batch = pick(1, 2), seq_q = pick(2, 30), seq_k = inputs == 2 || pick(0, 1) ? seq_q : pick(1, 300);
    const int mask_kind = pick(0, 2);  // none, boolean, additive
    const int dims = pick(0, 7);  // which of batch, heads, rows the mask has (the rest broadcast)
    const attn::MaskShape shape{(dims & 4) != 0, (dims & 2) != 0, (dims & 1) != 0};
    const bool padding = pick(0, 1), positions = pick(0, 1) && seq_k == seq_q, per_batch = pick(0, 1);
    INFO("trial " << trial << " batch " << batch << " seq " << seq_q << "x" << seq_k << " heads " << heads << "/"
                  << config.num_kv_heads << " embed " << e << " inputs " << inputs << " mask " << mask_kind << " shape "
                  << dims << (padding ? " padding" : "") << (positions ? " positions" : ""));
    const std::size_t most_q = std::size_t(batch) * seq_q, most_k = std::size_t(batch) * seq_k;
    const std::vector<float> xq(most_q * e, 0.1f), xk(most_k * config.kdim, 0.2f), xv(most_k * config.vdim, 0.3f);
    const std::size_t most_mask = std::size_t(batch) * heads * seq_q * seq_k;
    const std::vector<std::uint8_t> bool_mask(most_mask, 1), key_padding(most_k, 0);
    const std::vector<float> add_mask(most_mask, 0.0f);
    std::vector<std::int32_t> pos(most_q);
    for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = int(i % seq_q);
    std::vector<float> out(most_q * e);
    attn::MhaForward f;
    f.query = xq.data();
    f.key = inputs < 2 ? xk.data() : nullptr;
    f.value = inputs == 0 ? xv.data() : nullptr;
    f.out = out.data();
    f.batch = batch;
    f.causal = trial % 3 != 2;
    if (mask_kind) {
      f.mask = mask_kind == 1 ? static_cast<const void*>(bool_mask.data()) : add_mask.data();
      f.mask_type = mask_kind == 1 ? attn::MaskType::boolean : attn::MaskType::additive;
      f.mask_shape = shape;
    }
    if (padding) f.key_padding = key_padding.data();
    if (positions) f.positions = pos.data();
    // seq_q × seq_k (the arrays' first rows), and the tape of that, counted here: lse [batch,
    // heads, seq_q]; the query input, Q and the attention output; K and V; the key and value
    // inputs given; the mask, key padding and positions given.
    auto shaped = [&](int sq, int sk) {
      f.seq_q = sq;
      f.seq_k = sk;
      f.positions_batch_stride = per_batch ? sq : 0;
      const double rows_q = double(batch) * sq, rows_k = double(batch) * sk;
      const double mask = (shape.batch ? batch : 1) * (shape.heads ? heads : 1) * double(shape.rows ? sq : 1) * sk;
      return 4.0 * (rows_q * heads + rows_q * e + 2 * rows_q * qf + 2 * rows_k * kv) +
             (f.key ? 4.0 * rows_k * config.kdim : 0) + (f.value ? 4.0 * rows_k * config.vdim : 0) +
             (f.mask ? mask * (mask_kind == 2 ? 4 : 1) : 0) + (padding ? rows_k : 0) +
             (positions ? 4.0 * (per_batch ? rows_q : sq) : 0);
    };
    const double tape = shaped(seq_q, seq_k);
    attn::set_num_threads(1);
    const double plain = l.layer.forward_workspace_bytes(f);
    attn::MhaTape t;
    f.tape = &t;
    const double train = l.layer.forward_workspace_bytes(f);
    // The tape adds its lse and, past the kernel's workspace it is held with, its copies.
    const double lse = 4.0 * batch * heads * seq_q, past_kernel = train - plain - lse;
    CHECK(past_kernel >= 0);
    CHECK(past_kernel <= tape - lse);
    ++(past_kernel > 0 ? copies_larger : kernel_larger);
    // The first fill keeps the tape; a refill makes a whole new one before it gives the old one
    // back: of the same shapes it keeps nothing more, of one query fewer that tape's bytes fewer.
    check_once(train, [&] { return l.layer.forward(f); }, tape);
    REQUIRE(t.filled());
    check_threads([&] { return l.layer.forward_workspace_bytes(f); }, [&] { return l.layer.forward(f); });
    const double fewer = shaped(seq_q - 1, inputs == 2 || positions ? seq_q - 1 : seq_k);
    const double refill = l.layer.forward_workspace_bytes(f);
    attn::MhaTape fresh;
    f.tape = &fresh;
    CHECK(l.layer.forward_workspace_bytes(f) == refill);  // the same for a first fill
    f.tape = &t;
    check_once(refill, [&] { return l.layer.forward(f); }, fewer - tape);
  }
  CHECK(copies_larger > 0);
  CHECK(kernel_larger > 0);
  // With a cache a forward refuses a tape before allocating.
  Layer l(attn::MhaConfig{8, 2, 2, 8, 8, true});
  REQUIRE(l.layer.set_weights(l.arrays) == nullptr);
  attn::KvCache cache;
  REQUIRE(cache.allocate(l.layer.cache_config(1, 4)) == nullptr);
  const std::vector<float> x(8, 0.5f);
  std::vector<float> out(8);
  attn::MhaTape t;
  attn::MhaForward f;
  f.query = x.data();
  f.out = out.data();
  f.cache = &cache;
  CHECK(l.layer.forward_workspace_bytes(f) > 0);
  f.tape = &t;
  CHECK(l.layer.forward_workspace_bytes(f) == 0);
  CHECK(l.layer.forward(f) != nullptr);
}

// Small calls take their workspace from each thread's scratch (runtime/buffer.h), never malloc,
// whose lock the threaded build pays per call: the caller's and, with the pool, each worker's own.
// Counted as held all the same (the estimates above stay exact), and given back by the end.
TEST_CASE("small calls allocate nothing from malloc: large ones do and give it back", "[workspace]") {
  const auto decode = [](int seq_k, attn::KvType type) {
    tcase::Case c;  // one position of 8 query heads over 2 kv heads, 64 dims
    c.heads = 8;
    c.kv_heads = 2;
    c.seq_k = seq_k;
    c.head_dim = 64;
    c.kv_type = type;
    return c;
  };
  const auto prefill = [](int seq) {
    tcase::Case c;  // causal, 8 heads, 64 dims
    c.heads = c.kv_heads = 8;
    c.seq_q = c.seq_k = seq;
    c.head_dim = 64;
    c.causal = true;
    return c;
  };
  struct Call {
    tcase::Case c;
    bool small;
  };
  const Call calls[] = {
      {decode(1, attn::KvType::f32), true},
      {decode(64, attn::KvType::f16), true},
      {decode(1000, attn::KvType::i4), true},
      {decode(4096, attn::KvType::i8), true},  // split: partials too
      {prefill(16), true},  // few rows
      {prefill(64), true},  // blocked
      {prefill(300), false},  // blocked, a workspace past the scratch
      {decode(64, attn::KvType::f32), true},
  };
  for (int threads : {1, 2}) {
    for (bool every_call : {false, true}) {
      attn::set_num_threads(threads);
      attn::detail::set_pool_for_every_call(every_call);
      for (const Call& call : calls) {
        tcase::Run r = tcase::make_run(call.c);
        INFO(call.c.describe() << ", " << threads << " thread(s)" << (every_call ? ", on the pool" : ""));
        const long live = attn::fault::live, made = attn::fault::made;
        const std::size_t held = attn::fault::live_bytes;
        attn::fault::peak_bytes = held;
        REQUIRE(attn::attention(r.p) == nullptr);
        CHECK(attn::fault::peak_bytes > held);  // a workspace was taken, and counted
        CHECK((attn::fault::made == made) == call.small);
        CHECK(attn::fault::live == live);
        CHECK(attn::fault::live_bytes == held);
      }
    }
  }
  attn::detail::set_pool_for_every_call(false);
  attn::set_num_threads(1);
}

#endif  // ATTN_FAULT_INJECTION

TEST_CASE("workspace sizes past 4 GiB are whole, never wrapped in a 32-bit size_t", "[workspace]") {
  attn::AttentionParams p;  // sizes only: nothing is read
  p.seq_q = 512;  // rows past blocks::kBlockedSplitRows: the keys are not split, no statistics kept
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
  std::vector<float> x(4 * 3 * 8, 1.0f);
  attn::RotaryParams r;
  r.heads = 3;
  r.seq = 4;
  r.head_dim = 8;
  r.rotary_dim = 8;
  r.x = r.o = attn::dense_bhsd(3, 4, 8);
  r.in = r.out = x.data();
  CHECK(attn::rotary_workspace_bytes(r) > 0);
  r.rotary_dim = 5;  // odd
  CHECK(attn::rotary_workspace_bytes(r) == 0);
}

}  // namespace

// The few-rows loops read 16-byte vectors of their workspace and of the caches' rows (HeapBuffers
// both): a block that starts off a cache line makes some of them straddle two (see kAlignment).
TEST_CASE("every large block of the core starts on a cache line", "[workspace]") {
  std::vector<attn::HeapBuffer<float>> blocks(64);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    // Odd sizes from kAlignedFrom bytes on, all held at once, small blocks between them.
    attn::HeapBuffer<float> small;
    REQUIRE(small.allocate(i % 5 + 1));
    REQUIRE(blocks[i].allocate(attn::kAlignedFrom / sizeof(float) + i * 7 % 61));
    CHECK(reinterpret_cast<std::uintptr_t>(blocks[i].get()) % attn::kAlignment == 0);
  }
}
