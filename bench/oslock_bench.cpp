// oslock_bench.cpp: what the OS-lock counting behind async preemption's
// deferral (src/runtime/oslock.cpp) costs on an uncontended std::mutex
// lock/unlock pair. Twin: bench/go/oslock.go (an uncontended sync.Mutex
// pair, Go's nearest equivalent; Go counts nothing for it).
#include <dlfcn.h>
#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <goro/chan.hpp>
#include <goro/runtime.hpp>
#include <mutex>

#include "bench.hpp"

namespace {
using gorobench::clock;
using gorobench::ns_since;

constexpr std::int64_t pairs = 20'000'000;

// The pair through libgoro's counting wrappers, as every std::mutex in the
// program goes.
__attribute__((noinline)) double wrapped(std::mutex& m) {
  auto t0 = clock::now();
  for (std::int64_t i = 0; i < pairs; i++) {
    m.lock();
    m.unlock();
  }
  return ns_since(t0) / double(pairs);
}

// The same pair calling the real functions directly (what the program
// would pay without libgoro's interposition).
__attribute__((noinline)) double direct(pthread_mutex_t* m) {
  using fn = int (*)(pthread_mutex_t*);
  auto lock = reinterpret_cast<fn>(dlsym(RTLD_NEXT, "pthread_mutex_lock"));
  auto unlock = reinterpret_cast<fn>(dlsym(RTLD_NEXT, "pthread_mutex_unlock"));
  auto t0 = clock::now();
  for (std::int64_t i = 0; i < pairs; i++) {
    lock(m);
    unlock(m);
  }
  return ns_since(t0) / double(pairs);
}
}  // namespace

// In a goroutine (the counted path); the '#' lines give the same pair
// uncounted and on a plain thread.
GOROBENCH_WORKLOAD(stdmutex_pair,
                   "an uncontended std::mutex lock/unlock pair in a goroutine "
                   "(Go: sync.Mutex), 20M pairs; ns/pair",
                   "") {
  std::mutex m;
  pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER;
  double counted = 0, uncounted = 0;
  goro::chan<void> done = goro::make_chan<void>();
  goro::go([&] {
    uncounted = direct(&pm);
    counted = wrapped(m);
    done.close();
  });
  done.recv();
  double plain = wrapped(m);
  double plain_direct = direct(&pm);
  std::printf("# goroutine: counted %.2f ns/pair, real functions %.2f\n",
              counted, uncounted);
  std::printf("# plain thread: through the wrappers %.2f, real %.2f\n", plain,
              plain_direct);
  gorobench::check("stdmutex_pair", std::uint64_t(pairs));
  gorobench::result("stdmutex_pair", counted, "ns/pair");
}
