// checkpoint.h — safetensors files (the format PyTorch and Hugging Face read) and the model
// checkpoint built on them (DESIGN.md "Checkpoints").
//
// A safetensors file: 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the raw little-endian data. A model checkpoint holds every parameter as an F32 tensor
// (named as in DESIGN.md, written in buffer order so the data section IS the parameter
// buffer), optionally Adam's state as optimizer.m / optimizer.v, and in __metadata__ the
// format tag, the config, the step and the tokenizer: one file is all ./translate needs.
#pragma once
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "transformer.h"

using Metadata = std::map<std::string, std::string>;

struct TensorEntry {
    std::string name;
    std::string dtype;              // "F32", "I32", ...
    std::vector<int64_t> shape;
    size_t begin = 0, end = 0;      // byte offsets into the data section
    size_t numel() const;
};

// An open safetensors file whose header has been read and checked (offsets inside the file,
// sizes matching dtype x shape, no overlaps). Tensors are read on demand.
class SafeTensorsFile {
public:
    ~SafeTensorsFile();
    bool open(const std::string& path, std::string* error);
    const TensorEntry* find(const std::string& name) const;
    // Reads a tensor of the expected dtype and element count into dst; false + message otherwise.
    bool read(const std::string& name, const char* dtype, void* dst, size_t numel,
              std::string* error);
    std::vector<TensorEntry> tensors;
    Metadata metadata;
    std::string path;

private:
    FILE* f_ = nullptr;
    size_t data_start_ = 0;
};

// One tensor to write: raw bytes of dtype x shape.
struct TensorOut {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    const void* data;
};
// Writes atomically: a temporary file in the same folder, flushed and synced, then renamed
// over path, so a crash never leaves a half-written checkpoint under the final name. A path
// that exists and is not a regular file (a device, a FIFO, a folder) is refused, not replaced.
bool safetensors_write(const std::string& path, const std::vector<TensorOut>& tensors,
                       const Metadata& metadata, std::string* error);

// ---- Model checkpoints ------------------------------------------------------------------
extern const char* const CHECKPOINT_FORMAT;   // __metadata__["format"]

// Saves parameters (+ Adam state when with_optimizer) with config, step and the given extra
// metadata (e.g. "tokenizer", training position).
bool checkpoint_save(const Model& m, const std::string& path, const Metadata& extra,
                     bool with_optimizer, std::string* error);
// Loads a checkpoint into the model's buffers (on its backend's device; a CPU backend when
// none is set). An unallocated model takes the file's config and allocates the parameters,
// plus gradients and Adam state when `training` (./translate passes false: parameters only);
// an allocated one must have the same config, or the load is refused naming the difference.
// Adam state is loaded when present and the model trains. meta (optional) receives the
// file's __metadata__.
bool checkpoint_load(Model* m, const std::string& path, Metadata* meta, std::string* error,
                     bool training = true);
// The vocabulary a checkpoint carries (the "tokenizer" metadata, checked against its checksum),
// as vocab.bpe text: ./bpe and ./train --vocab take a checkpoint where a vocab.bpe goes.
bool checkpoint_tokenizer(const std::string& path, std::string* text, std::string* error);
// Whether path opens as a safetensors file (its header reads and checks): a checkpoint given
// where a vocab.bpe may be.
bool is_safetensors(const std::string& path);
// Reads the tensors named prefix + <DESIGN.md name> into a buffer of layout's shape.
bool read_parameters(SafeTensorsFile& file, const ParamLayout& layout, const std::string& prefix,
                     float* buffer, std::string* error);

// Checkpoint files ckpt-*.safetensors in dir, oldest (lowest step) first.
std::vector<std::string> list_checkpoints(const std::string& dir);

// Averages the parameters of checkpoints of one model element by element (fp32 result,
// double accumulation). Refuses inputs whose configs or tokenizers differ, naming the first
// difference. The output has the config, the tokenizer, the newest input's step and
// "averaged_from" (the inputs' file names): no Adam state, no data position or run options.
bool average_checkpoints(const std::vector<std::string>& inputs, const std::string& output,
                         std::string* error);
