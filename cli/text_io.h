// cli/text_io.h — text input for the programs in cli/: whole files (or stdin) as text, text
// as lines.
//
//   std::string text;  read_file("-", &text);  // "-" is stdin
//   std::vector<std::string> lines = split_lines(text);
#pragma once
#include <cstdio>
#include <string>
#include <vector>

// Reads a whole file ("-" is stdin) into *out (appending); false when it cannot be opened or
// read.
inline bool read_file(const std::string& path, std::string* out) {
    std::FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
    if (!f) return false;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
    bool ok = !std::ferror(f);
    if (f != stdin) std::fclose(f);
    return ok;
}

// Splits text into lines on '\n' only, the way Python iterates a file opened with
// newline="\n": a final line without '\n' counts, an empty tail after the last '\n' does not.
inline void split_lines(const std::string& text, std::vector<std::string>* lines) {
    size_t start = 0;
    while (start < text.size()) {
        size_t nl = text.find('\n', start);
        if (nl == std::string::npos) nl = text.size();
        lines->emplace_back(text, start, nl - start);
        start = nl + 1;
    }
}
inline std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    split_lines(text, &lines);
    return lines;
}
