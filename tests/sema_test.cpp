// sema_test.cpp: the runtime semaphore's wait structure (sema.cpp): many
// addresses hashing to one root, each with its own FIFO of waiters (LIFO
// for re-queued mutex waiters), found in a treap by address.
#include "runtime/sema.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <goro/goro.hpp>
#include <random>
#include <vector>

#include "runtime/g.hpp"
#include "runtime/tls.hpp"
#include "test_support.hpp"

namespace {

using goro::rt::G;

// 251 roots, hashed by (address >> 3) % 251: addresses 251 * 8 bytes apart
// share a root.
constexpr std::size_t root_stride = 251 * 8 / sizeof(std::uint32_t);

struct woken {
  int addr;
  int seq;
};

// Parks one waiter on sema[addr] and returns once it is parked (its G is
// waiting), so waiters queue in the order they are started.
void start_waiter(std::uint32_t* sema, int addr, int seq, bool lifo,
                  std::vector<woken>* log, std::atomic<int>* nlog) {
  std::atomic<G*> gp{nullptr};
  goro::go([=, &gp] {
    gp.store(goro::rt::getg());
    goro::rt::semacquire(sema, goro::rt::wait_reason::semacquire, lifo);
    (*log)[nlog->fetch_add(1)] = woken{addr, seq};
  });
  goro_test::deadline limit(std::chrono::seconds(10));
  while ((gp.load() == nullptr ||
          goro::rt::readgstatus(gp.load()) != goro::rt::g_waiting) &&
         !limit.passed())
    goro::gosched();
  ASSERT_FALSE(limit.passed())
      << "waiter " << addr << "/" << seq << " never parked";
}

// 40 addresses in one root, 6 waiters each (the fourth queued LIFO, as a
// mutex re-waiter is): every release wakes the head of its own address's
// queue, whatever the other addresses in the root do, in a random order of
// releases.
TEST(Sema, ManyAddressesInOneRootKeepTheirOwnOrder) {
  constexpr int naddr = 40, nwait = 6, lifo_seq = 3;
  std::vector<std::uint32_t> mem(naddr * root_stride + 1, 0);
  std::vector<woken> log(naddr * (nwait + 1));
  std::atomic<int> nlog{0};
  std::vector<int> bad;
  goro::options opt;
  opt.gomaxprocs = 1;
  goro::run(opt, [&] {
    auto sema = [&](int a) { return &mem[std::size_t(a) * root_stride]; };
    // Interleave the addresses so the treap sees inserts and removals in
    // every position.
    for (int seq = 0; seq < nwait; seq++)
      for (int a = 0; a < naddr; a++)
        start_waiter(sema((a * 7) % naddr), (a * 7) % naddr, seq,
                     seq == lifo_seq, &log, &nlog);
    // Expected wake order per address: LIFO puts seq 3 first.
    std::vector<std::vector<int>> expect(naddr);
    for (int a = 0; a < naddr; a++) {
      expect[a] = {lifo_seq, 0, 1, 2, 4, 5};
      std::reverse(expect[a].begin(), expect[a].end());  // pop from back
    }
    std::vector<int> order;
    for (int a = 0; a < naddr; a++)
      for (int k = 0; k < nwait; k++) order.push_back(a);
    std::mt19937 rng(12345);
    std::shuffle(order.begin(), order.end(), rng);
    auto release = [&](int a) {
      int before = nlog.load();
      goro::rt::semrelease(sema(a));
      goro_test::deadline limit(std::chrono::seconds(10));
      while (nlog.load() == before && !limit.passed()) goro::gosched();
      if (nlog.load() != before + 1) {
        bad.push_back(-1);
        return;
      }
      woken w = log[before];
      int want = expect[a].back();
      expect[a].pop_back();
      if (w.addr != a || w.seq != want) bad.push_back(a * 100 + w.seq);
    };
    // Half the releases; then one more waiter per address, which queues
    // behind the ones left (also behind a node promoted by a release);
    // then the rest, shuffled again.
    const std::size_t half = order.size() / 2;
    for (std::size_t k = 0; k < half && bad.empty(); k++) release(order[k]);
    for (int a = 0; a < naddr; a++) {
      start_waiter(sema(a), a, nwait, false, &log, &nlog);
      expect[a].insert(expect[a].begin(), nwait);
    }
    std::vector<int> rest(order.begin() + std::ptrdiff_t(half), order.end());
    for (int a = 0; a < naddr; a++) rest.push_back(a);
    std::shuffle(rest.begin(), rest.end(), rng);
    for (int a : rest) {
      if (!bad.empty()) break;
      release(a);
    }
  });
  EXPECT_EQ(nlog.load(), naddr * (nwait + 1));
  EXPECT_TRUE(bad.empty()) << "first wrong wake-up (addr*100+seq, -1 for "
                              "none): "
                           << (bad.empty() ? 0 : bad.front());
}

// A release on an address nobody waits on, in a root full of waiters for
// other addresses, wakes nobody and leaves the count for the next acquirer.
TEST(Sema, ReleaseOfAnotherAddressInTheRootWakesNobody) {
  std::vector<std::uint32_t> mem(3 * root_stride + 1, 0);
  std::vector<woken> log(8);
  std::atomic<int> nlog{0};
  int after_release = -1;
  goro::options opt;
  opt.gomaxprocs = 1;
  goro::run(opt, [&] {
    for (int i = 0; i < 4; i++) start_waiter(&mem[0], 0, i, false, &log, &nlog);
    goro::rt::semrelease(&mem[root_stride]);  // same root, no waiters
    for (int i = 0; i < 100; i++) goro::gosched();
    after_release = nlog.load();
    goro::rt::semacquire(&mem[root_stride],
                         goro::rt::wait_reason::semacquire);  // takes it
    // One release at a time: several at once would make the last woken
    // run first (it takes runnext), which is scheduling, not queue order.
    for (int i = 0; i < 4; i++) {
      goro::rt::semrelease(&mem[0]);
      goro_test::deadline limit(std::chrono::seconds(10));
      while (nlog.load() < i + 1 && !limit.passed()) goro::gosched();
    }
  });
  EXPECT_EQ(after_release, 0);
  EXPECT_EQ(nlog.load(), 4);
  for (int i = 0; i < 4; i++) EXPECT_EQ(log[i].seq, i) << "FIFO order";
}

}  // namespace
