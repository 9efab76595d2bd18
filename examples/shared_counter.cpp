// shared_counter.cpp: the seed's "race conditions" pitfall, counted.
//
//   shared_counter [goroutines]
//
// BAD: each goroutine reads the counter, yields, and writes back the value
// plus one: updates made in between are lost. (The seed's plain counter++
// from many goroutines is a data race, undefined behaviour in C++ as in
// Go; here the counter is an atomic so the program stays defined, and the
// read-modify-write is still not atomic, which is the bug.) GOOD: a
// goro::mutex around the update; ALTERNATIVE: each goroutine sends a
// signal on a channel and one goroutine counts them.
//
// Exits 1 if a good version miscounts.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>
#include <mutex>

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (n < 1) {
    std::fprintf(stderr, "usage: shared_counter [goroutines >= 1]\n");
    return 2;
  }
  return goro::run([n]() -> int {
    int rc = 0;
    {  // BAD: read, yield, write
      std::atomic<int> counter{0};
      goro::wait_group wg;
      wg.add(n);
      for (int i = 0; i < n; i++)
        goro::go([&] {
          const int seen = counter.load();
          goro::gosched();  // any scheduling point here loses updates
          counter.store(seen + 1);
          wg.done();
        });
      wg.wait();
      std::printf("BAD (read, yield, write):  %5d of %d increments kept\n",
                  counter.load(), n);
    }
    {  // GOOD: a mutex
      goro::mutex mu;
      int counter = 0;
      goro::wait_group wg;
      wg.add(n);
      for (int i = 0; i < n; i++)
        goro::go([&] {
          {
            std::lock_guard<goro::mutex> lock(mu);
            const int seen = counter;
            goro::gosched();  // others wait on the mutex meanwhile
            counter = seen + 1;
          }
          wg.done();
        });
      wg.wait();
      std::printf("GOOD (goro::mutex):        %5d of %d\n", counter, n);
      if (counter != n) rc = 1;
    }
    {  // ALTERNATIVE: channels; only the main goroutine touches the counter
      int counter = 0;
      auto ch = goro::make_chan<void>(std::size_t(n));
      for (int i = 0; i < n; i++) goro::go([ch] { ch.send(); });
      for (int i = 0; i < n; i++) {
        ch.recv();
        counter++;
      }
      std::printf("ALTERNATIVE (a channel):   %5d of %d\n", counter, n);
      if (counter != n) rc = 1;
    }
    std::printf(rc == 0 ? "shared_counter: ok\n" : "FAIL: miscounted\n");
    return rc;
  });
}
