#include "agent/pool/pool_chart.hpp"

#include "net/s3_xml.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ferry::agent::pool {
namespace {

constexpr double chart_width = 860, chart_height = 360, left = 56, right = 200, top = 20, bottom = 44;
constexpr const char* palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

// A round step for an axis of `span` units with about `ticks` marks: 1, 2 or 5 times a power of ten.
double tick_step(double span, int ticks) {
  const double raw = std::max(span, 1e-9) / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * power) return m * power;
  return 10 * power;
}

}  // namespace

std::string nodes_chart_svg(const std::vector<chart_line>& lines) {
  double end = 1;
  int most = 1;
  for (const auto& l : lines)
    for (const auto& [t, n] : l.steps) {
      end = std::max(end, t);
      most = std::max(most, n);
    }
  const double minutes = end / 60, plot_w = chart_width - left - right, plot_h = chart_height - top - bottom;
  auto x = [&](double seconds) { return left + plot_w * seconds / end; };
  auto y = [&](double nodes) { return top + plot_h * (1 - nodes / most); };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      chart_width, chart_height);
  const double xs = tick_step(minutes, 8);
  for (double m = 0; m <= minutes + 1e-9; m += xs)
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4:g}</text>\n",
                       x(m * 60), top, top + plot_h, top + plot_h + 16, m);
  const double ys = std::max(1.0, tick_step(most, 6));
  for (double n = 0; n <= most + 1e-9; n += ys)
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
                       "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
                       left, y(n), left + plot_w, left - 6, y(n) + 4, n);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">minutes</text>\n", left + plot_w / 2,
                     chart_height - 8);
  svg += fmt::format("<text x=\"14\" y=\"{:.1f}\" transform=\"rotate(-90 14 {:.1f})\" text-anchor=\"middle\">nodes "
                     "up</text>\n",
                     top + plot_h / 2, top + plot_h / 2);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto* colour = palette[i % std::size(palette)];
    std::string path;
    for (const auto& [t, n] : lines[i].steps)
      path += path.empty() ? fmt::format("M{:.1f},{:.1f}", x(t), y(n)) : fmt::format(" H{:.1f} V{:.1f}", x(t), y(n));
    if (!path.empty()) path += fmt::format(" H{:.1f}", x(end));
    svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", path, colour);
    const double ly = top + 14 + 18 * static_cast<double>(i);
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"{3}\" "
                       "stroke-width=\"3\"/><text x=\"{4:.1f}\" y=\"{5:.1f}\">{6}</text>\n",
                       left + plot_w + 12, ly, left + plot_w + 32, colour, left + plot_w + 38, ly + 4,
                       net::xml_escape(lines[i].label));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace ferry::agent::pool
