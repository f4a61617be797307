// checkpoint.cpp — safetensors reading and writing, model checkpoints on top of them, and a
// run's checkpoints listed and averaged.
// See checkpoint.h for the format. Every way a file can be wrong (missing, truncated, not
// safetensors, another program's file, wrong dtype or shape, another config) is refused with
// a message that names the file and the problem.
#include "model/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include "tokenizer.h"
#include "toolkit/files.h"
#include "toolkit/json.h"
#include "toolkit/numbers.h"

namespace fs = std::filesystem;

const char* const CHECKPOINT_FORMAT = "aiayn-transformer/1";

static size_t dtype_size(const std::string& dtype) {
    if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
    if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
    if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
    if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
    return 0;
}

size_t TensorEntry::numel() const {
    size_t n = 1;
    for (int64_t s : shape) n *= (size_t)s;
    return n;
}

SafeTensorsFile::~SafeTensorsFile() {
    if (f_) std::fclose(f_);
}

// Parses one header entry {"dtype", "shape", "data_offsets"}.
static bool parse_entry(const std::string& name, const Json& v, TensorEntry* t, std::string* why) {
    const Json* dt = v.get("dtype");
    const Json* sh = v.get("shape");
    const Json* off = v.get("data_offsets");
    if (v.type != Json::OBJECT || !dt || dt->type != Json::STRING || !sh ||
        sh->type != Json::ARRAY || !off || off->type != Json::ARRAY || off->items.size() != 2) {
        *why = "tensor \"" + name + "\" lacks dtype, shape or data_offsets";
        return false;
    }
    t->name = name;
    t->dtype = dt->str;
    for (const Json& s : sh->items) {
        if (s.type != Json::NUMBER || s.number < 0 || s.number > 1e12 || s.number != std::floor(s.number)) {
            *why = "tensor \"" + name + "\" has a bad shape";
            return false;
        }
        t->shape.push_back((int64_t)s.number);
    }
    const double kMaxOffset = 9007199254740992.0;   // 2^53: integers a double holds exactly
    if (off->items[0].type != Json::NUMBER || off->items[1].type != Json::NUMBER ||
        off->items[0].number < 0 || off->items[1].number < off->items[0].number ||
        off->items[1].number > kMaxOffset || off->items[0].number != std::floor(off->items[0].number) ||
        off->items[1].number != std::floor(off->items[1].number)) {
        *why = "tensor \"" + name + "\" has bad data_offsets";
        return false;
    }
    t->begin = (size_t)off->items[0].number;
    t->end = (size_t)off->items[1].number;
    size_t es = dtype_size(t->dtype);
    if (es == 0) { *why = "tensor \"" + name + "\" has unknown dtype " + t->dtype; return false; }
    double bytes = (double)es;   // (in size_t, [2^32, 2^32] wrapped to 0 bytes and matched offsets [0, 0])
    for (int64_t s : t->shape) bytes *= (double)s;
    if (bytes > kMaxOffset) { *why = "tensor \"" + name + "\" has a shape too large for any file"; return false; }
    if (t->end - t->begin != t->numel() * es) {
        *why = "tensor \"" + name + "\": data_offsets do not match dtype x shape";
        return false;
    }
    return true;
}

// Checks that the tensors lie inside the data section without overlapping.
static bool check_extents(std::vector<TensorEntry> ts, size_t data_size, std::string* why) {
    std::sort(ts.begin(), ts.end(),
              [](const TensorEntry& a, const TensorEntry& b) { return a.begin < b.begin; });
    size_t prev_end = 0;
    for (const TensorEntry& t : ts) {
        if (t.begin < prev_end) { *why = "tensor \"" + t.name + "\" overlaps another"; return false; }
        if (t.end > data_size) {
            *why = "file is truncated: tensor \"" + t.name + "\" ends at byte " +
                   std::to_string(t.end) + " of a " + std::to_string(data_size) + "-byte data section";
            return false;
        }
        prev_end = t.end;
    }
    return true;
}

bool SafeTensorsFile::open(const std::string& p, std::string* error) {
    path = p;
    auto fail = [&](const std::string& why) {
        *error = path + ": " + why;
        return false;
    };
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) return fail("is a folder, not a checkpoint file");
    f_ = std::fopen(p.c_str(), "rb");
    if (!f_) return fail(std::string("cannot open (") + std::strerror(errno) + ")");
    std::fseek(f_, 0, SEEK_END);
    long file_size = std::ftell(f_);
    std::fseek(f_, 0, SEEK_SET);
    unsigned char len_bytes[8];
    if (file_size < 8 || std::fread(len_bytes, 1, 8, f_) != 8)
        return fail("too short to be a safetensors file (" + std::to_string(file_size) + " bytes)");
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | len_bytes[i];
    if (n < 2 || n > (1u << 27))
        return fail("not a safetensors file (header length " + std::to_string(n) + " for a " +
                    std::to_string(file_size) + "-byte file)");
    if (8 + n > (uint64_t)file_size)
        return fail("file is truncated: its header needs " + std::to_string(8 + n) + " bytes, the file has " +
                    std::to_string(file_size));
    std::string header(n, '\0');
    if (std::fread(&header[0], 1, n, f_) != n) return fail("cannot read the header");
    Json j;
    std::string err;
    if (!json_parse(header, &j, &err)) return fail("not a safetensors file (header is not JSON: " + err + ")");
    if (j.type != Json::OBJECT) return fail("not a safetensors file (header is JSON, but not an object)");
    bool have_metadata = false;
    for (const auto& kv : j.members) {
        if (kv.first == "__metadata__") {   // one object of strings, as the format (and its library) requires
            if (have_metadata) return fail("\"__metadata__\" is listed twice in the header");
            have_metadata = true;
            if (kv.second.type != Json::OBJECT) return fail("\"__metadata__\" is not an object");
            for (const auto& m : kv.second.members) {
                if (m.second.type != Json::STRING) return fail("__metadata__ \"" + m.first + "\" is not a string");
                metadata[m.first] = m.second.str;
            }
            continue;
        }
        TensorEntry t;
        if (!parse_entry(kv.first, kv.second, &t, &err)) return fail(err);
        if (find(t.name)) return fail("tensor \"" + t.name + "\" is listed twice in the header");
        tensors.push_back(t);
    }
    data_start_ = 8 + n;
    if (!check_extents(tensors, (size_t)file_size - data_start_, &err)) return fail(err);
    return true;
}

const TensorEntry* SafeTensorsFile::find(const std::string& name) const {
    for (const TensorEntry& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

static std::string shape_text(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); i++) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

bool SafeTensorsFile::read(const std::string& name, const char* dtype, void* dst, size_t numel,
                           std::string* error) {
    const TensorEntry* t = find(name);
    if (!t) { *error = path + ": no tensor \"" + name + "\""; return false; }
    if (t->dtype != dtype) {
        *error = path + ": tensor \"" + name + "\" is " + t->dtype + ", expected " + dtype;
        return false;
    }
    if (t->numel() != numel) {
        *error = path + ": tensor \"" + name + "\" has shape " + shape_text(t->shape) + " (" +
                 std::to_string(t->numel()) + " values), expected " + std::to_string(numel);
        return false;
    }
    size_t bytes = t->end - t->begin;
    if (std::fseek(f_, (long)(data_start_ + t->begin), SEEK_SET) != 0 ||
        std::fread(dst, 1, bytes, f_) != bytes) {
        *error = path + ": cannot read tensor \"" + name + "\"";
        return false;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
static std::string header_json(const std::vector<TensorOut>& tensors, const Metadata& metadata) {
    std::string h = "{\"__metadata__\": {";
    bool first = true;
    for (const auto& kv : metadata) {
        h += (first ? "" : ", ") + json_quote(kv.first) + ": " + json_quote(kv.second);
        first = false;
    }
    h += "}";
    size_t offset = 0;
    for (const TensorOut& t : tensors) {
        size_t n = dtype_size(t.dtype);
        for (int64_t s : t.shape) n *= (size_t)s;
        h += ", " + json_quote(t.name) + ": {\"dtype\": " + json_quote(t.dtype) + ", \"shape\": " +
             shape_text(t.shape) + ", \"data_offsets\": [" + std::to_string(offset) + ", " +
             std::to_string(offset + n) + "]}";
        offset += n;
    }
    h += "}";
    while (h.size() % 8) h += ' ';   // the data section starts 8-byte aligned
    return h;
}

bool safetensors_write(const std::string& path, const std::vector<TensorOut>& tensors,
                       const Metadata& metadata, std::string* error) {
    std::string target;   // path, or the file a link there names (toolkit/files.h)
    if (!replacement_target(path, &target, error)) return false;
    const std::string tmp = target + ".tmp." + std::to_string(getpid());
    FILE* f = create_replacement(tmp, target);
    if (!f) { *error = tmp + ": cannot create (" + std::strerror(errno) + ")"; return false; }
    std::string h = header_json(tensors, metadata);
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)h.size() >> (8 * i));
    bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(h.data(), 1, h.size(), f) == h.size();
    for (const TensorOut& t : tensors) {
        size_t n = dtype_size(t.dtype);
        for (int64_t s : t.shape) n *= (size_t)s;
        ok = ok && std::fwrite(t.data, 1, n, f) == n;
    }
    ok = ok && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok || std::rename(tmp.c_str(), target.c_str()) != 0) {
        *error = path + ": write failed (" + std::strerror(errno) + ")";
        std::remove(tmp.c_str());
        return false;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
static std::vector<int64_t> shape64(const std::vector<int>& s) {
    return std::vector<int64_t>(s.begin(), s.end());
}

// The host copy of a device buffer: the buffer itself on the CPU, else downloaded into *staging.
static const float* host_floats(const Model& m, const float* device, std::vector<float>* staging) {
    if (m.backend->device() == Device::CPU) return device;
    staging->resize(m.layout.total);
    m.backend->download(staging->data(), device, m.layout.total * sizeof(float));
    return staging->data();
}

// A 64-bit checksum (FNV-1a over 8-byte words, then the tail bytes) as 16 hex digits: it
// detects damaged data (a flipped bit, a wrong block) at memory speed; it is no signature.
static std::string checksum_hex(const void* data, size_t bytes, uint64_t h = 0xcbf29ce484222325ull) {
    const unsigned char* p = (const unsigned char*)data;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < bytes; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
    return buf;
}

// Checks a checksum written by checkpoint_save (absent in files of earlier versions: nothing
// to check); false + message naming what is damaged.
static bool checksum_ok(const Metadata& meta, const char* key, const void* data, size_t bytes,
                        const std::string& what, std::string* why) {
    auto it = meta.find(key);
    if (it == meta.end() || it->second == checksum_hex(data, bytes)) return true;
    *why = what + ": checksum mismatch (a damaged file: flipped bits, a bad copy); refusing to use it";
    return false;
}

bool checkpoint_save(const Model& m, const std::string& path, const Metadata& extra,
                     bool with_optimizer, std::string* error) {
    if (with_optimizer && !m.adam_m) {
        *error = path + ": the model holds no Adam state to save";
        return false;
    }
    std::vector<float> staging_p, staging_m, staging_v;
    const float* params = host_floats(m, m.params, &staging_p);
    std::vector<TensorOut> out;
    for (const TensorInfo& t : m.layout.tensors)
        out.push_back({t.name, "F32", shape64(t.shape), params + t.offset});
    Metadata meta = extra;
    const size_t bytes = m.layout.total * sizeof(float);
    meta["params_checksum"] = checksum_hex(params, bytes);
    if (with_optimizer) {
        const float* am = host_floats(m, m.adam_m, &staging_m);
        const float* av = host_floats(m, m.adam_v, &staging_v);
        out.push_back({"optimizer.m", "F32", {(int64_t)m.layout.total}, am});
        out.push_back({"optimizer.v", "F32", {(int64_t)m.layout.total}, av});
        meta["optimizer_checksum"] = checksum_hex(av, bytes, std::stoull(checksum_hex(am, bytes), nullptr, 16));
    }
    auto tok = extra.find("tokenizer");   // the vocabulary is part of the model's identity
    if (tok != extra.end()) meta["tokenizer_checksum"] = checksum_hex(tok->second.data(), tok->second.size());
    meta["format"] = CHECKPOINT_FORMAT;
    meta["config"] = config_to_json(m.cfg);
    meta["config_checksum"] = checksum_hex(meta["config"].data(), meta["config"].size());
    meta["step"] = std::to_string(m.step);
    meta["train_forwards"] = std::to_string(m.train_forwards);
    meta["dropout_seed"] = std::to_string(m.dropout_seed);
    return safetensors_write(path, out, meta, error);
}

bool read_parameters(SafeTensorsFile& file, const ParamLayout& layout, const std::string& prefix,
                     float* buffer, std::string* error) {
    for (const TensorInfo& t : layout.tensors) {
        const TensorEntry* e = file.find(prefix + t.name);
        if (e && e->shape != shape64(t.shape)) {
            *error = file.path + ": tensor \"" + e->name + "\" has shape " + shape_text(e->shape) +
                     ", the config needs " + shape_text(shape64(t.shape));
            return false;
        }
        if (!file.read(prefix + t.name, "F32", buffer + t.offset, t.numel, error)) return false;
        const float* v = buffer + t.offset;
        for (size_t i = 0; i < t.numel; i++)
            if (!std::isfinite(v[i])) {   // a diverged or edited model: never translated or averaged
                *error = file.path + ": tensor \"" + prefix + t.name + "\" holds a non-finite value (" +
                         std::to_string(v[i]) + " at element " + std::to_string(i) + "); refusing to use it";
                return false;
            }
    }
    return true;
}

// A metadata value of digits only (toolkit/numbers.h: strtoull alone took "-3" as 2^64 - 3,
// " 7" and "+7", and wrapped past 2^64: a resumed run whose step read -3 trained on NaN updates).
template <class T> static bool metadata_count(const Metadata& meta, const char* key, T* out) {
    auto it = meta.find(key);
    return it != meta.end() && parse_decimal(it->second, out, "") == Decimal::ok;
}

// Reads the parameters (and, for training, Adam's state) into the model's buffers: straight
// into them on the CPU, through a host copy elsewhere.
static bool read_model_buffers(SafeTensorsFile& file, Model* m, bool training, std::string* error) {
    const bool host = m->backend->device() == Device::CPU;
    const size_t bytes = m->layout.total * sizeof(float);
    std::vector<float> staging(host ? 0 : m->layout.total);
    float* dst = host ? m->params : staging.data();
    if (!read_parameters(file, m->layout, "", dst, error)) return false;
    std::string why;
    if (!checksum_ok(file.metadata, "params_checksum", dst, bytes, "the parameters", &why)) {
        *error = file.path + ": " + why;
        return false;
    }
    model_set_params(m, dst);
    if (!training || (!file.find("optimizer.m") && !file.find("optimizer.v"))) return true;
    std::vector<float> mv(host ? 0 : 2 * m->layout.total);
    float* dm = host ? m->adam_m : mv.data();
    float* dv = host ? m->adam_v : mv.data() + m->layout.total;
    if (!file.read("optimizer.m", "F32", dm, m->layout.total, error) ||
        !file.read("optimizer.v", "F32", dv, m->layout.total, error))
        return false;
    auto sum = file.metadata.find("optimizer_checksum");
    if (sum != file.metadata.end() &&
        sum->second != checksum_hex(dv, bytes, std::stoull(checksum_hex(dm, bytes), nullptr, 16))) {
        *error = file.path + ": Adam's state: checksum mismatch (a damaged file: flipped bits, a bad copy); "
                 "refusing to resume from it";
        return false;
    }
    model_set_adam(m, dm, dv);
    return true;
}

// Every parameter tensor the config needs must be in the file with its shape: checked before
// allocating, so that a damaged or forged config cannot make the loader allocate more than
// the file holds (the tensors' extents lie inside the file and do not overlap).
static bool config_fits_file(const SafeTensorsFile& file, const Config& cfg, std::string* why) {
    for (const TensorInfo& t : make_layout(cfg).tensors) {
        const TensorEntry* e = file.find(t.name);
        if (!e) { *why = "no tensor \"" + t.name + "\""; return false; }
        if (e->shape != shape64(t.shape)) {
            *why = "tensor \"" + t.name + "\" has shape " + shape_text(e->shape) + ", the config needs " +
                   shape_text(shape64(t.shape));
            return false;
        }
    }
    return true;
}

// The checkpoint's format tag and its vocabulary, checked against its checksum.
static bool checked_tokenizer(SafeTensorsFile& file, std::string* text, std::string* why) {
    auto fmt = file.metadata.find("format");
    if (fmt == file.metadata.end()) return *why = "a safetensors file, but not a checkpoint of this program (no format tag)", false;
    if (fmt->second != CHECKPOINT_FORMAT)
        return *why = "checkpoint format \"" + fmt->second + "\", this program reads \"" + CHECKPOINT_FORMAT + "\"", false;
    *text = file.metadata["tokenizer"];
    return checksum_ok(file.metadata, "tokenizer_checksum", text->data(), text->size(), "the vocabulary (tokenizer)", why);
}

bool is_safetensors(const std::string& path) {
    SafeTensorsFile file;
    std::string error;
    return file.open(path, &error);
}

bool checkpoint_tokenizer(const std::string& path, std::string* text, std::string* error) {
    SafeTensorsFile file;
    if (!file.open(path, error)) return false;
    std::string why;
    if (!checked_tokenizer(file, text, &why)) return *error = path + ": " + why, false;
    if (text->empty()) return *error = path + ": the checkpoint holds no vocabulary", false;
    return true;
}

bool checkpoint_load(Model* m, const std::string& path, Metadata* meta, std::string* error,
                     bool training) {
    SafeTensorsFile file;
    if (!file.open(path, error)) return false;
    auto fail = [&](const std::string& why) { *error = path + ": " + why; return false; };
    std::string tok, err;
    if (!checked_tokenizer(file, &tok, &err)) return fail(err);
    Config cfg;
    const std::string& config_text = file.metadata["config"];
    if (!checksum_ok(file.metadata, "config_checksum", config_text.data(), config_text.size(), "the config", &err))
        return fail(err);
    if (!config_from_json(config_text, &cfg, &err)) return fail(err);
    if (!m->params) {
        if (!config_fits_file(file, cfg, &err)) return fail(err);
        model_allocate(m, cfg, training);
    } else {
        std::string diff = config_difference(m->cfg, cfg);
        if (!diff.empty()) return fail("config differs from the model's: " + diff);
        training = training && m->adam_m;
    }
    int64_t step = 0;
    if (!metadata_count(file.metadata, "step", &step)) return fail("metadata has no valid \"step\"");
    model_unpack_weights(m);   // (packed and int8 copies of the weights about to be overwritten)
    model_dequantize(m);
    if (!read_model_buffers(file, m, training, error)) return false;
    m->step = step;
    metadata_count(file.metadata, "train_forwards", &m->train_forwards);
    metadata_count(file.metadata, "dropout_seed", &m->dropout_seed);
    if (meta) *meta = file.metadata;
    return true;
}

// ---------------------------------------------------------------------------------------------
// A run's checkpoints, and their average (./average, and ./train at its end)
// ---------------------------------------------------------------------------------------------
std::vector<std::string> list_checkpoints(const std::string& dir) {
    std::vector<std::pair<long long, std::string>> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        std::string name = e.path().filename().string();
        if (name.rfind("ckpt-", 0) == 0 && name.size() > 17 &&
            name.compare(name.size() - 12, 12, ".safetensors") == 0 &&
            name.find_first_not_of("0123456789", 5) == name.size() - 12)   // ckpt-<step>: no other name
            if (long long step; parse_decimal(name.substr(5, name.size() - 17), &step, "") == Decimal::ok)
                found.push_back({step, e.path().string()});   // (not a step past 2^63 - 1)
    }
    std::sort(found.begin(), found.end());
    std::vector<std::string> out;
    for (auto& f : found) out.push_back(f.second);
    return out;
}

// §6.1 Machine Translation: "a single model obtained by averaging the last 5 checkpoints".
bool average_checkpoints(const std::vector<std::string>& inputs, const std::string& output,
                         std::string* error) {
    if (inputs.empty()) { *error = "no checkpoints to average"; return false; }
    Model avg;
    Metadata first_meta, meta;
    std::vector<double> sum;
    for (size_t i = 0; i < inputs.size(); i++) {
        Model m;
        if (!checkpoint_load(&m, inputs[i], &meta, error, false)) return false;
        if (i == 0) {
            model_allocate(&avg, m.cfg, false);
            first_meta = meta;
            sum.assign(m.layout.total, 0.0);
        } else {
            std::string diff = config_difference(avg.cfg, m.cfg);
            if (!diff.empty()) { *error = inputs[i] + ": config differs from " + inputs[0] + ": " + diff; return false; }
            if (meta["tokenizer"] != first_meta["tokenizer"]) {
                *error = inputs[i] + ": tokenizer differs from " + inputs[0] + "'s";
                return false;
            }
        }
        for (size_t j = 0; j < sum.size(); j++) sum[j] += m.params[j];
        avg.step = std::max(avg.step, m.step);   // the newest input's, in whatever order they came
    }
    for (size_t j = 0; j < sum.size(); j++) avg.params[j] = (float)(sum[j] / inputs.size());
    Metadata out_meta;
    out_meta["tokenizer"] = meta["tokenizer"];
    std::string from;
    for (const std::string& p : inputs)   // (the header must be UTF-8: a Latin-1 name's byte as U+FFFD)
        from += (from.empty() ? "" : " ") + replace_invalid_utf8(fs::path(p).filename().string());
    out_meta["averaged_from"] = from;
    return checkpoint_save(avg, output, out_meta, false, error);
}
