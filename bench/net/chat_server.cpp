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
#include <atomic>
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

// A line, allocated once by its reader and shared, immutable, by every
// queue it is delivered to (as Go's twin shares a string): the channels
// carry a pointer, not the bytes. Reference-counted where Go has its GC.
struct text {
  std::atomic<std::uint32_t> refs;
  std::uint8_t len;
  char bytes[kLineMax];

  static text* make(std::string_view s, std::uint32_t refs) {
    text* t = new text;
    t->refs.store(refs, std::memory_order_relaxed);
    t->len = static_cast<std::uint8_t>(s.size());
    std::memcpy(t->bytes, s.data(), s.size());
    return t;
  }
  std::string_view view() const { return {bytes, len}; }
  // Acquire-release: the last owner's delete comes after every other
  // owner's reads of the bytes.
  void release() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

struct client {
  goro::net::conn conn;
  goro::chan<text*> out = goro::make_chan<text*>(kOutCap);
  long room = -1;  // the broadcaster's
};

enum class kind : std::uint8_t { join, msg, leave };

struct event {
  kind k;
  client* from;  // alive until the broadcaster has taken its leave event
  text* line;    // join: "join R"; msg: the line (one reference); leave: null
};

// Drains c->out: waits for one line, then takes whatever else is already
// queued (up to one buffer) and writes it all at once.
void writer(std::shared_ptr<client> c) {
  char buf[kOutBuf];
  bool broken = false;
  while (auto first = c->out.recv()) {
    if (broken) {  // drain until the broadcaster closes the channel
      (*first)->release();
      continue;
    }
    std::size_t n = (*first)->len;
    std::memcpy(buf, (*first)->bytes, n);
    (*first)->release();
    while (n + kLineMax <= kOutBuf) {
      auto more = c->out.try_recv();
      if (!more) break;
      std::memcpy(buf + n, (*more)->bytes, (*more)->len);
      n += (*more)->len;
      (*more)->release();
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
        events.send(
            event{joined ? kind::msg : kind::join, c.get(), text::make(s, 1)});
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
    events.send(event{kind::leave, c.get(), nullptr});
  else
    c->out.close();  // the writer closes the connection
}

// Owns the rooms: no other goroutine touches them.
void broadcaster(goro::chan<event> events) {
  std::unordered_map<long, std::vector<client*>> rooms;
  for (event& ev : events) {
    client* c = ev.from;
    switch (ev.k) {
      case kind::join: {
        std::string_view s = ev.line->view();
        s.remove_prefix(s.starts_with("join ") ? 5 : 0);
        c->room = std::strtol(std::string(s).c_str(), nullptr, 10);
        ev.line->release();
        auto& members = rooms[c->room];
        members.push_back(c);
        if (members.size() == kRoomSize) {
          text* ready = text::make("ready\n", kRoomSize);
          for (client* m : members) m->out.send(ready);
        }
        break;
      }
      case kind::msg: {
        // One reference per member, taken before the first send (a writer
        // may release its own before the loop ends), then ours goes.
        auto& members = rooms[c->room];
        ev.line->refs.fetch_add(std::uint32_t(members.size()),
                                std::memory_order_relaxed);
        for (client* m : members) m->out.send(ev.line);
        ev.line->release();
        break;
      }
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
