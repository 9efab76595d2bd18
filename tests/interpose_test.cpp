// Plain POSIX calls made in goroutines park on the network poller
// (src/interpose/): socket, pipe, poll, select and sleep calls written the
// way C and C++ code writes them, with no goro API, at a few threads for
// hundreds of goroutines; and what the caller sees is the kernel's answer.
// TSan builds do not interpose (its interceptors must see every call): the
// tests skip there.
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <goro/goro.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

using namespace std::chrono_literals;

namespace {

#define SKIP_UNDER_TSAN()                                                   \
  do {                                                                      \
    if (GORO_TEST_TSAN)                                                     \
      GTEST_SKIP() << "TSan builds do not interpose the C library's calls"; \
  } while (0)

int os_threads() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') n++;
  ::closedir(d);
  return n;
}

// The thread bound of the issue: 2 per P plus a few (sysmon, the main
// thread, a spare).
int thread_bound(int procs) { return 2 * procs + 8; }

// Waits (bounded) until pred() holds, yielding the processor.
template <class F>
bool eventually(F pred, std::chrono::seconds limit = 20s) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    goro::sleep(1ms);
  }
  return true;
}

// Waits (bounded) until k goroutines are parked on descriptors (wait
// reason "IO wait"): the interposed calls' waits, observed, not slept for.
bool parked_on_descriptors(std::int64_t k) {
  return eventually([k] { return goro::stats().netpoll_waiting >= k; });
}

// A blocking TCP client connection to 127.0.0.1:port made with plain calls.
int dial(int port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(std::uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

// Every interposed function that the program's calls resolve to is goro's
// (the executable's own with libgoro.a, libgoro.so's otherwise), not the C
// library's or a sanitizer's: under ASan, libasan.so defines read, poll...
// first on the link line, and libgoro.a's files of interposed calls were
// once not linked at all.
TEST(Interpose, CallsResolveToGorosDefinitions) {
  SKIP_UNDER_TSAN();
  for (const char* name : {"read",
                           "write",
                           "readv",
                           "writev",
                           "recv",
                           "recvfrom",
                           "recvmsg",
                           "send",
                           "sendto",
                           "sendmsg",
                           "connect",
                           "accept",
                           "accept4",
                           "poll",
                           "ppoll",
                           "select",
                           "pselect",
                           "nanosleep",
                           "clock_nanosleep",
                           "usleep",
                           "sleep",
                           "close",
                           "dup2",
                           "socket",
                           "pipe2"}) {
    void* p = ::dlsym(RTLD_DEFAULT, name);
    ASSERT_NE(p, nullptr) << name;
    Dl_info info{};
    ASSERT_NE(::dladdr(p, &info), 0) << name;
    std::string obj = info.dli_fname != nullptr ? info.dli_fname : "";
    EXPECT_EQ(obj.find("libc.so"), std::string::npos) << name << " is " << obj;
#ifndef GORO_INTERPOSE_SHARED_TEST
    EXPECT_EQ(obj.find("libasan"), std::string::npos) << name << " is " << obj;
#endif
    // With libgoro.so under ASan, libasan.so comes first in the lookup
    // order; its interceptor forwards to the next definition, libgoro.so's
    // (the other tests of interpose_shared_test show the calls parking).
  }
}

// The repro: 1000 goroutines connect, send and wait in recv with
// plain POSIX calls against a goro::net server at GOMAXPROCS 2. The server
// answers only once every request is in, so all 1000 wait in recv at once.
TEST(Interpose, ThousandPosixClientsWaitInRecvOnFewThreads) {
  SKIP_UNDER_TSAN();
  constexpr int procs = 2;
  const int n = goro_test::live_scaled(1000, 300);
  goro::options o;
  o.gomaxprocs = procs;
  int max_threads = 0;
  std::atomic<int> ok{0};
  goro::run(o, [&] {
    auto ln = goro::net::listen("127.0.0.1:0");
    int port = ln.addr().port();
    std::atomic<int> requests{0};
    auto release = goro::make_chan<int>();
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      for (int i = 0; i < n; i++) {
        auto c = std::make_shared<goro::net::conn>(ln.accept());
        goro::go([c, &requests, release]() mutable {
          char buf[16];
          c->read_full(buf, 8);
          requests.fetch_add(1);
          release.recv();  // closed once every request is in
          c->write(buf, 8);
        });
      }
      wg.done();
    });
    for (int i = 0; i < n; i++) {
      wg.add(1);
      goro::go([&, i] {
        int s = dial(port);
        if (s >= 0) {
          char msg[8];
          std::snprintf(msg, sizeof msg, "%07d", i);
          if (::send(s, msg, 8, 0) == 8) {
            char got[8];
            ssize_t r = ::recv(s, got, 8, MSG_WAITALL);
            if (r == 8 && std::memcmp(got, msg, 8) == 0) ok.fetch_add(1);
          }
          ::close(s);
        }
        wg.done();
      });
    }
    EXPECT_TRUE(eventually([&] { return requests.load() == n; }))
        << requests.load() << " of " << n << " requests arrived";
    max_threads = os_threads();
    release.close();
    wg.wait();
  });
  EXPECT_EQ(ok.load(), n);
  EXPECT_LE(max_threads, thread_bound(procs))
      << "goroutines waiting in recv held OS threads";
}

// Goroutines blocked in read(2) on pipes: parked, not holding threads; each
// gets exactly its bytes.
TEST(Interpose, PipeReadersParkAndGetTheirBytes) {
  SKIP_UNDER_TSAN();
  constexpr int procs = 1;
  constexpr int n = 100;
  goro::options o;
  o.gomaxprocs = procs;
  int threads = 0;
  std::atomic<int> ok{0};
  goro::run(o, [&] {
    std::vector<std::array<int, 2>> pipes(n);
    for (auto& p : pipes) ASSERT_EQ(::pipe2(p.data(), O_CLOEXEC), 0);
    std::atomic<int> started{0};
    goro::wait_group wg;
    for (int i = 0; i < n; i++) {
      wg.add(1);
      goro::go([&, i] {
        started.fetch_add(1);
        int v = -1;
        if (::read(pipes[i][0], &v, sizeof v) == sizeof v && v == i * 7)
          ok.fetch_add(1);
        wg.done();
      });
    }
    ASSERT_TRUE(eventually([&] { return started.load() == n; }));
    ASSERT_TRUE(parked_on_descriptors(n));
    threads = os_threads();
    for (int i = 0; i < n; i++) {
      int v = i * 7;
      ASSERT_EQ(::write(pipes[i][1], &v, sizeof v), ssize_t(sizeof v));
    }
    wg.wait();
    for (auto& p : pipes) {
      ::close(p[0]);
      ::close(p[1]);
    }
  });
  EXPECT_EQ(ok.load(), n);
  EXPECT_LE(threads, thread_bound(procs));
}

// The caller's non-blocking descriptor still gets EAGAIN at once.
TEST(Interpose, NonBlockingDescriptorStillGetsEagain) {
  SKIP_UNDER_TSAN();
  goro::run([] {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    char c;
    errno = 0;
    EXPECT_EQ(::read(p[0], &c, 1), -1);
    EXPECT_EQ(errno, EAGAIN);
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    errno = 0;
    EXPECT_EQ(::recv(sv[0], &c, 1, 0), -1);
    EXPECT_EQ(errno, EAGAIN);
    errno = 0;
    EXPECT_EQ(::read(sv[0], &c, 1), -1);
    EXPECT_EQ(errno, EAGAIN);
    // MSG_DONTWAIT on a blocking socket: EAGAIN too.
    ASSERT_EQ(::fcntl(sv[1], F_SETFL, 0), 0);
    errno = 0;
    EXPECT_EQ(::recv(sv[1], &c, 1, MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN);
    // The flags are the caller's: goro changed nothing.
    EXPECT_EQ(::fcntl(sv[1], F_GETFL) & O_NONBLOCK, 0);
    EXPECT_NE(::fcntl(sv[0], F_GETFL) & O_NONBLOCK, 0);
    for (int fd : {p[0], p[1], sv[0], sv[1]}) ::close(fd);
  });
}

// SO_RCVTIMEO: the wait ends with EAGAIN, no earlier than the timeout.
TEST(Interpose, ReceiveTimeoutIsHonoured) {
  SKIP_UNDER_TSAN();
  goro::run([] {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    timeval tv{0, 50000};
    ASSERT_EQ(::setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    char c;
    auto t0 = std::chrono::steady_clock::now();
    errno = 0;
    EXPECT_EQ(::recv(sv[0], &c, 1, 0), -1);
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 50ms);
    ::close(sv[0]);
    ::close(sv[1]);
  });
}

// A blocking stream write larger than the socket buffer returns once every
// byte is out; the reader gets them all, in order.
TEST(Interpose, BlockingWriteSendsEverything) {
  SKIP_UNDER_TSAN();
  goro::options o;
  o.gomaxprocs = 1;
  goro::run(o, [] {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    constexpr std::size_t n = 4 << 20;
    std::vector<unsigned char> out(n), in(n);
    for (std::size_t i = 0; i < n; i++) out[i] = (unsigned char)(i * 31 + 7);
    ssize_t wrote = -2;
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      wrote = ::write(sv[0], out.data(), n);
      wg.done();
    });
    std::size_t got = 0;
    while (got < n) {
      // readv of two halves of what is left, to cover the iovec path.
      std::size_t left = n - got;
      iovec iov[2] = {{in.data() + got, left / 2},
                      {in.data() + got + left / 2, left - left / 2}};
      ssize_t r = ::readv(sv[1], iov, 2);
      ASSERT_GT(r, 0);
      got += std::size_t(r);
    }
    wg.wait();
    EXPECT_EQ(wrote, ssize_t(n));
    EXPECT_EQ(in, out);
    ::close(sv[0]);
    ::close(sv[1]);
  });
}

// poll: a timeout with nothing ready returns 0; many goroutines wait in
// poll(-1) at once on a few threads; revents are the kernel's.
TEST(Interpose, PollWaitsParkAndReportTheKernelsEvents) {
  SKIP_UNDER_TSAN();
  constexpr int procs = 1;
  constexpr int n = 100;
  goro::options o;
  o.gomaxprocs = procs;
  int threads = 0;
  std::atomic<int> ok{0};
  goro::run(o, [&] {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    pollfd one{p[0], POLLIN, 0};
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(::poll(&one, 1, 30), 0);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
    std::vector<std::array<int, 2>> pipes(n);
    for (auto& q : pipes) ASSERT_EQ(::pipe2(q.data(), O_CLOEXEC), 0);
    std::atomic<int> started{0};
    goro::wait_group wg;
    for (int i = 0; i < n; i++) {
      wg.add(1);
      goro::go([&, i] {
        started.fetch_add(1);
        // The read end and, never ready, the read end of the shared pipe.
        pollfd fds[2] = {{pipes[i][0], POLLIN, 0}, {p[0], POLLIN, 0}};
        int r = ::poll(fds, 2, -1);
        if (r == 1 && fds[0].revents == POLLIN && fds[1].revents == 0)
          ok.fetch_add(1);
        wg.done();
      });
    }
    ASSERT_TRUE(eventually([&] { return started.load() == n; }));
    ASSERT_TRUE(parked_on_descriptors(n));
    threads = os_threads();
    for (auto& q : pipes) ASSERT_EQ(::write(q[1], "x", 1), 1);
    wg.wait();
    for (auto& q : pipes) {
      ::close(q[0]);
      ::close(q[1]);
    }
    ::close(p[0]);
    ::close(p[1]);
  });
  EXPECT_EQ(ok.load(), n);
  EXPECT_LE(threads, thread_bound(procs));
}

// select: the sets come back as the kernel fills them; the timeval holds
// what is left.
TEST(Interpose, SelectReportsReadyDescriptorsAndTimesOut) {
  SKIP_UNDER_TSAN();
  goro::run([] {
    int a[2], b[2];
    ASSERT_EQ(::pipe2(a, O_CLOEXEC), 0);
    ASSERT_EQ(::pipe2(b, O_CLOEXEC), 0);
    fd_set r;
    FD_ZERO(&r);
    FD_SET(a[0], &r);
    FD_SET(b[0], &r);
    timeval tv{0, 30000};
    EXPECT_EQ(::select(std::max(a[0], b[0]) + 1, &r, nullptr, nullptr, &tv), 0);
    EXPECT_EQ(tv.tv_sec, 0);
    EXPECT_EQ(tv.tv_usec, 0);
    goro::go([&] {
      goro::sleep(10ms);
      (void)::write(b[1], "y", 1);
    });
    FD_ZERO(&r);
    FD_SET(a[0], &r);
    FD_SET(b[0], &r);
    EXPECT_EQ(::select(std::max(a[0], b[0]) + 1, &r, nullptr, nullptr, nullptr),
              1);
    EXPECT_FALSE(FD_ISSET(a[0], &r));
    EXPECT_TRUE(FD_ISSET(b[0], &r));
    for (int fd : {a[0], a[1], b[0], b[1]}) ::close(fd);
  });
}

// close(2) of a descriptor a goroutine waits on wakes it with EBADF.
TEST(Interpose, CloseWakesTheWaiterWithEbadf) {
  SKIP_UNDER_TSAN();
  goro::run([] {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    std::atomic<bool> started{false};
    ssize_t r = 0;
    int err = 0;
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      started = true;
      char c;
      r = ::read(sv[0], &c, 1);
      err = errno;
      wg.done();
    });
    ASSERT_TRUE(eventually([&] { return started.load(); }));
    ASSERT_TRUE(parked_on_descriptors(1));  // in its wait: the close wakes it
    ::close(sv[0]);
    wg.wait();
    EXPECT_EQ(r, -1);
    EXPECT_EQ(err, EBADF);
    ::close(sv[1]);
  });
}

// A reader and a writer of one socket wait at the same time (the one-shot
// registration serves both).
TEST(Interpose, ReaderAndWriterOfOneSocketWaitTogether) {
  SKIP_UNDER_TSAN();
  goro::options o;
  o.gomaxprocs = 1;
  goro::run(o, [] {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    constexpr std::size_t big = 2 << 20;
    std::vector<char> out(big, 'w');
    ssize_t wrote = 0, got = 0;
    char c = 0;
    goro::wait_group wg;
    wg.add(2);
    goro::go([&] {  // waits for room: nobody reads sv[1] yet
      wrote = ::write(sv[0], out.data(), big);
      wg.done();
    });
    goro::go([&] {  // waits for data on the same descriptor
      got = ::read(sv[0], &c, 1);
      wg.done();
    });
    ASSERT_TRUE(parked_on_descriptors(2));  // the writer and the reader
    ASSERT_EQ(::write(sv[1], "r", 1), 1);   // wakes the reader
    std::vector<char> in(big);
    std::size_t n = 0;
    while (n < big) {
      ssize_t r = ::read(sv[1], in.data() + n, big - n);
      ASSERT_GT(r, 0);
      n += std::size_t(r);
    }
    wg.wait();
    EXPECT_EQ(got, 1);
    EXPECT_EQ(c, 'r');
    EXPECT_EQ(wrote, ssize_t(big));
    ::close(sv[0]);
    ::close(sv[1]);
  });
}

// std::this_thread::sleep_for, usleep and nanosleep in goroutines are goro
// sleeps: 100 sleeping goroutines hold no threads.
TEST(Interpose, SleepsInGoroutinesHoldNoThreads) {
  SKIP_UNDER_TSAN();
  constexpr int procs = 1;
  constexpr int n = 100;
  goro::options o;
  o.gomaxprocs = procs;
  int threads = 0;
  std::atomic<int> done{0};
  goro::run(o, [&] {
    std::atomic<int> started{0};
    goro::wait_group wg;
    for (int i = 0; i < n; i++) {
      wg.add(1);
      goro::go([&, i] {
        started.fetch_add(1);
        auto t0 = std::chrono::steady_clock::now();
        if (i % 3 == 0) std::this_thread::sleep_for(300ms);
        if (i % 3 == 1) ::usleep(300000);
        if (i % 3 == 2) {
          timespec ts{0, 300000000};
          EXPECT_EQ(::nanosleep(&ts, nullptr), 0);
        }
        if (std::chrono::steady_clock::now() - t0 >= 300ms) done.fetch_add(1);
        wg.done();
      });
    }
    ASSERT_TRUE(eventually([&] { return started.load() == n; }));
    threads = os_threads();
    wg.wait();
  });
  EXPECT_EQ(done.load(), n);
  EXPECT_LE(threads, thread_bound(procs));
}

// Bad arguments get the kernel's errors.
TEST(Interpose, SleepArgumentsTheKernelRefuses) {
  SKIP_UNDER_TSAN();
  goro::run([] {
    timespec bad{0, 1000000000};
    errno = 0;
    EXPECT_EQ(::nanosleep(&bad, nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(::clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, nullptr), EINVAL);
    timespec past{0, 0};
    EXPECT_EQ(::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &past, nullptr),
              0);
  });
}

// The way C++ code often does I/O once: inside a function-local static's
// initialiser and std::call_once. The goroutine holds the initialisation
// guard (an OS lock), so its read goes to the kernel instead of parking
// (resuming on another thread with the guard held could deadlock it); the
// blocked-thread hand-off lets the writer run at GOMAXPROCS 1.
int interpose_test_static_read(int fd) {
  static int v = [fd] {
    int x = -1;
    if (::read(fd, &x, sizeof x) != ssize_t(sizeof x)) return -2;
    return x;
  }();
  return v;
}

TEST(Interpose, ReadInsideStaticInitAndCallOnce) {
  SKIP_UNDER_TSAN();
  goro::options o;
  o.gomaxprocs = 1;
  goro::run(o, [] {
    int p[2], q[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    ASSERT_EQ(::pipe2(q, O_CLOEXEC), 0);
    goro::go([w1 = p[1], w2 = q[1]] {
      int a = 7, b = 9;
      (void)!::write(w1, &a, sizeof a);
      (void)!::write(w2, &b, sizeof b);
    });
    EXPECT_EQ(interpose_test_static_read(p[0]), 7);
    static std::once_flag once;
    int got = -1;
    std::call_once(once, [&] { (void)!::read(q[0], &got, sizeof got); });
    EXPECT_EQ(got, 9);
    for (int fd : {p[0], p[1], q[0], q[1]}) ::close(fd);
  });
}

// A plain thread's calls are the kernel's, untouched.
TEST(Interpose, PlainThreadBlocksAsUsual) {
  SKIP_UNDER_TSAN();
  goro::run([] {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    int v = 0;
    std::thread t([&] { (void)::read(p[0], &v, sizeof v); });
    int w = 42;
    ASSERT_EQ(::write(p[1], &w, sizeof w), ssize_t(sizeof w));
    t.join();
    EXPECT_EQ(v, 42);
    ::close(p[0]);
    ::close(p[1]);
  });
}

// GORO_DEBUG=interpose=0: the calls go to the kernel; blocked readers hold
// threads (the blocked-thread hand-off gives their Ps away).
TEST(Interpose, OffBySettingBlocksThreads) {
  SKIP_UNDER_TSAN();
  ::setenv("GORO_DEBUG", "interpose=0", 1);
  constexpr int procs = 1;
  constexpr int n = 20;
  goro::options o;
  o.gomaxprocs = procs;
  int threads = 0;
  goro::run(o, [&] {
    std::vector<std::array<int, 2>> pipes(n);
    for (auto& p : pipes) ASSERT_EQ(::pipe2(p.data(), O_CLOEXEC), 0);
    std::atomic<int> started{0};
    goro::wait_group wg;
    for (int i = 0; i < n; i++) {
      wg.add(1);
      goro::go([&, i] {
        started.fetch_add(1);
        char c;
        (void)::read(pipes[i][0], &c, 1);
        wg.done();
      });
    }
    // Each blocked reader's P is handed off, so all of them start.
    ASSERT_TRUE(eventually([&] { return started.load() == n; }));
    ASSERT_TRUE(eventually([&] { return os_threads() > n; }));
    threads = os_threads();
    for (auto& p : pipes) ASSERT_EQ(::write(p[1], "x", 1), 1);
    wg.wait();
    for (auto& p : pipes) {
      ::close(p[0]);
      ::close(p[1]);
    }
  });
  ::unsetenv("GORO_DEBUG");
  EXPECT_GT(threads, n);
}

}  // namespace
