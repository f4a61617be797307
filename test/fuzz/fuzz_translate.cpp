// test/fuzz/fuzz_translate.cpp — ./translate's line handling (cli/translate.cpp: LineReader on
// stdin, then Translator::encode: spaces, tabs and CRs at the ends, invalid UTF-8, --replace-invalid, --max-input-tokens,
// --split-long, --split-sentences) on arbitrary stdin bytes. The first byte holds the switches
// and the token limit. Checked: the lines read are the input's lines (a UTF-8 byte-order mark at
// the input's start dropped, as ./translate drops it); a line is refused only for
// invalid UTF-8 (without --replace-invalid) or length (without --split-long: the line's, or with
// --split-sentences a sentence's), with a message; an accepted line's pieces each fit the limit
// and decode to the line, in order, with only white space left out between them (none when
// the line is one piece).
#include <fcntl.h>

#include "test/fuzz/fuzz.h"
#define main translate_main
#include "cli/translate.cpp"
#undef main

// Serves the bytes as file descriptor 0, as a shell redirection would.
static void set_stdin(const std::string& bytes) {
    std::string path = fuzz_write("stdin.txt", bytes.data(), bytes.size());
    int fd = open(path.c_str(), O_RDONLY);
    FUZZ_CHECK(fd >= 0 && dup2(fd, 0) == 0, "stdin from a file");
    close(fd);
}

static void check_line(Translator& t, std::string line) {
    std::vector<std::vector<int>> pieces;
    std::string err;
    bool ok = t.encode(line, &pieces, &err);
    line = std::string(trim(line, " \t\r"));   // (as training: cli/line_check.h)
    bool valid = invalid_utf8_at(line) < 0;
    if (!valid && !t.opt.replace_invalid) {
        FUZZ_CHECK(!ok && err.find("invalid UTF-8") != std::string::npos, "invalid UTF-8 refused");
        return;
    }
    std::string text = valid ? line : replace_invalid_utf8(line);
    FUZZ_CHECK(invalid_utf8_at(text) < 0, "replacement gives valid UTF-8");
    size_t n = t.tok.encode(text).size();
    if (t.opt.split_sentences) {   // the longest sentence decides
        n = 0;
        for (std::string_view s : sentences::split(text)) n = std::max(n, t.tok.encode(s).size());
    }
    if ((int)n > t.opt.max_input_tokens && !t.opt.split_long) {
        FUZZ_CHECK(!ok && err.find("--max-input-tokens") != std::string::npos, "long line refused");
        return;
    }
    FUZZ_CHECK(ok, "a good line is accepted");
    size_t at = 0;
    for (size_t p = 0; p < pieces.size(); p++) {
        FUZZ_CHECK((int)pieces[p].size() <= t.opt.max_input_tokens, "each piece fits the limit");
        const std::string piece = t.tok.decode(pieces[p]);
        int len;
        if (p > 0 && text.compare(at, piece.size(), piece) != 0)   // the white space between two sentences
            while (at < text.size() && sentences::is_space(sentences::char_at(text, at, &len))) at += len;
        FUZZ_CHECK(text.compare(at, piece.size(), piece) == 0, "the pieces decode to the line, in order");
        at += piece.size();
    }
    FUZZ_CHECK(at == text.size(), "the pieces decode to the whole line");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0 || size > 1 << 20) return 0;
    std::string input = fuzz_rest(data, size, 1);
    Translator t;
    t.tok = fuzz_tokenizer();
    t.opt.replace_invalid = data[0] & 1;
    t.opt.split_long = data[0] & 2;
    t.opt.split_sentences = data[0] & 4;
    t.opt.max_input_tokens = 1 + (data[0] >> 3);
    set_stdin(input);
    LineReader in;
    std::string line, joined;
    while (in.next(&line)) {
        t.line_number++;
        joined += line + "\n";
        check_line(t, line);
        (void)in.line_ready();
    }
    FUZZ_CHECK(in.read_error() == 0, "stdin read without error");
    std::string expect = starts_with_utf8_bom(input) ? input.substr(3) : input;   // an encoding mark, not text
    if (!expect.empty() && expect.back() != '\n') expect += '\n';
    FUZZ_CHECK(joined == expect, "the lines read are the input's lines");
    return 0;
}
