// report.cpp: statistics and report of bench/run.sh (no Python needed).
//
//   bench_report <raw results> <targets file> <csv out> [--markdown <file>]
//                [--svg <file>]
//
// Raw lines (written by run.sh; runs numbered from 1, warm-ups not recorded):
//   RESULT <runtime> <procs> <run> <workload> <metric> <value> <unit>
//   CHECK  <runtime> <procs> <run> <workload> <value>
//   FAIL   <runtime> <procs> <run> <workload> <reason...>
// Targets (bench/targets.txt), '#' starts a comment:
//   <metric> <procs|*> ratio_max   <x>   goro median / Go median <= x
//   <metric> <procs|*> ratio_min   <x>   goro median / Go median >= x (for
//                                         the few higher-is-better metrics)
//   <metric> <procs|*> abs_max     <x>   goro median <= x (metric's unit)
//   <metric> <procs>   scaling_max <x>   goro median at procs / at 1 P <= x
// Runtimes: goro, go and, where bench/boost's twins ran, boost (Boost.Fiber);
// every ratio is over Go's median.
// Prints an aligned table (median, min-max per runtime, goro/Go ratio of the
// medians, target) and writes the same data as CSV; --markdown writes the
// side-by-side table for docs/benchmarks.md, --svg a plot of the goro/Go
// and Boost/Go ratios per metric and GOMAXPROCS (log scale, line at 1).
// Lower is better for every metric except those with a ratio_min target
// (e.g. a kept fraction).
//
// Memory: the metrics <workload>.peak_rss (VmHWM, KiB), .page_tables (VmPTE
// at the end, KiB) and .minflt (minor faults), which every run of either
// runtime prints after its workload, are not rows of their own: their
// medians per (workload, GOMAXPROCS) appear as three columns ("goro / Go
// (ratio)") on the first row of that workload at that GOMAXPROCS, and as
// six CSV columns on every row of the workload.
// Exit status: 0 (a missed target is reported, not an error).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::vector<std::string> kRuntimes = {"goro", "go", "boost"};
constexpr int kNumRt = 3;  // goro, go, boost (indices into kRuntimes)

struct series {
  std::vector<double> values;
};

struct stats {
  double median = NAN, min = NAN, max = NAN;
  std::size_t n = 0;
};

stats compute(std::vector<double> v) {
  stats s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  const std::size_t m = v.size() / 2;
  s.median = v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  return s;
}

// The per-run memory metrics and their suffixes in the raw results.
enum mem_kind { kPeakRss, kPageTables, kMinflt, kMemKinds };
const char* const kMemSuffix[kMemKinds] = {".peak_rss", ".page_tables",
                                           ".minflt"};

// kMemKinds for any other metric.
int mem_kind_of(const std::string& metric) {
  for (int k = 0; k < kMemKinds; ++k) {
    const std::string suf = kMemSuffix[k];
    if (metric.size() > suf.size() &&
        metric.compare(metric.size() - suf.size(), suf.size(), suf) == 0)
      return k;
  }
  return kMemKinds;
}

struct target {
  std::string metric, procs, kind;
  double limit = 0;
};

// One row of the main table.
struct row_key {
  std::string metric;
  int procs;
  bool operator<(const row_key& o) const {
    return metric != o.metric ? metric < o.metric : procs < o.procs;
  }
};

std::string fmt(double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  const double a = std::fabs(v);
  if (a >= 1000)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (a >= 100)
    std::snprintf(buf, sizeof buf, "%.1f", v);
  else if (a >= 10)
    std::snprintf(buf, sizeof buf, "%.2f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string csv_num(double v) {
  if (std::isnan(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string range(const stats& s) {
  if (s.n == 0) return "-";
  return fmt(s.min) + ".." + fmt(s.max);
}

// A table printed with columns padded to their widest cell.
struct table {
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right;  // right-align column i
  void print(std::ostream& out) const {
    std::vector<std::size_t> w;
    for (const auto& r : rows)
      for (std::size_t i = 0; i < r.size(); ++i) {
        if (w.size() <= i) w.push_back(0);
        w[i] = std::max(w[i], r[i].size());
      }
    for (std::size_t ri = 0; ri < rows.size(); ++ri) {
      const auto& r = rows[ri];
      std::string line;
      for (std::size_t i = 0; i < r.size(); ++i) {
        const std::size_t pad = w[i] - r[i].size();
        const bool ra = i < right.size() && right[i];
        if (i) line += "  ";
        if (ra) line.append(pad, ' ');
        line += r[i];
        if (!ra && i + 1 < r.size()) line.append(pad, ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out << line << '\n';
      if (ri == 0) {
        std::size_t total = 0;
        for (std::size_t i = 0; i < w.size(); ++i) total += w[i] + (i ? 2 : 0);
        out << std::string(total, '-') << '\n';
      }
    }
  }
};

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

// One row of the report: a metric at one GOMAXPROCS, in order of first
// appearance of the metric.
struct row {
  std::string metric, wl, unit, tgt, status, note;
  int procs = 0;
  std::array<stats, kNumRt> st;
  double ratio = NAN, bratio = NAN;  // goro/Go, boost/Go
  bool first_of_workload = false, higher_better = false;
  std::array<std::array<double, kNumRt>, kMemKinds> mm;  // [kind][runtime]
};

// A markdown table cell: '|' would end the cell.
std::string md_cell(std::string s) {
  for (std::size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2)
    s.replace(i, 1, "\\|");
  return s;
}

// The side-by-side table for docs/benchmarks.md: one row per metric and
// GOMAXPROCS, medians, ratios over Go, target and status, and the
// workload's peak RSS (VmHWM) beside its first metric.
void write_markdown(std::ostream& out, const std::vector<row>& rows,
                    bool has_boost,
                    const std::vector<std::vector<std::string>>& scaling,
                    const std::vector<std::string>& checks, int met,
                    int missed) {
  out << "| metric (unit) | P | goro | Go |" << (has_boost ? " Boost |" : "")
      << " goro/Go |" << (has_boost ? " Boost/Go |" : "")
      << " target | status | peak RSS MiB goro / Go"
      << (has_boost ? " / Boost" : "") << " |\n|---|--:|--:|--:|"
      << (has_boost ? "--:|" : "") << "--:|" << (has_boost ? "--:|" : "")
      << "---|---|--:|\n";
  for (const auto& r : rows) {
    std::string rss;
    if (r.first_of_workload) {
      const auto& m = r.mm[kPeakRss];
      if (!std::isnan(m[0]) || !std::isnan(m[1])) {
        rss = fmt(m[0] / 1024) + " / " + fmt(m[1] / 1024);
        if (has_boost) rss += " / " + fmt(m[2] / 1024);
      }
    }
    std::string status = r.status == "MISS" ? "**MISS**" : r.status;
    if (!r.note.empty() && r.note.find("failed") != std::string::npos)
      status += (status.empty() ? "" : " ") + ("(" + r.note + ")");
    out << "| " << md_cell(r.metric) << " (" << md_cell(r.unit)
        << (r.higher_better ? ", higher is better" : "") << ") | " << r.procs
        << " | " << fmt(r.st[0].median) << " | " << fmt(r.st[1].median)
        << " | ";
    if (has_boost) out << fmt(r.st[2].median) << " | ";
    out << fmt(r.ratio) << " | ";
    if (has_boost) out << fmt(r.bratio) << " | ";
    std::string tgt = r.tgt;  // "ratio<=0.400" -> "ratio ≤ 0.400"
    for (const char* op : {"<=", ">="})
      if (auto at = tgt.find(op); at != std::string::npos)
        tgt.replace(at, 2,
                    std::string(at ? " " : "") + (op[0] == '<' ? "≤ " : "≥ "));
    out << md_cell(tgt) << " | " << md_cell(status) << " | " << rss << " |\n";
  }
  if (!scaling.empty()) {
    out << "\n| scaling: median at P / at P=1 | P | goro | Go | target | "
           "status |\n|---|--:|--:|--:|---|---|\n";
    for (const auto& s : scaling) {
      out << '|';
      for (const auto& c : s) out << ' ' << md_cell(c) << " |";
      out << '\n';
    }
  }
  out << "\nTargets: " << met << " met, " << missed << " missed.";
  std::size_t ok = 0;
  std::vector<std::string> bad;
  for (const auto& c : checks) {
    if (c.find(": ok") != std::string::npos)
      ++ok;
    else if (c.rfind("check ", 0) == 0)
      bad.push_back(c.substr(6));
  }
  if (!checks.empty()) {
    out << " Checksums agree across runtimes in " << ok << " workloads";
    if (!bad.empty()) {
      out << "; MISMATCH in";
      for (const auto& b : bad) out << ' ' << b.substr(0, b.find(':'));
    }
    out << '.';
  }
  out << '\n';
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '&')
      o += "&amp;";
    else if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

// A plot of goro/Go and Boost/Go per metric and GOMAXPROCS: one line per
// row, log-scale x axis from 1/100 to 100 (beyond: a marker at the edge),
// a line at 1.0. Plain SVG text, no dependency.
void write_svg(std::ostream& out, const std::vector<row>& rows,
               bool has_boost) {
  std::vector<const row*> shown;
  for (const auto& r : rows)
    if (std::isfinite(r.ratio) || (has_boost && std::isfinite(r.bratio)))
      shown.push_back(&r);
  const double lo = -2, hi = 2;  // log10 range of the axis
  const int label_w = 330, plot_w = 640, right_w = 30, top = 70, row_h = 15,
            bottom = 50;
  const int width = label_w + plot_w + right_w;
  const int height = top + row_h * static_cast<int>(shown.size()) + bottom;
  auto x_of = [&](double ratio) {
    double l = std::log10(ratio);
    l = std::clamp(l, lo, hi);
    return label_w + (l - lo) / (hi - lo) * plot_w;
  };
  char buf[512];
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
      << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << ' '
      << height << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"10\" y=\"20\" font-size=\"15\" font-weight=\"bold\">"
         "Ratio of medians over Go 1.19 (log scale; left of 1.0: lower than "
         "Go)</text>\n"
      << "<text x=\"10\" y=\"38\">Lower is better except rows marked "
         "(higher is better). Markers at the edges are beyond 1/100 or "
         "100.</text>\n";
  // Legend.
  out << "<circle cx=\"" << label_w + 10
      << "\" cy=\"54\" r=\"4.5\" "
         "fill=\"#1f77b4\"/><text x=\""
      << label_w + 20 << "\" y=\"58\">goro / Go</text>\n";
  if (has_boost)
    out << "<rect x=\"" << label_w + 106
        << "\" y=\"50\" width=\"8\" "
           "height=\"8\" fill=\"#ff7f0e\" transform=\"rotate(45 "
        << label_w + 110 << " 54)\"/><text x=\"" << label_w + 120
        << "\" y=\"58\">Boost.Fiber / Go</text>\n";
  // Rows: alternate a band per workload.
  std::string prev_wl;
  bool band = false;
  for (std::size_t i = 0; i < shown.size(); ++i) {
    const row& r = *shown[i];
    const int y = top + static_cast<int>(i) * row_h;
    if (r.wl != prev_wl) band = !band;
    prev_wl = r.wl;
    if (band)
      out << "<rect x=\"0\" y=\"" << y << "\" width=\"" << width
          << "\" height=\"" << row_h << "\" fill=\"#f2f2f2\"/>\n";
    std::string label = r.metric + " P=" + std::to_string(r.procs);
    if (r.higher_better) label += " (higher is better)";
    out << "<text x=\"" << label_w - 8 << "\" y=\"" << y + row_h - 4
        << "\" text-anchor=\"end\">" << xml_escape(label) << "</text>\n";
  }
  // Grid and axis.
  const int y0 = top, y1 = top + row_h * static_cast<int>(shown.size());
  for (int e = static_cast<int>(lo); e <= static_cast<int>(hi); ++e)
    for (int m = 1; m <= 9; ++m) {
      const double v = m * std::pow(10.0, e);
      if (std::log10(v) > hi + 1e-9) break;
      const double x = x_of(v);
      const bool major = m == 1;
      std::snprintf(buf, sizeof buf,
                    "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                    "stroke=\"%s\" stroke-width=\"1\"/>\n",
                    x, y0, x, y1, major ? "#bbbbbb" : "#e4e4e4");
      out << buf;
      if (major || m == 2 || m == 5) {
        std::snprintf(buf, sizeof buf, "%g", v);
        out << "<text x=\"" << x << "\" y=\"" << y1 + 14
            << "\" text-anchor=\"middle\"" << (major ? "" : " fill=\"#888\"")
            << ">" << buf << "</text>\n";
      }
    }
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                "stroke=\"#d62728\" stroke-width=\"1.5\"/>\n",
                x_of(1), y0 - 4, x_of(1), y1 + 4);
  out << buf;
  out << "<text x=\"" << label_w + plot_w / 2 << "\" y=\"" << y1 + 32
      << "\" text-anchor=\"middle\">median / Go's median</text>\n";
  // Markers, with the values as tooltips.
  for (std::size_t i = 0; i < shown.size(); ++i) {
    const row& r = *shown[i];
    const double yc = top + static_cast<double>(i) * row_h + row_h / 2.0;
    if (has_boost && std::isfinite(r.bratio)) {
      const double x = x_of(r.bratio);
      std::snprintf(buf, sizeof buf,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" "
                    "fill=\"#ff7f0e\" transform=\"rotate(45 %.1f %.1f)\">"
                    "<title>%s P=%d Boost/Go %s</title></rect>\n",
                    x - 4, yc - 4, x, yc, xml_escape(r.metric).c_str(), r.procs,
                    fmt(r.bratio).c_str());
      out << buf;
    }
    if (std::isfinite(r.ratio)) {
      std::snprintf(buf, sizeof buf,
                    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" "
                    "fill=\"#1f77b4\"><title>%s P=%d goro/Go %s</title>"
                    "</circle>\n",
                    x_of(r.ratio), yc, xml_escape(r.metric).c_str(), r.procs,
                    fmt(r.ratio).c_str());
      out << buf;
    }
  }
  out << "</svg>\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string md_path, svg_path;
  for (int i = 4; i < argc; i += 2) {
    const std::string opt = argv[i];
    if (i + 1 >= argc || (opt != "--markdown" && opt != "--svg")) {
      argc = 0;  // usage
      break;
    }
    (opt == "--markdown" ? md_path : svg_path) = argv[i + 1];
  }
  if (argc < 4) {
    std::cerr << "usage: " << argv[0]
              << " <raw results> <targets> <csv out> [--markdown <file>] "
                 "[--svg <file>]\n";
    return 2;
  }
  std::ifstream raw(argv[1]);
  if (!raw) {
    std::cerr << "cannot read " << argv[1] << '\n';
    return 2;
  }

  // metric -> order of first appearance, unit, workload.
  std::vector<std::string> metric_order;
  std::map<std::string, std::string> unit_of, workload_of;
  std::map<row_key, std::map<std::string, series>> data;
  std::set<int> all_procs;
  // (workload, procs, runtime) -> failures
  std::map<std::tuple<std::string, int, std::string>, int> failures;
  std::map<std::tuple<std::string, int, std::string>, std::string> fail_reason;
  std::vector<std::string> workloads_seen;
  // (workload, procs) -> runtime -> memory kind -> values of the runs
  std::map<std::pair<std::string, int>,
           std::map<std::string, std::array<series, kMemKinds>>>
      mem;
  // workload -> runtime -> set of checksums
  std::map<std::string, std::map<std::string, std::set<std::string>>> checks;

  auto see_workload = [&](const std::string& w) {
    if (std::find(workloads_seen.begin(), workloads_seen.end(), w) ==
        workloads_seen.end())
      workloads_seen.push_back(w);
  };

  std::string line;
  while (std::getline(raw, line)) {
    std::istringstream in(line);
    std::string kind, rt, wl;
    int procs = 0, run = 0;
    if (!(in >> kind >> rt >> procs >> run >> wl)) continue;
    see_workload(wl);
    all_procs.insert(procs);
    if (kind == "RESULT") {
      std::string metric, unit;
      double value = 0;
      if (!(in >> metric >> value >> unit)) continue;
      if (const int k = mem_kind_of(metric); k != kMemKinds) {
        mem[{wl, procs}][rt][k].values.push_back(value);
        continue;
      }
      if (!unit_of.count(metric)) {
        metric_order.push_back(metric);
        unit_of[metric] = unit;
        workload_of[metric] = wl;
      }
      data[{metric, procs}][rt].values.push_back(value);
    } else if (kind == "CHECK") {
      std::string value;
      if (in >> value) checks[wl][rt].insert(value);
    } else if (kind == "FAIL") {
      std::string reason;
      std::getline(in, reason);
      auto k = std::make_tuple(wl, procs, rt);
      ++failures[k];
      fail_reason[k] = reason.empty() ? "failed" : reason.substr(1);
    }
  }

  std::vector<target> targets;
  if (std::ifstream tf(argv[2]); tf) {
    while (std::getline(tf, line)) {
      if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
      std::istringstream in(line);
      target t;
      if (in >> t.metric >> t.procs >> t.kind >> t.limit) targets.push_back(t);
    }
  }
  auto find_target = [&](const std::string& metric, int procs,
                         bool scaling) -> std::optional<target> {
    for (const auto& t : targets) {
      if (t.metric != metric) continue;
      if ((t.kind == "scaling_max") != scaling) continue;
      if (t.procs == "*" || t.procs == std::to_string(procs)) return t;
    }
    return std::nullopt;
  };

  // Workloads with failures but no result at all still get a row.
  for (const auto& w : workloads_seen) {
    bool has = false;
    for (const auto& [m, wl] : workload_of) has = has || wl == w;
    if (!has) {
      metric_order.push_back(w);
      unit_of[w] = "-";
      workload_of[w] = w;
    }
  }

  auto fail_note = [&](const std::string& wl, int procs,
                       const std::string& rt) -> std::string {
    auto k = std::make_tuple(wl, procs, rt);
    auto it = failures.find(k);
    if (it == failures.end()) return "";
    return rt + " failed " + std::to_string(it->second) + "x (" +
           fail_reason[k] + ")";
  };

  // Medians of a workload's memory at procs: [kind][runtime].
  auto mem_medians = [&](const std::string& wl, int procs) {
    std::array<std::array<double, kNumRt>, kMemKinds> m;
    for (auto& a : m) a.fill(NAN);
    auto it = mem.find({wl, procs});
    if (it == mem.end()) return m;
    for (int r = 0; r < kNumRt; ++r) {
      auto rit = it->second.find(kRuntimes[r]);
      if (rit == it->second.end()) continue;
      for (int k = 0; k < kMemKinds; ++k)
        m[k][r] = compute(rit->second[k].values).median;
    }
    return m;
  };
  bool has_boost = false;
  for (const auto& [k, per_rt] : data)
    has_boost = has_boost || per_rt.count("boost");
  // "goro / Go[ / Boost] (goro/Go)", values divided by `scale`.
  auto mem_cell = [&](const std::array<double, kNumRt>& v, double scale) {
    if (std::isnan(v[0]) && std::isnan(v[1]) && std::isnan(v[2]))
      return std::string();
    std::string c = fmt(v[0] / scale) + " / " + fmt(v[1] / scale);
    if (has_boost) c += " / " + fmt(v[2] / scale);
    if (!std::isnan(v[0]) && !std::isnan(v[1]) && v[1] != 0)
      c += " (" + fmt(v[0] / v[1]) + ")";
    return c;
  };

  std::vector<row> rows;
  std::set<std::string> mem_shown;  // workloads whose first metric was seen
  int missed = 0, met = 0;
  for (const auto& metric : metric_order) {
    const bool first_of_workload = mem_shown.insert(workload_of[metric]).second;
    for (int procs : all_procs) {
      row r;
      r.metric = metric;
      r.wl = workload_of[metric];
      r.unit = unit_of[metric];
      r.procs = procs;
      r.first_of_workload = first_of_workload;
      auto it = data.find({metric, procs});
      for (int k = 0; k < kNumRt; ++k)
        if (it != data.end() && it->second.count(kRuntimes[k]))
          r.st[k] = compute(it->second.at(kRuntimes[k]).values);
      for (const auto& rt : kRuntimes) {
        std::string f = fail_note(r.wl, procs, rt);
        if (!f.empty()) r.note += (r.note.empty() ? "" : "; ") + f;
      }
      if (r.st[0].n == 0 && r.st[1].n == 0 && r.st[2].n == 0 &&
          r.note.empty() && !(first_of_workload && mem.count({r.wl, procs})))
        continue;
      r.ratio = r.st[0].median / r.st[1].median;
      r.bratio = r.st[2].median / r.st[1].median;
      if (r.st[0].n && r.st[1].n && r.st[0].max >= r.st[1].min &&
          r.st[1].max >= r.st[0].min)
        r.note += (r.note.empty() ? "" : "; ") + std::string("ranges overlap");
      if (auto tg = find_target(metric, procs, false)) {
        double v = NAN;
        bool at_least = false;  // v >= limit passes (else v <= limit)
        if (tg->kind == "ratio_max") {
          r.tgt = "ratio<=" + fmt(tg->limit);
          v = r.ratio;
        } else if (tg->kind == "ratio_min") {
          r.tgt = "ratio>=" + fmt(tg->limit);
          v = r.ratio;
          at_least = true;
        } else if (tg->kind == "abs_max") {
          r.tgt = "<=" + fmt(tg->limit);
          v = r.st[0].median;
        } else {
          r.tgt = tg->kind + "?";
        }
        r.higher_better = at_least;
        if (std::isnan(v)) {
          r.status = "n/a";
        } else if (at_least ? v >= tg->limit : v <= tg->limit) {
          r.status = "ok";
          ++met;
        } else {
          r.status = "MISS";
          ++missed;
        }
      }
      r.mm = mem_medians(r.wl, procs);
      rows.push_back(std::move(r));
    }
  }

  // --- text table and CSV ---------------------------------------------------
  std::ofstream csv(argv[3]);
  csv << "metric,workload,unit,gomaxprocs,goro_median,goro_min,goro_max,"
         "goro_n,go_median,go_min,go_max,go_n,ratio_goro_over_go,target,"
         "status,note,goro_peak_rss_kib,go_peak_rss_kib,goro_page_tables_kib,"
         "go_page_tables_kib,goro_minflt,go_minflt,boost_median,boost_min,"
         "boost_max,boost_n,ratio_boost_over_go,boost_peak_rss_kib\n";
  table t;
  {
    std::vector<std::string> h = {"metric",   "unit",          "P",
                                  "goro med", "goro min..max", "n",
                                  "Go med",   "Go min..max",   "n"};
    std::vector<bool> ra = {false, false, true, true, true,
                            true,  true,  true, true};
    if (has_boost) {
      for (const char* c : {"Boost med", "Boost min..max", "n"}) h.push_back(c);
      for (int i = 0; i < 3; ++i) ra.push_back(true);
    }
    h.push_back("goro/Go");
    ra.push_back(true);
    if (has_boost) {
      h.push_back("Boost/Go");
      ra.push_back(true);
    }
    for (const char* c : {"target", "status"}) {
      h.push_back(c);
      ra.push_back(false);
    }
    for (const char* c : {"peak RSS MiB", "page tables MiB", "minflt k"}) {
      h.push_back(c);
      ra.push_back(true);
    }
    h.push_back("note");
    ra.push_back(false);
    t.rows.push_back(h);
    t.right = ra;
  }
  for (const auto& r : rows) {
    std::vector<std::string> c = {r.metric,
                                  r.unit,
                                  std::to_string(r.procs),
                                  fmt(r.st[0].median),
                                  range(r.st[0]),
                                  std::to_string(r.st[0].n),
                                  fmt(r.st[1].median),
                                  range(r.st[1]),
                                  std::to_string(r.st[1].n)};
    if (has_boost) {
      c.push_back(fmt(r.st[2].median));
      c.push_back(range(r.st[2]));
      c.push_back(std::to_string(r.st[2].n));
    }
    c.push_back(fmt(r.ratio));
    if (has_boost) c.push_back(fmt(r.bratio));
    c.push_back(r.tgt);
    c.push_back(r.status);
    if (r.first_of_workload) {
      c.push_back(mem_cell(r.mm[kPeakRss], 1024));
      c.push_back(mem_cell(r.mm[kPageTables], 1024));
      c.push_back(mem_cell(r.mm[kMinflt], 1000));
    } else {
      c.insert(c.end(), 3, std::string());
    }
    c.push_back(r.note);
    t.rows.push_back(std::move(c));
    csv << csv_field(r.metric) << ',' << csv_field(r.wl) << ','
        << csv_field(r.unit) << ',' << r.procs << ',' << csv_num(r.st[0].median)
        << ',' << csv_num(r.st[0].min) << ',' << csv_num(r.st[0].max) << ','
        << r.st[0].n << ',' << csv_num(r.st[1].median) << ','
        << csv_num(r.st[1].min) << ',' << csv_num(r.st[1].max) << ','
        << r.st[1].n << ',' << csv_num(r.ratio) << ',' << csv_field(r.tgt)
        << ',' << r.status << ',' << csv_field(r.note);
    for (int k = 0; k < kMemKinds; ++k)
      csv << ',' << csv_num(r.mm[k][0]) << ',' << csv_num(r.mm[k][1]);
    csv << ',' << csv_num(r.st[2].median) << ',' << csv_num(r.st[2].min) << ','
        << csv_num(r.st[2].max) << ',' << r.st[2].n << ',' << csv_num(r.bratio)
        << ',' << csv_num(r.mm[kPeakRss][2]) << '\n';
  }
  t.print(std::cout);
  if (!mem.empty())
    std::cout << "memory columns, on the first row of each workload: median "
                 "over runs of peak RSS (VmHWM) and page tables (VmPTE, not "
                 "part of RSS), both read by the process after its workload, "
                 "and minor page faults of the whole run; goro / Go"
              << (has_boost ? " / Boost" : "") << " (goro/Go)\n";

  // Scaling: median at P / median at 1 P, per runtime.
  std::vector<std::vector<std::string>> scaling_rows;
  if (all_procs.count(1) && all_procs.size() > 1) {
    table s;
    s.rows.push_back({"scaling (median at P / median at P=1)", "P", "goro",
                      "Go", "target", "status"});
    s.right = {false, true, true, true, false, false};
    for (const auto& metric : metric_order) {
      auto base = data.find({metric, 1});
      if (base == data.end()) continue;
      for (int procs : all_procs) {
        if (procs == 1) continue;
        auto it = data.find({metric, procs});
        if (it == data.end()) continue;
        std::map<std::string, double> sc;
        for (const auto& rt : kRuntimes) {
          double a = NAN, b = NAN;
          if (it->second.count(rt))
            a = compute(it->second.at(rt).values).median;
          if (base->second.count(rt))
            b = compute(base->second.at(rt).values).median;
          sc[rt] = a / b;
        }
        std::string tgt, status;
        if (auto tg = find_target(metric, procs, true)) {
          tgt = "goro<=" + fmt(tg->limit);
          if (std::isnan(sc["goro"])) {
            status = "n/a";
          } else if (sc["goro"] <= tg->limit) {
            status = "ok";
            ++met;
          } else {
            status = "MISS";
            ++missed;
          }
        }
        s.rows.push_back({metric, std::to_string(procs), fmt(sc["goro"]),
                          fmt(sc["go"]), tgt, status});
        // The markdown report shows only the rows with a target.
        if (!tgt.empty()) scaling_rows.push_back(s.rows.back());
        csv << csv_field("scaling:" + metric) << ','
            << csv_field(workload_of[metric]) << ",ratio," << procs << "/1,"
            << csv_num(sc["goro"]) << ",,,," << csv_num(sc["go"]) << ",,,,"
            << csv_num(sc["goro"] / sc["go"]) << ',' << csv_field(tgt) << ','
            << status << ",,,,,,,,,,,,,\n";
      }
    }
    std::cout << '\n';
    s.print(std::cout);
  }

  // Checksums must agree across runtimes and runs.
  std::vector<std::string> check_lines;
  for (const auto& [wl, per_rt] : checks) {
    std::set<std::string> all;
    for (const auto& [rt, vals] : per_rt) all.insert(vals.begin(), vals.end());
    check_lines.push_back("check " + wl + ": " +
                          (all.size() == 1 ? "ok (" + *all.begin() + ")"
                                           : std::string("MISMATCH")));
    if (all.size() != 1)
      for (const auto& [rt, vals] : per_rt)
        for (const auto& v : vals) check_lines.push_back("  " + rt + ' ' + v);
  }
  if (!check_lines.empty()) {
    std::cout << '\n';
    for (const auto& l : check_lines) std::cout << l << '\n';
  }
  std::cout << "\ntargets: " << met << " met, " << missed << " missed\n";

  if (!md_path.empty()) {
    std::ofstream md(md_path);
    write_markdown(md, rows, has_boost, scaling_rows, check_lines, met, missed);
    if (!md) {
      std::cerr << "cannot write " << md_path << '\n';
      return 2;
    }
  }
  if (!svg_path.empty()) {
    std::ofstream svg(svg_path);
    write_svg(svg, rows, has_boost);
    if (!svg) {
      std::cerr << "cannot write " << svg_path << '\n';
      return 2;
    }
  }
  return 0;
}
