// cli/text_io.h — text input and checked output for the programs in cli/: whole files (or
// stdin) as text, text as lines, and a standard output whose write errors are errors.
//
//   guard_stdout("bleu");                     first thing in main(): see below
//   std::string text;  read_file("-", &text);  // "-" is stdin
//   std::vector<std::string> lines = split_lines(text);
//   write_stdout(text);  flush_stdout();      a write error ends the program (below)
//
// Write errors: guard_stdout() refuses a closed standard output (exit 1; otherwise the next
// file opened would take descriptor 1 and receive the program's output; a program whose output
// may go to a file instead, ./translate -o, gives it /dev/null and asks require_stdout() once it
// knows whether it writes stdout), gives closed
// stdin/stderr /dev/null so that no file takes their numbers either, and registers an exit
// handler that flushes and closes stdout: a failed write (a full disk, an I/O error) ends the
// program with a message naming stdout and exit status 1, whatever main() returned. A broken
// pipe (EPIPE, e.g. `./translate < big | head -1`) ends quietly as SIGPIPE would.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "toolkit/files.h"   // read_file, starts_with_utf8_bom

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

namespace text_io_detail {
inline std::string program = "program";
inline std::string stdout_name = "standard output";   // what messages call it (e.g. an -o file)
inline void (*stdout_cleanup)() = nullptr;             // runs before a write error ends the program
inline bool stdout_was_closed = false;                 // closed at start: fd 1 holds /dev/null

// A write to stdout failed with error e (0: unknown): a broken pipe ends as SIGPIPE would,
// anything else with a message and exit status 1. Safe to call from an exit handler.
[[noreturn]] inline void stdout_failed(int e) {
    if (stdout_cleanup) stdout_cleanup();
    if (e == EPIPE) {
        std::signal(SIGPIPE, SIG_DFL);
        std::raise(SIGPIPE);
    }
    std::fprintf(stderr, "%s: error writing to %s: %s\n", program.c_str(), stdout_name.c_str(),
                 e ? std::strerror(e) : "write failed");
    _exit(1);
}

inline void close_stdout_at_exit() {
    errno = 0;
    bool ok = std::fflush(stdout) == 0;
    int e = ok ? 0 : errno;
    ok = !std::ferror(stdout) && ok;
    if (std::fclose(stdout) != 0 && ok) { ok = false; e = errno; }
    if (!ok) stdout_failed(e);
}
}  // namespace text_io_detail

// An allocation that fails (a line, a batch or a model larger than the memory) ends the program
// with a message and exit status 1, its exit handlers run (an -o temporary file removed),
// instead of std::bad_alloc's abort. guard_stdout() installs it.
inline void exit_when_out_of_memory() {
    std::set_new_handler([] {
        std::fprintf(stderr, "%s: out of memory (the input, a batch or the model is larger than the memory "
                             "allows; see --help for the sizes to lower)\n", text_io_detail::program.c_str());
        std::exit(1);
    });
}

// False, after saying so, when standard output was closed at start (guard_stdout's
// `output_may_be_a_file`): call it once the program knows that it writes stdout.
inline bool require_stdout() {
    if (!text_io_detail::stdout_was_closed) return true;
    std::fprintf(stderr, "%s: standard output is closed; nothing could be written "
                         "(redirect it to a file, or to /dev/null)\n", text_io_detail::program.c_str());
    return false;
}

// See the header comment. Call once, first thing in main(). With output_may_be_a_file, a closed
// stdout is given /dev/null (so that no file opened meanwhile takes descriptor 1) and refused
// later, by require_stdout(), only if the program writes it after all.
inline void guard_stdout(const char* program, bool output_may_be_a_file = false) {
    text_io_detail::program = program;
    exit_when_out_of_memory();
    if (fcntl(STDIN_FILENO, F_GETFD) == -1) open("/dev/null", O_RDONLY);    // takes fd 0
    if (fcntl(STDOUT_FILENO, F_GETFD) == -1) {
        text_io_detail::stdout_was_closed = true;
        // (fd 0 is open by now: /dev/null takes fd 1)
        if (!output_may_be_a_file || open("/dev/null", O_WRONLY) != STDOUT_FILENO) {
            if (fcntl(STDERR_FILENO, F_GETFD) != -1) require_stdout();
            std::exit(1);
        }
    }
    if (fcntl(STDERR_FILENO, F_GETFD) == -1) open("/dev/null", O_WRONLY);   // takes fd 2
    std::atexit(text_io_detail::close_stdout_at_exit);
}

// Flushes stdout; on a write error ends the program as the exit handler would (message and
// exit status 1; quietly on a broken pipe). Lets a long run stop at its first lost output.
inline void flush_stdout() {
    errno = 0;
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) text_io_detail::stdout_failed(errno);
}

// Writes s to stdout; on a write error ends the program as flush_stdout() does.
inline void write_stdout(const std::string& s) {
    errno = 0;
    if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size()) text_io_detail::stdout_failed(errno);
}
