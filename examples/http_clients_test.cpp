// The web server against real HTTP clients: the curl binary and Python's
// http.client, run as child processes against a server on a loopback port
// of this process. Each client is bounded by its own time limit (curl
// --max-time, Python's socket timeout) and the test skips when the client
// is not installed. Assertions are on what the client reports, never on
// how long it took.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <goro/goro.hpp>
#include <string>
#include <vector>

#include "http_server.hpp"
#include "http_test_server.hpp"

extern char** environ;

namespace {

// Whether `name` is an executable on PATH.
bool on_path(const char* name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string p = path;
  for (std::size_t i = 0; i <= p.size();) {
    std::size_t end = p.find(':', i);
    if (end == std::string::npos) end = p.size();
    std::string file = p.substr(i, end - i) + "/" + name;
    if (end > i && ::access(file.c_str(), X_OK) == 0) return true;
    i = end + 1;
  }
  return false;
}

struct result {
  int status = -1;  // exit status, -1 if it did not exit normally
  std::string out, err;
};

// A temporary file, removed on destruction.
struct temp_file {
  std::string path = "/tmp/goro_http_clients_XXXXXX";
  int fd;
  temp_file() { fd = ::mkstemp(path.data()); }
  ~temp_file() {
    if (fd >= 0) ::close(fd);
    ::unlink(path.c_str());
  }
  std::string contents() const {
    std::string s;
    char buf[4096];
    ssize_t n;
    ::lseek(fd, 0, SEEK_SET);
    while ((n = ::read(fd, buf, sizeof buf)) > 0)
      s.append(buf, static_cast<std::size_t>(n));
    return s;
  }
};

// Runs argv (killed after `limit`) with `input` on its stdin, its stdout and
// stderr collected (files, not pipes: nothing to drain while it runs). Waiting
// for it is a blocking call (goro::blocking_long hands the P on), so the
// server's goroutines keep running meanwhile.
result run(const std::vector<std::string>& argv, const std::string& input,
           std::chrono::seconds limit = std::chrono::seconds(60)) {
  temp_file in, out, err;
  result r;
  if (in.fd < 0 || out.fd < 0 || err.fd < 0) {
    ADD_FAILURE() << "mkstemp: " << std::strerror(errno);
    return r;
  }
  if (::write(in.fd, input.data(), input.size()) !=
      static_cast<ssize_t>(input.size())) {
    ADD_FAILURE() << "write: " << std::strerror(errno);
    return r;
  }
  ::lseek(in.fd, 0, SEEK_SET);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in.fd, 0);
  posix_spawn_file_actions_adddup2(&fa, out.fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err.fd, 2);
  // The child starts with no signal blocked and default handlers (the
  // runtime's threads block or catch some).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int e = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (e != 0) {
    ADD_FAILURE() << "posix_spawnp " << argv[0] << ": " << std::strerror(e);
    return r;
  }
  // The watchdog: a client still running after `limit` (a loaded
  // machine, a hang) is killed and the test fails. The child is waited
  // for without being reaped (WNOWAIT) until the watchdog is stopped, so
  // the watchdog can never hit a recycled pid.
  goro::timer watchdog =
      goro::after_func(limit, [pid] { ::kill(pid, SIGKILL); });
  goro::blocking_long([&] {
    siginfo_t si;
    while (::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOWAIT) <
               0 &&
           errno == EINTR) {
    }
  });
  bool in_time = watchdog.stop();
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  EXPECT_TRUE(in_time) << argv[0] << " killed after its time limit";
  if (WIFEXITED(ws)) r.status = WEXITSTATUS(ws);
  r.out = out.contents();
  r.err = err.contents();
  return r;
}

bool has(const std::string& s, const char* what) {
  return s.find(what) != std::string::npos;
}

// curl with a 30 s limit, the URL of `path` on srv last.
result curl(const http_test::server& srv, std::vector<std::string> args,
            const std::string& path = "/", const std::string& input = "") {
  args.insert(args.begin(), {"curl", "-sS", "--max-time", "30"});
  args.push_back("http://" + srv.where() + path);
  return run(args, input);
}

#define SKIP_WITHOUT(tool) \
  if (!on_path(tool)) GTEST_SKIP() << tool " not installed"

}  // namespace

// curl -I: GET's headers and nothing after them ("Excess found" in curl's
// verbose log when a HEAD answer carries a body).
TEST(HttpClients, CurlHeadHasNoBody) {
  SKIP_WITHOUT("curl");
  goro::run([] {
    http_test::server srv;
    result r = curl(srv, {"-v", "-I"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has(r.out, "HTTP/1.1 200 OK")) << r.out;
    EXPECT_TRUE(has(r.out, "Content-Length: 13")) << r.out;
    EXPECT_FALSE(has(r.err, "Excess")) << r.err;
    // HEAD then GET on one connection: the GET's answer is whole.
    r = curl(srv, {"-I", "http://" + srv.where() + "/", "--next", "-sS",
                   "--max-time", "30"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has(r.out, "Hello, World!")) << r.out;
  });
}

// Expect: 100-continue: curl reports the interim answer, sends the body
// and gets the final one.
TEST(HttpClients, CurlExpectContinue) {
  SKIP_WITHOUT("curl");
  goro::run([] {
    http_test::server srv;
    result r =
        curl(srv, {"-v", "--data-binary", "@-", "-H", "Expect: 100-continue"},
             "/up", "hello world");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has(r.err, "HTTP/1.1 100 Continue")) << r.err;
    EXPECT_EQ(r.out, "got 11 bytes");
  });
}

// A body over the bound: 413 at once, never "100 Continue" (curl then
// does not send the 2 MB).
TEST(HttpClients, CurlExpectContinueWithAnOversizedBodyGets413) {
  SKIP_WITHOUT("curl");
  goro::run([] {
    http_test::server srv;
    result r =
        curl(srv, {"-v", "--data-binary", "@-", "-H", "Expect: 100-continue"},
             "/up", std::string(2000000, 'b'));
    EXPECT_TRUE(has(r.err, "HTTP/1.1 413")) << r.err;
    EXPECT_FALSE(has(r.err, "100 Continue")) << r.err;
  });
}

// curl -H 'Host:' sends no Host header: 400 on HTTP/1.1, 200 on 1.0.
TEST(HttpClients, CurlWithoutHostGets400OnHttp11) {
  SKIP_WITHOUT("curl");
  goro::run([] {
    http_test::server srv;
    result r =
        curl(srv, {"-o", "/dev/null", "-w", "%{http_code}", "-H", "Host:"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "400");
    r = curl(srv, {"--http1.0", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                   "Host:"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "200");
  });
}

// Two URLs in one curl: the second request reuses the connection.
TEST(HttpClients, CurlReusesTheKeepAliveConnection) {
  SKIP_WITHOUT("curl");
  goro::run([] {
    http_test::server srv;
    result r = curl(srv, {"-v", "http://" + srv.where() + "/"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "Hello, World!Hello, World!");
    EXPECT_TRUE(has(r.err, "Re-using existing connection")) << r.err;
  });
}

// Python's http.client on one keep-alive connection: HEAD, GET, POST,
// each answer checked in the script. (http.client drops what its buffered
// reader holds past a HEAD answer, so this does not see a HEAD body: the
// curl test and HttpConn.HeadAnswerHasContentLengthAndNoBody do.)
TEST(HttpClients, PythonHttpClientOnOneConnection) {
  SKIP_WITHOUT("python3");
  goro::run([] {
    http_test::server srv;
    std::size_t colon = srv.where().rfind(':');
    std::string script =
        "import http.client, sys\n"
        "c = http.client.HTTPConnection('127.0.0.1', " +
        srv.where().substr(colon + 1) +
        ", timeout=10)\n"
        "c.request('HEAD', '/')\n"
        "r = c.getresponse()\n"
        "assert r.status == 200 and r.getheader('Content-Length') == '13'\n"
        "assert r.read() == b''\n"
        "c.request('GET', '/')\n"
        "r = c.getresponse()\n"
        "assert r.read() == b'Hello, World!', 'GET after HEAD'\n"
        "c.request('POST', '/up', body=b'abcd')\n"
        "r = c.getresponse()\n"
        "assert r.read() == b'got 4 bytes'\n"
        "print('ok')\n";
    // (Python's start-up alone can take tens of seconds on a loaded
    // machine: a longer limit than curl's.)
    result r = run({"python3", "-c", script}, "", std::chrono::seconds(100));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "ok\n") << r.err;
  });
}
