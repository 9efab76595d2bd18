// clientlib_servers.hpp: throw-away PostgreSQL and Redis servers for the
// client-library tests (tests/clientlib_*_test.cpp), plus what those tests
// share: a watchdog, the OS thread count, RLIMIT_NOFILE raised.
//
// Each server is started at most once per test process, on first use
// (clientlib::postgres(), clientlib::redis()), in a fresh directory under
// $TMPDIR (or /tmp) that is removed afterwards. PostgreSQL 15 listens on a
// Unix socket only (listen_addresses = ''), with max_connections = 1100
// and fsync off; redis-server on a Unix socket only (--port 0), no
// persistence, maxclients 2000. A server that is not installed, or that
// does not come up within 30 s, makes the caller skip with the reason.
//
// Cleanup does not depend on the test process ending well: a small shell
// (the "reaper"), detached from the test process, waits for EOF on a pipe
// whose only writer is the test process, then stops PostgreSQL
// (pg_ctl -m immediate), kills redis-server and removes the directory. The
// pipe reaches EOF when the test process closes it at the end of the tests
// (a GoogleTest Environment's TearDown, which waits for the reaper) or when
// the process dies in any way (a failed assertion, the watchdog's abort,
// SIGKILL).
//
// PostgreSQL refuses to run as root: as root (CI), initdb and pg_ctl run as
// the `postgres` user (runuser), which then owns the directory.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace clientlib {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// Stack for the goroutines that call into a client library: libpq, hiredis
// and libcurl were written for thread stacks (libpq keeps 8 KiB buffers on
// the stack), and ASan's frames are larger still.
inline constexpr std::size_t client_stack_size =
#if defined(__SANITIZE_ADDRESS__)
    1024 * 1024;
#else
    256 * 1024;
#endif

// The bound the concurrency tests check: the threads that run goroutines
// (GOMAXPROCS of them), a few spares for handoffs, the runtime's own
// (sysmon, the poller...), the test's main thread and watchdog.
inline int thread_bound(int gomaxprocs) { return 2 * gomaxprocs + 8; }

// The bound of the data tests, which move megabytes: their copies contend
// on glibc malloc's arena locks (a goroutine frees, on whichever thread it
// runs, memory that another thread's arena holds), and a futex wait on one
// that lasts a GORO_DEBUG=blockedsyscall period is handed off to another
// thread by design (docs/guide.md, "Calls goro was not told about"); and
// on an overloaded machine any system call goro makes in entersyscall can
// outlast sysmon's 20 us and have its P retaken, as in Go. Seen: 8 to 38
// threads at load averages of 40 to 200 on two cores. Still far below a
// thread per connection (200 and more here), which is what these tests
// reach without the interposition (over 100 threads).
inline constexpr int data_thread_bound = 64;

// The OS threads of this process now (entries of /proc/self/task).
inline int os_thread_count() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') n++;
  }
  closedir(d);
  return n;
}

// Soft RLIMIT_NOFILE up to the hard limit: a thousand client connections
// (and, in one process, the server ends of the in-process web server).
inline void raise_nofile() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}
inline long nofile_limit() {
  rlimit rl{};
  return getrlimit(RLIMIT_NOFILE, &rl) == 0 ? long(rl.rlim_cur) : -1;
}

// Aborts the process with a message if not destroyed within `limit`: every
// test here is bounded even when a goroutine never wakes up. The abort
// closes the reaper's pipe, so the servers go too.
class watchdog {
 public:
  watchdog(std::string what, std::chrono::seconds limit)
      : what_(std::move(what)), thread_([this, limit] {
          std::unique_lock<std::mutex> lk(mu_);
          if (!cv_.wait_for(lk, limit, [this] { return done_; })) {
            std::fprintf(stderr,
                         "clientlib watchdog: %s did not finish within %lld s "
                         "(%d OS threads); aborting\n",
                         what_.c_str(), static_cast<long long>(limit.count()),
                         os_thread_count());
            std::fflush(stderr);
            std::abort();
          }
        }) {}
  ~watchdog() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

namespace detail {

inline bool is_root() { return geteuid() == 0; }

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

inline std::string read_file(const std::string& path, std::size_t max = 4096) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)),
                std::istreambuf_iterator<char>());
  if (s.size() > max) s.erase(0, s.size() - max);  // the tail: the error
  return s;
}

// Spawns argv (argv[0] a path) with cwd `dir`, stdin /dev/null and the fds
// `dups` (from, to); -1 on failure. `setsid`: in a session of its own.
inline pid_t spawn(const std::vector<std::string>& args, const std::string& dir,
                   bool setsid = false,
                   const std::vector<std::pair<int, int>>& dups = {},
                   const std::string& log = "") {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (!dir.empty()) posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (!log.empty()) {  // the output of a tool, shown only when it fails
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  }
  // dup2 clears O_CLOEXEC on the copy: these fds reach the program.
  for (auto [from, to] : dups) posix_spawn_file_actions_adddup2(&fa, from, to);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  if (setsid) posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &fa, &at, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  return rc == 0 ? pid : -1;
}

// Waits up to `limit` for pid to exit; its exit status, or -1 (then it has
// been killed and reaped).
inline int wait_exit(pid_t pid, std::chrono::milliseconds limit) {
  auto deadline = steady::now() + limit;
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      if (fd >= 0) close(fd);
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    if (r < 0 && errno != EINTR) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - steady::now());
    if (left.count() <= 0) break;
    if (fd >= 0) {
      pollfd p{fd, POLLIN, 0};
      poll(&p, 1, static_cast<int>(left.count()));
    } else {
      // No pidfd (Linux < 5.3): poll the exit now and then.
      std::this_thread::sleep_for(
          std::min(left, std::chrono::milliseconds(10)));
    }
  }
  if (fd >= 0) close(fd);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

// Runs a command to completion (bounded), its output appended to `log`;
// true on exit status 0.
inline bool run(const std::vector<std::string>& args, const std::string& dir,
                const std::string& log, std::chrono::milliseconds limit) {
  pid_t pid = spawn(args, dir, false, {}, log);
  return pid > 0 && wait_exit(pid, limit) == 0;
}

// The PostgreSQL tools as the user that may run them.
inline std::vector<std::string> as_pg_user(std::vector<std::string> args) {
  if (!is_root()) return args;
  std::vector<std::string> out{"/usr/sbin/runuser", "-u", "postgres", "--"};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

inline bool executable(const std::string& p) {
  return access(p.c_str(), X_OK) == 0;
}

}  // namespace detail

// The directory of this process's servers and its reaper.
class server_dir {
 public:
  static server_dir& get() {
    static server_dir d;
    made() = true;
    return d;
  }
  // get() has been called: there may be something to shut down.
  static bool& made() {
    static bool m = false;
    return m;
  }
  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }

  // Ends the servers and removes the directory (waits for the reaper, up to
  // 40 s). Idempotent.
  void shutdown() {
    if (redis_pid_ > 0) {
      kill(redis_pid_, SIGTERM);  // a clean shutdown removes its pid file
      detail::wait_exit(redis_pid_, 10s);
      redis_pid_ = -1;
    }
    if (ctl_w_ >= 0) {
      close(ctl_w_);
      ctl_w_ = -1;
      // The reaper exits (closing done_r_'s only writer) when it is done.
      auto deadline = steady::now() + 40s;
      char b;
      for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - steady::now());
        if (left.count() <= 0) break;
        pollfd p{done_r_, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(left.count())) <= 0 && errno != EINTR)
          break;
        ssize_t n = read(done_r_, &b, 1);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
      }
      close(done_r_);
      done_r_ = -1;
    }
  }
  void set_redis_pid(pid_t p) { redis_pid_ = p; }

 private:
  server_dir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/goro-clientlib-XXXXXX";
    // A Unix socket path has 107 bytes at most.
    if (tmpl.size() > 70) tmpl = "/tmp/goro-clientlib-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) {
      error_ = "mkdtemp " + tmpl + ": " + std::strerror(errno);
      return;
    }
    std::string path = buf.data();
    if (detail::is_root()) {
      passwd* pw = getpwnam("postgres");
      if (pw != nullptr) {
        if (chown(path.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
          error_ = "chown " + path + ": " + std::strerror(errno);
        }
      }
    }
    // The reaper: a shell, detached from this process (a background job of
    // a shell that exits at once, so it outlives a test process killed
    // with its children), waits for EOF on fd 4 (ctl: this process holds
    // the only write end), then cleans up; fd 5, the write end of `done`,
    // closes when it exits. Its own session: a Ctrl-C of the test does not
    // stop it first.
    int ctl[2], done[2];
    if (pipe2(ctl, O_CLOEXEC) != 0 || pipe2(done, O_CLOEXEC) != 0) {
      error_ = std::string("pipe: ") + std::strerror(errno);
      rmdir(path.c_str());
      return;
    }
    std::string q = detail::shell_quote(path);
    std::string stop_pg =
        std::string(detail::is_root() ? "/usr/sbin/runuser -u postgres -- "
                                      : "") +
        "/usr/lib/postgresql/15/bin/pg_ctl -D " + q +
        "/pg -m immediate -w -t 20 stop";
    std::string script = "( cat <&4 >/dev/null 4<&-; if [ -f " + q +
                         "/pg/postmaster.pid ]; then " + stop_pg +
                         " >/dev/null 2>&1; fi; if [ -f " + q +
                         "/redis.pid ]; then kill -9 $(cat " + q +
                         "/redis.pid) 2>/dev/null; fi; rm -rf " + q +
                         " ) >/dev/null 2>&1 &";
    pid_t sh = detail::spawn({"/bin/sh", "-c", script}, "/", true,
                             {{ctl[0], 4}, {done[1], 5}});
    close(done[1]);
    close(ctl[0]);
    if (sh < 0 || detail::wait_exit(sh, 10s) != 0) {
      error_ = "cannot start /bin/sh for the cleanup";
      close(ctl[1]);
      close(done[0]);
      rmdir(path.c_str());
      return;
    }
    ctl_w_ = ctl[1];
    done_r_ = done[0];
    path_ = path;
  }

  std::string path_;
  std::string error_;
  int ctl_w_ = -1;
  int done_r_ = -1;
  pid_t redis_pid_ = -1;
};

struct server {
  bool ok = false;
  std::string why;  // when !ok: the reason to skip
  std::string socket_dir;
  std::string socket_path;  // redis: the socket; postgres: its directory
};

// PostgreSQL 15, started on first call; nullptr-free: check ok.
inline const server& postgres() {
  static server s = [] {
    server r;
    const std::string bin = "/usr/lib/postgresql/15/bin/";
    if (!detail::executable(bin + "initdb") ||
        !detail::executable(bin + "pg_ctl")) {
      r.why = "PostgreSQL 15 is not installed (" + bin +
              "initdb; scripts/deps.sh clients installs postgresql-15)";
      return r;
    }
    if (detail::is_root()) {
      if (getpwnam("postgres") == nullptr) {
        r.why =
            "running as root and there is no `postgres` user to run "
            "PostgreSQL as";
        return r;
      }
      if (!detail::executable("/usr/sbin/runuser")) {
        r.why = "running as root and there is no /usr/sbin/runuser";
        return r;
      }
    }
    raise_nofile();
    server_dir& d = server_dir::get();
    if (!d.ok()) {
      r.why = d.error();
      return r;
    }
    const std::string data = d.path() + "/pg";
    if (!detail::run(detail::as_pg_user({bin + "initdb", "-D", data, "-A",
                                         "trust", "-U", "postgres", "-E",
                                         "UTF8", "--locale=C", "--no-sync"}),
                     d.path(), d.path() + "/initdb.log", 60s)) {
      r.why = "initdb failed or took over 60 s: " +
              detail::read_file(d.path() + "/initdb.log");
      return r;
    }
    {
      std::ofstream conf(data + "/postgresql.conf", std::ios::app);
      conf << "\n# goro clientlib tests\n"
           << "listen_addresses = ''\n"
           << "unix_socket_directories = '" << d.path() << "'\n"
           << "port = 5432\n"
           << "max_connections = 1100\n"
           << "shared_buffers = 32MB\n"
           << "fsync = off\nsynchronous_commit = off\n"
           << "full_page_writes = off\n"
           << "autovacuum = off\n"
           << "max_parallel_workers_per_gather = 0\n"
           << "log_min_messages = warning\n";
      if (!conf) {
        r.why = "cannot write " + data + "/postgresql.conf";
        return r;
      }
    }
    if (!detail::run(detail::as_pg_user({bin + "pg_ctl", "-D", data, "-l",
                                         d.path() + "/pg.log", "-w", "-t", "30",
                                         "start"}),
                     d.path(), d.path() + "/pg_ctl.log", 40s)) {
      r.why = "PostgreSQL did not start within 30 s; its log: " +
              detail::read_file(d.path() + "/pg.log");
      return r;
    }
    r.ok = true;
    r.socket_dir = d.path();
    r.socket_path = d.path();
    return r;
  }();
  return s;
}

// How many connections a test opens at once: the postmaster starts the
// backends one by one, and a thousand at once on a loaded two-core machine
// can take longer than a connect timeout. Limiting the connects does not
// limit the queries: the connections, once open, are all used at once.
inline constexpr int pg_connects_at_once = 32;

// libpq's connection string for postgres().
inline std::string pg_conninfo() {
  return "host=" + postgres().socket_dir +
         " port=5432 user=postgres dbname=postgres connect_timeout=60";
}

namespace detail {
// PING over the Unix socket: true on "+PONG".
inline bool redis_pings(const std::string& sock) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock.c_str());
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  bool ok = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
      write(fd, "PING\r\n", 6) == 6) {
    char buf[16] = {};
    ssize_t n = read(fd, buf, sizeof buf - 1);
    ok = n >= 5 && std::strncmp(buf, "+PONG", 5) == 0;
  }
  close(fd);
  return ok;
}
}  // namespace detail

// redis-server, started on first call.
inline const server& redis() {
  static server s = [] {
    server r;
    const std::string bin = "/usr/bin/redis-server";
    if (!detail::executable(bin)) {
      r.why = "redis-server is not installed (" + bin +
              "; scripts/deps.sh clients installs redis-server)";
      return r;
    }
    raise_nofile();
    server_dir& d = server_dir::get();
    if (!d.ok()) {
      r.why = d.error();
      return r;
    }
    const std::string sock = d.path() + "/redis.sock";
    pid_t pid = detail::spawn({bin,
                               "--port",
                               "0",
                               "--unixsocket",
                               sock,
                               "--unixsocketperm",
                               "700",
                               "--save",
                               "",
                               "--appendonly",
                               "no",
                               "--maxclients",
                               "2000",
                               "--daemonize",
                               "no",
                               "--pidfile",
                               d.path() + "/redis.pid",
                               "--dir",
                               d.path(),
                               "--logfile",
                               d.path() + "/redis.log"},
                              d.path(), false, {}, d.path() + "/redis.out");
    if (pid < 0) {
      r.why = "cannot start " + bin;
      return r;
    }
    d.set_redis_pid(pid);
    auto deadline = steady::now() + 30s;
    while (!detail::redis_pings(sock)) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) {
        d.set_redis_pid(-1);
        r.why = "redis-server exited; its log: " +
                detail::read_file(d.path() + "/redis.log");
        return r;
      }
      if (steady::now() > deadline) {
        r.why = "redis-server did not answer PING within 30 s; its log: " +
                detail::read_file(d.path() + "/redis.log");
        return r;
      }
      // Polling an outside process's start-up: nothing to wait on.
      std::this_thread::sleep_for(20ms);
    }
    r.ok = true;
    r.socket_dir = d.path();
    r.socket_path = sock;
    return r;
  }();
  return s;
}

namespace detail {
// Stops the servers after the last test of the process.
class servers_env : public ::testing::Environment {
 public:
  void TearDown() override {
    if (server_dir::made()) server_dir::get().shutdown();
  }
};
inline ::testing::Environment* const servers_env_registered =
    ::testing::AddGlobalTestEnvironment(new servers_env);
}  // namespace detail

// A failure seen in a goroutine: counted, the first few kept for the
// report (assertions are made on the test's own thread afterwards).
class failures {
 public:
  void add(const std::string& what) {
    if (count_.fetch_add(1, std::memory_order_relaxed) < 10) {
      std::lock_guard<std::mutex> lk(mu_);  // never held across a park
      first_ += what + "\n";
    }
  }
  int count() const { return count_.load(std::memory_order_relaxed); }
  std::string first() const {
    std::lock_guard<std::mutex> lk(mu_);
    return first_;
  }

 private:
  std::atomic<int> count_{0};
  mutable std::mutex mu_;
  std::string first_;
};

// A peak of the thread count, sampled by whoever calls sample().
class thread_peak {
 public:
  int sample() {
    int n = os_thread_count();
    int cur = peak_.load(std::memory_order_relaxed);
    while (n > cur &&
           !peak_.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
    }
    return n;
  }
  int peak() const { return peak_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int> peak_{0};
};

// Deterministic bytes for (seed, size): what the servers are asked to
// store and send back, and what the tests compare against.
inline std::string payload(std::uint64_t seed, std::size_t size) {
  std::string s(size, '\0');
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (std::size_t i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    // Printable, so that the same bytes go through text protocols too.
    s[i] = static_cast<char>('!' + (x % 94));
  }
  return s;
}

}  // namespace clientlib
