// work_stealing.cpp: Ps that run out of work steal half of another P's run
// queue (the seeds' work-stealing examples, with the runtime's own per-P
// counts).
//
//   work_stealing [slow_ms] [batch_base] [tasks]
//
// 1. The seed's ten goroutines, five quick and five that sleep `slow_ms`
//    (100 by default): the quick ones finish while the slow ones are
//    parked on timers.
// 2. The seed's demonstrateWorkStealing: one batch of 100 + p * 50
//    CPU-bound goroutines per P (`batch_base` instead of 100), each batch
//    spawned by one goroutine, so it starts in a single P's run queue.
//    The table shows, per P, the goroutines it ran and those it stole.
//    With GOMAXPROCS=1 there is nobody to steal; on a machine with fewer
//    free CPUs than Ps, the thieves get fewer chances (see the note
//    printed).
// 3. "Excessive parallelism": `tasks` CPU-bound tasks as one goroutine
//    each, then as gomaxprocs goroutines that split them. On goro, as on
//    Go, a goroutine is cheap enough that both take about the same time:
//    more goroutines than Ps buy no more parallelism, only more switches.
//
// Exits 1 if a goroutine did not run or the two ways disagree.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0)
      .count();
}

// ~50-100 us of CPU work the compiler cannot fold.
std::uint64_t cpu_task(std::uint64_t seed) {
  std::uint64_t x = seed;
  for (int i = 0; i < 100'000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    asm volatile("" : "+r"(x));
  }
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  const int slow_ms = argc > 1 ? std::atoi(argv[1]) : 100;
  const int batch_base = argc > 2 ? std::atoi(argv[2]) : 100;
  const int tasks = argc > 3 ? std::atoi(argv[3]) : 1000;
  if (slow_ms < 0 || batch_base < 1 || tasks < 1) {
    std::fprintf(stderr,
                 "usage: work_stealing [slow_ms >= 0] [batch_base >= 1] "
                 "[tasks >= 1]\n");
    return 2;
  }
  return goro::run([&]() -> int {
    int rc = 0;
    const int procs = goro::gomaxprocs();
    std::printf("gomaxprocs %d, num_cpu %d\n", procs, goro::num_cpu());

    std::printf("\n=== 1. Quick and slow goroutines ===\n");
    {
      goro::wait_group wg;
      for (int i = 0; i < 10; i++) {
        wg.add(1);
        goro::go(
            [&wg, slow_ms](int id) {
              if (id < 5) {  // these goroutines finish quickly
                std::printf("Quick work done: %d\n", id);
              } else {  // these take longer: parked on a timer meanwhile
                goro::sleep(std::chrono::milliseconds(slow_ms));
                std::printf("Slow work done: %d\n", id);
              }
              wg.done();
            },
            i);
      }
      wg.wait();  // the seed sleeps 200 ms and hopes
    }

    std::printf("\n=== 2. Uneven batches, one per P ===\n");
    {
      const auto before = goro::debug::per_p_stats();
      std::atomic<int> ran{0};
      std::atomic<std::uint64_t> sink{0};
      int total = 0;
      goro::wait_group wg;
      const auto t0 = clock_type::now();
      for (int p = 0; p < procs; p++) {
        const int workload = batch_base + p * batch_base / 2;  // uneven
        total += workload;
        wg.add(workload);
        goro::go([&, workload] {  // the batch starts in this P's queue
          for (int j = 0; j < workload; j++)
            goro::go([&, j] {
              sink += cpu_task(std::uint64_t(j));
              ran++;
              wg.done();
            });
        });
      }
      wg.wait();
      const double ms = ms_since(t0);
      const auto after = goro::debug::per_p_stats();
      std::printf("Completed uneven workload (%d goroutines) in %.1f ms\n",
                  total, ms);
      std::printf("%-4s %15s %18s\n", "P", "goroutines run",
                  "goroutines stolen");
      std::uint64_t stolen = 0;
      for (const auto& a : after) {
        std::uint64_t run0 = 0, stolen0 = 0;
        for (const auto& b : before)
          if (b.id == a.id) {
            run0 = b.goroutines_run;
            stolen0 = b.goroutines_stolen;
          }
        std::printf("%-4d %15llu %18llu\n", a.id,
                    (unsigned long long)(a.goroutines_run - run0),
                    (unsigned long long)(a.goroutines_stolen - stolen0));
        stolen += a.goroutines_stolen - stolen0;
      }
      if (procs == 1)
        std::printf("(one P: nobody to steal from; try GOMAXPROCS=2)\n");
      else if (stolen == 0)
        std::printf(
            "(nothing stolen: the other Ps' threads never got a CPU while the "
            "work lasted, a busy machine or fewer CPUs than Ps)\n");
      else
        std::printf("(work stealing balanced the load across the Ps)\n");
      if (ran.load() != total) {
        std::printf("FAIL: %d of %d goroutines ran\n", ran.load(), total);
        rc = 1;
      }
    }

    std::printf("\n=== 3. %d CPU-bound tasks: a goroutine each, or %d ===\n",
                tasks, procs);
    {
      std::atomic<std::uint64_t> a{0};
      goro::wait_group wg;
      auto t0 = clock_type::now();
      wg.add(tasks);
      for (int i = 0; i < tasks; i++)
        goro::go([&, i] {
          a += cpu_task(std::uint64_t(i));
          wg.done();
        });
      wg.wait();
      const double many_ms = ms_since(t0);

      // Create only as many goroutines as Ps; collect on a channel.
      auto results = goro::make_chan<std::uint64_t>(std::size_t(procs));
      t0 = clock_type::now();
      for (int w = 0; w < procs; w++)
        goro::go([results, w, procs, tasks] {
          std::uint64_t sum = 0;
          for (int i = w; i < tasks; i += procs)
            sum += cpu_task(std::uint64_t(i));
          results.send(sum);
        });
      std::uint64_t b = 0;
      for (int w = 0; w < procs; w++) b += *results.recv();
      const double few_ms = ms_since(t0);
      std::printf("%d goroutines: %.1f ms; %d goroutines: %.1f ms\n", tasks,
                  many_ms, procs, few_ms);
      if (a.load() != b) {
        std::printf("FAIL: the two ways computed different sums\n");
        rc = 1;
      }
    }
    if (rc == 0) std::printf("work_stealing: ok\n");
    return rc;
  });
}
