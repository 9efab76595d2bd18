// Tests of the per-P local run queue, the global run queue's overflow path
// and the steal order: ports of Go's TestSchedLocalQueue,
// TestSchedLocalQueueSteal, TestSchedLocalQueueEmpty and TestStealOrder
// (runtime/proc_test.go, export_test.go, proc_runtime_test.go).
//
// No running runtime is needed: the Ps and Gs are plain objects driven
// directly through the internal API, as Go's export_test.go does.
#include "runtime/runq.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <numeric>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/g.hpp"
#include "runtime/globrunq.hpp"
#include "runtime/p.hpp"
#include "runtime/steal.hpp"
#include "test_support.hpp"

namespace {

using goro::rt::G;
using goro::rt::P;
using goro::rt::runqempty;
using goro::rt::runqget;
using goro::rt::runqlen;
using goro::rt::runqput;
using goro::rt::runqsteal;

constexpr std::uint32_t kRunqSize = 256;  // len(p.runq) in Go

// Gs live in one array; a G's identity in these tests is its index.
struct gpool {
  explicit gpool(std::size_t n) : gs(new G[n]), n(n) {}
  std::unique_ptr<G[]> gs;
  std::size_t n;
  G* at(std::size_t i) { return &gs[i]; }
  // -1 when gp is not one of ours.
  long index(const G* gp) const {
    if (gp < &gs[0] || gp >= &gs[0] + n) return -1;
    return static_cast<long>(gp - &gs[0]);
  }
};

G* get(P* pp, bool* inherit = nullptr) {
  bool dummy = false;
  return runqget(pp, inherit ? inherit : &dummy);
}

// Pops the global queue dry; returns what it held, in order.
std::vector<G*> drain_global() {
  std::vector<G*> out;
  while (G* gp = goro::rt::globrunqget_for_test()) out.push_back(gp);
  return out;
}

// Pops the local queue dry (runnext first, then FIFO).
std::vector<G*> drain_local(P* pp) {
  std::vector<G*> out;
  while (G* gp = get(pp)) out.push_back(gp);
  return out;
}

class RunqTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The global queue is process-wide; start each test from empty.
    drain_global();
    ASSERT_EQ(goro::rt::globrunqsize(), 0u);
  }
  void TearDown() override { drain_global(); }
};

// TestSchedLocalQueue: for every length 0..256 put that many distinct Gs and
// get them back in FIFO order; the queue is empty before and after.
TEST_F(RunqTest, PutGetEveryLength) {
  auto p = std::make_unique<P>();
  gpool pool(kRunqSize);
  for (std::uint32_t i = 0; i <= kRunqSize; i++) {
    ASSERT_TRUE(runqempty(p.get())) << "iter " << i;
    ASSERT_EQ(get(p.get()), nullptr)
        << "runq is not empty initially, iter " << i;
    for (std::uint32_t j = 0; j < i; j++) runqput(p.get(), pool.at(j), false);
    ASSERT_EQ(runqlen(p.get()), i);
    ASSERT_EQ(runqempty(p.get()), i == 0);
    for (std::uint32_t j = 0; j < i; j++) {
      bool inherit = true;
      G* gp = get(p.get(), &inherit);
      ASSERT_EQ(gp, pool.at(j)) << "bad element at iter " << i << "/" << j
                                << " (got index " << pool.index(gp) << ")";
      EXPECT_FALSE(inherit) << "ring entries must not inherit the time slice";
      ASSERT_EQ(runqlen(p.get()), i - j - 1);
    }
    ASSERT_EQ(get(p.get()), nullptr)
        << "runq is not empty afterwards, iter " << i;
    ASSERT_TRUE(runqempty(p.get()));
  }
  // A full local queue never spilled to the global queue.
  EXPECT_EQ(goro::rt::globrunqsize(), 0u);
}

// Interleaved puts and gets wrap the ring's free-running head and tail many
// times over; the order stays FIFO.
TEST_F(RunqTest, PutGetWrapsAround) {
  auto p = std::make_unique<P>();
  gpool pool(kRunqSize);
  std::size_t next_put = 0, next_get = 0;
  for (int round = 0; round < 5000; round++) {
    int puts = 1 + (round * 7) % 13;
    for (int k = 0; k < puts && next_put - next_get < kRunqSize;
         k++, next_put++)
      runqput(p.get(), pool.at(next_put % kRunqSize), false);
    int gets = 1 + (round * 5) % 11;
    for (int k = 0; k < gets && next_get < next_put; k++, next_get++) {
      G* gp = get(p.get());
      ASSERT_EQ(gp, pool.at(next_get % kRunqSize)) << "round " << round;
    }
    ASSERT_EQ(runqlen(p.get()), next_put - next_get);
  }
  drain_local(p.get());
  EXPECT_EQ(goro::rt::globrunqsize(), 0u);
}

// TestSchedLocalQueueSteal: for every length 0..256, a thief takes
// n - n/2 Gs (the oldest ones, from the head), returning one of them and
// leaving the rest in its own queue; the victim keeps the newest n/2 in
// order; every G is accounted for exactly once.
TEST_F(RunqTest, StealEveryLength) {
  auto victim = std::make_unique<P>();
  auto thief = std::make_unique<P>();
  gpool pool(kRunqSize);
  for (std::uint32_t i = 0; i <= kRunqSize; i++) {
    for (std::uint32_t j = 0; j < i; j++)
      runqput(victim.get(), pool.at(j), false);
    const std::uint32_t want = i - i / 2;

    G* stolen = runqsteal(thief.get(), victim.get(), true);
    if (i == 0) {
      ASSERT_EQ(stolen, nullptr) << "stole from an empty queue";
    } else {
      ASSERT_NE(stolen, nullptr) << "nothing stolen from a queue of " << i;
    }
    ASSERT_EQ(runqlen(thief.get()), want == 0 ? 0 : want - 1) << "iter " << i;
    ASSERT_EQ(runqlen(victim.get()), i - want) << "iter " << i;

    std::vector<int> seen(i, 0);
    std::vector<long> thief_got;
    if (stolen) thief_got.push_back(pool.index(stolen));
    std::vector<G*> tq = drain_local(thief.get());
    for (G* gp : tq) thief_got.push_back(pool.index(gp));
    std::vector<G*> vq = drain_local(victim.get());

    // The thief got exactly the oldest `want` Gs.
    ASSERT_EQ(thief_got.size(), want) << "bad steal at iter " << i;
    std::vector<long> sorted = thief_got;
    std::sort(sorted.begin(), sorted.end());
    for (std::uint32_t k = 0; k < want; k++)
      ASSERT_EQ(sorted[k], static_cast<long>(k))
          << "thief did not take the head of the queue, iter " << i;
    // What stayed in the thief's ring kept its FIFO order.
    for (std::size_t k = 1; k < tq.size(); k++)
      ASSERT_LT(pool.index(tq[k - 1]), pool.index(tq[k])) << "iter " << i;
    // The victim kept the tail, in order.
    ASSERT_EQ(vq.size(), i - want);
    for (std::size_t k = 0; k < vq.size(); k++)
      ASSERT_EQ(vq[k], pool.at(want + k)) << "victim order, iter " << i;

    for (long x : thief_got) {
      ASSERT_GE(x, 0);
      ASSERT_LT(x, static_cast<long>(i));
      seen[x]++;
    }
    for (G* gp : vq) seen[pool.index(gp)]++;
    for (std::uint32_t j = 0; j < i; j++)
      ASSERT_EQ(seen[j], 1) << "bad element " << j << " at iter " << i;
  }
  EXPECT_EQ(goro::rt::globrunqsize(), 0u);
}

// runnext is stolen only when the ring is empty and the caller allows it.
TEST_F(RunqTest, StealRunnext) {
  auto victim = std::make_unique<P>();
  auto thief = std::make_unique<P>();
  gpool pool(4);

  runqput(victim.get(), pool.at(0), true);  // runnext only
  ASSERT_FALSE(runqempty(victim.get()));
  ASSERT_EQ(runqlen(victim.get()), 0u) << "runnext is not counted by runqlen";
  EXPECT_EQ(runqsteal(thief.get(), victim.get(), false), nullptr)
      << "runnext stolen although steal_runnext=false";
  ASSERT_FALSE(runqempty(victim.get()));
  EXPECT_EQ(runqsteal(thief.get(), victim.get(), true), pool.at(0));
  EXPECT_TRUE(runqempty(victim.get()));
  EXPECT_TRUE(runqempty(thief.get()));

  // With a non-empty ring the ring is stolen from, never runnext.
  runqput(victim.get(), pool.at(1), false);
  runqput(victim.get(), pool.at(2), true);
  EXPECT_EQ(runqsteal(thief.get(), victim.get(), true), pool.at(1));
  bool inherit = false;
  EXPECT_EQ(get(victim.get(), &inherit), pool.at(2));
  EXPECT_TRUE(inherit);
  EXPECT_TRUE(runqempty(victim.get()));
  EXPECT_TRUE(runqempty(thief.get()));
}

// runqput(next=true) puts gp in runnext and kicks the previous runnext to
// the tail; runqget returns runnext first, with inherit_time == true.
TEST_F(RunqTest, Runnext) {
  auto p = std::make_unique<P>();
  gpool pool(8 + kRunqSize);
  runqput(p.get(), pool.at(0), false);
  runqput(p.get(), pool.at(1), true);  // runnext = 1
  EXPECT_EQ(runqlen(p.get()), 1u);
  runqput(p.get(), pool.at(2), true);  // runnext = 2, 1 kicked to tail
  EXPECT_EQ(runqlen(p.get()), 2u);
  runqput(p.get(), pool.at(3), false);  // ring: 0 1 3
  EXPECT_EQ(runqlen(p.get()), 3u);

  struct want {
    int idx;
    bool inherit;
  };
  const want order[] = {{2, true}, {0, false}, {1, false}, {3, false}};
  for (const want& w : order) {
    bool inherit = !w.inherit;
    G* gp = get(p.get(), &inherit);
    ASSERT_EQ(gp, pool.at(w.idx)) << "got index " << pool.index(gp);
    EXPECT_EQ(inherit, w.inherit) << "G " << w.idx;
  }
  EXPECT_EQ(get(p.get()), nullptr);
  EXPECT_TRUE(runqempty(p.get()));

  // Kicking runnext into a full ring spills to the global queue. (Every G
  // is distinct: the global queue links Gs through G::schedlink.)
  for (std::uint32_t j = 0; j < kRunqSize; j++)
    runqput(p.get(), pool.at(8 + j), false);
  runqput(p.get(), pool.at(4), true);
  runqput(p.get(), pool.at(5), true);  // kicks 4 into a full ring
  EXPECT_EQ(goro::rt::globrunqsize(), kRunqSize / 2 + 1);
  EXPECT_EQ(runqlen(p.get()), kRunqSize / 2);
  std::vector<G*> global = drain_global();
  ASSERT_EQ(global.size(), kRunqSize / 2 + 1);
  EXPECT_EQ(global.back(), pool.at(4)) << "the kicked runnext goes last";
  bool inherit = false;
  EXPECT_EQ(get(p.get(), &inherit), pool.at(5));
  EXPECT_TRUE(inherit);
  drain_local(p.get());
}

// runqputslow: the 257th put into a full ring moves the older half (128)
// plus the new G — 129 Gs — to the global queue, in order; the local queue
// keeps the newer 128.
TEST_F(RunqTest, OverflowToGlobalQueue) {
  auto p = std::make_unique<P>();
  gpool pool(kRunqSize + 1);
  for (std::uint32_t j = 0; j < kRunqSize; j++)
    runqput(p.get(), pool.at(j), false);
  ASSERT_EQ(runqlen(p.get()), kRunqSize);
  ASSERT_EQ(goro::rt::globrunqsize(), 0u) << "spilled before the ring was full";

  runqput(p.get(), pool.at(kRunqSize), false);
  ASSERT_EQ(goro::rt::globrunqsize(), kRunqSize / 2 + 1);
  ASSERT_EQ(runqlen(p.get()), kRunqSize / 2);

  std::vector<G*> global = drain_global();
  ASSERT_EQ(global.size(), kRunqSize / 2 + 1);
  for (std::uint32_t k = 0; k < kRunqSize / 2; k++)
    EXPECT_EQ(global[k], pool.at(k))
        << "global position " << k << " holds index " << pool.index(global[k]);
  EXPECT_EQ(global[kRunqSize / 2], pool.at(kRunqSize)) << "the new G goes last";
  EXPECT_EQ(goro::rt::globrunqsize(), 0u);

  std::vector<G*> local = drain_local(p.get());
  ASSERT_EQ(local.size(), kRunqSize / 2);
  for (std::uint32_t k = 0; k < kRunqSize / 2; k++)
    EXPECT_EQ(local[k], pool.at(kRunqSize / 2 + k)) << "local position " << k;
}

// Many puts in a row keep spilling in batches of 129 (the ring's older half
// plus the new G); the result matches a simple model of Go's runqput /
// runqputslow exactly: nothing lost, duplicated or reordered.
TEST_F(RunqTest, RepeatedOverflowMatchesModel) {
  auto p = std::make_unique<P>();
  const std::size_t n = 5000;
  gpool pool(n);
  std::deque<std::size_t> model_local;
  std::vector<std::size_t> model_global;
  for (std::size_t j = 0; j < n; j++) {
    runqput(p.get(), pool.at(j), false);
    if (model_local.size() < kRunqSize) {
      model_local.push_back(j);
    } else {
      for (std::uint32_t k = 0; k < kRunqSize / 2; k++) {
        model_global.push_back(model_local.front());
        model_local.pop_front();
      }
      model_global.push_back(j);
    }
    ASSERT_EQ(runqlen(p.get()), model_local.size()) << "after put " << j;
  }
  ASSERT_EQ(goro::rt::globrunqsize(), model_global.size());
  std::vector<G*> global = drain_global();
  std::vector<G*> local = drain_local(p.get());
  ASSERT_EQ(global.size(), model_global.size());
  ASSERT_EQ(local.size(), model_local.size());
  for (std::size_t k = 0; k < global.size(); k++)
    ASSERT_EQ(global[k], pool.at(model_global[k]))
        << "global position " << k << " holds " << pool.index(global[k]);
  for (std::size_t k = 0; k < local.size(); k++)
    ASSERT_EQ(local[k], pool.at(model_local[k])) << "local position " << k;
}

// TestSchedLocalQueueEmpty: runqempty must never report a queue as empty
// while it is not. The owner keeps one G in the queue at every instant by
// putting a second G (with or without runnext kicking) before getting one,
// exactly as Go's RunSchedLocalQueueEmptyTest; another thread calls
// runqempty at the same moment. The racy window is the kick of runnext into
// the ring while runqget empties runnext. Go's checker looks once per
// iteration; this one keeps looking for as long as the owner's put/get pair
// runs (the invariant holds throughout), which samples the few-nanosecond
// window far more often.
TEST_F(RunqTest, EmptyNeverSpurious) {
  auto p = std::make_unique<P>();
  gpool pool(2);
  // Busy-wait rendezvous per iteration: far slower under TSan.
  const int iters = GORO_TEST_TSAN ? 2000 : goro_test::scaled(100000, 10000);

  std::atomic<int> start{0};      // iteration the checker should run (1-based)
  std::atomic<int> pair_done{0};  // the owner finished its put/get pair
  std::atomic<int> finished{0};   // iteration the checker has finished
  std::atomic<int> ready{0};      // rendezvous counter for one iteration
  std::atomic<long> spurious{0};
  std::atomic<long> checks{0};
  std::atomic<int> first_bad{-1};
  std::atomic<bool> abandon{false};
  goro_test::deadline limit(std::chrono::seconds(30));

  std::thread checker([&] {
    long local_checks = 0;
    for (int i = 0; i < iters; i++) {
      while (start.load(std::memory_order_acquire) != i + 1) {
        if (abandon.load(std::memory_order_relaxed)) return;
        if (GORO_TEST_SANITIZED) std::this_thread::yield();
      }
      ready.fetch_add(1);
      while (ready.load() != 2) {
      }
      bool last = false;
      do {
        last = pair_done.load(std::memory_order_acquire) == i + 1;
        local_checks++;
        if (runqempty(p.get())) {
          if (spurious.fetch_add(1) == 0) first_bad.store(i);
          break;
        }
      } while (!last);
      finished.store(i + 1, std::memory_order_release);
    }
    checks.store(local_checks);
  });

  int i = 0;
  bool timed_out = false;
  for (; i < iters; i++) {
    ready.store(0);
    const bool next0 = (i & 1) == 0;
    const bool next1 = (i & 2) == 0;
    runqput(p.get(), pool.at(0), next0);
    start.store(i + 1, std::memory_order_release);
    ready.fetch_add(1);
    while (ready.load() != 2) {
    }
    runqput(p.get(), pool.at(1), next1);
    get(p.get());
    pair_done.store(i + 1, std::memory_order_release);
    while (finished.load(std::memory_order_acquire) != i + 1) {
      if (GORO_TEST_SANITIZED) std::this_thread::yield();
      if (limit.passed()) {
        timed_out = true;
        break;
      }
    }
    if (timed_out) break;
    get(p.get());
    if ((i & 1023) == 0 && limit.passed()) {
      timed_out = true;
      break;
    }
  }
  if (timed_out) abandon.store(true);
  checker.join();
  ASSERT_FALSE(timed_out) << "stopped after " << i << " of " << iters
                          << " iterations";
  EXPECT_EQ(spurious.load(), 0)
      << "runqempty reported a non-empty queue as empty " << spurious.load()
      << " times in " << checks.load() << " checks; first at iteration "
      << first_bad.load() << " (next0=" << ((first_bad.load() & 1) == 0)
      << " next1=" << ((first_bad.load() & 2) == 0) << ")";
  EXPECT_TRUE(runqempty(p.get()));
}

// One owner putting and getting while a thief concurrently steals: every G
// is run (taken from some queue) exactly once. This exercises the CAS on
// runqhead between owner and thief, and the owner's overflow path racing a
// thief.
TEST_F(RunqTest, ConcurrentOwnerAndThief) {
  auto owner = std::make_unique<P>();
  auto thief = std::make_unique<P>();
  const std::size_t n = goro_test::scaled<std::size_t>(400000, 40000);
  gpool pool(n);
  std::vector<std::atomic<int>> taken(n);
  for (auto& t : taken) t.store(0);
  std::atomic<bool> owner_done{false};
  std::atomic<std::size_t> stolen{0};

  auto take = [&](G* gp) {
    long idx = pool.index(gp);
    ASSERT_GE(idx, 0);
    taken[idx].fetch_add(1, std::memory_order_relaxed);
  };

  std::thread th([&] {
    for (;;) {
      bool last = owner_done.load(std::memory_order_acquire);
      G* gp = runqsteal(thief.get(), owner.get(), true);
      if (gp) {
        take(gp);
        stolen.fetch_add(1, std::memory_order_relaxed);
        // A thief only steals into an empty queue: run its own first.
        while (G* g2 = get(thief.get())) {
          take(g2);
          stolen.fetch_add(1, std::memory_order_relaxed);
        }
      } else if (last) {
        break;
      }
    }
  });

  std::size_t next = 0;
  unsigned rnd = 12345;
  while (next < n) {
    rnd = rnd * 1103515245u + 12345u;
    int puts = 1 + (rnd >> 16) % 8;
    for (int k = 0; k < puts && next < n; k++, next++)
      runqput(owner.get(), pool.at(next), (rnd >> 8) % 4 == 0);
    rnd = rnd * 1103515245u + 12345u;
    int gets = (rnd >> 16) % 8;
    for (int k = 0; k < gets; k++) {
      G* gp = get(owner.get());
      if (!gp) break;
      take(gp);
    }
  }
  owner_done.store(true, std::memory_order_release);
  th.join();
  for (G* gp : drain_local(owner.get())) take(gp);
  for (G* gp : drain_global()) take(gp);

  EXPECT_GT(stolen.load(), 0u) << "the thief never stole anything";
  std::size_t bad = 0;
  for (std::size_t j = 0; j < n; j++) {
    if (taken[j].load() != 1) {
      if (bad < 10)
        ADD_FAILURE() << "G " << j << " taken " << taken[j].load() << " times";
      bad++;
    }
  }
  EXPECT_EQ(bad, 0u);
}

// TestStealOrder: for every P count 1..64 and many start values, the
// enumeration visits every P index exactly once and then reports done.
TEST(StealOrder, VisitsEveryPExactlyOnce) {
  goro::rt::random_order ord;
  for (std::uint32_t procs = 1; procs <= 64; procs++) {
    ord.reset(procs);
    // Go checks start(0..len(coprimes)-1); cover far more, including values
    // that select every coprime increment and large r.
    std::vector<std::uint32_t> rs;
    for (std::uint32_t r = 0; r < procs * 70; r++) rs.push_back(r);
    for (std::uint32_t r : {0xFFFFFFFFu, 0x80000000u, 0x9E3779B9u, 123456789u})
      rs.push_back(r);
    for (std::uint32_t r : rs) {
      auto e = ord.start(r);
      std::vector<bool> checked(procs, false);
      for (std::uint32_t k = 0; k < procs; k++) {
        ASSERT_FALSE(e.done()) << "done early: procs " << procs << " r " << r;
        std::uint32_t x = e.position();
        ASSERT_LT(x, procs) << "procs " << procs << " r " << r;
        ASSERT_FALSE(checked[x]) << "duplicate during enumeration: procs "
                                 << procs << " r " << r << " pos " << x;
        checked[x] = true;
        e.next();
      }
      ASSERT_TRUE(e.done()) << "not done: procs " << procs << " r " << r;
    }
  }
}

// Different start values give different (start position, increment)
// pairs: the first procs * phi(procs) values of r do not repeat one
// (Go's second half of RunStealOrderTest). The increment is observed as
// the distance between the first two positions.
TEST(StealOrder, StartValuesSpreadOverPositionsAndIncrements) {
  goro::rt::random_order ord;
  for (std::uint32_t procs = 2; procs <= 64; procs++) {
    ord.reset(procs);
    std::uint32_t ncoprimes = 0;
    for (std::uint32_t i = 1; i <= procs; i++)
      if (std::gcd(i, procs) == 1) ncoprimes++;
    std::set<std::pair<std::uint32_t, std::uint32_t>> seen;
    for (std::uint32_t r = 0; r < procs * ncoprimes; r++) {
      auto e = ord.start(r);
      std::uint32_t pos = e.position();
      e.next();
      std::uint32_t inc = (e.position() + procs - pos) % procs;
      ASSERT_TRUE(seen.insert({pos, inc}).second)
          << "duplicate pos+inc: procs " << procs << " r " << r << " pos "
          << pos << " inc " << inc;
    }
  }
}

// Reusing one random_order for a smaller count after a larger one works
// (the coprime list is rebuilt, as procresize does).
TEST(StealOrder, ResetShrinks) {
  goro::rt::random_order ord;
  ord.reset(64);
  ord.reset(3);
  for (std::uint32_t r = 0; r < 1000; r++) {
    auto e = ord.start(r);
    std::uint32_t mask = 0, steps = 0;
    for (; !e.done() && steps < 10; e.next(), steps++) {
      ASSERT_LT(e.position(), 3u);
      mask |= 1u << e.position();
    }
    EXPECT_EQ(steps, 3u);
    EXPECT_EQ(mask, 7u);
  }
}

}  // namespace
