// The benchmark's native ceiling: the same kernel compiled by g++ for 128-bit SSE (no
// sanitizers), timed in-process. Prints one JSON object per shape given on the command line as
// B,H,Sq,Sk,D[,causal]: {"shape": "...", "ms": median, "calls": all calls made, "simd": ...}.
// scripts/profile.sh runs it under callgrind. --kv-heads N: grouped K/V heads (default one per
// head); --cache DTYPE: the keys and values sit in a KV cache of that dtype (a decode step).
//   attn_bench_native [--warm-ms 1000] [--budget-ms 3000] [--kv-heads N] [--cache float32|float16|bfloat16|int8]
//   SHAPE...
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "kernel/attention.h"

int main(int argc, char** argv) {
  using clock = std::chrono::steady_clock;
  int warm_ms = 1000, budget_ms = 3000, kv_heads = 0;
  std::string cache_dtype;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if ((arg == "--warm-ms" || arg == "--budget-ms" || arg == "--kv-heads") && a + 1 < argc) {
      (arg == "--warm-ms" ? warm_ms : arg == "--budget-ms" ? budget_ms : kv_heads) = std::atoi(argv[++a]);
      continue;
    }
    if (arg == "--cache" && a + 1 < argc) {
      cache_dtype = argv[++a];
      continue;
    }
    int b = 0, h = 0, sq = 0, sk = 0, d = 0, causal = 0;
    if (std::sscanf(argv[a], "%d,%d,%d,%d,%d,%d", &b, &h, &sq, &sk, &d, &causal) < 5) return 2;
    const int kvh = kv_heads > 0 ? kv_heads : h;
    std::vector<float> q(std::size_t(b) * h * sq * d), k(std::size_t(b) * kvh * sk * d), v(k.size()), o(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * float(i));
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.11f * float(i)), v[i] = std::sin(0.05f * float(i));
    attn::AttentionParams p;
    p.query = q.data();
    p.key = k.data();
    p.value = v.data();
    p.out = o.data();
    p.batch = b;
    p.heads = h;
    p.kv_heads = kvh;
    p.seq_q = sq;
    p.seq_k = sk;
    p.head_dim = d;
    p.value_dim = d;
    p.q = p.o = attn::dense_bhsd(h, sq, d);
    p.k = p.v = attn::dense_bhsd(kvh, sk, d);
    attn::KvCache cache;
    if (!cache_dtype.empty()) {
      const attn::KvType types[] = {attn::KvType::f32, attn::KvType::f16, attn::KvType::bf16, attn::KvType::i8};
      const char* names[] = {"float32", "float16", "bfloat16", "int8"};
      attn::KvCacheConfig c;
      c.batch = b;
      c.kv_heads = kvh;
      c.head_dim = c.value_dim = d;
      c.max_seq = sk;
      c.dtype = attn::KvType(-1);
      for (int t = 0; t < 4; ++t)
        if (cache_dtype == names[t]) c.dtype = types[t];
      const char* err = cache.allocate(c);
      if (!err) err = cache.append(k.data(), p.k, v.data(), p.v, sk);
      if (err) {
        std::fprintf(stderr, "%s\n", err);
        return 1;
      }
      cache.describe(p);
    }
    p.scale = 1.0f / std::sqrt(float(d));
    p.causal = causal != 0;
    const auto seconds = [](clock::duration t) { return std::chrono::duration<double>(t).count(); };
    int calls = 0;
    const auto warm_end = clock::now() + std::chrono::milliseconds(warm_ms);
    while (clock::now() < warm_end) attn::attention(p), ++calls;
    std::vector<double> ms;
    const auto end = clock::now() + std::chrono::milliseconds(budget_ms);
    while (ms.size() < 5 || (clock::now() < end && ms.size() < 200)) {
      const auto t0 = clock::now();
      if (const char* err = attn::attention(p)) {
        std::fprintf(stderr, "%s\n", err);
        return 1;
      }
      ms.push_back(1e3 * seconds(clock::now() - t0));
    }
    std::sort(ms.begin(), ms.end());
    calls += static_cast<int>(ms.size());
    std::printf("{\"shape\": \"%s\", \"ms\": %.4f, \"calls\": %d, \"simd\": \"%s\"}\n", argv[a], ms[ms.size() / 2],
                calls, attn::simd_name());
    std::fflush(stdout);
  }
  return 0;
}
