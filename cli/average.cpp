// cli/average.cpp — ./average: averages checkpoints of one model element by element (the
// paper's recipe: the last 5 checkpoints of a run), writing a checkpoint that ./translate reads.
//
//   ./average --out avg.safetensors runs/default/ckpt-*.safetensors
//   ./average --out avg.safetensors --last 5 runs/default      the last 5 checkpoints of a run
// Inputs whose configs or tokenizers differ are refused, naming the first difference, and so is
// one checkpoint given twice. The average's step is its newest input's. A write
// that fails (the checkpoint, or stdout: cli/text_io.h) is an error, exit 1.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/options.h"
#include "cli/text_io.h"
#include "model/checkpoint.h"
#include "toolkit/files.h"

// A checkpoint is written to a temporary file that is then renamed over --out, so --out must
// be a regular file or not exist (renaming over /dev/null or /dev/full, as root, would replace
// the device itself), and none of the inputs (its training state would be lost). Returns the
// exit status when it cannot be written, else -1.
static int check_target(const std::string& out, const std::vector<std::string>& inputs) {
    std::string target, err;
    if (!replacement_target(out, &target, &err)) {
        std::fprintf(stderr, "average: --out %s (checkpoints are written to a temporary file and renamed over it)\n",
                     err.c_str());
        return 1;
    }
    for (const std::string& in : inputs)
        if (same_file(out, in)) {
            std::fprintf(stderr, "average: --out %s is the input %s: averaging never replaces a checkpoint it "
                                 "reads (give another --out)\n", out.c_str(), in.c_str());
            return 2;
        }
    return -1;
}

// One checkpoint given twice (a.safetensors a.safetensors, or by another name) would weigh
// double in the average: a mistake, refused (exit 2). Else -1.
static int refuse_repeats(const std::vector<std::string>& inputs) {
    for (size_t i = 0; i < inputs.size(); i++)
        for (size_t j = 0; j < i; j++)
            if (same_file(inputs[i], inputs[j])) {
                std::fprintf(stderr, "average: %s and %s are the same checkpoint: it would count twice in the "
                                     "average (give each once)\n", inputs[j].c_str(), inputs[i].c_str());
                return 2;
            }
    return -1;
}

// --last N DIR: the last N checkpoints (ckpt-*.safetensors, by step) of the run folder DIR.
// Returns the exit status when they cannot be had (2: a usage error, 1: too few), else -1.
static int last_checkpoints(int n, std::vector<std::string>* inputs) {
    if (inputs->size() != 1) {
        std::fprintf(stderr, "average: --last N takes one run folder, not %zu arguments (see --help)\n", inputs->size());
        return 2;
    }
    const std::string dir = inputs->front();
    if (!std::filesystem::is_directory(dir)) {
        std::fprintf(stderr, "average: --last: %s is not a folder\n", dir.c_str());
        return 1;
    }
    std::vector<std::string> all = list_checkpoints(dir);
    if (all.size() < (size_t)n) {
        std::fprintf(stderr, "average: --last %d: %s holds %zu checkpoint%s (ckpt-*.safetensors)\n", n, dir.c_str(),
                     all.size(), all.size() == 1 ? "" : "s");
        return 1;
    }
    inputs->assign(all.end() - n, all.end());
    return -1;
}

int main(int argc, char** argv) {
    guard_stdout("average");
    std::string out;
    Options o("average", "Averages the parameters of checkpoints of the same model (fp32 result).");
    o.usage_suffix(" CHECKPOINT... | --last N DIR");
    o.add("--out", &out, "the averaged checkpoint to write", "FILE");
    int last = 0;
    o.add("--last", &last, "average the last N checkpoints of the run folder DIR (0: the files given)", at_least(0));
    std::vector<std::string> inputs;
    if (!o.parse(argc, argv, &inputs)) return o.exit_code();
    if (last > 0) {
        int status = last_checkpoints(last, &inputs);
        if (status >= 0) return status;
    }
    if (out.empty() || inputs.empty()) {
        std::fprintf(stderr, "average: need --out FILE and at least one checkpoint (see --help)\n");
        return 2;
    }
    for (const std::string& in : inputs)
        if (std::filesystem::is_directory(in)) {
            std::fprintf(stderr, "average: %s is a folder (--last N %s averages its last N checkpoints)\n", in.c_str(),
                         in.c_str());
            return 2;
        }
    if (int status = check_target(out, inputs); status >= 0) return status;
    if (int status = refuse_repeats(inputs); status >= 0) return status;
    std::string err;
    if (!average_checkpoints(inputs, out, &err)) {
        std::fprintf(stderr, "average: %s\n", err.c_str());
        return 1;
    }
    std::printf("averaged %zu checkpoints -> %s\n", inputs.size(), out.c_str());
    return 0;
}
