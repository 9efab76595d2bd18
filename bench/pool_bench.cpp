// pool_bench.cpp: goro::pool (Go's sync.Pool) get/put pairs. Twin:
// bench/go/pool.go. The '#' lines give the same loop with a std::mutex
// protected free list and with plain new/delete, for comparison.
#include <cstdint>
#include <cstdio>
#include <goro/pool.hpp>
#include <goro/runtime.hpp>
#include <goro/wait_group.hpp>
#include <memory>
#include <mutex>
#include <vector>

#include "bench.hpp"

namespace {
using gorobench::clock;
using gorobench::ns_since;

constexpr int goroutines = 8;
constexpr std::int64_t total = 10'000'000;
constexpr std::int64_t per = total / goroutines;

struct obj {
  std::uint64_t a[8] = {};
};

// Runs body(count) in `goroutines` goroutines, each doing `per` pairs;
// returns ns per pair (wall time over all pairs).
template <class Body>
double run_pairs(Body body) {
  goro::wait_group wg;
  auto t0 = clock::now();
  wg.add(goroutines);
  for (int i = 0; i < goroutines; ++i) {
    goro::go([&] {
      body();
      wg.done();
    });
  }
  wg.wait();
  return ns_since(t0) / double(total);
}

// A free list behind one std::mutex (what a pool without per-P state is).
class locked_free_list {
 public:
  std::unique_ptr<obj> get() {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (!free_.empty()) {
        obj* o = free_.back();
        free_.pop_back();
        return std::unique_ptr<obj>(o);
      }
    }
    return std::make_unique<obj>();
  }
  void put(std::unique_ptr<obj> o) {
    std::lock_guard<std::mutex> g(mu_);
    free_.push_back(o.release());
  }
  ~locked_free_list() {
    for (obj* o : free_) delete o;
  }

 private:
  std::mutex mu_;
  std::vector<obj*> free_;
};
}  // namespace

// 8 goroutines each take an object from the pool, touch it and give it
// back; 10M pairs in all (Go's BenchmarkPool without RunParallel).
GOROBENCH_WORKLOAD(pool_getput,
                   "8 goroutines each getting an object from a pool, touching "
                   "it and putting it back, 10M get/put pairs; ns/pair",
                   "") {
  goro::pool<obj> p([] { return std::make_unique<obj>(); });
  double pooled = run_pairs([&] {
    for (std::int64_t j = 0; j < per; ++j) {
      std::unique_ptr<obj> o = p.get();
      o->a[0]++;
      p.put(std::move(o));
    }
  });
  locked_free_list fl;
  double locked = run_pairs([&] {
    for (std::int64_t j = 0; j < per; ++j) {
      std::unique_ptr<obj> o = fl.get();
      o->a[0]++;
      fl.put(std::move(o));
    }
  });
  double plain = run_pairs([&] {
    for (std::int64_t j = 0; j < per; ++j) {
      auto o = std::make_unique<obj>();
      o->a[0]++;
      asm volatile("" : : "r"(o.get()) : "memory");
    }
  });
  std::printf("# std::mutex free list %.2f ns/pair (pool/that %.2f)\n", locked,
              pooled / locked);
  std::printf("# new/delete %.2f ns/pair (pool/that %.2f)\n", plain,
              pooled / plain);
  gorobench::check("pool_getput", std::uint64_t(total));
  gorobench::result("pool_getput", pooled, "ns/pair");
}
