// producer_consumer.cpp: "communicate, don't share" (the seed's
// communicationExample), then several producers and consumers on one
// buffered channel.
//
//   producer_consumer [producers] [consumers] [items_per_producer] [capacity]
//
// Part 1 is the seed's program: a producer goroutine sends 0..9 and closes
// the channel; main ranges over it (the loop ends at the close).
//
// Part 2: `producers` goroutines each send `items_per_producer` numbers into
// a channel of `capacity`; `consumers` goroutines range over it. Nobody
// shares a counter: each consumer sums what it received and sends its sum
// on a results channel. The Go idiom for "close when every producer is
// done": one more goroutine waits on the producers' wait_group and closes
// the channel. A full buffer parks the producers, an empty one parks the
// consumers; neither blocks a thread. Exits 1 if the sums do not match.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>

int main(int argc, char** argv) {
  const int producers = argc > 1 ? std::atoi(argv[1]) : 4;
  const int consumers = argc > 2 ? std::atoi(argv[2]) : 3;
  const int per_producer = argc > 3 ? std::atoi(argv[3]) : 100'000;
  const long capacity = argc > 4 ? std::atol(argv[4]) : 16;
  if (producers < 1 || consumers < 1 || per_producer < 0 || capacity < 0) {
    std::fprintf(stderr,
                 "usage: producer_consumer [producers >= 1] [consumers >= 1] "
                 "[items_per_producer >= 0] [capacity >= 0]\n");
    return 2;
  }
  return goro::run([&]() -> int {
    std::printf(
        "=== Part 1: the seed's producer and a range-for consumer ===\n");
    {
      auto ch =
          goro::make_chan<int>();  // unbuffered: each send meets a receive
      goro::go([ch] {              // the channel is captured by value
        for (int i = 0; i < 10; i++) ch.send(i);  // send values to the consumer
        ch.close();
      });
      int received = 0;
      for (int value : ch) {  // the consumer (here, the main goroutine)
        std::printf("Received: %d\n", value);
        ++received;
      }
      if (received != 10) {
        std::printf("FAIL: received %d values, want 10\n", received);
        return 1;
      }
    }

    std::printf(
        "\n=== Part 2: %d producers x %d items, %d consumers, capacity %ld "
        "===\n",
        producers, per_producer, consumers, capacity);
    auto items = goro::make_chan<std::int64_t>(std::size_t(capacity));
    auto sums = goro::make_chan<std::int64_t>(std::size_t(consumers));
    goro::wait_group producing;
    for (int p = 0; p < producers; ++p) {
      producing.add(1);
      goro::go([items, p, per_producer, &producing] {
        for (int i = 1; i <= per_producer; ++i)
          items.send(std::int64_t(p) * per_producer + i);
        producing.done();
      });
    }
    // Closes `items` once every producer is done; `producing` lives in
    // main's frame, which outlives this goroutine (main waits below for
    // the consumers, which end only after the close).
    goro::go([items, &producing] {
      producing.wait();
      items.close();
    });
    const auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < consumers; ++c) {
      goro::go([items, sums] {
        std::int64_t sum = 0;
        for (std::int64_t v : items) sum += v;
        sums.send(sum);
      });
    }
    std::int64_t total = 0;
    for (int c = 0; c < consumers; ++c) {
      const std::int64_t s = *sums.recv();
      std::printf("consumer sum: %lld\n", (long long)s);
      total += s;
    }
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
    const std::int64_t n = std::int64_t(producers) * per_producer;
    const std::int64_t want = n * (n + 1) / 2;
    std::printf(
        "%lld items in %.1f ms (%.0f ns per item); total %lld, want %lld\n",
        (long long)n, ms, n ? ms * 1e6 / double(n) : 0.0, (long long)total,
        (long long)want);
    if (total != want) {
      std::printf("FAIL: sums differ\n");
      return 1;
    }
    std::printf("producer_consumer: ok\n");
    return 0;
  });
}
