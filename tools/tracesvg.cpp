// goro_tracesvg: renders a goro execution trace (Chrome Trace Event JSON,
// goro::trace / GORO_TRACE) into a standalone SVG timeline, for people
// without a browser trace viewer:
//
//   goro_tracesvg trace.json out.svg [width]
//
// A lane per P (and, below them, a lane per thread), goroutine run slices
// coloured by goroutine (the same goroutine has the same colour on every
// lane) and labelled where they are wide enough, a hover title on each
// slice, markers for steals and preemptions, and a time axis. Slices
// narrower than a pixel are merged into their neighbour, so the file stays
// small for long traces. Exit status: 0 written, 1 bad input (with a
// message), 2 usage.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// --- A small JSON reader: enough for trace files (no \u decoding). ------

struct json {
  enum kind_t { null, boolean, number, string, array, object } kind = null;
  double num = 0;
  std::string str;
  std::vector<json> arr;
  // An object's members, in order (two vectors: a pair with the
  // still-incomplete json is not allowed as a vector element by clang).
  std::vector<std::string> keys;
  std::vector<json> vals;
  const json* get(const char* k) const {
    for (std::size_t i = 0; i < keys.size(); i++)
      if (keys[i] == k) return &vals[i];
    return nullptr;
  }
  std::string s(const char* k) const {
    const json* v = get(k);
    return v && v->kind == string ? v->str : std::string();
  }
  double n(const char* k, double dflt = -1) const {
    const json* v = get(k);
    return v && v->kind == number ? v->num : dflt;
  }
};

struct parser {
  const std::string& t;
  std::size_t i = 0;
  [[noreturn]] void fail(const char* what) const {
    throw std::runtime_error(std::string("invalid JSON (") + what +
                             ") at offset " + std::to_string(i));
  }
  void ws() {
    while (i < t.size() && std::strchr(" \t\r\n", t[i]) && t[i]) i++;
  }
  bool eat(char c) {
    ws();
    if (i < t.size() && t[i] == c) {
      i++;
      return true;
    }
    return false;
  }
  std::string str() {
    if (!eat('"')) fail("string expected");
    std::string out;
    while (i < t.size() && t[i] != '"') {
      char c = t[i++];
      if (c == '\\') {
        if (i >= t.size()) break;
        char e = t[i++];
        if (e == 'u') {
          i += 4;
          out += '?';
        } else {
          out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        }
      } else {
        out += c;
      }
    }
    if (!eat('"')) fail("unterminated string");
    return out;
  }
  json value() {
    ws();
    json v;
    if (i >= t.size()) fail("unexpected end");
    if (eat('{')) {
      v.kind = json::object;
      if (eat('}')) return v;
      do {
        std::string k = str();
        if (!eat(':')) fail("':' expected");
        {
          json val = value();
          v.keys.push_back(std::move(k));
          v.vals.push_back(std::move(val));
        }
      } while (eat(','));
      if (!eat('}')) fail("'}' expected");
    } else if (eat('[')) {
      v.kind = json::array;
      if (eat(']')) return v;
      do v.arr.push_back(value());
      while (eat(','));
      if (!eat(']')) fail("']' expected");
    } else if (t[i] == '"') {
      v.kind = json::string;
      v.str = str();
    } else if (t.compare(i, 4, "true") == 0 || t.compare(i, 4, "null") == 0) {
      i += 4;
    } else if (t.compare(i, 5, "false") == 0) {
      i += 5;
    } else {
      char* end = nullptr;
      v.kind = json::number;
      v.num = std::strtod(t.c_str() + i, &end);
      if (end == t.c_str() + i) fail("value expected");
      i = std::size_t(end - t.c_str());
    }
    return v;
  }
};

// --- The model: lanes of slices and markers. ------------------------------

struct slice {
  double t0, t1;
  long long goid;
  std::string name;
};
struct marker {
  double t;
  std::string kind, name;
};
struct lane {
  std::string label;
  std::vector<slice> slices;
  std::vector<marker> markers;
  double open_t = -1;  // an unmatched B
  long long open_goid = 0;
  std::string open_name;
};

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20) o += c;
    }
  }
  return o;
}

// A colour per goroutine: golden-ratio hues, two lightness bands.
std::string colour(long long goid) {
  double h = std::fmod(double(goid) * 137.508, 360.0);
  int l = goid % 2 ? 58 : 46;
  char buf[48];
  std::snprintf(buf, sizeof buf, "hsl(%.0f,62%%,%d%%)", h, l);
  return buf;
}

std::string time_label(double us) {
  char b[32];
  if (us == 0)
    std::snprintf(b, sizeof b, "0");
  else if (std::fabs(us) >= 1e6)
    std::snprintf(b, sizeof b, "%gs", us / 1e6);
  else if (std::fabs(us) >= 1e3)
    std::snprintf(b, sizeof b, "%gms", us / 1e3);
  else
    std::snprintf(b, sizeof b, "%gus", us);
  return b;
}

int run(const char* in_path, const char* out_path, int width) {
  std::ifstream in(in_path);
  if (!in) throw std::runtime_error(std::string("cannot read ") + in_path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  parser p{text};
  json doc = p.value();
  const json* evs = doc.get("traceEvents");
  if (doc.kind != json::object || !evs || evs->kind != json::array)
    throw std::runtime_error(std::string(in_path) +
                             ": not a trace (no traceEvents array)");

  // pid 1: Ps, pid 2: threads (goro's writer); lanes keyed (pid, tid).
  std::map<std::pair<int, long long>, lane> lanes;
  double tmin = 1e300, tmax = -1e300;
  for (const json& e : evs->arr) {
    std::string ph = e.s("ph");
    int pid = int(e.n("pid", 0));
    long long tid = (long long)e.n("tid", 0);
    if (ph == "M") {
      if (e.s("name") == "thread_name") {
        const json* a = e.get("args");
        lanes[{pid, tid}].label = a ? a->s("name") : "";
      }
      continue;
    }
    double ts = e.n("ts", 0);
    tmin = std::min(tmin, ts);
    tmax = std::max(tmax, ts);
    lane& l = lanes[{pid, tid}];
    const json* a = e.get("args");
    if (ph == "B") {
      l.open_t = ts;
      l.open_goid = a ? (long long)a->n("goid", 0) : 0;
      l.open_name = e.s("name");
    } else if (ph == "E" && l.open_t >= 0) {
      l.slices.push_back({l.open_t, ts, l.open_goid, l.open_name});
      l.open_t = -1;
    } else if (ph == "i") {
      std::string cat = e.s("cat");
      if (cat == "steal" || cat == "preempt" || cat == "netpoll")
        l.markers.push_back({ts, cat, e.s("name")});
    }
  }
  if (tmax < tmin) tmin = tmax = 0;
  double span = std::max(tmax - tmin, 1.0);

  const int left = 110, right = 20, top = 56, lane_h = 30, gap = 6;
  const double plot_w = width - left - right;
  auto x_of = [&](double t) { return left + (t - tmin) / span * plot_w; };

  std::vector<std::pair<std::pair<int, long long>, lane*>> order;
  for (auto& [k, l] : lanes)
    if (k.first == 1 || k.first == 2) order.push_back({k, &l});
  int nP = 0;
  for (auto& o : order) nP += o.first.first == 1;
  int height = top + int(order.size()) * (lane_h + gap) + (nP ? 24 : 0) + 50;

  std::FILE* f = std::fopen(out_path, "w");
  if (!f) throw std::runtime_error(std::string("cannot write ") + out_path);
  std::fprintf(f,
               "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n",
               width, height, width, height);
  std::fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  std::fprintf(f,
               "<text x=\"%d\" y=\"20\" font-size=\"14\" "
               "font-weight=\"bold\">goro trace: %s</text>\n",
               left, esc(in_path).c_str());
  std::fprintf(f,
               "<text x=\"%d\" y=\"38\" fill=\"#555\">%zu lanes, %s; "
               "goroutine slices coloured by goroutine; ticks: steal (blue), "
               "preempt (red), netpoll (green)</text>\n",
               left, order.size(), time_label(span).c_str());

  // Time axis: 1-2-5 steps, about ten ticks.
  double raw = span / 10, step = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (step * m >= raw) {
      step *= m;
      break;
    }
  int axis_y = height - 36;
  std::fprintf(f, "<g class=\"axis\">\n");
  std::fprintf(f,
               "<line x1=\"%d\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
               "stroke=\"#333\"/>\n",
               left, axis_y, left + plot_w, axis_y);
  for (double t = 0; t <= span + step / 2; t += step) {
    double x = x_of(tmin + t);
    std::fprintf(f,
                 "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                 "stroke=\"#ddd\"/><line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" "
                 "y2=\"%d\" stroke=\"#333\"/><text x=\"%.1f\" y=\"%d\" "
                 "text-anchor=\"middle\">%s</text>\n",
                 x, top - 4, x, axis_y, x, axis_y, x, axis_y + 5, x,
                 axis_y + 18, time_label(t).c_str());
  }
  std::fprintf(f, "</g>\n");

  int y = top;
  bool threads_header = false;
  for (auto& [key, l] : order) {
    bool is_p = key.first == 1;
    if (!is_p && !threads_header) {
      threads_header = true;
      y += 8;
      std::fprintf(f,
                   "<text x=\"4\" y=\"%d\" fill=\"#555\">threads (M)</text>\n",
                   y + 4);
      y += 10;
    }
    std::string label = l->label.empty()
                            ? (is_p ? "P" : "M") + std::to_string(key.second)
                            : l->label;
    if (l->open_t >= 0)  // still running at the end of the trace
      l->slices.push_back({l->open_t, tmax, l->open_goid, l->open_name});
    std::fprintf(f, "<g class=\"lane %s\" data-track=\"%lld\">\n",
                 is_p ? "p-lane" : "m-lane", key.second);
    std::fprintf(f,
                 "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
                 "fill=\"%s\"/>\n",
                 left, y, plot_w, lane_h, is_p ? "#f3f3f3" : "#fafafa");
    std::fprintf(f, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">%s</text>\n",
                 8, y + lane_h / 2 + 4, esc(label).c_str());
    std::sort(l->slices.begin(), l->slices.end(),
              [](const slice& a, const slice& b) { return a.t0 < b.t0; });
    double drawn_end = -1;  // pixel where the last rect ends
    for (const slice& s : l->slices) {
      double x0 = x_of(s.t0), x1 = std::max(x_of(s.t1), x0 + 0.5);
      if (x1 - x0 < 1 && x0 < drawn_end + 1) continue;  // merged
      drawn_end = x1;
      std::fprintf(f,
                   "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                   "fill=\"%s\"><title>%s: %s, %s</title></rect>\n",
                   x0, y + 2, x1 - x0, lane_h - 4, colour(s.goid).c_str(),
                   esc(s.name).c_str(), time_label(s.t0 - tmin).c_str(),
                   time_label(s.t1 - s.t0).c_str());
      // A label where it fits (about 6 px a character).
      std::size_t fit = std::size_t((x1 - x0 - 4) / 6);
      if (fit >= 3) {
        std::string t =
            s.name.size() > fit ? s.name.substr(0, fit - 1) + "~" : s.name;
        std::fprintf(f, "<text x=\"%.2f\" y=\"%d\" fill=\"white\">%s</text>\n",
                     x0 + 2, y + lane_h / 2 + 4, esc(t).c_str());
      }
    }
    for (const marker& m : l->markers) {
      const char* c = m.kind == "steal"     ? "#1565c0"
                      : m.kind == "preempt" ? "#c62828"
                                            : "#2e7d32";
      double x = x_of(m.t);
      std::fprintf(f,
                   "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" "
                   "stroke=\"%s\" stroke-width=\"1.5\"><title>%s</title>"
                   "</line>\n",
                   x, y, x, y + 6, c, esc(m.name).c_str());
    }
    std::fprintf(f, "</g>\n");
    y += lane_h + gap;
  }
  std::fprintf(f, "</svg>\n");
  bool bad = std::ferror(f) != 0;
  if (std::fclose(f) != 0 || bad)
    throw std::runtime_error(std::string("cannot write ") + out_path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s trace.json out.svg [width]\n", argv[0]);
    return 2;
  }
  int width = argc == 4 ? std::atoi(argv[3]) : 1400;
  if (width < 300 || width > 100000) {
    std::fprintf(stderr, "goro_tracesvg: width must be 300..100000\n");
    return 2;
  }
  try {
    return run(argv[1], argv[2], width);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "goro_tracesvg: %s\n", e.what());
    return 1;
  }
}
