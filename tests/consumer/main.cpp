// Smallest program against an installed goro: start the runtime, spawn one
// goroutine, wait for it.
#include <goro/goro.hpp>

int main() {
  return goro::run([] {
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] { wg.done(); });
    wg.wait();
    return 0;
  });
}
