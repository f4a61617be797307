// cli/serve.h — `./translate --serve [HOST:]PORT`: the translation service over HTTP/JSON
// (cli/serve.cpp). cli/translate.cpp loads the model, adds these options to its table and
// calls serve() when --serve is given.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cli/line_check.h"
#include "cli/options.h"
#include "toolkit/decode.h"

struct ServeOptions {
    std::string address;            // --serve: "" = stdin mode, else [HOST:]PORT
    std::string host = "127.0.0.1";  // parsed from address
    int port = 0;                    // 0: any free port (printed at start)
    int batch_wait_ms = 5;           // --batch-wait
    bool no_batching = false;        // --no-batching: each request decoded alone
    int max_request_lines = 1000;    // more: 413
    int64_t max_request_bytes = 4 << 20;   // body size; more: 413
    int max_request_beam = 16;       // per-request "beam" (and "nbest") at most this
    double request_timeout_s = 60;   // a request not answered by then: 503
    int threads = 64;                // HTTP connections served at once
};

// Adds --serve, --batch-wait and the limits to ./translate's option table.
void add_serve_options(Options* opts, ServeOptions* o);

// What the service translates with: a loaded model and its tokenizer, the server-wide
// decoding defaults and stdin mode's line rules.
struct ServeModel {
    Model* model;
    const Tokenizer* tok;
    DecodeOptions defaults;     // --beam, --nbest, --alpha, --max-len-a/b
    int batch_tokens;           // --batch-tokens
    LineRules rules;            // --max-input-tokens, --replace-invalid, --split-long, --split-sentences
    std::string model_path;
    std::vector<std::string> ensemble_paths;   // --ensemble: the other models' checkpoints
};

// Why this ./translate has no server ("" when it has one): it was built without cpp-httplib
// (HTTP=0, or Debian's libcpp-httplib-dev not found at build time; make info says which).
const char* serve_missing();

// Serves until SIGTERM or SIGINT (then stops accepting, answers the requests in flight and
// returns 0); 1 when the address cannot be bound, 2 on inconsistent options.
int serve(const ServeModel& m, const ServeOptions& o);
