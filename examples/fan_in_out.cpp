// fan_in_out.cpp: the seed's "scheduler-aware architecture" as a pipeline:
// an I/O stage (many goroutines, unbounded: they mostly wait), a CPU stage
// fanned out to exactly gomaxprocs workers (more could not run in
// parallel), and a fan-in that merges the workers' output channels into one
// with a dynamic select. Buffered channels between the stages give
// back-pressure.
//
//   fan_in_out [requests] [io_ms] [cpu_iters]
//
// Exits 1 if a request is lost or answered twice.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>
#include <optional>
#include <vector>

namespace {

struct request {
  int id;
  std::uint64_t payload;
};
struct response {
  int id;
  std::uint64_t digest;
  int worker;
};

// CPU-bound leaf the compiler cannot fold.
std::uint64_t digest(std::uint64_t x, std::uint64_t iters) {
  for (std::uint64_t i = 0; i < iters; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    asm volatile("" : "+r"(x));
  }
  return x;
}

// Fan-in: every value of every input ends up on the returned channel, which
// is closed when all inputs are closed. One goroutine selects over all the
// inputs at once with a dynamic_select (Go's reflect.Select: the number of
// cases is known only at run time); a closed input is disabled (its case
// becomes a nil channel, never ready), Go's idiom.
goro::recv_chan<response> merge(std::vector<goro::recv_chan<response>> ins) {
  auto out = goro::make_chan<response>(ins.size());
  goro::go([ins = std::move(ins), out = goro::send_chan<response>(out)] {
    goro::dynamic_select sel;
    for (const auto& in : ins) sel.add_recv(in);
    for (std::size_t open = ins.size(); open > 0;) {
      const auto r = sel.select();  // blocks: no default case
      if (!r.recv_ok) {             // closed and drained
        sel.disable(r.index);
        open--;
      } else {
        out.send(*sel.take<response>(r.index));
      }
    }
    out.close();
  });
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int requests = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int io_ms = argc > 2 ? std::atoi(argv[2]) : 5;
  const long cpu_iters = argc > 3 ? std::atol(argv[3]) : 200'000;
  if (requests < 1 || io_ms < 0 || cpu_iters < 0) {
    std::fprintf(stderr,
                 "usage: fan_in_out [requests >= 1] [io_ms >= 0] "
                 "[cpu_iters >= 0]\n");
    return 2;
  }
  return goro::run([&]() -> int {
    const int workers = goro::gomaxprocs();
    std::printf(
        "%d requests: I/O stage (a goroutine per request, %d ms wait each) "
        "-> CPU stage (%d workers = gomaxprocs) -> fan-in\n",
        requests, io_ms, workers);
    const auto t0 = std::chrono::steady_clock::now();

    // I/O layer: unbounded, one goroutine per request; they park on timers.
    auto decoded = goro::make_chan<request>(std::size_t(workers) * 4);
    goro::wait_group io;
    for (int i = 0; i < requests; ++i) {
      io.add(1);
      goro::go([=, &io] {
        goro::sleep(std::chrono::milliseconds(io_ms));  // "read the request"
        decoded.send(request{i, std::uint64_t(i) * 7919});
        io.done();
      });
    }
    goro::go([decoded, &io] {  // close the stage's output when it is done
      io.wait();
      decoded.close();
    });

    // CPU layer: bounded fan-out, one output channel per worker.
    std::vector<goro::recv_chan<response>> outs;
    for (int w = 0; w < workers; ++w) {
      auto out = goro::make_chan<response>(4);
      goro::go([decoded, out, w, cpu_iters] {
        for (const request& r : decoded)
          out.send(
              response{r.id, digest(r.payload, std::uint64_t(cpu_iters)), w});
        out.close();
      });
      outs.push_back(out);
    }

    // Fan-in, then the "write" stage: the main goroutine.
    std::vector<int> seen(std::size_t(requests), 0);
    std::vector<int> per_worker(std::size_t(workers), 0);
    for (const response& r : merge(outs)) {
      ++seen[std::size_t(r.id)];
      ++per_worker[std::size_t(r.worker)];
    }
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
    int bad = 0;
    for (int s : seen) bad += s != 1;
    std::printf("all stages done in %.1f ms; requests per CPU worker:", ms);
    for (int n : per_worker) std::printf(" %d", n);
    std::printf("\n");
    if (bad != 0) {
      std::printf("FAIL: %d requests lost or duplicated\n", bad);
      return 1;
    }
    std::printf("fan_in_out: ok\n");
    return 0;
  });
}
