// The benchmark's native ceiling: the same kernel compiled by g++ for 128-bit SSE (no
// sanitizers), timed in-process. Prints one JSON object per shape given on the command line as
// B,H,Sq,Sk,D[,causal]: {"shape": "...", "ms": median, "calls": all calls made, "simd": ...}.
// scripts/profile.sh runs it under callgrind.
//   attn_bench_native [--warm-ms 1000] [--budget-ms 3000] SHAPE...
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attention.h"

int main(int argc, char** argv) {
  using clock = std::chrono::steady_clock;
  int warm_ms = 1000, budget_ms = 3000;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if ((arg == "--warm-ms" || arg == "--budget-ms") && a + 1 < argc) {
      (arg == "--warm-ms" ? warm_ms : budget_ms) = std::atoi(argv[++a]);
      continue;
    }
    int b = 0, h = 0, sq = 0, sk = 0, d = 0, causal = 0;
    if (std::sscanf(argv[a], "%d,%d,%d,%d,%d,%d", &b, &h, &sq, &sk, &d, &causal) < 5) return 2;
    std::vector<float> q(std::size_t(b) * h * sq * d), k(std::size_t(b) * h * sk * d), v(k.size()), o(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * float(i));
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.11f * float(i)), v[i] = std::sin(0.05f * float(i));
    attn::AttentionParams p;
    p.query = q.data(); p.key = k.data(); p.value = v.data(); p.out = o.data();
    p.batch = b; p.heads = h; p.kv_heads = h; p.seq_q = sq; p.seq_k = sk; p.head_dim = d; p.value_dim = d;
    p.q = p.o = attn::dense_bhsd(h, sq, d);
    p.k = p.v = attn::dense_bhsd(h, sk, d);
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
      if (const char* err = attn::attention(p)) { std::fprintf(stderr, "%s\n", err); return 1; }
      ms.push_back(1e3 * seconds(clock::now() - t0));
    }
    std::sort(ms.begin(), ms.end());
    calls += static_cast<int>(ms.size());
    std::printf("{\"shape\": \"%s\", \"ms\": %.4f, \"calls\": %d, \"simd\": \"%s\"}\n", argv[a], ms[ms.size() / 2], calls,
                attn::simd_name());
    std::fflush(stdout);
  }
  return 0;
}
