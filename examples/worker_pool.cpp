// worker_pool.cpp: the seed's "scheduler-aware worker pool", complete.
//
// gomaxprocs * 2 worker goroutines take jobs from a buffered channel. Half
// the jobs are I/O-bound (they wait, holding no thread), half CPU-bound;
// CPU-bound jobs first take a slot of a semaphore sized to gomaxprocs, so
// no more goroutines compute at once than there are Ps to run them (the
// rest of the workers stay free for I/O). A monitor goroutine prints the
// goroutine count and the pool's counters on a ticker. Shutdown closes the
// job queue, waits for the workers with a timeout, and cancels the pool's
// context if they do not finish in time: every wait in the pool (job
// queue, semaphore, I/O, result send, monitor) also watches ctx.done(), so
// cancellation ends them all promptly.
//
//   worker_pool [jobs] [work_units] [slow_io_ms]
//
// Part 1 submits `jobs` mixed jobs of `work_units` units and shuts down
// with a generous timeout (every job completes). Part 2 submits I/O jobs of
// `slow_io_ms` and shuts down with a timeout far shorter than that: the
// pool cancels its context and the workers abandon their jobs. Exits 1 if
// a check fails (results lost, more CPU jobs at once than Ps, goroutines
// left behind).
//
// Differences from the Go original, on purpose: I/O jobs wait in a select
// with ctx.done() (time.Sleep cannot be cancelled), and after cancelling,
// Shutdown waits for the workers again before closing the results channel
// (the original closes it while a worker may still send: a panic in Go,
// undefined behaviour in C++).
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>
#include <optional>
#include <string>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
const clock_type::time_point program_start = clock_type::now();

// log.Printf with a millisecond timestamp since the start; one printf per
// line, so lines from concurrent goroutines do not interleave.
__attribute__((format(printf, 1, 2))) void logf(const char* fmt, ...) {
  char msg[512];
  std::va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const double ms = std::chrono::duration<double, std::milli>(
                        clock_type::now() - program_start)
                        .count();
  std::printf("[%8.1f ms] %s\n", ms, msg);
}

// A goroutine that has just signalled (wg.done(), close) is still counted
// until it returns: wait, boundedly, for the count to settle.
std::int64_t settled_goroutines(std::int64_t want) {
  const auto until = clock_type::now() + 2s;
  while (goro::num_goroutine() != want && clock_type::now() < until)
    goro::sleep(1ms);
  return goro::num_goroutine();
}

struct scheduler_stats {
  std::atomic<std::int64_t> goroutines{0};
  std::atomic<std::int64_t> completed{0};
  std::atomic<std::int64_t> cpu_bound_ops{0};
  std::atomic<std::int64_t> cpu_now{0};  // CPU jobs holding a slot now
  std::atomic<std::int64_t> cpu_peak{0};
  std::atomic<std::int64_t> canceled{0};  // jobs abandoned on cancellation
};

struct job {
  int id = 0;
  bool cpu_bound = false;
  int work_units = 0;
};

struct result {
  int job_id = 0;
  std::int64_t value = 0;
  clock_type::duration elapsed{};
};

enum class submit_status { ok, canceled, queue_full };

class worker_pool {
 public:
  explicit worker_pool(int workers)
      : workers_(workers),
        job_queue_(goro::make_chan<job>(std::size_t(workers) * 2)),
        results_(goro::make_chan<result>(std::size_t(workers) * 2)),
        // Limit concurrent CPU-bound operations to GOMAXPROCS: more could
        // not run in parallel anyway, they would only take turns on the Ps.
        cpu_semaphore_(goro::make_chan<void>(std::size_t(goro::gomaxprocs()))) {
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    ctx_ = ctx;
    cancel_ = cancel;
  }

  // The pool's goroutines capture `this`: the pool must outlive them,
  // which shutdown() guarantees by waiting for every one of them.
  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;

  void start(std::chrono::milliseconds monitor_every) {
    logf("Starting pool: workers=%d GOMAXPROCS=%d NumCPU=%d", workers_,
         goro::gomaxprocs(), goro::num_cpu());
    for (int i = 0; i < workers_; ++i) {
      stats_.goroutines++;
      // Go 1.25's wg.Go(func() { p.worker(i) }): add(1), and done() when
      // the goroutine ends, however it ends (the seed's defer wg.Done()).
      wg_.go([this, i] { worker(i); });
    }
    // Background goroutine to monitor the scheduler.
    wg_monitor_.go([this, monitor_every] { monitor(monitor_every); });
  }

  submit_status submit(job j, std::chrono::milliseconds wait) {
    switch (goro::select(goro::case_send(job_queue_, j),
                         goro::case_recv(ctx_.done()),
                         goro::case_recv(goro::after(wait)))) {
      case 0:
        return submit_status::ok;
      case 1:
        return submit_status::canceled;
      default:
        return submit_status::queue_full;
    }
  }

  goro::recv_chan<result> results() const { return results_; }

  // Returns true if the workers finished within `timeout`.
  bool shutdown(std::chrono::milliseconds timeout) {
    logf("Shutting down worker pool...");
    job_queue_.close();  // stop accepting new jobs; workers drain the rest

    auto done = goro::make_chan<void>();
    goro::go([this, done] {
      wg_.wait();
      done.close();
    });
    bool in_time = true;
    if (goro::select(goro::case_recv(done),
                     goro::case_recv(goro::after(timeout))) == 0) {
      logf("All workers finished");
    } else {
      logf("Shutdown timeout, cancelling...");
      in_time = false;
      cancel_();
      done.recv();  // every wait watches ctx: the workers return promptly
      logf("Workers stopped after cancellation");
    }
    cancel_();  // stops the monitor (Go's `defer cancel()`)
    wg_monitor_.wait();
    results_.close();  // no worker can send any more
    return in_time;
  }

  const scheduler_stats& stats() const { return stats_; }

 private:
  void worker(int id) {
    for (;;) {
      std::optional<job> j;
      if (goro::select(goro::case_recv(ctx_.done()),
                       goro::case_recv(job_queue_, j)) == 0) {
        logf("Worker %d: shutting down", id);
        break;
      }
      if (!j) break;  // queue closed and drained

      const auto start = clock_type::now();
      std::optional<result> r = process_job(*j);
      if (!r) {
        stats_.canceled++;
        continue;  // the next select sees ctx.done()
      }
      r->elapsed = clock_type::now() - start;
      if (goro::select(goro::case_send(results_, *r),
                       goro::case_recv(ctx_.done())) == 1)
        break;
      stats_.completed++;
    }
    stats_.goroutines--;
  }

  // std::nullopt: the job was abandoned because the pool was cancelled.
  std::optional<result> process_job(const job& j) {
    if (j.cpu_bound) {
      // Acquire the semaphore for CPU-bound work: at most gomaxprocs of
      // these run at once.
      if (goro::select(goro::case_send(cpu_semaphore_),
                       goro::case_recv(ctx_.done())) == 1)
        return std::nullopt;
      const std::int64_t now = ++stats_.cpu_now;
      for (std::int64_t peak = stats_.cpu_peak.load(); now > peak;)
        if (stats_.cpu_peak.compare_exchange_weak(peak, now)) break;
      stats_.cpu_bound_ops++;
      const std::int64_t value = cpu_intensive_work(j.work_units);
      --stats_.cpu_now;
      cpu_semaphore_.recv();  // release the slot
      return result{j.id, value, {}};
    }
    // I/O-bound simulation: the goroutine parks on a timer and holds no
    // thread meanwhile. Unlike time.Sleep, the select can be cancelled.
    if (goro::select(goro::case_recv(
                         goro::after(std::chrono::milliseconds(j.work_units))),
                     goro::case_recv(ctx_.done())) == 1)
      return std::nullopt;
    return result{j.id, j.work_units, {}};
  }

  // A call-free loop: the runtime preempts it at the end of its time slice
  // (by signal), so it does not starve the other goroutines.
  static std::int64_t cpu_intensive_work(int units) {
    std::int64_t r = 0;
    const std::int64_t n = std::int64_t(units) * 1'000'000;
    for (std::int64_t i = 0; i < n; ++i) {
      r += i * i % 1000;
      asm volatile("" : "+r"(r));
    }
    return r;
  }

  void monitor(std::chrono::milliseconds every) {
    goro::ticker tick(every);
    for (;;) {
      if (goro::select(goro::case_recv(ctx_.done()), goro::case_recv(tick.c)) ==
          0)
        break;
      logf(
          "Monitor: total_goroutines=%lld pool_stats=goroutines=%lld "
          "completed=%lld cpu_ops=%lld",
          (long long)goro::num_goroutine(), (long long)stats_.goroutines.load(),
          (long long)stats_.completed.load(),
          (long long)stats_.cpu_bound_ops.load());
    }
  }

  const int workers_;
  goro::chan<job> job_queue_;
  goro::chan<result> results_;
  goro::chan<void> cpu_semaphore_;  // a token per running CPU-bound job
  goro::context ctx_;
  goro::cancel_func cancel_;
  goro::wait_group wg_, wg_monitor_;
  scheduler_stats stats_;
};

// Collects results until the pool closes the channel; returns the count.
struct collector {
  goro::wait_group wg;
  std::atomic<int> count{0};

  void start(goro::recv_chan<result> results) {
    wg.go([this, results] {
      for (const result& r : results) {
        if (count++ < 5)  // only log the first few
          logf("Result: job=%d value=%lld elapsed=%.1fms", r.job_id,
               (long long)r.value,
               std::chrono::duration<double, std::milli>(r.elapsed).count());
      }
      logf("Total results collected: %d", count.load());
    });
  }
};

int fail(const char* what) {
  std::printf("FAIL: %s\n", what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int jobs = argc > 1 ? std::atoi(argv[1]) : 20;
  const int units = argc > 2 ? std::atoi(argv[2]) : 10;
  const int slow_io_ms = argc > 3 ? std::atoi(argv[3]) : 2000;
  if (jobs < 1 || units < 1 || slow_io_ms < 50) {
    std::fprintf(stderr,
                 "usage: worker_pool [jobs >= 1] [work_units >= 1] "
                 "[slow_io_ms >= 50]\n");
    return 2;
  }
  return goro::run([&]() -> int {
    std::printf("=== goro scheduler configuration ===\n");
    std::printf("GOMAXPROCS: %d\nNumCPU: %d\nInitial goroutines: %lld\n",
                goro::gomaxprocs(), goro::num_cpu(),
                (long long)goro::num_goroutine());
    const std::int64_t baseline = goro::num_goroutine();
    int rc = 0;

    std::printf("\n=== Part 1: %d mixed jobs, generous shutdown timeout ===\n",
                jobs);
    {
      worker_pool pool(goro::gomaxprocs() * 2);
      pool.start(20ms);
      collector results;
      results.start(pool.results());
      int submitted = 0;
      for (int i = 0; i < jobs; ++i) {
        // Alternate CPU- and I/O-bound jobs.
        job j{i, i % 2 == 0, units};
        if (pool.submit(j, 1s) == submit_status::ok)
          ++submitted;
        else
          logf("Failed to submit job %d: job queue full", i);
      }
      const bool in_time = pool.shutdown(5s);
      results.wg.wait();
      const auto& s = pool.stats();
      std::printf(
          "submitted %d, completed %lld, collected %d; at most %lld CPU-bound "
          "jobs at once (semaphore: %d)\n",
          submitted, (long long)s.completed.load(), results.count.load(),
          (long long)s.cpu_peak.load(), goro::gomaxprocs());
      if (!in_time) rc = fail("part 1 needed the cancellation path");
      if (results.count.load() != submitted || s.completed.load() != submitted)
        rc = fail("part 1 lost results");
      if (s.cpu_peak.load() > goro::gomaxprocs())
        rc = fail("more CPU-bound jobs ran at once than the semaphore allows");
    }

    std::printf(
        "\n=== Part 2: slow I/O jobs (%d ms), shutdown timeout 50 ms ===\n",
        slow_io_ms);
    {
      const int workers = goro::gomaxprocs() * 2;
      worker_pool pool(workers);
      pool.start(1s);
      collector results;
      results.start(pool.results());
      for (int i = 0; i < workers; ++i)
        pool.submit(job{i, false, slow_io_ms}, 1s);
      const auto t0 = clock_type::now();
      const bool in_time = pool.shutdown(50ms);
      const auto took = clock_type::now() - t0;
      results.wg.wait();
      const auto& s = pool.stats();
      std::printf(
          "shutdown took %.1f ms; %lld jobs abandoned on cancellation, %d "
          "results\n",
          std::chrono::duration<double, std::milli>(took).count(),
          (long long)s.canceled.load(), results.count.load());
      if (in_time) rc = fail("part 2 finished before its timeout");
      if (took >= std::chrono::milliseconds(slow_io_ms))
        rc = fail("cancellation did not cut the jobs short");
    }

    // Every goroutine of both pools has returned: nothing leaked.
    const std::int64_t final_count = settled_goroutines(baseline);
    std::printf("\nFinal goroutines: %lld (initial %lld)\n",
                (long long)final_count, (long long)baseline);
    if (final_count != baseline) rc = fail("goroutines left behind");
    std::printf(rc == 0 ? "worker_pool: ok\n" : "worker_pool: FAILED\n");
    return rc;
  });
}
