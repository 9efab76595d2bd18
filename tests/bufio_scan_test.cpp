// goro::bufio::scanner: the core cases of Go's scan_test.go (lines with
// CRLF, words over Unicode space, bytes, runes with invalid UTF-8, long
// lines through small buffers, token too long, a last line without
// newline, custom split functions, errors, empty tokens) against
// in-memory sources.
#include <goro/bufio.hpp>
#include <string>
#include <vector>

#include "bufio_support.hpp"
#include "test_support.hpp"

using goro::bufio::scanner;
using goro::bufio::split_result;
using goro_test::mem_source;

namespace {

std::vector<std::string> scan_all(scanner& sc) {
  std::vector<std::string> out;
  while (sc.scan()) out.push_back(sc.text());
  return out;
}

std::vector<std::string> scan_all(const std::string& text,
                                  goro::bufio::split_func split,
                                  std::size_t chunk = 0) {
  mem_source src{text, chunk};
  scanner sc(src, std::move(split));
  auto out = scan_all(sc);
  EXPECT_FALSE(sc.err());
  return out;
}

using strings = std::vector<std::string>;

}  // namespace

TEST(BufioScanner, LinesDropCrLf) {
  for (std::size_t chunk : {0, 1, 2, 5}) {
    EXPECT_EQ(
        scan_all("one\r\ntwo\n\r\n\nthree\r\n", goro::bufio::scan_lines, chunk),
        (strings{"one", "two", "", "", "three"}))
        << chunk;
    // Only a \r right before the \n goes.
    EXPECT_EQ(scan_all("a\rb\r\r\n", goro::bufio::scan_lines, chunk),
              (strings{"a\rb\r"}));
  }
}

// Go's TestScanLineNoNewline, ...ReturnButNoNewline, ...EmptyFinalLine,
// ...EmptyFinalLineWithCR.
TEST(BufioScanner, LastLine) {
  EXPECT_EQ(scan_all("abc\ndef", goro::bufio::scan_lines),
            (strings{"abc", "def"}));
  EXPECT_EQ(scan_all("abc\ndef\r", goro::bufio::scan_lines),
            (strings{"abc", "def"}));
  EXPECT_EQ(scan_all("abc\n\n", goro::bufio::scan_lines), (strings{"abc", ""}));
  EXPECT_EQ(scan_all("abc\n\r\n", goro::bufio::scan_lines),
            (strings{"abc", ""}));
  EXPECT_EQ(scan_all("", goro::bufio::scan_lines), strings{});
  EXPECT_EQ(scan_all("\n", goro::bufio::scan_lines), strings{""});
}

TEST(BufioScanner, Bytes) {
  EXPECT_EQ(scan_all("ab\n\xff", goro::bufio::scan_bytes, 1),
            (strings{"a", "b", "\n", "\xff"}));
}

// Go's TestScanRune: valid runes whole, each invalid byte as U+FFFD.
TEST(BufioScanner, Runes) {
  const std::string fffd = "\xEF\xBF\xBD";
  for (std::size_t chunk : {0, 1}) {
    EXPECT_EQ(scan_all("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80",
                       goro::bufio::scan_runes, chunk),
              (strings{"a", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"}))
        << chunk;
    // A stray continuation byte, a surrogate, an overlong form, a lead
    // byte cut by the end of input.
    EXPECT_EQ(
        scan_all("\x80x\xED\xA0\x80\xC0\xAFy\xE2\x82", goro::bufio::scan_runes,
                 chunk),
        (strings{fffd, "x", fffd, fffd, fffd, fffd, fffd, "y", fffd, fffd}))
        << chunk;
    EXPECT_EQ(scan_all(fffd, goro::bufio::scan_runes, chunk),
              strings{fffd});  // a real U+FFFD
  }
}

// Go's TestScanWords and TestSpace on a few code points.
TEST(BufioScanner, WordsSplitOnUnicodeSpace) {
  const std::string text =
      "  abc\tdef\n\v\f\r ghi\xC2\x85jkl\xC2\xA0mno\xE2\x80\x80pqr\xE3\x80\x80"
      "\xE2\x80\xA8stu\xE1\x9A\x80vwx\xE2\x81\x9F\xC3\xA9t\xC3\xA9  ";
  for (std::size_t chunk : {0, 1, 3}) {
    EXPECT_EQ(scan_all(text, goro::bufio::scan_words, chunk),
              (strings{"abc", "def", "ghi", "jkl", "mno", "pqr", "stu", "vwx",
                       "\xC3\xA9t\xC3\xA9"}))
        << chunk;
  }
  // U+200B (zero width space) is not white space for Go.
  EXPECT_EQ(scan_all("a\xE2\x80\x8B"
                     "b",
                     goro::bufio::scan_words),
            strings{"a\xE2\x80\x8B"
                    "b"});
  // Go's TestScanWordsExcessiveWhiteSpace: more space than the buffer.
  mem_source src{std::string(300, ' ') + "word" + std::string(300, ' ')};
  scanner sc(src, goro::bufio::scan_words);
  sc.buffer(16, 64);
  EXPECT_EQ(scan_all(sc), strings{"word"});
  EXPECT_FALSE(sc.err());
}

// Go's TestScanLongLines: lines up to the maximum through a small, growing
// buffer, one byte per read.
TEST(BufioScanner, LongLinesGrowTheBuffer) {
  std::string text;
  strings want;
  for (std::size_t n = 0; n < 300; n += 7) {
    std::string line(n, char('a' + n % 26));
    text += line + (n % 2 ? "\r\n" : "\n");
    want.push_back(line);
  }
  mem_source src{text, 1};
  scanner sc(src);
  sc.buffer(4, 1000);
  EXPECT_EQ(scan_all(sc), want);
  EXPECT_FALSE(sc.err());
}

// Go's TestScanLineTooLong and the 64 KiB default.
TEST(BufioScanner, TokenTooLong) {
  mem_source src{"short\n" + std::string(200, 'x') + "\nnext\n"};
  scanner sc(src);
  sc.buffer(16, 100);
  ASSERT_TRUE(sc.scan());
  EXPECT_EQ(sc.bytes(), "short");
  EXPECT_FALSE(sc.scan());
  ASSERT_TRUE(sc.err());
  try {
    std::rethrow_exception(sc.err());
  } catch (const goro::bufio::token_too_long& e) {
    EXPECT_STREQ(e.what(), "bufio.Scanner: token too long");
  }
  EXPECT_FALSE(sc.scan());  // stays stopped

  const std::size_t max = goro::bufio::max_scan_token_size;
  mem_source fits{std::string(max - 1, 'y') + "\n"};
  scanner ok(fits);
  ASSERT_TRUE(ok.scan());
  EXPECT_EQ(ok.bytes().size(), max - 1);
  EXPECT_FALSE(ok.scan());
  EXPECT_FALSE(ok.err());

  mem_source too{std::string(max + 1, 'y') + "\n"};
  scanner bad(too);
  EXPECT_FALSE(bad.scan());
  EXPECT_TRUE(bad.err());
}

TEST(BufioScanner, BufferAndSplitOnlyBeforeScan) {
  mem_source src{"a\nb\n"};
  scanner sc(src);
  ASSERT_TRUE(sc.scan());
  EXPECT_THROW(sc.buffer(16, 16), std::logic_error);
  EXPECT_THROW(sc.split(goro::bufio::scan_words), std::logic_error);
}

// Go's TestSplitError: an error from the split function stops the scan.
TEST(BufioScanner, SplitFunctionError) {
  int calls = 0;
  auto split = [&](std::string_view data, bool at_eof) -> split_result {
    if (++calls > 3) throw std::runtime_error("split: too many");
    return goro::bufio::scan_bytes(data, at_eof);
  };
  mem_source src{"abcdef"};
  scanner sc(src, split);
  EXPECT_EQ(scan_all(sc), (strings{"a", "b", "c"}));
  ASSERT_TRUE(sc.err());
  EXPECT_THROW(std::rethrow_exception(sc.err()), std::runtime_error);
}

// Go's ErrFinalToken: stop after this token, without error.
TEST(BufioScanner, FinalToken) {
  auto split = [](std::string_view data, bool at_eof) -> split_result {
    split_result r = goro::bufio::scan_words(data, at_eof);
    if (r.token && *r.token == "STOP") r.final_token = true;
    return r;
  };
  mem_source src{"a b STOP c d"};
  scanner sc(src, split);
  EXPECT_EQ(scan_all(sc), (strings{"a", "b", "STOP"}));
  EXPECT_FALSE(sc.err());
}

// Go's TestEmptyTokens / TestWithNoEmptyTokens: a comma splitter.
TEST(BufioScanner, CustomSplitWithEmptyTokens) {
  auto commas = [](std::string_view data, bool at_eof) -> split_result {
    std::size_t i = data.find(',');
    if (i != std::string_view::npos) return {i + 1, data.substr(0, i)};
    if (!at_eof) return {};
    return {0, data, true};  // the rest, possibly empty, ends the input
  };
  EXPECT_EQ(scan_all("1,2,3,", commas), (strings{"1", "2", "3", ""}));
  EXPECT_EQ(scan_all(",,", commas, 1), (strings{"", "", ""}));
}

// Go's TestDontLoopForever: a split function that returns empty tokens at
// the end of input forever.
TEST(BufioScanner, DontLoopForever) {
  mem_source src{"abc"};
  scanner sc(src, [](std::string_view data, bool) {
    if (!data.empty()) return split_result{1, data.substr(0, 1)};
    return split_result{0, data};
  });
  EXPECT_THROW(
      {
        for (int i = 0; i < 1000; i++) sc.scan();
      },
      std::logic_error);
}

TEST(BufioScanner, AdvanceBeyondInputIsAnError) {
  mem_source src{"abc"};
  scanner sc(
      src, [](std::string_view d, bool) { return split_result{d.size() + 1}; });
  EXPECT_FALSE(sc.scan());
  EXPECT_THROW(std::rethrow_exception(sc.err()), std::out_of_range);
}

// Go's TestErrAtEOF: a read error ends the input; what was buffered is
// still split (as a last token), then err() is that error.
TEST(BufioScanner, SourceErrorEndsInput) {
  mem_source src{"one\ntwo\nthr", 4};
  src.fail_at = 4;
  scanner sc(src);
  EXPECT_EQ(scan_all(sc), (strings{"one", "two", "thr"}));
  ASSERT_TRUE(sc.err());
  EXPECT_THROW(std::rethrow_exception(sc.err()), mem_source::timeout);
}

// Go's TestLargeReader: text longer than every buffer, any chunking.
TEST(BufioScanner, LargeInput) {
  std::string text;
  for (int i = 0; i < 20000; i++) text += "line " + std::to_string(i) + "\n";
  for (std::size_t chunk : {0, 1, 999}) {
    mem_source src{text, chunk};
    scanner sc(src);
    int n = 0;
    bool ok = true;
    while (sc.scan()) ok = ok && sc.bytes() == "line " + std::to_string(n++);
    EXPECT_TRUE(ok);
    EXPECT_EQ(n, 20000);
    EXPECT_FALSE(sc.err());
  }
}
