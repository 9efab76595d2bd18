// goro::bufio reader and writer: the core cases of Go's bufio_test.go
// (every read method over every chunking and buffer size, unread_byte,
// peek, discard, reset, write patterns, sticky errors) against in-memory
// sources, over goro::net TCP loopback connections (a line echo server,
// EPIPE on a closed peer, deadlines that leave the buffer intact, sticky
// write deadlines) and over a goro::fd pipe.
#include <unistd.h>

#include <atomic>
#include <goro/bufio.hpp>
#include <goro/goro.hpp>
#include <string>
#include <vector>

#include "bufio_support.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;
using goro::bufio::reader;
using goro::bufio::writer;
using goro_test::mem_sink;
using goro_test::mem_source;

namespace {

// Text with every byte value and some newlines.
std::string test_text(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; i++)
    s.push_back(i % 37 == 36 ? '\n' : char(i * 7 + i / 256));
  return s;
}

// How the source chunks its reads.
struct chunking {
  const char* name;
  std::size_t chunk;
  bool half;
};
const chunking chunkings[] = {
    {"full", 0, false}, {"one_byte", 1, false}, {"half", 0, true}};

// Ways of reading everything from a reader (Go's bufreaders).
std::string read_by_bytes(reader& r) {
  std::string s;
  while (auto c = r.read_byte()) s.push_back(*c);
  return s;
}
std::string read_by_lines(reader& r) {
  std::string s, line;
  while (r.read_until('\n', line)) {
  }
  s += line;
  return s;
}
std::string read_by_chunks(reader& r, std::size_t n) {
  std::string s;
  std::vector<char> buf(n);
  while (std::size_t k = r.read(buf.data(), n)) s.append(buf.data(), k);
  return s;
}

// What read_line() yields, each line with "\n" appended: text with every
// "\r\n" as "\n", and a newline after a last line that lacks one.
std::string as_lines(const std::string& text) {
  std::string s;
  for (std::size_t i = 0; i < text.size(); i++) {
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    s.push_back(text[i]);
  }
  if (!s.empty() && s.back() != '\n') s.push_back('\n');
  return s;
}

}  // namespace

TEST(BufioReader, Simple) {
  mem_source src{"hello world"};
  reader r(src);
  EXPECT_EQ(read_by_chunks(r, 64), "hello world");
  mem_source src2{"hello\nworld"};
  reader r2(src2);
  EXPECT_EQ(r2.read_string('\n'), "hello\n");
  EXPECT_EQ(r2.read_string('\n'), "world");  // no delim: end of stream
  EXPECT_EQ(r2.read_string('\n'), "");
}

// Go's TestReader: every method, chunking and buffer size reads it all.
TEST(BufioReader, AllMethodsChunkingsAndSizes) {
  const std::size_t sizes[] = {16, 23, 32, 46, 64, 93, 128, 1024, 4096};
  const std::size_t text_sizes[] = {0, 1, 7, 100, 1000, 10000};
  for (std::size_t ts : text_sizes) {
    const std::string text = test_text(ts);
    for (const chunking& ch : chunkings) {
      for (std::size_t size : sizes) {
        for (int method = 0; method < 8; method++) {
          mem_source src{text, ch.chunk, ch.half};
          reader r(src, size);
          std::string got;
          switch (method) {
            case 0:
              got = read_by_bytes(r);
              break;
            case 1:
              got = read_by_lines(r);
              break;
            case 2:
              got = read_by_chunks(r, 1);
              break;
            case 3:
              got = read_by_chunks(r, 3);
              break;
            case 4:
              got = read_by_chunks(r, 7);
              break;
            case 5:
              got = read_by_chunks(r, 16);
              break;
            case 6:
              got = read_by_chunks(r, 5000);
              break;
            default:
              while (auto l = r.read_line()) got += *l + "\n";
              break;
          }
          const std::string want = method == 7 ? as_lines(text) : text;
          ASSERT_TRUE(got == want) << ch.name << " size " << size << " method "
                                   << method << " text " << ts;
        }
      }
    }
  }
}

TEST(BufioReader, LargeReadGoesStraightThroughWhenEmpty) {
  mem_source src{test_text(10000)};
  reader r(src, 16);
  std::vector<char> buf(100);
  EXPECT_EQ(r.read(buf.data(), 100), 100u);
  ASSERT_EQ(src.asked.size(), 1u);
  EXPECT_EQ(src.asked[0], 100u);  // into buf, not through the 16-byte buffer
  EXPECT_EQ(r.buffered(), 0u);
  EXPECT_EQ(r.read(buf.data(), 5), 5u);  // small: one fill of the buffer
  EXPECT_EQ(src.asked.back(), 16u);
  EXPECT_EQ(r.buffered(), 11u);
  EXPECT_EQ(r.read(buf.data(), 100), 11u);  // buffered first, no read
  EXPECT_EQ(src.asked.size(), 2u);
}

TEST(BufioReader, ZeroLengthReadIsNotEof) {
  mem_source src{"x"};
  reader r(src);
  char c;
  EXPECT_EQ(r.read(&c, 0), 0u);
  EXPECT_EQ(src.calls, 0);
  EXPECT_EQ(r.read(&c, 1), 1u);
}

// Go's TestUnreadByte, TestUnreadByteMultiple, TestUnreadByteOthers.
TEST(BufioReader, UnreadByte) {
  mem_source src{"abc"};
  reader r(src);
  EXPECT_THROW(r.unread_byte(), std::logic_error);  // nothing read yet
  EXPECT_EQ(r.read_byte(), 'a');
  r.unread_byte();
  EXPECT_THROW(r.unread_byte(), std::logic_error);  // twice in a row
  EXPECT_EQ(r.read_byte(), 'a');
  EXPECT_EQ(r.read_byte(), 'b');
  EXPECT_EQ(r.read_byte(), 'c');
  EXPECT_EQ(r.read_byte(), std::nullopt);
  r.unread_byte();  // the last byte read, even after EOF
  EXPECT_EQ(r.read_byte(), 'c');
}

TEST(BufioReader, UnreadByteAfterEveryReadLength) {
  const std::string data = "Hello, world!";
  for (std::size_t n = 0; n <= data.size(); n++) {
    mem_source src{data};
    reader r(src);
    std::string buf(n, '\0');
    ASSERT_EQ(r.read(buf.data(), n), n);
    if (n == 0) {
      EXPECT_THROW(r.unread_byte(), std::logic_error);
      continue;
    }
    r.unread_byte();
    EXPECT_THROW(r.unread_byte(), std::logic_error);
    EXPECT_EQ(read_by_chunks(r, 64), data.substr(n - 1));
  }
}

TEST(BufioReader, UnreadByteAfterOtherReads) {
  for (int how = 0; how < 4; how++) {
    mem_source src{"first line\nsecond\n"};
    reader r(src, 16);
    std::string s;
    switch (how) {
      case 0:
        r.read_until('\n', s);
        break;
      case 1:
        s = r.read_string('\n');
        break;
      case 2:
        s = *r.read_line() + "\n";
        break;
      default:
        s.resize(4);
        s.resize(r.read(s.data(), 4));
        break;
    }
    r.unread_byte();
    EXPECT_EQ(r.read_byte(), s.back()) << how;
  }
  // Not after peek or discard (Go's TestNoUnreadByteAfterPeek/Discard).
  mem_source src{"abcdef"};
  reader r(src);
  r.read_byte();
  r.peek(2);
  EXPECT_THROW(r.unread_byte(), std::logic_error);
  r.read_byte();
  r.discard(1);
  EXPECT_THROW(r.unread_byte(), std::logic_error);
}

// Go's TestPeek, with its 32-byte buffer.
TEST(BufioReader, Peek) {
  mem_source src{"abcdefghijklmnopqrstuvwxyz 0123456789"};
  src.chunk = 1;  // peek must loop until it has n bytes
  reader r(src, 32);
  EXPECT_EQ(r.peek(1), "a");
  EXPECT_EQ(r.peek(4), "abcd");
  EXPECT_THROW(r.peek(33), goro::bufio::buffer_full);
  EXPECT_EQ(r.peek(32), "abcdefghijklmnopqrstuvwxyz 01234");
  EXPECT_EQ(r.peek(0), "");
  char buf[3];
  EXPECT_EQ(r.read(buf, 3), 3u);
  EXPECT_EQ(r.peek(1), "d");
  EXPECT_EQ(r.peek(2), "de");
  EXPECT_EQ(r.discard(20), 20u);
  EXPECT_EQ(r.peek(4), "xyz ");
  EXPECT_EQ(r.peek(20), "xyz 0123456789");  // fewer only at end of stream
  EXPECT_EQ(r.discard(100), 14u);
  EXPECT_EQ(r.peek(1), "");
}

// Go's TestReaderDiscard, as a table.
TEST(BufioReader, Discard) {
  struct tc {
    std::size_t buf_size, peek_size, n, want, want_buffered;
    const char* rest;
  };
  const tc cases[] = {
      {16, 0, 0, 0, 0, "abcdefghijklmnopqrstuvwxyz"},
      {16, 0, 1, 1, 15, "bcdefghijklmnopqrstuvwxyz"},
      {16, 0, 16, 16, 0, "qrstuvwxyz"},
      {16, 0, 17, 17, 9, "rstuvwxyz"},
      {16, 5, 3, 3, 13, "defghijklmnopqrstuvwxyz"},
      {16, 16, 20, 20, 6, "uvwxyz"},
      {16, 0, 26, 26, 0, ""},
      {16, 0, 27, 26, 0, ""},  // fewer only at end of stream
  };
  for (const tc& c : cases) {
    mem_source src{"abcdefghijklmnopqrstuvwxyz"};
    reader r(src, c.buf_size);
    if (c.peek_size > 0) r.peek(c.peek_size);
    EXPECT_EQ(r.discard(c.n), c.want) << c.n;
    EXPECT_EQ(r.buffered(), c.want_buffered) << c.n;
    EXPECT_EQ(read_by_chunks(r, 64), c.rest) << c.n;
  }
}

TEST(BufioReader, ResetDropsBufferedBytes) {
  mem_source a{"foo foo"}, b{"bar bar"};
  reader r(a);
  char buf[3];
  EXPECT_EQ(r.read(buf, 3), 3u);
  EXPECT_EQ(r.buffered(), 4u);
  r.reset(b);
  EXPECT_EQ(r.buffered(), 0u);
  EXPECT_THROW(r.unread_byte(), std::logic_error);
  EXPECT_EQ(read_by_chunks(r, 64), "bar bar");
}

TEST(BufioReader, ReadLineStripsLfAndCrLf) {
  mem_source src{"one\r\ntwo\n\nthree\rfour\r\n\r\nlast"};
  reader r(src, 16);
  std::vector<std::string> got;
  while (auto l = r.read_line()) got.push_back(*l);
  const std::vector<std::string> want = {"one",         "two", "",
                                         "three\rfour", "",    "last"};
  EXPECT_EQ(got, want);
  std::string line = "stale";
  EXPECT_FALSE(r.read_line(line));
}

TEST(BufioReader, LinesLongerThanTheBuffer) {
  const std::string a(100, 'a'), b(40, 'b');
  for (const chunking& ch : chunkings) {
    mem_source src{a + "\r\n" + b + "\n" + a, ch.chunk, ch.half};
    reader r(src, 16);
    std::string line;
    ASSERT_TRUE(r.read_line(line)) << ch.name;
    EXPECT_EQ(line, a);
    EXPECT_EQ(r.read_string('\n'), b + "\n");
    EXPECT_TRUE(r.read_line(line));  // the last line, without newline
    EXPECT_EQ(line, a);
    EXPECT_FALSE(r.read_line(line));
  }
}

TEST(BufioReader, ReadUntilAppendsAndSignalsEof) {
  mem_source src{"k1=v1;k2=v2;tail"};
  reader r(src);
  std::string out = ">";
  EXPECT_TRUE(r.read_until(';', out));
  EXPECT_EQ(out, ">k1=v1;");
  EXPECT_TRUE(r.read_until(';', out));
  EXPECT_EQ(out, ">k1=v1;k2=v2;");
  EXPECT_FALSE(r.read_until(';', out));  // end of stream: what was left
  EXPECT_EQ(out, ">k1=v1;k2=v2;tail");
  EXPECT_FALSE(r.read_until(';', out));
  EXPECT_EQ(out, ">k1=v1;k2=v2;tail");
}

// An error from the source (a deadline) leaves every byte in place: the
// next call continues the same line.
TEST(BufioReader, SourceErrorLosesNoBytes) {
  // A line that fits: nothing is consumed until its newline arrives.
  mem_source src{"hello\nworld\n", 3};
  src.fail_at = 2;  // after "hel"
  reader r(src, 16);
  EXPECT_THROW(r.read_line(), mem_source::timeout);
  EXPECT_EQ(r.buffered(), 3u);
  EXPECT_EQ(r.read_line(), "hello");
  EXPECT_EQ(r.read_line(), "world");

  // A line longer than the buffer: read_until keeps the moved bytes in out.
  const std::string big = test_text(100).substr(0, 50) + "!";
  mem_source src2{big + "end", 7};
  src2.fail_at = 5;  // after 23 bytes: the 16-byte buffer filled once
  reader r2(src2, 16);
  std::string out;
  EXPECT_THROW(r2.read_until('!', out), mem_source::timeout);
  EXPECT_EQ(out.size(), 16u);
  EXPECT_EQ(out.size() + r2.buffered(), src2.pos);
  EXPECT_TRUE(r2.read_until('!', out));
  EXPECT_EQ(out, big);
  EXPECT_EQ(read_by_chunks(r2, 64), "end");

  // peek and read_byte too.
  mem_source src3{"abcdef", 2};
  src3.fail_at = 2;
  reader r3(src3, 16);
  EXPECT_THROW(r3.peek(4), mem_source::timeout);
  EXPECT_EQ(r3.peek(4), "abcd");
  EXPECT_EQ(read_by_bytes(r3), "abcdef");
}

TEST(BufioReader, SmallSizeIsRaisedTo16) {
  mem_source src{""};
  EXPECT_EQ(reader(src, 0).size(), 16u);
  EXPECT_EQ(reader(src).size(), goro::bufio::default_buffer_size);
}

// ---------------------------------------------------------------------------
// writer
// ---------------------------------------------------------------------------

// Go's TestWriter: every buffer size and write length come out intact.
TEST(BufioWriter, AllSizes) {
  const std::string data = test_text(8192);
  const std::size_t buf_sizes[] = {1,  2,  3,  4,  5,  6,  7,   8,   9,
                                   10, 23, 32, 46, 64, 77, 100, 1000};
  const std::size_t write_sizes[] = {0, 1, 2, 3, 7, 8, 9, 31, 64, 1000, 8192};
  for (std::size_t bs : buf_sizes) {
    for (std::size_t ws : write_sizes) {
      for (std::size_t chunk : {std::size_t{0}, std::size_t{3}}) {
        mem_sink sink;
        sink.chunk = chunk;
        writer w(sink, bs);
        std::size_t off = 0;
        while (off < data.size()) {
          std::size_t n =
              std::min(std::max(ws, std::size_t{1}), data.size() - off);
          if (ws == 0) {
            w.write_byte(data[off]);
          } else {
            ASSERT_EQ(w.write(data.data() + off, n), n);
          }
          off += ws == 0 ? 1 : n;
        }
        w.flush();
        ASSERT_EQ(sink.out, data)
            << "buf " << bs << " write " << ws << " chunk " << chunk;
        EXPECT_EQ(w.buffered(), 0u);
      }
    }
  }
}

TEST(BufioWriter, BufferedAndAvailable) {
  mem_sink sink;
  writer w(sink, 10);
  EXPECT_EQ(w.available(), 10u);
  w.write("abc");
  w.write_byte('d');
  EXPECT_EQ(w.buffered(), 4u);
  EXPECT_EQ(w.available(), 6u);
  EXPECT_TRUE(sink.sizes.empty());  // nothing written before a flush
  w.flush();
  EXPECT_EQ(sink.out, "abcd");
  EXPECT_EQ(w.available(), 10u);
  w.flush();  // nothing buffered: no write
  EXPECT_EQ(sink.sizes.size(), 1u);
}

// Large writes skip the buffer when it is empty (Go's Writer.Write).
TEST(BufioWriter, LargeWriteGoesStraightThrough) {
  const std::string big = test_text(10000);
  mem_sink sink;
  writer w(sink, 4096);
  w.write(big);
  EXPECT_EQ(sink.sizes, std::vector<std::size_t>{10000});
  EXPECT_EQ(w.buffered(), 0u);

  mem_sink sink2;
  writer w2(sink2, 4096);
  w2.write("0123456789");
  w2.write(big);  // fill the buffer, flush it, then the rest directly
  EXPECT_EQ(sink2.sizes, (std::vector<std::size_t>{4096, 10010 - 4096}));
  EXPECT_EQ(sink2.out, "0123456789" + big);
}

TEST(BufioWriter, ErrorsAreSticky) {
  mem_sink sink;
  sink.limit = 5;  // then EPIPE
  sink.chunk = 2;
  writer w(sink, 8);
  w.write("abcdefgh");  // fits exactly
  try {
    w.write_byte('i');  // flush: writes 5 bytes in 3 calls, then EPIPE
    FAIL() << "no error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EPIPE);
  }
  EXPECT_EQ(sink.out, "abcde");
  EXPECT_EQ(w.buffered(), 3u);  // "fgh" kept, in order
  const std::size_t calls = sink.sizes.size();
  EXPECT_THROW(w.write("x"), std::system_error);
  EXPECT_THROW(w.write_byte('x'), std::system_error);
  EXPECT_THROW(w.flush(), std::system_error);
  EXPECT_EQ(sink.sizes.size(), calls);  // rethrown without touching the sink
  mem_sink fresh;
  w.reset(fresh);  // clears the error and the buffer
  w.write("ok");
  w.flush();
  EXPECT_EQ(fresh.out, "ok");
}

TEST(BufioWriter, ErrorInDirectWriteIsSticky) {
  mem_sink sink;
  sink.limit = 0;
  writer w(sink, 16);
  EXPECT_THROW(w.write(test_text(100)), std::system_error);
  EXPECT_THROW(w.write_byte('a'), std::system_error);
  EXPECT_EQ(sink.sizes.size(), 1u);
}

TEST(BufioWriter, SinkWritingNothingIsShortWrite) {
  mem_sink sink;
  sink.zero = true;
  writer w(sink, 16);
  w.write("abc");
  EXPECT_THROW(w.flush(), goro::bufio::short_write);
  EXPECT_THROW(w.flush(), goro::bufio::short_write);
}

// ---------------------------------------------------------------------------
// over goro::net TCP loopback connections
// ---------------------------------------------------------------------------

// A line echo server (reader + writer per connection, one goroutine each)
// and clients sending LF and CRLF lines, some longer than the buffer.
TEST(BufioNet, LineEchoServer) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    goro::wait_group server;
    server.add(1);
    goro::go([&ln, &server] {
      for (;;) {
        goro::net::conn c;
        try {
          c = ln.accept();
        } catch (const goro::closed_error&) {
          break;
        }
        goro::go([c = std::move(c)]() mutable {
          reader in(c);
          writer out(c);
          std::string line;
          while (in.read_line(line)) {
            out.write("echo: ");
            out.write(line);
            out.write_byte('\n');
            if (in.buffered() == 0)
              out.flush();  // flush per batch, as Go servers do
          }
          out.flush();
        });
      }
      server.done();
    });
    const int clients = 8;
    std::atomic<int> bad{0};
    goro::wait_group wg;
    for (int i = 0; i < clients; i++) {
      wg.go([&, i] {
        goro::net::conn c = goro::net::dial(ln.addr().str());
        writer out(c);
        std::vector<std::string> sent;
        for (int k = 0; k < 200; k++) {
          std::string line = std::to_string(i) + ":" + std::to_string(k);
          if (k % 50 == 7)
            line += std::string(5000, char('a' + k % 26));  // > 4096
          out.write(line);
          out.write(k % 2 ? "\r\n" : "\n");
          sent.push_back(line);
        }
        out.flush();
        c.close_write();
        goro::bufio::scanner sc(c);
        std::size_t k = 0;
        while (sc.scan()) {
          if (k >= sent.size() || sc.bytes() != "echo: " + sent[k]) bad++;
          k++;
        }
        if (k != sent.size() || sc.err()) bad++;
      });
    }
    wg.wait();
    EXPECT_EQ(bad.load(), 0);
    ln.close();
    server.wait();
  });
}

// Go's write to a peer that closed: EPIPE (or ECONNRESET), then the same
// error from every later call without touching the socket.
TEST(BufioNet, StickyWriteErrorOnClosedPeer) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    goro::go([&ln] { ln.accept().close(); });
    goro::net::conn c = goro::net::dial(ln.addr().str());
    char b;
    EXPECT_EQ(c.read(&b, 1), 0u);  // the peer's FIN: it has closed
    writer w(c, 64);
    const std::string chunk(1000, 'x');
    int code = 0;
    for (int i = 0; i < 1000 && code == 0;
         i++) {  // the RST comes after one write
      try {
        w.write(chunk);
      } catch (const std::system_error& e) {
        code = e.code().value();
      }
    }
    EXPECT_TRUE(code == EPIPE || code == ECONNRESET) << code;
    for (int i = 0; i < 3; i++) {
      try {
        w.write_byte('y');
        ADD_FAILURE() << "write after error succeeded";
      } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), code);
      }
      try {
        w.flush();
        ADD_FAILURE() << "flush after error succeeded";
      } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), code);
      }
    }
  });
}

// A read deadline passes mid-line: deadline_exceeded propagates, the
// partial line stays buffered, and after set_read_deadline(later) the next
// read continues without losing a byte.
TEST(BufioNet, DeadlineKeepsBufferedBytes) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    auto go_on = goro::make_chan<void>(0);
    goro::wait_group peer;
    peer.go([&] {
      goro::net::conn c = ln.accept();
      c.write("hello\nwor");
      go_on.recv();  // until the client's read timed out
      c.write(std::string(40, 'z'));
      go_on.recv();
      c.write("ld\n" + std::string(40, 'z') + "\n");
    });
    goro::net::conn c = goro::net::dial(ln.addr().str());
    reader r(c, 16);
    EXPECT_EQ(r.read_line(), "hello");

    c.set_read_deadline(goro_test::clock::now() + 20ms);
    EXPECT_THROW(r.read_line(), goro::deadline_exceeded);
    EXPECT_EQ(r.buffered(), 3u);                       // "wor", still there
    EXPECT_THROW(r.peek(4), goro::deadline_exceeded);  // still past
    EXPECT_EQ(r.buffered(), 3u);

    // A line longer than the 16-byte buffer, cut by deadlines: read_until
    // keeps what it moved out of the buffer in `line`, and each call goes
    // on from there. The peer sends no newline until told, so the loop ends
    // when all 43 bytes are in, whatever the timing.
    go_on.send();
    std::string line;
    const goro_test::deadline give_up(10s);  // bytes lost: never 43
    while (!give_up.passed()) {
      c.set_read_deadline(goro_test::clock::now() + 20ms);
      try {
        r.read_until('\n', line);
        ADD_FAILURE() << "no newline was sent";
        break;
      } catch (const goro::deadline_exceeded&) {
        if (line.size() + r.buffered() == 43) break;
      }
    }
    EXPECT_EQ(line.size() + r.buffered(), 43u);
    EXPECT_GE(line.size(), 16u);

    c.set_read_deadline({});
    go_on.send();
    EXPECT_TRUE(r.read_until('\n', line));
    EXPECT_EQ(line, "wor" + std::string(40, 'z') + "ld\n");
    EXPECT_EQ(r.read_line(), std::string(40, 'z'));
    peer.wait();
  });
}

// A write deadline that passes while the peer does not read: the writer
// reports deadline_exceeded, and (as Go's bufio.Writer) keeps reporting it
// after the deadline is cleared: a timed-out writer is done.
TEST(BufioNet, WriteDeadlineIsSticky) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    auto done = goro::make_chan<void>(0);
    goro::wait_group peer;
    peer.go([&] {
      goro::net::conn c = ln.accept();
      done.recv();  // reads nothing until the client is through
    });
    goro::net::conn c = goro::net::dial(ln.addr().str());
    writer w(c, 1024);
    c.set_write_deadline(goro_test::clock::now() + 50ms);
    const std::string chunk(1 << 20, 'x');
    bool timed_out = false;
    for (int i = 0; i < 1000 && !timed_out;
         i++) {  // socket buffers hold a few MiB
      try {
        w.write(chunk);
      } catch (const goro::deadline_exceeded&) {
        timed_out = true;
      }
    }
    EXPECT_TRUE(timed_out);
    c.set_write_deadline({});
    EXPECT_THROW(w.write_byte('y'), goro::deadline_exceeded);
    EXPECT_THROW(w.flush(), goro::deadline_exceeded);
    done.send();
    peer.wait();
  });
}

// Over goro::fd (a pipe), writer and reader in two goroutines.
TEST(BufioFd, PipeLines) {
  goro::run([] {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    goro::fd rd(p[0]), wr(p[1]);
    const int lines = 20000;
    goro::wait_group wg;
    wg.go([&] {
      writer w(wr, 512);
      for (int i = 0; i < lines; i++) {
        w.write(std::to_string(i));
        w.write(i % 3 ? "\n" : "\r\n");
      }
      w.flush();
      wr.close();
    });
    reader r(rd, 64);
    std::string line;
    int n = 0;
    bool ok = true;
    while (r.read_line(line)) ok = ok && line == std::to_string(n++);
    EXPECT_TRUE(ok);
    EXPECT_EQ(n, lines);
    wg.wait();
  });
}
