// goro::net over the network poller, loopback only; the cases that
// tests/tcpsock_test.cpp (echo, deadlines, half-close, reset, UDP, Unix,
// idle connections...) does not cover:
//  - dial_timeout against a listener whose accept queue is full (the SYN is
//    dropped, the handshake never completes): deadline_exceeded, never a
//    socket that is still connecting; from goroutines and plain threads;
//  - accept out of descriptors in a child process (its own RLIMIT_NOFILE):
//    goroutine and plain-thread acceptors back off without spinning and
//    recover; listener deadlines; close across goroutines and threads;
//  - Go's socket defaults (TCP_NODELAY, SO_REUSEADDR, IPV6_V6ONLY,
//    non-blocking, close-on-exec), the dual-stack ":port" listener;
//  - EINTR never escapes from a plain thread's accept or read;
//  - Unix listeners on a path remove it on close (Go's unlink-on-close);
//  - address parsing and formatting; UDP truncation and ICMP refusal;
//  - sysmon's poll while every P computes and only yields every ~1 ms.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <goro/goro.hpp>
#include <string>
#include <thread>
#include <vector>

#include "net_support.hpp"

using namespace std::chrono_literals;
using goro::net::conn;
using goro::net::listener;

using ::testing::ExitedWithCode;

namespace {

using goro_test::clock;
using goro_test::cpu_time;
using goro_test::serve_echo;

double millis(clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

int getopt_int(int s, int level, int opt) {
  int v = -1;
  socklen_t len = sizeof v;
  if (getsockopt(s, level, opt, &v, &len) != 0) return -1;
  return v;
}

bool is_connected(int s) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  return getpeername(s, reinterpret_cast<sockaddr*>(&ss), &len) == 0;
}

// A TCP listener (plain sockets, no goro) whose accept queue is full:
// listen() with backlog 0 and connections nobody accepts. The kernel drops
// the next SYN (the client retransmits it after 1 s), so a dial to it stays
// in SYN_SENT. ok is false if the queue could not be filled.
struct full_backlog {
  int lfd = -1;
  std::string where;
  std::vector<int> fillers;
  bool ok = false;

  full_backlog() {
    lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (lfd < 0 || ::bind(lfd, reinterpret_cast<sockaddr*>(&sa), len) != 0 ||
        ::listen(lfd, 0) != 0 ||
        getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
      return;
    where = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    // Connect until one handshake does not complete within 200 ms.
    for (int i = 0; i < 16; i++) {
      int c = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (c < 0) return;
      int rc = ::connect(c, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      if (rc != 0 && errno != EINPROGRESS) {
        ::close(c);
        return;
      }
      pollfd p{c, POLLOUT, 0};
      if (rc == 0 ||
          (::poll(&p, 1, 200) == 1 &&
           getopt_int(c, SOL_SOCKET, SO_ERROR) == 0 && is_connected(c))) {
        fillers.push_back(c);
        continue;
      }
      ::close(c);
      ok = true;
      return;
    }
  }
  ~full_backlog() {
    for (int c : fillers) ::close(c);
    if (lfd >= 0) ::close(lfd);
  }
  full_backlog(const full_backlog&) = delete;
  full_backlog& operator=(const full_backlog&) = delete;
};

// Dials `where` with a short timeout `rounds` times; every dial must fail
// with deadline_exceeded after about the timeout. Returns "" or what went
// wrong.
std::string dial_must_time_out(const std::string& where, int rounds) {
  for (int i = 0; i < rounds; i++) {
    auto t0 = clock::now();
    try {
      conn c = goro::net::dial_timeout("tcp", where, 20ms);
      return "round " + std::to_string(i) +
             ": dial_timeout returned a connection after " +
             std::to_string(millis(clock::now() - t0)) + " ms, " +
             (is_connected(c.fd().get())
                  ? "connected (the accept queue was not full?)"
                  : "NOT connected (getpeername: ENOTCONN): a spurious "
                    "writable wake-up was taken for the end of the handshake");
    } catch (const goro::deadline_exceeded&) {
      if (clock::now() - t0 < 20ms)
        return "round " + std::to_string(i) + ": timed out early, after " +
               std::to_string(millis(clock::now() - t0)) + " ms";
    } catch (const std::exception& e) {
      return "round " + std::to_string(i) + ": " + e.what();
    }
  }
  return "";
}

// Ends a death-test child: 0 when ok, else 1 after printing why.
[[noreturn]] void child_exit(const std::string& failure) {
  if (!failure.empty())
    std::fprintf(stderr, "child check failed: %s\n", failure.c_str());
  else
    std::fprintf(stderr, "child: ok\n");
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(failure.empty() ? 0 : 1);
}

class NetChild : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (::testing::internal::InDeathTestChild())
      goro_test::arm_child_watchdog(
          std::chrono::seconds(goro_test::scaled(30, 90)));
  }
};

}  // namespace

// ---- dial ----

TEST(NetDial, TimeoutWhileTheHandshakeIsUnanswered) {
  goro::run([] {
    goro_test::min_procs procs(2);  // an idle P's M polls in between
    full_backlog fb;
    if (!fb.ok) GTEST_SKIP() << "could not fill a loopback accept queue";
    std::string failure = dial_must_time_out(fb.where, 20);
    EXPECT_EQ(failure, "");
  });
}

TEST(NetDial, TimeoutFromAPlainThread) {
  full_backlog fb;
  if (!fb.ok) GTEST_SKIP() << "could not fill a loopback accept queue";
  std::string failure;
  std::thread t([&] { failure = dial_must_time_out(fb.where, 10); });
  t.join();
  EXPECT_EQ(failure, "");
}

TEST(NetDial, ZeroTimeoutIsNoneNegativeIsExpired) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    EXPECT_THROW(goro::net::dial_timeout("tcp", ln.addr().str(), -1ms),
                 goro::deadline_exceeded);
    conn c = goro::net::dial_timeout("tcp", ln.addr().str(), 0ns);
    EXPECT_TRUE(is_connected(c.fd().get()));
    conn sc = ln.accept();
    // The timeout bounds the dial only: once it has passed, the connection
    // still reads and writes (no deadline left behind).
    conn d = goro::net::dial_timeout("tcp", ln.addr().str(), 20ms);
    EXPECT_TRUE(is_connected(d.fd().get()));
    conn sd = ln.accept();
    goro::sleep(30ms);
    EXPECT_NO_THROW(d.write("late", 4));
    char b[4];
    EXPECT_EQ(sd.read_full(b, 4), 4u);
    sd.write("back", 4);
    EXPECT_EQ(d.read_full(b, 4), 4u);
  });
}

// Every dial returns a connected socket (remote_addr works), many times in
// a row, with goroutines on other Ps polling.
TEST(NetDial, ManySequentialDialsReturnConnectedSockets) {
  goro::run([] {
    goro_test::min_procs procs(2);
    auto ln = goro::net::listen("127.0.0.1:0");
    const int n = goro_test::scaled(3000, 500);
    goro::wait_group server;
    server.add(1);
    std::atomic<int> accepted{0};
    goro::go([&] {
      for (int i = 0; i < n; i++) {
        conn s = ln.accept();
        accepted++;
      }
      server.done();
    });
    int bad = 0;
    goro_test::deadline dl(30s);
    for (int i = 0; i < n && !dl.passed(); i++) {
      conn c = goro::net::dial(ln.addr().str());
      if (!is_connected(c.fd().get()) || !(c.remote_addr() == ln.addr())) bad++;
    }
    server.wait();
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(accepted.load(), n);
  });
}

// ---- accept ----

// Out of descriptors (EMFILE) in a child process with its own
// RLIMIT_NOFILE: a goroutine and a plain thread blocked in accept back off
// (5 ms doubling to 1 s) instead of failing or spinning, and both accept
// once descriptors are free again.
TEST_F(NetChild, AcceptSurvivesEmfileWithoutSpinningAndRecovers) {
  EXPECT_EXIT(
      {
        std::string failure;
        goro::run([&failure] {
          auto ln1 = goro::net::listen("127.0.0.1:0");
          auto ln2 = goro::net::listen("127.0.0.1:0");
          // The clients connect before descriptors run out: the kernel
          // completes their handshakes from the backlog.
          conn c1 = goro::net::dial(ln1.addr().str());
          conn c2 = goro::net::dial(ln2.addr().str());
          // Both acceptors start before descriptors run out (a sanitizer's
          // checks in thread creation need descriptors), and accept once
          // they have.
          goro::chan<int> gate = goro::make_chan<int>(2);
          std::atomic<int> accepted{0}, errors{0};
          goro::wait_group wg;
          wg.add(1);
          goro::go([&] {
            try {
              gate.recv();
              conn s = ln1.accept();
              accepted++;
            } catch (const std::exception& e) {
              std::fprintf(stderr, "goroutine accept: %s\n", e.what());
              errors++;
            }
            wg.done();
          });
          std::thread plain([&] {
            try {
              gate.recv();
              conn s = ln2.accept();
              accepted++;
            } catch (const std::exception& e) {
              std::fprintf(stderr, "thread accept: %s\n", e.what());
              errors++;
            }
          });
          rlimit rl{};
          getrlimit(RLIMIT_NOFILE, &rl);
          rl.rlim_cur = 128;
          std::vector<int> filler;
          if (setrlimit(RLIMIT_NOFILE, &rl) != 0) failure = "setrlimit failed";
          for (int i = 0; i < 256 && failure.empty(); i++) {
            int d = ::dup(0);
            if (d < 0) break;
            filler.push_back(d);
          }
          if (failure.empty() && (::dup(0) >= 0 || errno != EMFILE))
            failure = "could not exhaust descriptors";
          if (!failure.empty()) child_exit(failure);
          gate.send(1);
          gate.send(1);
          // ~200 ms out of descriptors: no failure, no spinning.
          auto cpu0 = cpu_time();
          auto t0 = clock::now();
          while (clock::now() - t0 < 200ms) goro::sleep(10ms);
          auto cpu = cpu_time() - cpu0;
          std::printf("200 ms of EMFILE back-off: %.2f ms CPU\n",
                      std::chrono::duration<double, std::milli>(cpu).count());
          if (accepted.load() != 0 || errors.load() != 0)
            failure = "accept returned while out of descriptors";
          else if (cpu > 50ms)
            failure = "accept spun while out of descriptors: " +
                      std::to_string(cpu.count()) + " us CPU in 200 ms";
          for (int i = 0; i < 16 && !filler.empty(); i++) {
            ::close(filler.back());
            filler.pop_back();
          }
          // Both recover (the back-off is at most 1 s by now).
          goro_test::deadline dl(5s);
          while (accepted.load() + errors.load() < 2 && !dl.passed())
            goro::sleep(5ms);
          if (failure.empty() && accepted.load() != 2)
            failure =
                "accept did not recover: " + std::to_string(accepted.load()) +
                " accepted, " + std::to_string(errors.load()) + " errors";
          if (accepted.load() + errors.load() < 2) child_exit(failure);
          wg.wait();
          plain.join();
          for (int d : filler) ::close(d);
        });
        child_exit(failure);
      },
      ExitedWithCode(0), "child: ok");
}

TEST(NetAccept, ListenerDeadline) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    auto t0 = clock::now();
    ln.set_deadline(t0 + 30ms);
    EXPECT_THROW(ln.accept(), goro::deadline_exceeded);
    EXPECT_GE(clock::now() - t0, 30ms);
    ln.set_deadline({});
    conn c = goro::net::dial(ln.addr().str());
    conn s = ln.accept();
    EXPECT_EQ(s.remote_addr(), c.local_addr());
    EXPECT_EQ(s.local_addr(), c.remote_addr());
  });
}

// A goroutine's accept is woken by a close from a plain thread, and a plain
// thread's accept by a close from a goroutine.
TEST(NetAccept, CloseAcrossGoroutinesAndThreads) {
  goro::run([] {
    auto ln1 = goro::net::listen("127.0.0.1:0");
    auto ln2 = goro::net::listen("127.0.0.1:0");
    std::atomic<int> started{0}, closed{0};
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      started++;
      try {
        ln1.accept();
      } catch (const goro::closed_error&) {
        closed++;
      }
      wg.done();
    });
    std::thread plain([&] {
      started++;
      try {
        ln2.accept();
      } catch (const goro::closed_error&) {
        closed++;
      }
    });
    ASSERT_TRUE(goro_test::eventually([&] { return started.load() == 2; }));
    std::thread closer([&] { ln1.close(); });
    closer.join();
    ln2.close();
    wg.wait();
    plain.join();
    EXPECT_EQ(closed.load(), 2);
    EXPECT_THROW(ln1.accept(), goro::closed_error);
  });
}

// Go allows any number of goroutines in Accept (or Read) on one listener
// (internal/poll.FD serialises them with its fdMutex). Before goro::fd had
// its per-direction locks (fd_state.rmu/wmu) the second acceptor's prepare
// step (poll_reset: rg.exchange(0)) wiped the first one, already parked in
// the slot, out of it, and nothing woke that goroutine again, not even
// close() (6 failures in 6 runs). The same held for two readers (or two
// writers) of one conn.
TEST_F(NetChild, TwoAcceptorsOnOneListenerBothWakeOnClose) {
  EXPECT_EXIT(
      {
        std::string failure;
        goro::options o;
        o.gomaxprocs = 1;  // one acceptor parks before the other prepares
        goro::run(o, [&failure] {
          auto ln = goro::net::listen("127.0.0.1:0");
          std::atomic<int> started{0}, returned{0};
          for (int i = 0; i < 2; i++) {
            goro::go([&] {
              started++;
              try {
                ln.accept();
              } catch (const goro::closed_error&) {
              }
              returned++;
            });
          }
          // Both in accept (parked, or about to park: close wakes either).
          goro_test::eventually([&] { return started.load() == 2; });
          for (int i = 0; i < 10; i++) goro::gosched();
          ln.close();
          if (!goro_test::eventually([&] { return returned.load() == 2; },
                                     2000ms))
            failure = std::to_string(2 - returned.load()) +
                      " of 2 acceptors never returned after close()";
        });
        child_exit(failure);
      },
      ExitedWithCode(0), "child: ok");
}

// ---- socket options and addresses ----

TEST(NetSockopt, GoDefaults) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    EXPECT_EQ(getopt_int(ln.fd().get(), SOL_SOCKET, SO_REUSEADDR), 1);
    conn c = goro::net::dial(ln.addr().str());
    conn s = ln.accept();
    for (int d : {ln.fd().get(), c.fd().get(), s.fd().get()}) {
      EXPECT_TRUE(fcntl(d, F_GETFL) & O_NONBLOCK) << d;
      EXPECT_TRUE(fcntl(d, F_GETFD) & FD_CLOEXEC) << d;
    }
    EXPECT_EQ(getopt_int(c.fd().get(), IPPROTO_TCP, TCP_NODELAY), 1);
    EXPECT_EQ(getopt_int(s.fd().get(), IPPROTO_TCP, TCP_NODELAY), 1);
    c.set_no_delay(false);
    EXPECT_EQ(getopt_int(c.fd().get(), IPPROTO_TCP, TCP_NODELAY), 0);
    c.set_no_delay(true);
    EXPECT_EQ(getopt_int(c.fd().get(), IPPROTO_TCP, TCP_NODELAY), 1);
    auto pc = goro::net::listen_packet("udp", "127.0.0.1:0");
    EXPECT_TRUE(fcntl(pc.fd().get(), F_GETFL) & O_NONBLOCK);
    EXPECT_TRUE(fcntl(pc.fd().get(), F_GETFD) & FD_CLOEXEC);
    c.close();
    EXPECT_THROW(c.set_no_delay(true), goro::closed_error);
    EXPECT_THROW(c.close_write(), goro::closed_error);
    EXPECT_THROW(c.local_addr(), goro::closed_error);
  });
}

// ":port" listens on every interface, IPv6 and IPv4 (IPV6_V6ONLY off);
// "tcp6" is IPv6 only.
TEST(NetSockopt, DualStackWildcardListener) {
  goro::run([] {
    listener ln6;
    try {
      ln6 = goro::net::listen("tcp6", "[::1]:0");
    } catch (const std::exception& e) {
      GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
    }
    EXPECT_EQ(getopt_int(ln6.fd().get(), IPPROTO_IPV6, IPV6_V6ONLY), 1);
    auto ln = goro::net::listen(":0");
    ASSERT_EQ(ln.addr().family(), AF_INET6);
    EXPECT_EQ(getopt_int(ln.fd().get(), IPPROTO_IPV6, IPV6_V6ONLY), 0);
    goro::wait_group server;
    serve_echo(ln, server);
    const std::string port = std::to_string(ln.addr().port());
    for (const char* host : {"127.0.0.1", "[::1]", "localhost"}) {
      conn c = goro::net::dial(std::string(host) + ":" + port);
      c.write("dual", 4);
      char b[4];
      EXPECT_EQ(c.read_full(b, 4), 4u) << host;
      EXPECT_EQ(std::string(b, 4), "dual") << host;
    }
    ln.close();
    server.wait();
  });
}

TEST(NetAddr, ParseAndFormat) {
  auto a = goro::net::resolve("tcp", "127.0.0.1:80");
  EXPECT_EQ(a.str(), "127.0.0.1:80");
  EXPECT_EQ(a.host(), "127.0.0.1");
  EXPECT_EQ(a.port(), 80);
  EXPECT_EQ(a.family(), AF_INET);
  auto b = goro::net::resolve("udp6", "[::1]:443");
  EXPECT_EQ(b.str(), "[::1]:443");
  EXPECT_EQ(b.host(), "::1");
  EXPECT_EQ(b.family(), AF_INET6);
  EXPECT_EQ(goro::net::resolve("tcp4", "localhost:0").str(), "127.0.0.1:0");
  EXPECT_EQ(goro::net::resolve("tcp", "localhost:65535").port(), 65535);
  goro::net::addr empty;
  EXPECT_EQ(empty.str(), "");
  EXPECT_EQ(empty.port(), 0);
  EXPECT_TRUE(empty == goro::net::addr());
  EXPECT_FALSE(a == b);

  for (const char* bad :
       {"", ":", "127.0.0.1", "127.0.0.1:", "[::1]", "[::1", "[::1]80",
        "::1:80", "a:b:80", "127.0.0.1:-1", "127.0.0.1:+80", "127.0.0.1:http",
        "127.0.0.1:65536", "127.0.0.1:123456", "no-such-host.invalid:80"})
    EXPECT_THROW(goro::net::resolve("tcp", bad), std::invalid_argument) << bad;
  EXPECT_THROW(goro::net::resolve("tcp4", "[::1]:80"), std::invalid_argument);
  EXPECT_THROW(goro::net::resolve("tcp6", "127.0.0.1:80"),
               std::invalid_argument);
  EXPECT_THROW(goro::net::resolve("ip", "127.0.0.1:80"), std::invalid_argument);
  EXPECT_THROW(goro::net::listen("udp", "127.0.0.1:0"), std::invalid_argument);
  EXPECT_THROW(goro::net::listen_packet("tcp", "127.0.0.1:0"),
               std::invalid_argument);
  EXPECT_THROW(goro::net::dial_packet("unix", "@x"), std::invalid_argument);
  EXPECT_THROW(goro::net::dial("unix", ""), std::invalid_argument);
  EXPECT_THROW(goro::net::dial("unix", std::string(200, 'x')),
               std::invalid_argument);

  auto hosts = goro::net::lookup_host("localhost");
  ASSERT_FALSE(hosts.empty());
  bool loopback = false;
  for (const auto& h : hosts)
    loopback = loopback || h == "127.0.0.1" || h == "::1";
  EXPECT_TRUE(loopback);
  // Inside a goroutine too (getaddrinfo under the syscall hand-off).
  goro::run([] {
    EXPECT_FALSE(goro::net::lookup_host("localhost").empty());
    EXPECT_EQ(goro::net::resolve("tcp", "localhost:7").port(), 7);
  });
}

// ---- streams ----

TEST(NetTcp, CloseReadThenReadIsEndOfStream) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    conn c = goro::net::dial(ln.addr().str());
    conn s = ln.accept();
    s.close_read();
    char b[4];
    EXPECT_EQ(s.read(b, sizeof b), 0u);
    s.write("out", 3);  // the other direction still works
    EXPECT_EQ(c.read_full(b, 3), 3u);
  });
}

std::atomic<int> net_test_signals{0};
extern "C" void net_test_on_signal(int) { net_test_signals++; }

// A plain thread blocked in accept and then in read is interrupted by
// signals (a handler without SA_RESTART): neither call reports EINTR.
TEST(NetTcp, EintrNeverEscapesFromAPlainThread) {
  struct sigaction sa {
  }, old{};
  sa.sa_handler = net_test_on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  auto ln = goro::net::listen("127.0.0.1:0");
  std::atomic<int> stage{0};
  std::string result;
  std::thread t([&] {
    try {
      stage = 1;
      conn s = ln.accept();
      stage = 2;
      char b[5];
      std::size_t n = s.read_full(b, 5);
      result.assign(b, n);
    } catch (const std::exception& e) {
      result = std::string("error: ") + e.what();
    }
    stage = 3;
  });
  auto pester = [&](int until_stage) {
    // Signals while the thread is (most likely) blocked; bounded.
    for (int i = 0; i < 20 && stage.load() < until_stage; i++) {
      pthread_kill(t.native_handle(), SIGUSR1);
      std::this_thread::sleep_for(2ms);
    }
  };
  while (stage.load() < 1) std::this_thread::yield();
  pester(2);
  conn c = goro::net::dial(ln.addr().str());
  while (stage.load() < 2) std::this_thread::yield();
  pester(3);
  c.write("hello", 5);
  t.join();
  sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(result, "hello");
  EXPECT_GT(net_test_signals.load(), 0);
}

// Plain threads as clients of a goroutine server, each verifying its bytes.
TEST(NetTcp, PlainThreadClientsOfAGoroutineServer) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    goro::wait_group server;
    serve_echo(ln, server);
    const std::string where = ln.addr().str();
    std::atomic<int> bad{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < 8; i++)
      ts.emplace_back([&, i] {
        try {
          conn c = goro::net::dial(where);
          c.set_deadline(clock::now() + 20s);
          char out[1000], in[1000];
          for (int r = 0; r < 50; r++) {
            for (std::size_t k = 0; k < sizeof out; k++)
              out[k] = char(i * 131 + r * 17 + k);
            c.write(out, sizeof out);
            if (c.read_full(in, sizeof in) != sizeof in ||
                std::memcmp(in, out, sizeof in) != 0)
              bad++;
          }
        } catch (const std::exception&) {
          bad++;
        }
      });
    goro::blocking([&] {
      for (auto& t : ts) t.join();
    });
    EXPECT_EQ(bad.load(), 0);
    ln.close();
    server.wait();
  });
}

// ---- Unix ----

// A listener on a filesystem path removes it on close (Go's
// UnixListener unlink-on-close), so the path can be listened on again.
TEST(NetUnix, PathListenerRemovesItsSocketFileOnClose) {
  char dir[] = "/tmp/goro-net-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/sock";
  goro::run([&path] {
    for (int round = 0; round < 2; round++) {
      auto ln = goro::net::listen("unix", path);
      struct stat st;
      ASSERT_EQ(::stat(path.c_str(), &st), 0);
      EXPECT_TRUE(S_ISSOCK(st.st_mode));
      EXPECT_EQ(ln.addr().str(), path);
      goro::wait_group server;
      serve_echo(ln, server);
      conn c = goro::net::dial("unix", path);
      c.write("path", 4);
      char b[4];
      EXPECT_EQ(c.read_full(b, 4), 4u);
      EXPECT_EQ(std::string(b, 4), "path");
      ln.close();
      server.wait();
      EXPECT_NE(::stat(path.c_str(), &st), 0) << "socket file left behind";
    }
    {
      // The destructor removes it too; a moved-from listener does not.
      auto ln = goro::net::listen("unix", path);
      listener moved = std::move(ln);
      ln.close();
      struct stat st;
      EXPECT_EQ(::stat(path.c_str(), &st), 0);
    }
    struct stat st;
    EXPECT_NE(::stat(path.c_str(), &st), 0);
  });
  ::unlink(path.c_str());
  ::rmdir(dir);
}

TEST(NetUnix, DatagramDeadlineAndAbstractAddresses) {
  goro::run([] {
    std::string name = "@goro-net-test-" + std::to_string(::getpid());
    auto srv = goro::net::listen_packet("unixgram", name);
    EXPECT_EQ(srv.local_addr().str(), name);
    EXPECT_EQ(srv.local_addr().port(), 0);
    EXPECT_EQ(srv.local_addr().family(), AF_UNIX);
    goro::net::dialer d;  // named, so that srv can reply
    d.local_addr = goro::net::resolve("unixgram", name + "-client");
    auto cl = d.dial_packet("unixgram", name);
    char b[16];
    cl.set_read_deadline(clock::now() + 20ms);
    EXPECT_THROW(cl.read(b, sizeof b), goro::deadline_exceeded);
    cl.set_read_deadline({});
    for (int i = 0; i < 100; i++) {
      std::string m = "m" + std::to_string(i);
      cl.write(m.data(), m.size());
      goro::net::addr from;
      std::size_t n = srv.recv_from(b, sizeof b, &from);
      ASSERT_EQ(std::string(b, n), m);
      srv.send_to(b, n, from);
      ASSERT_EQ(cl.read(b, sizeof b), m.size());
    }
  });
}

// ---- UDP ----

TEST(NetUdp, TruncationZeroLengthAndRefusal) {
  goro::run([] {
    auto srv = goro::net::listen_packet("udp4", "127.0.0.1:0");
    auto cl = goro::net::dial_packet("udp", srv.local_addr().str());
    char big[100];
    std::memset(big, 'u', sizeof big);
    cl.write(big, sizeof big);
    char b[10];
    EXPECT_EQ(srv.recv_from(b, sizeof b), sizeof b);  // truncated
    cl.write(big, 0);  // a datagram of 0 bytes is one too
    goro::net::addr from;
    EXPECT_EQ(srv.recv_from(b, sizeof b, &from), 0u);
    EXPECT_EQ(from, cl.local_addr());

    // A connected UDP socket sees the port-unreachable ICMP of a closed
    // port as ECONNREFUSED on its next read.
    std::string closed_port;
    {
      auto tmp = goro::net::listen_packet("udp", "127.0.0.1:0");
      closed_port = tmp.local_addr().str();
    }
    auto lonely = goro::net::dial_packet("udp", closed_port);
    lonely.set_read_deadline(clock::now() + 5s);
    lonely.write("?", 1);
    try {
      lonely.read(b, sizeof b);
      ADD_FAILURE() << "read from a closed UDP port returned";
    } catch (const goro::deadline_exceeded&) {
      ADD_FAILURE() << "no ICMP refusal within 5 s";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), ECONNREFUSED) << e.what();
    }
  });
}

// ---- the poller ----

// Every P runs goroutines that compute and only yield (never block), each
// about every 1 ms of work: no findrunnable ever polls, so a ready socket's
// reader depends on sysmon's poll (10 ms without one). Latency expected
// ~10-20 ms; asserted < 1 s.
TEST(NetPoll, SysmonServesAReaderWhileEveryPComputes) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    conn c = goro::net::dial(ln.addr().str());
    conn s = ln.accept();
    std::atomic<bool> stop{false};
    goro::wait_group busy;
    const int procs = goro::gomaxprocs();
    std::atomic<long> work_sink{0};
    for (int i = 0; i < procs; i++) {
      busy.add(1);
      goro::go([&] {
        unsigned long x = 1;
        while (!stop.load(std::memory_order_relaxed)) {
          auto until = clock::now() + 1ms;
          while (clock::now() < until)
            for (int k = 0; k < 1000; k++) x = x * 6364136223846793005ul + 1;
          goro::gosched();
        }
        work_sink += long(x & 1);
        busy.done();
      });
    }
    std::atomic<std::int64_t> served_at{0};
    std::atomic<std::uint64_t> reader_id{0};
    goro::wait_group reader;
    reader.add(1);
    goro::go([&] {
      char b;
      reader_id = goro::goroutine_id();
      s.read(&b, 1);
      served_at = clock::now().time_since_epoch().count();
      reader.done();
    });
    // The writer is a plain thread, so the write does not depend on the
    // busy Ps; it starts once the reader is parked in the poller.
    ASSERT_TRUE(goro_test::eventually([&] { return reader_id.load() != 0; }));
    ASSERT_TRUE(goro_test::eventually_in_io_wait(reader_id.load()));
    std::atomic<std::int64_t> written_at{0};
    std::thread writer([&] {
      written_at = clock::now().time_since_epoch().count();
      c.write("!", 1);
    });
    bool served =
        goro_test::eventually([&] { return served_at.load() != 0; }, 5000ms);
    goro::blocking([&] { writer.join(); });
    stop = true;
    busy.wait();
    ASSERT_TRUE(served) << "a ready socket was not served in 5 s";
    reader.wait();
    auto latency = clock::duration(served_at.load() - written_at.load());
    std::printf(
        "ready socket served %.1f ms after the write, %d Ps computing\n",
        millis(latency), procs);
    EXPECT_LT(latency, 1s);
  });
}
