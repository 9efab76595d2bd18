// first_goroutine.cpp: the seed's first programs, "Creating a goroutine is
// as simple as using the go keyword", and what happens to a goroutine that
// blocks on a channel.
//
//   first_goroutine
//
// 1. goro::go starts a goroutine; main waits for it on a wait_group. (The
//    seed waits with time.Sleep(1 * time.Second): that only works if the
//    goroutine happens to finish within the second; a wait_group or a
//    channel always does.)
// 2. A goroutine blocks receiving from a channel: it is parked ("removed
//    from M and P"), a goroutine dump shows it as [chan receive], and the
//    send makes it runnable again.
// 3. Goroutines do not run in the order they were created: the newest one
//    goes to its P's runnext slot and runs first, the others wait in the
//    run queue or are stolen by other Ps. Never rely on the order.
#include <cstdio>
#include <goro/goro.hpp>
#include <string>
#include <vector>

int main() {
  return goro::run([]() -> int {
    std::printf("=== 1. Hello from a goroutine ===\n");
    goro::wait_group wg;
    wg.add(1);
    goro::go([&wg] {  // this runs in a separate goroutine
      std::printf("Hello from a goroutine! (goroutine %llu)\n",
                  (unsigned long long)goro::goroutine_id());
      wg.done();
    });
    // Main continues execution here (goroutine 1), then waits for it.
    wg.wait();

    std::printf("\n=== 2. A goroutine blocked on a channel ===\n");
    auto ch = goro::make_chan<int>();
    auto got = goro::make_chan<int>(1);
    goro::go([ch, got] {
      // This goroutine blocks on receiving from the channel: it is parked
      // until a value arrives, and its thread runs other goroutines.
      const int value = *ch.recv();
      std::printf("received %d\n", value);
      got.send(value);
    });
    // Wait (bounded) until the dump shows it parked on the receive.
    std::string dump;
    for (int i = 0; i < 10'000; i++) {
      dump = goro::debug::stack(true);
      if (dump.find("[chan receive]") != std::string::npos) break;
      goro::sleep(std::chrono::microseconds(100));
    }
    const auto at = dump.find("[chan receive]");
    if (at == std::string::npos) {
      std::printf("FAIL: the receiver never parked\n");
      return 1;
    }
    const auto line = dump.rfind("goroutine ", at);
    std::printf("the dump says: %s\n",
                dump.substr(line, dump.find('\n', at) - line).c_str());
    // When we send a value, the blocked goroutine becomes runnable again.
    ch.send(42);
    if (*got.recv() != 42) {
      std::printf("FAIL: wrong value\n");
      return 1;
    }

    std::printf("\n=== 3. Creation order is not execution order ===\n");
    auto order = goro::make_chan<int>(8);
    for (int i = 0; i < 8; i++) goro::go([order, i] { order.send(i); });
    std::printf("created 0..7, ran in the order:");
    for (int i = 0; i < 8; i++) std::printf(" %d", *order.recv());
    std::printf(
        "\n(on one P the last one created usually runs first: it "
        "takes the runnext slot)\n");
    std::printf("first_goroutine: ok\n");
    return 0;
  });
}
