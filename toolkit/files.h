// toolkit/files.h — the programs' files: input read whole, output written whole or not at all,
// never over one of their own inputs.
//
//   if (!read_file(path, &text, &why)) fail(why);               "-" is stdin
//   if (starts_with_utf8_bom(text)) text.erase(0, 3);           an encoding mark, not text
//   if (same_file(out, model)) refuse...;                      the same file by another name
//   if (!write_file_replacing(path, text, &err)) fail(err);     a temporary file, then renamed
//
// A file is replaced by renaming a finished temporary file (path.tmp.PID, fsync'd) over it, so
// that a full disk, a file-size limit or a kill leaves the old file whole, and it keeps the old
// file's permissions. A link is followed:
// the file it names is replaced, the link stays. Anything but a regular file (a device such as
// /dev/null, a folder) is refused rather than renamed over.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

// Reads a whole file ("-" is stdin) into *out (appending); false when it cannot be opened or
// read (a folder: "Is a directory"), with the system's reason in *why when given.
inline bool read_file(const std::string& path, std::string* out, std::string* why = nullptr) {
    std::FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
    if (!f) {
        if (why) *why = std::strerror(errno);
        return false;
    }
    char buf[1 << 16];
    size_t n;
    errno = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
    const bool ok = !std::ferror(f);
    if (!ok && why) *why = errno ? std::strerror(errno) : "read error";
    if (f != stdin) std::fclose(f);
    return ok;
}

// Whether text starts with a UTF-8 byte-order mark (EF BB BF, U+FEFF): the signature Windows
// Notepad and "UTF-8 with BOM" saving put at a file's start, which says how the file is encoded
// and is no part of its text (Python reads it so with encoding="utf-8-sig").
inline bool starts_with_utf8_bom(const std::string& text) { return text.compare(0, 3, "\xEF\xBB\xBF") == 0; }

// Whether a and b name one existing file (the same device and inode: links, ./x and x alike).
inline bool same_file(const std::string& a, const std::string& b) {
    struct stat sa, sb;
    return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

// Where a link that names no existing file points (followed link by link, as `> path` would
// create it); path itself when it is no link.
inline std::string dangling_link_end(const std::string& path) {
    std::filesystem::path p = path;
    std::error_code ec;
    for (int hops = 0; hops < 40 && std::filesystem::is_symlink(p, ec); hops++) {
        const std::filesystem::path to = std::filesystem::read_symlink(p, ec);
        if (ec) break;
        p = to.is_absolute() ? to : p.parent_path() / to;
    }
    return p.string();
}

// The file that writing `path` replaces: the file a link names (or would name: a dangling
// link's, to be created), else path itself. False + *error when path exists and is not a
// regular file.
inline bool replacement_target(const std::string& path, std::string* target, std::string* error) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {   // nothing there yet
        *target = dangling_link_end(path);
        return true;
    }
    if (!S_ISREG(st.st_mode)) {
        *error = path + ": exists and is not a regular file; not replacing it";
        return false;
    }
    std::error_code ec;
    *target = std::filesystem::canonical(path, ec).string();
    if (ec || target->empty()) *target = path;
    return true;
}

// Opens the temporary file tmp that will replace target, for writing, with target's permissions
// when it exists (a vocabulary or checkpoint kept private stays so), else as fopen would (0666
// less the umask). A descriptor, or -1 (errno set) when it cannot be created.
inline int open_replacement(const std::string& tmp, const std::string& target) {
    struct stat st;
    const bool exists = stat(target.c_str(), &st) == 0;
    const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd >= 0 && exists) (void)fchmod(fd, st.st_mode & 07777);
    return fd;
}

// open_replacement as a FILE*; null (errno set) when it cannot be created.
inline std::FILE* create_replacement(const std::string& tmp, const std::string& target) {
    const int fd = open_replacement(tmp, target);
    if (fd < 0) return nullptr;
    std::FILE* f = fdopen(fd, "wb");
    if (!f) close(fd);
    return f;
}

// Writes text to path through a temporary file renamed over it (see the top). False + *error
// naming the file and the reason; the old file, if any, is left as it was.
inline bool write_file_replacing(const std::string& path, const std::string& text, std::string* error) {
    std::string target;
    if (!replacement_target(path, &target, error)) return false;
    const std::string tmp = target + ".tmp." + std::to_string(getpid());
    std::FILE* f = create_replacement(tmp, target);
    if (!f) {
        *error = "cannot create " + tmp + ": " + std::strerror(errno);
        return false;
    }
    bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
              fsync(fileno(f)) == 0;
    ok = std::fclose(f) == 0 && ok;
    if (!ok || std::rename(tmp.c_str(), target.c_str()) != 0) {
        *error = "cannot write " + path + ": " + std::strerror(errno);
        std::remove(tmp.c_str());
        return false;
    }
    return true;
}
