// Threads change nothing but speed: the kernel and the projections give bit-identical results
// with 1, 2 and 3 threads (in builds without threads every count runs serially, trivially equal).
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "attention.h"
#include "linear.h"
#include "parallel.h"

namespace {

std::vector<float> random_vec(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& e : v) e = uni(rng);
  return v;
}

std::vector<float> run(int threads, int batch, int heads, int kv_heads, int seq_q, int seq_k, int d,
                       bool causal) {
  attn::set_num_threads(threads);
  const auto q = random_vec(std::size_t(batch) * heads * seq_q * d, 1);
  const auto k = random_vec(std::size_t(batch) * kv_heads * seq_k * d, 2);
  const auto v = random_vec(k.size(), 3);
  std::vector<float> out(q.size()), w(std::size_t(batch) * heads * seq_q * seq_k);
  attn::AttentionParams p;
  p.query = q.data();
  p.key = k.data();
  p.value = v.data();
  p.out = out.data();
  p.weights = w.data();
  p.batch = batch;
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.seq_q = seq_q;
  p.seq_k = seq_k;
  p.head_dim = p.value_dim = d;
  p.q = p.o = attn::dense_bhsd(heads, seq_q, d);
  p.k = p.v = attn::dense_bhsd(kv_heads, seq_k, d);
  p.w = attn::dense_bhsd(heads, seq_q, seq_k);
  p.scale = 0.25f;
  p.causal = causal;
  REQUIRE(attn::attention(p) == nullptr);
  out.insert(out.end(), w.begin(), w.end());
  attn::set_num_threads(1);
  return out;
}

}  // namespace

TEST_CASE("parallel_for runs every item exactly once", "[parallel]") {
  for (int threads : {1, 2, 3, 8}) {
    attn::set_num_threads(threads);
    for (int count : {0, 1, 2, 7, 100}) {
      std::vector<std::atomic<int>> hits(count);
      attn::parallel_for(count, [&](int i) { hits[i]++; });
      for (int i = 0; i < count; ++i) CHECK(hits[i].load() == 1);
    }
  }
  attn::set_num_threads(1);
}

TEST_CASE("attention is bit-identical with 1, 2 and 3 threads", "[parallel]") {
  struct Shape { int b, h, kv, sq, sk, d; bool causal; };
  const Shape shapes[] = {
      {1, 1, 1, 100, 130, 16, false},  // one kv head: row blocks split into chunks
      {1, 1, 1, 100, 100, 16, true},
      {2, 4, 2, 33, 70, 8, true},
      {1, 8, 2, 1, 200, 32, false},    // decode: the direct path
      {3, 6, 6, 17, 17, 5, false},
  };
  for (const Shape& s : shapes) {
    INFO("shape " << s.b << "," << s.h << "/" << s.kv << "," << s.sq << "x" << s.sk << "," << s.d);
    const auto one = run(1, s.b, s.h, s.kv, s.sq, s.sk, s.d, s.causal);
    for (int threads : {2, 3}) {
      const auto many = run(threads, s.b, s.h, s.kv, s.sq, s.sk, s.d, s.causal);
      CHECK(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("PackedLinear is bit-identical with 1 and 3 threads", "[parallel]") {
  const int rows = 9, in = 300, out = 70;
  const auto x = random_vec(std::size_t(rows) * in, 4), w = random_vec(std::size_t(out) * in, 5);
  const auto b = random_vec(out, 6);
  attn::PackedLinear lin;
  REQUIRE(lin.pack(w.data(), b.data(), out, in) == nullptr);
  std::vector<float> scratch(lin.scratch_floats(rows)), y1(std::size_t(rows) * out), y3(y1.size());
  attn::set_num_threads(1);
  lin.apply(x.data(), in, rows, y1.data(), out, scratch.data());
  attn::set_num_threads(3);
  lin.apply(x.data(), in, rows, y3.data(), out, scratch.data());
  attn::set_num_threads(1);
  CHECK(std::memcmp(y1.data(), y3.data(), y1.size() * sizeof(float)) == 0);
}
