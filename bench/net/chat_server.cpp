// goro_net_chat: the goro broadcast chat server of bench/net/run.sh's chat
// workload. Its twin is `gonetbench chat-server` (bench/go/net/chat.go),
// with the same structure and constants; the load client is
// `gonetbench chat-client` for both.
//
// Protocol (lines end in "\n"): a client's first line is "join R"; once
// room R holds kRoomSize members the server sends "ready" to each of them;
// every later line a member sends is delivered to every member of its
// room, the sender included.
//
// Structure: a goroutine per connection reading lines, a writer goroutine
// per client draining its own buffered channel (what is queued is batched,
// with non-blocking receives, into one write) and one broadcaster
// goroutine that owns the rooms.
//
//   goro_net_chat [address]   default 127.0.0.1:0; prints "listening ADDR"
//   goro_net_chat --self [CONNS [LINES [SECONDS]]]
//       the server and chat_client.cpp's client in one process (2000
//       connections, 20 lines, 60 s limit): prints the client's RESULT
//       lines; the twin of `gonetbench chat-self`
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <goro/goro.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "chat_client.hpp"

namespace {

constexpr std::size_t kRoomSize = 20;   // members per room
constexpr std::size_t kOutCap = 128;    // lines queued per client
constexpr std::size_t kEvents = 256;    // the broadcaster's queue
constexpr std::size_t kOutBuf = 4096;   // bytes per write
constexpr std::size_t kLineMax = 63;    // longest line, "\n" included
constexpr std::size_t kReadBuf = 4096;  // bytes per read

// One line by value (Go's twin shares an immutable string instead).
struct line {
  std::uint8_t len = 0;
  char text[kLineMax];

  line() = default;
  explicit line(std::string_view s) : len(static_cast<std::uint8_t>(s.size())) {
    std::memcpy(text, s.data(), s.size());
  }
  std::string_view view() const { return {text, len}; }
};

struct client {
  goro::net::conn conn;
  goro::chan<line> out = goro::make_chan<line>(kOutCap);
  long room = -1;  // the broadcaster's
};

enum class kind : std::uint8_t { join, msg, leave };

struct event {
  kind k;
  client* from;  // alive until the broadcaster has taken its leave event
  line text;     // join: "join R"; msg: the line
};

// Drains c->out: waits for one line, then takes whatever else is already
// queued (up to one buffer) and writes it all at once.
void writer(std::shared_ptr<client> c) {
  char buf[kOutBuf];
  bool broken = false;
  while (auto first = c->out.recv()) {
    if (broken) continue;  // drain until the broadcaster closes the channel
    std::size_t n = 0;
    std::memcpy(buf, first->text, first->len);
    n = first->len;
    while (n + kLineMax <= kOutBuf) {
      auto more = c->out.try_recv();
      if (!more) break;
      std::memcpy(buf + n, more->text, more->len);
      n += more->len;
    }
    try {
      c->conn.write(buf, n);
    } catch (const std::system_error&) {
      broken = true;  // the peer is gone
    }
  }
  c->conn.close();
}

// Turns the connection's lines into events for the broadcaster.
void reader(std::shared_ptr<client> c, goro::chan<event> events) {
  char buf[kReadBuf];
  std::size_t have = 0;
  bool joined = false;
  try {
    for (;;) {
      std::size_t n = c->conn.read(buf + have, sizeof buf - have);
      if (n == 0) break;
      have += n;
      std::size_t start = 0;
      for (;;) {
        const void* nl = std::memchr(buf + start, '\n', have - start);
        if (!nl) break;
        std::size_t end = static_cast<const char*>(nl) - buf + 1;
        std::string_view s(buf + start, end - start);
        if (s.size() > kLineMax)
          throw std::system_error(EMSGSIZE, std::generic_category());
        events.send(event{joined ? kind::msg : kind::join, c.get(), line(s)});
        joined = true;
        start = end;
      }
      std::memmove(buf, buf + start, have - start);
      have -= start;
      if (have > kLineMax) break;  // a line too long
    }
  } catch (const std::system_error&) {
    // Reset by the peer, or a line too long: the connection is done.
  }
  if (joined)
    events.send(event{kind::leave, c.get(), line()});
  else
    c->out.close();  // the writer closes the connection
}

// Owns the rooms: no other goroutine touches them.
void broadcaster(goro::chan<event> events) {
  std::unordered_map<long, std::vector<client*>> rooms;
  const line ready(std::string_view("ready\n"));
  for (event& ev : events) {
    client* c = ev.from;
    switch (ev.k) {
      case kind::join: {
        std::string_view s = ev.text.view();
        s.remove_prefix(s.starts_with("join ") ? 5 : 0);
        c->room = std::strtol(std::string(s).c_str(), nullptr, 10);
        auto& members = rooms[c->room];
        members.push_back(c);
        if (members.size() == kRoomSize)
          for (client* m : members) m->out.send(ready);
        break;
      }
      case kind::msg:
        for (client* m : rooms[c->room]) m->out.send(ev.text);
        break;
      case kind::leave: {
        auto& members = rooms[c->room];
        for (std::size_t i = 0; i < members.size(); ++i) {
          if (members[i] == c) {
            members[i] = members.back();
            members.pop_back();
            break;
          }
        }
        if (members.empty()) rooms.erase(c->room);
        c->out.close();
        break;
      }
    }
  }
}

// Accepts clients forever: a writer and a reader goroutine each.
void serve(goro::net::listener ln) {
  auto events = goro::make_chan<event>(kEvents);
  goro::go(broadcaster, events);
  for (;;) {
    try {
      auto c = std::make_shared<client>();
      c->conn = ln.accept();
      goro::go(writer, c);
      goro::go(reader, c, events);
    } catch (const std::system_error& e) {
      std::fprintf(stderr, "goro_net_chat: accept: %s\n", e.what());
      goro::sleep(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool self = argc > 1 && std::string_view(argv[1]) == "--self";
  const char* address = argc > 1 && !self ? argv[1] : "127.0.0.1:0";
  return goro::run([&] {
    goro::net::listener ln;
    try {
      ln = goro::net::listen(address);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "goro_net_chat: listen %s: %s\n", address, e.what());
      return 1;
    }
    std::string addr = ln.addr().str();
    if (self) {
      int conns = argc > 2 ? std::atoi(argv[2]) : 2000;
      int lines = argc > 3 ? std::atoi(argv[3]) : 20;
      double limit = argc > 4 ? std::atof(argv[4]) : 60;
      goro::go(serve, std::move(ln));
      return chat_client(addr, conns, lines, limit, kRoomSize);
    }
    std::printf("listening %s\n", addr.c_str());
    std::fflush(stdout);
    serve(std::move(ln));
    return 0;
  });
}
