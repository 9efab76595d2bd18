// bench_main.cpp: main of goro_bench (the shared helpers: bench_util.cpp).
// See bench.hpp for the output protocol.
#include <cstdio>
#include <goro/runtime.hpp>

#include "bench.hpp"

namespace gorobench {

void spin_for(std::chrono::nanoseconds d) {
  auto t0 = clock::now();
  while (clock::now() - t0 < d) goro::preempt_point();
}

}  // namespace gorobench

int main(int argc, char** argv) {
  int exit_code = 0;
  const gorobench::workload* wl =
      gorobench::parse_command_line(argc, argv, &exit_code);
  if (wl == nullptr) return exit_code;
  goro::options opt;
  opt.gomaxprocs = gorobench::env_gomaxprocs();
  return goro::run(opt, [wl] {
    std::printf("# runtime=goro workload=%s gomaxprocs=%d num_cpu=%d\n",
                wl->name, goro::gomaxprocs(), goro::num_cpu());
    wl->fn();
    gorobench::report_memory(wl->name);
    return 0;
  });
}
