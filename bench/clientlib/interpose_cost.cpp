// goro_interpose_cost: what one interposed socket call costs when it does
// not wait. libgoro defines read, write, recv, send, poll... (issue 24) so
// that a blocking call made in a goroutine parks it on the network poller;
// a call whose data is already there must stay about as cheap as the
// system call itself.
//
// Each case is a round of 1-byte write + 1-byte read on an AF_UNIX stream
// socketpair (blocking descriptors, as a C library that never heard of goro
// leaves them), the read always finding its byte: through the libc names
// (::write/::read, ::send/::recv: libgoro's when interposition is on) and
// through syscall(SYS_write/SYS_read) (the raw system call, never
// interposed), on a plain thread and in a goroutine; the same on a pipe
// (which takes no MSG_DONTWAIT: libgoro polls it before the read). Also a
// poll() of a ready descriptor with timeout 0 and -1 (both return at once)
// against SYS_poll. Prints RESULT <context>_<call>_<impl>_ns (per call: a
// write+read round is two) and <context>_<call>_ratio (interposed/raw) per
// case, the minimum of --reps repetitions of --ms milliseconds each;
// contexts: thread (before the runtime starts), goroutine, rtthread (a
// plain thread while the runtime runs).
//
//   goro_interpose_cost [--ms 200] [--reps 5]
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <goro/goro.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

int g_ms = 200;
int g_reps = 5;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "goro_interpose_cost: %s: %s\n", what,
               std::strerror(errno));
  std::exit(1);
}

// A connected pair: a is written, b read. An AF_UNIX stream socketpair,
// or a pipe (a descriptor that takes no MSG_DONTWAIT: the interposed read
// polls it first).
struct fdpair {
  int a = -1, b = -1;
  explicit fdpair(bool pipe_pair) {
    int sv[2];
    if (pipe_pair) {
      if (pipe(sv) != 0) fail("pipe");
      b = sv[0];
      a = sv[1];
      return;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) fail("socketpair");
    a = sv[0];
    b = sv[1];
  }
  ~fdpair() {
    close(a);
    close(b);
  }
};

// One round: 1 byte written on a, read on b. Returns the calls it made.
int rw_libc(const fdpair& p) {
  char c = 'x';
  if (::write(p.a, &c, 1) != 1) fail("write");
  if (::read(p.b, &c, 1) != 1) fail("read");
  return 2;
}
int rw_raw(const fdpair& p) {
  char c = 'x';
  if (syscall(SYS_write, p.a, &c, 1) != 1) fail("SYS_write");
  if (syscall(SYS_read, p.b, &c, 1) != 1) fail("SYS_read");
  return 2;
}
int sr_libc(const fdpair& p) {
  char c = 'x';
  if (::send(p.a, &c, 1, 0) != 1) fail("send");
  if (::recv(p.b, &c, 1, 0) != 1) fail("recv");
  return 2;
}
int sr_raw(const fdpair& p) {
  char c = 'x';
  if (syscall(SYS_sendto, p.a, &c, 1, 0, nullptr, 0) != 1) fail("SYS_sendto");
  if (syscall(SYS_recvfrom, p.b, &c, 1, 0, nullptr, nullptr) != 1)
    fail("SYS_recvfrom");
  return 2;
}
// poll of a descriptor that is writable now (a socket with room).
int poll0_libc(const fdpair& p) {
  pollfd f{p.a, POLLOUT, 0};
  if (::poll(&f, 1, 0) != 1) fail("poll");
  return 1;
}
int pollinf_libc(const fdpair& p) {
  pollfd f{p.a, POLLOUT, 0};
  if (::poll(&f, 1, -1) != 1) fail("poll");
  return 1;
}
int poll_raw(const fdpair& p) {
  pollfd f{p.a, POLLOUT, 0};
  if (syscall(SYS_poll, &f, 1, 0) != 1) fail("SYS_poll");
  return 1;
}

using round_fn = int (*)(const fdpair&);

// ns per call of one timed loop of about g_ms.
double time_once(round_fn f, const fdpair& p) {
  auto t0 = std::chrono::steady_clock::now();
  auto end = t0 + std::chrono::milliseconds(g_ms);
  std::uint64_t calls = 0;
  auto now = t0;
  while (now < end) {
    for (int i = 0; i < 256; ++i) calls += static_cast<unsigned>(f(p));
    now = std::chrono::steady_clock::now();
  }
  return std::chrono::duration<double, std::nano>(now - t0).count() /
         static_cast<double>(calls);
}

struct pair_case {
  const char* name;
  round_fn libc;
  round_fn raw;
  bool pipe_pair;
};

const pair_case cases[] = {
    {"write_read", rw_libc, rw_raw, false},
    {"send_recv", sr_libc, sr_raw, false},
    {"pipe_write_read", rw_libc, rw_raw, true},
    {"poll_ready_t0", poll0_libc, poll_raw, false},
    {"poll_ready_inf", pollinf_libc, poll_raw, false},
};

// The best of g_reps loops of each, raw and libc alternating (a busy
// machine's slow patch then hurts both alike).
void run_case(const char* ctx, const pair_case& c) {
  fdpair p(c.pipe_pair);
  double libc = 1e300, raw = 1e300;
  for (int r = 0; r < g_reps; ++r) {
    raw = std::min(raw, time_once(c.raw, p));
    libc = std::min(libc, time_once(c.libc, p));
  }
  std::printf("RESULT %s_%s_libc_ns %.1f ns\n", ctx, c.name, libc);
  std::printf("RESULT %s_%s_raw_ns %.1f ns\n", ctx, c.name, raw);
  std::printf("RESULT %s_%s_ratio %.3f x\n", ctx, c.name, libc / raw);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--ms")
      g_ms = std::atoi(argv[i + 1]);
    else if (a == "--reps")
      g_reps = std::atoi(argv[i + 1]);
  }
  if (g_ms < 1 || g_reps < 1) {
    std::fprintf(stderr, "usage: goro_interpose_cost [--ms N] [--reps N]\n");
    return 2;
  }
  // Plain thread first (the runtime not started yet, then a thread of its
  // own once it is: the interposed calls must stay cheap on both).
  for (const auto& c : cases) {
    run_case("thread", c);
  }
  return goro::run([] {
    for (const auto& c : cases) {
      run_case("goroutine", c);
    }
    // A plain thread while the runtime runs.
    std::thread t([] {
      for (const auto& c : cases) {
        run_case("rtthread", c);
      }
    });
    goro::blocking([&] { t.join(); });
    std::fflush(stdout);
  });
}
