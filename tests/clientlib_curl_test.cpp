// libcurl's easy interface (curl_easy_perform, blocking) in goroutines
// against goro's own HTTP server in the same process (goro issue 24: plain
// blocking socket calls park the goroutine on the network poller, the
// thread goes on running others).
//
// The server is the web server example's (examples/http_server.hpp, one
// goroutine per connection) on 127.0.0.1:0. Needs libcurl4-openssl-dev
// (scripts/deps.sh clients) and Node's http-parser (scripts/deps.sh base);
// without them the tests skip, saying why. Run them alone with
//   cmake --build --preset default --target clientlib_curl_test
//   ./build/default/tests/clientlib_curl_test
// The concurrency test holds 500 requests in flight at once (the server
// answers none until all have arrived) on GOMAXPROCS = 2 and checks that
// the process has at most 2*GOMAXPROCS+8 OS threads meanwhile: with the
// libc interposition off (GORO_DEBUG=interpose=0) each curl_easy_perform
// holds a thread and it fails (hangs until the watchdog). Then every
// goroutine fetches pages of 0 B to 1 MiB, each body compared byte for
// byte. Elapsed times are printed, never asserted.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <goro/goro.hpp>
#include <string>
#include <vector>

#include "clientlib_servers.hpp"

#if defined(GORO_HAVE_LIBCURL) && defined(GORO_HAVE_HTTP_SERVER)
#include <curl/curl.h>

#include "clientlib_http.hpp"
#include "http_server.hpp"
#endif

namespace {

using namespace std::chrono_literals;

#if defined(GORO_HAVE_LIBCURL) && defined(GORO_HAVE_HTTP_SERVER)

constexpr int kProcs = 2;

// The pages the server has: /page/K is pages()[K], deterministic bytes.
const std::vector<std::string>& pages() {
  static const std::vector<std::string> p = [] {
    const std::size_t sizes[] = {0,      1,      1000,  4096,   65535,   65536,
                                 100000, 262144, 12345, 500000, 1 << 20, 8192};
    std::vector<std::string> v;
    for (std::size_t k = 0; k < std::size(sizes); k++)
      v.push_back(clientlib::payload(1000 + k, sizes[k]));
    return v;
  }();
  return p;
}

// The server's routes: /page/K, and /barrier/I, answered "ok-I" only once
// `expected` barrier requests have arrived (all_in is closed then; the
// answers go out when `release` is closed).
struct routes {
  int expected = 0;
  std::atomic<int> arrived{0};
  goro::chan<void> all_in = goro::make_chan<void>();
  goro::chan<void> release = goro::make_chan<void>();

  http::response operator()(const http::request& r) {
    http::response out;
    out.content_type = "application/octet-stream";
    if (r.url.rfind("/page/", 0) == 0) {
      std::size_t k = std::strtoul(r.url.c_str() + 6, nullptr, 10);
      if (k < pages().size()) {
        out.body = pages()[k];
        return out;
      }
    } else if (r.url.rfind("/barrier/", 0) == 0) {
      if (arrived.fetch_add(1) + 1 == expected) all_in.close();
      release.recv();  // returns once closed
      out.body = "ok-" + r.url.substr(9);
      return out;
    }
    out.status = 404;
    out.body = "no such page";
    return out;
  }
};

std::size_t append_body(char* data, std::size_t size, std::size_t nmemb,
                        void* user) {
  static_cast<std::string*>(user)->append(data, size * nmemb);
  return size * nmemb;
}

// GET url on h (keep-alive between calls); the body, or "" with *err set.
bool fetch(CURL* h, const std::string& url, std::string* body,
           std::string* err) {
  body->clear();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
  CURLcode rc = curl_easy_perform(h);
  if (rc != CURLE_OK) {
    *err = url + ": " + curl_easy_strerror(rc);
    return false;
  }
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) {
    *err = url + ": status " + std::to_string(status);
    return false;
  }
  return true;
}

CURL* new_handle() {
  CURL* h = curl_easy_init();
  if (h == nullptr) return nullptr;
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 80L);
  return h;
}

void global_init() {
  static const bool once = [] {
    curl_global_init(CURL_GLOBAL_ALL);
    return true;
  }();
  (void)once;
}

// 500 goroutines, a curl handle each, all in curl_easy_perform at once
// (the server holds every answer until all 500 requests are in), then
// 3 pages each on the same handle, every body compared byte for byte.
TEST(ClientlibCurl, FiveHundredRequestsAtOnceThenPages) {
  global_init();
  pages();  // built here: not under a static's guard that goroutines wait on
  clientlib::raise_nofile();
  clientlib::watchdog wd("ClientlibCurl.FiveHundredRequestsAtOnceThenPages",
                         100s);
  constexpr int n = 500, per = 3;
  clientlib::failures fail;
  clientlib::thread_peak peak;
  std::atomic<long> checked{0}, bytes{0};
  int arrived_seen = 0, threads_at_peak = 0;
  double barrier_ms = 0, pages_ms = 0;
  std::string main_error;

  goro::options opt;
  opt.gomaxprocs = kProcs;
  goro::run(opt, [&] {
    routes rt;
    rt.expected = n;
    goro::net::listener ln;
    try {
      ln = goro::net::listen("127.0.0.1:0");
    } catch (const std::exception& e) {
      main_error = std::string("listen: ") + e.what();
      return;
    }
    const std::string base = "http://" + ln.addr().str();
    goro::wait_group served, conns;
    served.go([&] {
      clientlib::serve_counted(
          ln, [&rt](const http::request& r) { return rt(r); }, conns);
    });
    std::atomic<int> through{0};  // past the barrier request
    goro::wait_group wg;
    auto t0 = clientlib::steady::now();
    for (int i = 0; i < n; i++) {
      wg.add(1);
      goro::go(goro::go_options{clientlib::client_stack_size}, [&, i] {
        CURL* h = new_handle();
        std::string body, err;
        if (h == nullptr) {
          fail.add("curl_easy_init failed");
        } else if (!fetch(h, base + "/barrier/" + std::to_string(i), &body,
                          &err)) {
          fail.add(err);
        } else if (body != "ok-" + std::to_string(i)) {
          fail.add("barrier " + std::to_string(i) + ": wrong body " + body);
        }
        through.fetch_add(1);
        for (int j = 0; h != nullptr && j < per; j++) {
          std::size_t k = (i * 5 + j) % pages().size();
          if (!fetch(h, base + "/page/" + std::to_string(k), &body, &err)) {
            fail.add(err);
          } else if (body != pages()[k]) {
            fail.add("/page/" + std::to_string(k) + ": " +
                     std::to_string(body.size()) + " bytes, not the " +
                     std::to_string(pages()[k].size()) + " sent");
          } else {
            checked.fetch_add(1);
            bytes.fetch_add(long(body.size()));
          }
        }
        if (h != nullptr) curl_easy_cleanup(h);
        wg.done();
      });
    }
    // Until all n requests are held by the server (or the deadline).
    auto all_in = rt.all_in;
    auto deadline = goro::after(60s);
    for (bool waiting = true; waiting;) {
      auto tick = goro::after(20ms);  // to sample the thread count
      switch (goro::select(goro::case_recv(all_in), goro::case_recv(deadline),
                           goro::case_recv(tick))) {
        case 0:
        case 1:
          waiting = false;
          break;
        default:
          peak.sample();
          // A goroutine that failed before the barrier never arrives.
          if (fail.count() > 0 && through.load() > 0) waiting = false;
      }
    }
    arrived_seen = rt.arrived.load();
    threads_at_peak = peak.sample();
    auto t1 = clientlib::steady::now();
    std::printf(
        "[ClientlibCurl] %d of %d requests in flight at once, %d OS "
        "threads\n",
        arrived_seen, n, threads_at_peak);
    rt.release.close();
    wg.wait();
    auto t2 = clientlib::steady::now();
    peak.sample();
    ln.close();
    served.wait();
    conns.wait();  // every client has closed its connection
    barrier_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    pages_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  });

  std::printf(
      "[ClientlibCurl] all %d in after %.0f ms; %ld pages (%ld bytes) "
      "checked in %.0f ms; peak %d OS threads\n",
      n, barrier_ms, checked.load(), bytes.load(), pages_ms, peak.peak());
  RecordProperty("in_flight", arrived_seen);
  RecordProperty("threads", threads_at_peak);
  RecordProperty("peak_threads", peak.peak());
  RecordProperty("pages_ms", static_cast<int>(pages_ms));
  ASSERT_EQ(main_error, "");
  EXPECT_EQ(fail.count(), 0) << fail.first();
  EXPECT_EQ(arrived_seen, n) << "requests in flight at once";
  EXPECT_LE(threads_at_peak, clientlib::thread_bound(kProcs))
      << "OS threads with " << arrived_seen << " requests in flight";
  // The pages move megabytes: see data_thread_bound.
  EXPECT_LE(peak.peak(), clientlib::data_thread_bound);
  EXPECT_EQ(checked.load(), long(n) * per);
}

#else

TEST(ClientlibCurl, FiveHundredRequestsAtOnceThenPages) {
#ifndef GORO_HAVE_LIBCURL
  GTEST_SKIP() << "libcurl (libcurl4-openssl-dev) was not found at configure "
                  "time";
#else
  GTEST_SKIP() << "Node's http-parser (libhttp-parser-dev), which the "
                  "in-process web server needs, was not found at configure "
                  "time";
#endif
}

#endif

}  // namespace
