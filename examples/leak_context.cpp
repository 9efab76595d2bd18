// leak_context.cpp: goroutine leaks and how a context prevents them (the
// seed's "Common pitfalls: goroutine leaks").
//
//   leak_context [queries]
//
// BAD: first_reply() asks three replicas at once on an unbuffered channel
// and returns the first answer. The two slower replicas then block
// forever on their send: nobody will ever receive. Each call leaks two
// goroutines; num_goroutine() grows and a goroutine dump shows them all
// parked in [chan send].
//
// GOOD: the replicas also select on the caller's context, and the caller
// cancels it once it has its answer: the losers return. The seed's loop
// ("do something repeatedly") gets the same treatment: a select on
// ctx.done() with a default case, stopped by cancel(), and a deadline
// (with_timeout) that stops a worker by itself.
//
// Exits 1 if the good versions leave goroutines behind or the bad one does
// not leak (then the demo would show nothing).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;

// A replica that answers after `delay`.
int ask_replica(int replica, std::chrono::milliseconds delay) {
  goro::sleep(delay);
  return replica;
}

// BAD: the losers block forever on `replies`, which main never reads again.
// `leaked` keeps the channels so that main can drain them at the end (only
// a receive can ever free those goroutines).
int first_reply_leaky(std::vector<goro::chan<int>>& leaked) {
  auto replies = goro::make_chan<int>();  // unbuffered
  for (int r = 0; r < 3; r++)
    goro::go([replies, r] {
      replies.send(ask_replica(r, std::chrono::milliseconds(1 + r)));
    });
  leaked.push_back(replies);
  return *replies.recv();
}

// GOOD: each replica gives up when the caller no longer waits.
int first_reply(const goro::context& parent) {
  auto [ctx, cancel] = goro::with_cancel(parent);
  auto replies = goro::make_chan<int>();
  goro::wait_group wg;
  for (int r = 0; r < 3; r++) {
    wg.add(1);
    goro::go([replies, r, ctx = ctx, &wg] {
      const int answer = ask_replica(r, std::chrono::milliseconds(1 + r));
      goro::select(goro::case_send(replies, answer),
                   goro::case_recv(ctx.done()));
      wg.done();
    });
  }
  const int first = *replies.recv();
  cancel();   // the others' selects take the ctx.done() case
  wg.wait();  // `wg` lives in this frame: wait before it goes away
  return first;
}

// Counts the goroutines parked in a channel send in a full dump.
int parked_in_send() {
  const std::string dump = goro::debug::stack(true);
  int n = 0;
  for (std::size_t at = 0;
       (at = dump.find("[chan send]", at)) != std::string::npos; ++at)
    ++n;
  return n;
}

// A goroutine that has just called wg.done() is still counted until it
// returns: wait, boundedly, for the count to settle.
std::int64_t settled_goroutines(std::int64_t want) {
  const auto until = std::chrono::steady_clock::now() + 2s;
  while (goro::num_goroutine() != want &&
         std::chrono::steady_clock::now() < until)
    goro::sleep(1ms);
  return goro::num_goroutine();
}

}  // namespace

int main(int argc, char** argv) {
  const int queries = argc > 1 ? std::atoi(argv[1]) : 10;
  if (queries < 1) {
    std::fprintf(stderr, "usage: leak_context [queries >= 1]\n");
    return 2;
  }
  return goro::run([&]() -> int {
    int rc = 0;
    const std::int64_t base = goro::num_goroutine();
    std::printf("=== BAD: %d queries, the slow replicas block forever ===\n",
                queries);
    std::vector<goro::chan<int>> leaked;
    for (int q = 0; q < queries; q++) first_reply_leaky(leaked);
    // Wait (bounded) until every loser is parked on its send.
    const int want_leaked = 2 * queries;
    const auto until = std::chrono::steady_clock::now() + 5s;
    int in_send = 0;
    while ((in_send = parked_in_send()) < want_leaked &&
           std::chrono::steady_clock::now() < until)
      goro::sleep(1ms);
    const std::int64_t after_bad = goro::num_goroutine();
    std::printf(
        "num_goroutine: %lld before, %lld after (%lld leaked); the dump shows "
        "%d goroutines in [chan send]\n",
        (long long)base, (long long)after_bad, (long long)(after_bad - base),
        in_send);
    if (after_bad - base != want_leaked || in_send != want_leaked) {
      std::printf("FAIL: expected %d leaked goroutines\n", want_leaked);
      rc = 1;
    }
    // The only cure after the fact: somebody receives.
    for (auto& ch : leaked) {
      ch.recv();
      ch.recv();
    }
    std::printf("drained by hand: num_goroutine %lld\n",
                (long long)settled_goroutines(base));

    std::printf("\n=== GOOD: the same queries with a context ===\n");
    for (int q = 0; q < queries; q++) first_reply(goro::background());
    const std::int64_t after_good = settled_goroutines(base);
    std::printf("num_goroutine: %lld before, %lld after\n", (long long)base,
                (long long)after_good);
    if (after_good != base) {
      std::printf("FAIL: the context version leaked\n");
      rc = 1;
    }

    std::printf("\n=== GOOD: a loop with a way out ===\n");
    {
      auto [ctx, cancel] = goro::with_cancel(goro::background());
      goro::wait_group wg;
      std::int64_t rounds = 0;
      wg.add(1);
      goro::go([ctx = ctx, &rounds, &wg] {
        for (;;) {
          bool stop = false;
          goro::select(goro::case_recv(ctx.done(), [&](bool) { stop = true; }),
                       goro::case_default());
          if (stop) break;  // exit when the context is canceled
          ++rounds;         // do something repeatedly
          goro::sleep(100us);
        }
        wg.done();
      });
      goro::sleep(20ms);
      cancel();  // later, when you want to stop the goroutine
      wg.wait();
      std::printf("the loop ran %lld rounds and returned after cancel(): %s\n",
                  (long long)rounds, ctx.err().message().c_str());
    }
    {
      auto [ctx, cancel] = goro::with_timeout(goro::background(), 30ms);
      auto done = goro::make_chan<void>();
      const auto t0 = std::chrono::steady_clock::now();
      goro::go([ctx = ctx, done] {
        goro::ticker tick(5ms);
        int ticks = 0;
        while (goro::select(goro::case_recv(ctx.done()),
                            goro::case_recv(tick.c)) == 1)
          ++ticks;
        std::printf("worker with a 30 ms deadline: %d ticks, then \"%s\"\n",
                    ticks, ctx.err().message().c_str());
        done.close();
      });
      done.recv();
      cancel();  // releases the context's timer (Go: defer cancel())
      const auto ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
      if (ms < 30) {
        std::printf("FAIL: the deadline fired early (%.1f ms)\n", ms);
        rc = 1;
      }
    }
    const std::int64_t end = settled_goroutines(base);
    std::printf("\nnum_goroutine at the end: %lld (at the start: %lld)\n",
                (long long)end, (long long)base);
    if (end != base) rc = 1;
    if (rc == 0) std::printf("leak_context: ok\n");
    return rc;
  });
}
