// svg.cpp — the SVG writer of svg.h: escaping, elements, atomic file write.
#include "toolkit/svg.h"

#include <cmath>
#include <cstdio>

#include "tokenizer.h"   // utf8_char

std::string xml_escape(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    const unsigned char* p = (const unsigned char*)s.data();
    for (size_t i = 0; i < s.size(); i++) {
        const unsigned char c = p[i];
        if (c >= 0x80) {   // a multi-byte character as it is; invalid UTF-8 as U+FFFD
            uint32_t cp;
            const int len = utf8_char(p + i, s.size() - i, &cp);
            if (len == 0 || cp == 0xFFFE || cp == 0xFFFF) out += "\xEF\xBF\xBD";
            else out.append(s, i, (size_t)len);
            i += len > 0 ? (size_t)len - 1 : 0;
            continue;
        }
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        default:
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') out += "\xEF\xBF\xBD";   // U+FFFD
            else out += (char)c;
        }
    }
    return out;
}

std::string attr(const char* name, const std::string& value) {
    return std::string(" ") + name + "=\"" + xml_escape(value) + "\"";
}

std::string attr(const char* name, const char* value) { return attr(name, std::string(value)); }

std::string attr(const char* name, double value) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", value);
    return attr(name, std::string(buf));
}

std::string svg_num(double v) {
    if (!std::isfinite(v)) v = 0;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    std::string s = buf;
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s == "-0" ? "0" : s;
}

Svg::Svg(double width, double height) : width_(width), height_(height) {
    rect(0, 0, width, height, attr("fill", "white"));
}

void Svg::rect(double x, double y, double w, double h, const std::string& extra) {
    body_ += "<rect x=\"" + svg_num(x) + "\" y=\"" + svg_num(y) + "\" width=\"" + svg_num(w) +
             "\" height=\"" + svg_num(h) + "\"" + extra + "/>\n";
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& extra) {
    body_ += "<line x1=\"" + svg_num(x1) + "\" y1=\"" + svg_num(y1) + "\" x2=\"" + svg_num(x2) +
             "\" y2=\"" + svg_num(y2) + "\"" + extra + "/>\n";
}

void Svg::circle(double cx, double cy, double r, const std::string& extra) {
    body_ += "<circle cx=\"" + svg_num(cx) + "\" cy=\"" + svg_num(cy) + "\" r=\"" + svg_num(r) +
             "\"" + extra + "/>\n";
}

void Svg::polyline(const std::vector<double>& xs, const std::vector<double>& ys,
                   const std::string& extra) {
    std::string pts;
    for (size_t i = 0; i < xs.size() && i < ys.size(); i++)
        pts += (i ? " " : "") + svg_num(xs[i]) + "," + svg_num(ys[i]);
    body_ += "<polyline points=\"" + pts + "\" fill=\"none\"" + extra + "/>\n";
}

void Svg::text(double x, double y, const std::string& s, const std::string& extra) {
    body_ += "<text x=\"" + svg_num(x) + "\" y=\"" + svg_num(y) + "\"" + extra + ">" +
             xml_escape(s) + "</text>\n";
}

void Svg::open_group(const std::string& extra) {
    body_ += "<g" + extra + ">\n";
    open_groups_++;
}

void Svg::close_group() {
    if (open_groups_ == 0) return;
    body_ += "</g>\n";
    open_groups_--;
}

std::string Svg::finish() {
    while (open_groups_ > 0) close_group();
    const std::string w = svg_num(width_), h = svg_num(height_);
    std::string head = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                       "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
                       "\" viewBox=\"0 0 " + w + " " + h +
                       "\" font-family=\"DejaVu Sans, Verdana, sans-serif\">\n";
    std::string doc = head + body_ + "</svg>\n";
    body_.clear();
    return doc;
}
