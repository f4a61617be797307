// svg.h — a small writer of self-contained SVG files, shared by the pictures the programs
// draw: attention maps (toolkit/attention_view.cpp, ./translate --attention) and training
// curves (toolkit/curves.cpp, ./train's curves.svg). No dependency: the text is built in
// memory and written in one go by toolkit/files.h's write_file_replacing (a temporary file,
// then a rename).
//
//   Svg svg(400, 300);                          // a white canvas of 400 x 300 px
//   svg.text(10, 20, "a < b & \"c\"", "font-size=\"12\"");   // text is escaped
//   svg.rect(10, 30, 50, 20, attr("fill", "#08519c") + attr("fill-opacity", 0.5));
//   if (!write_file_replacing("out.svg", svg.finish(), &err)) ...
//
// Every text and attribute value passes through xml_escape (&, <, >, ", '), so a sentence may
// hold any character; what XML 1.0 forbids (control characters other than tab, newline and
// carriage return, invalid UTF-8, U+FFFE/U+FFFF) becomes U+FFFD, so the file stays
// well-formed whatever the input or a model's output.
#pragma once
#include <string>
#include <vector>

// s with &, <, >, " and ' written as entities and what XML forbids as U+FFFD.
std::string xml_escape(const std::string& s);
// ' name="value"' with the value escaped; numbers are written with up to 6 significant
// digits (%g), so a value read back differs from the float by at most 5e-7 relative.
std::string attr(const char* name, const std::string& value);
std::string attr(const char* name, const char* value);
std::string attr(const char* name, double value);
// A number for coordinates: at most 2 decimals, no trailing zeros ("12.5", "3").
std::string svg_num(double v);

class Svg {
public:
    // The canvas, width x height pixels, with a white background.
    Svg(double width, double height);
    double width() const { return width_; }
    double height() const { return height_; }
    // Elements; `extra` holds further attributes built with attr() (or "").
    void rect(double x, double y, double w, double h, const std::string& extra);
    void line(double x1, double y1, double x2, double y2, const std::string& extra);
    void circle(double cx, double cy, double r, const std::string& extra);
    // A polyline through (xs[i], ys[i]).
    void polyline(const std::vector<double>& xs, const std::vector<double>& ys,
                  const std::string& extra);
    // Text at (x, y) (the baseline), escaped; `extra`: font-size, text-anchor, transform, ...
    void text(double x, double y, const std::string& s, const std::string& extra);
    void open_group(const std::string& extra);   // <g extra>
    void close_group();                          // </g>
    // The document: every element so far, closed. The writer may not be used afterwards.
    std::string finish();

private:
    double width_, height_;
    std::string body_;
    int open_groups_ = 0;
};
