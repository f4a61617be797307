// json.h — a small, strict JSON reader and string escaper, enough for safetensors headers, the
// config in checkpoint metadata and ./translate --serve's requests. Header-only. Parse errors
// carry the byte offset; numbers follow RFC 8259's grammar exactly (no nan, inf, hex).
//
//   Json v; std::string err;
//   if (!json_parse(text, &v, &err)) ...;  v.get("key") -> const Json* or nullptr
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "tokenizer.h"   // append_utf8

struct Json {
    enum Type { NUL, BOOL, NUMBER, STRING, ARRAY, OBJECT } type = NUL;
    bool boolean = false;
    double number = 0;
    std::string str;
    std::vector<Json> items;                             // ARRAY
    std::vector<std::pair<std::string, Json>> members;   // OBJECT, in file order
    const Json* get(const std::string& key) const {
        for (const auto& kv : members)
            if (kv.first == key) return &kv.second;
        return nullptr;
    }
};

// Escapes s as a JSON string literal, quotes included.
inline std::string json_quote(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += (char)c;
                }
        }
    }
    return out + "\"";
}

class JsonParser {
public:
    // max_values: more values than this (every number, string, array and object counts) is an
    // error, before they are all held: a body of "[0,0,...]" takes 50 times its bytes as Json.
    JsonParser(const std::string& text, size_t max_values = SIZE_MAX) : s_(text), values_left_(max_values) {}
    bool parse(Json* out, std::string* err) {
        bool ok = value(out, 0) && (skip_ws(), pos_ == s_.size() || fail("trailing characters"));
        if (!ok && err) *err = error_ + " at byte " + std::to_string(pos_);
        return ok;
    }

private:
    const std::string& s_;
    size_t values_left_;
    size_t pos_ = 0;
    std::string error_;

    bool fail(const char* msg) { error_ = msg; return false; }
    void skip_ws() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' ||
                                    s_[pos_] == '\t'))
            pos_++;
    }
    bool literal(const char* word) {
        size_t n = std::char_traits<char>::length(word);
        if (s_.compare(pos_, n, word) != 0) return fail("invalid literal");
        pos_ += n;
        return true;
    }
    bool value(Json* v, int depth) {
        if (depth > 64) return fail("nesting too deep");
        if (values_left_-- == 0) return fail("too many values");
        skip_ws();
        if (pos_ >= s_.size()) return fail("unexpected end");
        char c = s_[pos_];
        if (c == '{') return object(v, depth);
        if (c == '[') return array(v, depth);
        if (c == '"') { v->type = Json::STRING; return string(&v->str); }
        if (c == 't') { v->type = Json::BOOL; v->boolean = true; return literal("true"); }
        if (c == 'f') { v->type = Json::BOOL; v->boolean = false; return literal("false"); }
        if (c == 'n') { v->type = Json::NUL; return literal("null"); }
        return number(v);
    }
    // RFC 8259's number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; strtod alone would
    // also take nan, inf, hex, a leading '+' or '.', which JSON does not have.
    size_t digits(size_t i) const {
        while (i < s_.size() && s_[i] >= '0' && s_[i] <= '9') i++;
        return i;
    }
    bool number(Json* v) {
        size_t i = pos_;
        if (i < s_.size() && s_[i] == '-') i++;
        size_t int_end = digits(i);
        if (int_end == i) return fail(i == pos_ ? "expected a value" : "expected a digit");
        if (s_[i] == '0' && int_end > i + 1) return fail("leading zero in a number");
        i = int_end;
        if (i < s_.size() && s_[i] == '.') {
            size_t frac_end = digits(i + 1);
            if (frac_end == i + 1) { pos_ = i + 1; return fail("expected a digit after '.'"); }
            i = frac_end;
        }
        if (i < s_.size() && (s_[i] == 'e' || s_[i] == 'E')) {
            size_t j = i + 1;
            if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) j++;
            size_t exp_end = digits(j);
            if (exp_end == j) { pos_ = j; return fail("expected a digit in the exponent"); }
            i = exp_end;
        }
        v->number = std::strtod(s_.substr(pos_, i - pos_).c_str(), nullptr);   // overflow: +-HUGE_VAL
        v->type = Json::NUMBER;
        pos_ = i;
        return true;
    }
    bool hex4(uint32_t* cp) {
        if (pos_ + 4 > s_.size()) return fail("short \\u escape");
        *cp = 0;
        for (int i = 0; i < 4; i++) {
            char h = s_[pos_++];
            int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                  : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) return fail("bad \\u escape");
            *cp = *cp * 16 + (uint32_t)d;
        }
        return true;
    }
    bool escape(std::string* out) {
        char e = s_[pos_++];
        switch (e) {
            case '"': *out += '"'; return true;
            case '\\': *out += '\\'; return true;
            case '/': *out += '/'; return true;
            case 'b': *out += '\b'; return true;
            case 'f': *out += '\f'; return true;
            case 'n': *out += '\n'; return true;
            case 'r': *out += '\r'; return true;
            case 't': *out += '\t'; return true;
            case 'u': {
                uint32_t cp;
                if (!hex4(&cp)) return false;
                if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(pos_, 2, "\\u") == 0) {
                    pos_ += 2;
                    uint32_t lo;
                    if (!hex4(&lo)) return false;
                    if (lo < 0xDC00 || lo >= 0xE000) return fail("bad surrogate pair");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                append_utf8(out, cp);
                return true;
            }
            default: return fail("bad escape");
        }
    }
    bool string(std::string* out) {
        pos_++;   // opening quote
        while (pos_ < s_.size()) {
            char c = s_[pos_++];
            if (c == '"') return true;
            if ((unsigned char)c < 0x20) return fail("control character in string");
            if (c != '\\') { *out += c; continue; }
            if (pos_ >= s_.size()) break;
            if (!escape(out)) return false;
        }
        return fail("unterminated string");
    }
    bool array(Json* v, int depth) {
        v->type = Json::ARRAY;
        pos_++;
        skip_ws();
        if (pos_ < s_.size() && s_[pos_] == ']') { pos_++; return true; }
        for (;;) {
            v->items.emplace_back();
            if (!value(&v->items.back(), depth + 1)) return false;
            skip_ws();
            if (pos_ >= s_.size()) return fail("unterminated array");
            char c = s_[pos_++];
            if (c == ']') return true;
            if (c != ',') return fail("expected ',' or ']'");
        }
    }
    bool object(Json* v, int depth) {
        v->type = Json::OBJECT;
        pos_++;
        skip_ws();
        if (pos_ < s_.size() && s_[pos_] == '}') { pos_++; return true; }
        for (;;) {
            skip_ws();
            if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a key");
            std::string key;
            if (!string(&key)) return false;
            skip_ws();
            if (pos_ >= s_.size() || s_[pos_++] != ':') return fail("expected ':'");
            v->members.emplace_back(key, Json());
            if (!value(&v->members.back().second, depth + 1)) return false;
            skip_ws();
            if (pos_ >= s_.size()) return fail("unterminated object");
            char c = s_[pos_++];
            if (c == '}') return true;
            if (c != ',') return fail("expected ',' or '}'");
        }
    }
};

inline bool json_parse(const std::string& text, Json* out, std::string* err, size_t max_values = SIZE_MAX) {
    return JsonParser(text, max_values).parse(out, err);
}
