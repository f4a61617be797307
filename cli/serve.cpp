// cli/serve.cpp — `./translate --serve [HOST:]PORT`: a translation service over HTTP/JSON
// with dynamic batching. HTTP is Debian's cpp-httplib (httplib.h): the request parser, a
// thread pool of connections, keep-alive, body-size limits and timeouts.
//
//   POST /translate   OpenNMT-py's REST format: [{"src": "text", "id": 1}, ...] ->
//                     [[{"src": ..., "tgt": ..., "n_best": N, "pred_score": S}, ...], ...]
//                     (N lists, the k-th holding every item's k-th best); optional per-request
//                     "beam", "nbest", "alpha", and "sampling" ("topk:K" | "topp:P") with
//                     "temperature" and "seed", in the items (the same in every item that sets
//                     them), within the server's limits. Item i's sample draws from stream i
//                     (its pieces: i * 2^32 + piece), as line i of ./translate --sampling does,
//                     whatever the request is batched with
//   GET /health       200 {"status": "ok", ...} once the model is loaded (queued lines, requests
//                     answered, requests timed out and how many of their sources were never
//                     decoded: a timed-out request is dropped, toolkit/batch_queue.h)
//   GET /info         the model's config, vocabulary size, device, precision, limits, version
//
// Threads: cpp-httplib's pool runs the handlers, which check and encode a request's lines
// (cli/line_check.h: stdin mode's rules), queue them as one job (toolkit/batch_queue.h) and
// wait. The calling thread (the one that loaded the Model) is the only one that decodes:
// it takes queued jobs together, up to --batch-tokens or --batch-wait, whichever comes first.
// Errors are JSON {"error": "..."}: 400 bad JSON, types, values, UTF-8 or line length
// (naming the item), 413 body or line count over the limits, 404 unknown path, 503 a request
// not answered within --request-timeout, or whose batch ran out of memory (the device's or the
// host's: that batch's requests get the error, the server goes on with the next). SIGTERM /
// SIGINT: stop accepting, answer the requests in flight, return 0.
// Built without cpp-httplib (the Makefile's HTTP=0, chosen when httplib.h is not found, as on a
// GPU machine's image), the options stay and --serve is refused with a message.
#include "cli/serve.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>

#include "toolkit/batch_queue.h"
#include "toolkit/files.h"   // starts_with_utf8_bom
#include "toolkit/json.h"
#include "toolkit/numbers.h"

void add_serve_options(Options* opts, ServeOptions* o) {
    opts->section("server (--serve)");
    opts->add_custom("--serve", "[HOST:]PORT", "serve HTTP/JSON instead of reading stdin (host 127.0.0.1 unless given; port 0: any free one)",
                     [o] { return o->address.empty() ? std::string("off") : o->address; },
                     [o](const std::string& s) {
                         size_t colon = s.rfind(':');
                         std::string host = colon == std::string::npos ? "127.0.0.1" : s.substr(0, colon);
                         std::string port = colon == std::string::npos ? s : s.substr(colon + 1);
                         // [::1]:8080, IPv6's form: the brackets dropped ("[]" is no host: refused)
                         if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
                         int number = 0;
                         if (host.empty() || parse_decimal(port, &number, "") != Decimal::ok || number > 65535)
                             return false;
                         o->address = s;
                         o->host = host;
                         o->port = number;
                         return true;
                     });
    opts->add("--batch-wait", &o->batch_wait_ms, "ms a batch waits for more lines (until --batch-tokens)", in_range(0, 10000));
    opts->add_flag("--no-batching", &o->no_batching, "decode each request alone (for comparison)");
    opts->add("--max-request-lines", &o->max_request_lines, "lines per request (more: 413)", in_range(1, 1000000));
    opts->add("--max-request-bytes", &o->max_request_bytes, "request body size (more: 413)", in_range(1, 1LL << 32));
    opts->add("--max-request-beam", &o->max_request_beam, "largest per-request beam and nbest", in_range(1, 64));
    Bounds timeout = in_range(0, 1e6);   // (0, 11 days]: a deadline that a clock can hold
    timeout.lo_open = true;
    opts->add("--request-timeout", &o->request_timeout_s, "seconds from a request's body read to its translation, parsing included (then 503)",
              timeout);
    opts->add("--serve-threads", &o->threads, "HTTP connections served at once", in_range(1, 4096));
}

#ifndef TRANSFORMER_HTTP
const char* serve_missing() {
    return "--serve: this ./translate was built without cpp-httplib (Debian's libcpp-httplib-dev); "
           "install it and rebuild (make info)";
}

int serve(const ServeModel&, const ServeOptions&) {
    std::fprintf(stderr, "translate: %s\n", serve_missing());
    return 2;
}
#else
#include <httplib.h>

// The version of this service's API (the request and response formats above).
static const char* kServeApiVersion = "1";

const char* serve_missing() { return ""; }

namespace {

// A number as JSON text; digits = 9 round-trips a float, 7 shows a float option as typed.
std::string json_number(double v, int digits = 9) {
    if (!std::isfinite(v)) return "null";
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    return buf;
}

// A JSON string of text that may hold bytes not ours: JSON is UTF-8 (RFC 8259), and a message
// can echo a request's raw bytes (an unknown key, a path) or a file name that is not.
std::string json_text(const std::string& s) { return json_quote(replace_invalid_utf8(s)); }

std::string json_error(const std::string& message) { return "{\"error\": " + json_text(message) + "}"; }

// An HTTP status and, for an error, its message.
struct Status {
    int code = 200;
    std::string message;
};
Status fail(int code, std::string message) { return Status{code, std::move(message)}; }

// One parsed POST /translate request.
struct TranslateRequest {
    std::vector<std::string> src;                    // the items' text, as checked (clean)
    std::vector<std::vector<std::vector<int>>> pieces;   // per item: its pieces' token ids
    DecodeOptions opt;
};

// Reads an optional per-request option from an item: a number (an integer when `integer`)
// within lo..hi; it must agree with the value another item gave (*seen, *first_item).
Status read_option(const Json& v, const std::string& key, int item, bool integer, double lo, double hi,
                   double* value, int* first_item) {
    std::string where = "item " + std::to_string(item) + ": \"" + key + "\"";
    std::string range = std::to_string((long)lo) + ".." + (hi == (long)hi ? std::to_string((long)hi) : json_number(hi));
    if (v.type != Json::NUMBER || (integer && v.number != std::floor(v.number)) || !(v.number >= lo && v.number <= hi))
        return fail(400, where + " must be " + (integer ? "an integer" : "a number") + " in " + range);
    if (*first_item && *value != v.number)
        return fail(400, where + " is " + json_number(v.number) + ", item " + std::to_string(*first_item) +
                             " said " + json_number(*value) + " (options apply to the whole request)");
    if (!*first_item) *first_item = item;
    *value = v.number;
    return Status{};
}

// Reads an item's "sampling": "topk:K" or "topp:P", the same in every item that gives it.
Status read_sampling(const Json& v, int item, std::string* value, int* first_item) {
    const std::string where = "item " + std::to_string(item) + ": \"sampling\"";
    DecodeOptions check;
    if (v.type != Json::STRING || !parse_sampling(v.str, &check))
        return fail(400, where + " must be \"topk:K\" (K in 1..1000000) or \"topp:P\" (0 < P <= 1)");
    if (*first_item && *value != v.str)
        return fail(400, where + " is " + json_quote(v.str) + ", item " + std::to_string(*first_item) + " said " +
                             json_quote(*value) + " (options apply to the whole request)");
    if (!*first_item) *first_item = item;
    *value = v.str;
    return Status{};
}

// The keys an item may have.
constexpr const char* kItemKeys[] = {"src", "id", "beam", "nbest", "alpha", "sampling", "temperature", "seed"};
constexpr size_t kItemKeyCount = sizeof kItemKeys / sizeof kItemKeys[0];

// Whether an item may have this key.
bool known_key(const std::string& key) {
    for (const char* k : kItemKeys)
        if (key == k) return true;
    return false;
}

// "src, id, beam, ...": the keys for a message.
std::string item_keys_text() {
    std::string out;
    for (const char* k : kItemKeys) out += (out.empty() ? "" : ", ") + std::string(k);
    return out;
}

// Parses and checks a POST /translate body into *req. A UTF-8 byte-order mark before the JSON
// is ignored (RFC 8259 8.1 allows it; Python's json.loads of bytes does the same), as
// ./translate drops one at the start of its input files: it is blanked to spaces, not erased,
// so that a parse error's byte offset still counts the body's bytes as sent.
Status parse_request(std::string body, const ServeModel& m, const ServeOptions& o, TranslateRequest* req) {
    if (starts_with_utf8_bom(body)) body.replace(0, 3, "   ");
    Json root;
    std::string err;
    // At most --max-request-lines items of the known keys: more values are refused while
    // parsing, before they take memory (413 when the body is a well-formed start of an array).
    const size_t max_values = 1 + (size_t)o.max_request_lines * (1 + kItemKeyCount);
    if (!json_parse(body, &root, &err, max_values)) {
        if (err.rfind("too many values", 0) == 0)
            return fail(413, "more than --max-request-lines " + std::to_string(o.max_request_lines) +
                                 " lines of at most " + std::to_string(kItemKeyCount) + " keys each");
        return fail(400, "malformed JSON: " + err);
    }
    if (root.type != Json::ARRAY)
        return fail(400, "the body must be a JSON array of {\"src\": TEXT} objects (OpenNMT-py's REST format)");
    if ((int64_t)root.items.size() > o.max_request_lines)
        return fail(413, std::to_string(root.items.size()) + " lines, more than --max-request-lines " +
                             std::to_string(o.max_request_lines));
    double beam = m.defaults.beam, nbest = m.defaults.nbest, alpha = m.defaults.alpha;
    double temperature = 1, seed = 1;
    std::string sampling;
    int beam_from = 0, nbest_from = 0, alpha_from = 0, temperature_from = 0, seed_from = 0, sampling_from = 0;
    for (size_t i = 0; i < root.items.size(); i++) {
        const Json& item = root.items[i];
        const int n = (int)i + 1;
        const std::string where = "item " + std::to_string(n);
        if (item.type != Json::OBJECT) return fail(400, where + ": must be an object {\"src\": TEXT}");
        const Json* src = item.get("src");
        if (!src) return fail(400, where + ": no \"src\"");
        if (src->type != Json::STRING) return fail(400, where + ": \"src\" must be a string");
        // Unknown keys first: of the 8 known ones a key given twice shows within the first 9 (an item
        // of 150,000 distinct keys had taken 28 s of comparing each with each, below).
        for (const auto& kv : item.members)
            if (!known_key(kv.first))
                return fail(400, where + ": unknown key \"" + kv.first +
                                     "\" (known: " + item_keys_text() + ")");
        for (size_t k = 0; k < item.members.size(); k++)
            for (size_t j = 0; j < k; j++)
                if (item.members[j].first == item.members[k].first)
                    return fail(400, where + ": key \"" + item.members[k].first + "\" given twice");
        for (const auto& kv : item.members) {
            Status s;
            if (kv.first == "beam") s = read_option(kv.second, kv.first, n, true, 1, o.max_request_beam, &beam, &beam_from);
            else if (kv.first == "nbest") s = read_option(kv.second, kv.first, n, true, 1, o.max_request_beam, &nbest, &nbest_from);
            else if (kv.first == "alpha") s = read_option(kv.second, kv.first, n, false, 0, 10, &alpha, &alpha_from);
            else if (kv.first == "sampling") s = read_sampling(kv.second, n, &sampling, &sampling_from);
            else if (kv.first == "temperature")
                s = read_option(kv.second, kv.first, n, false, 0, 100, &temperature, &temperature_from);
            else if (kv.first == "seed")   // to 2^53 - 1: past it a JSON number is not exact (2^53 + 1 is 2^53)
                s = read_option(kv.second, kv.first, n, true, 0, 9007199254740991.0, &seed, &seed_from);
            if (s.code != 200) return s;
        }
        req->pieces.emplace_back();
        req->src.emplace_back();
        if (!check_line(*m.tok, src->str, m.rules, where, &req->pieces.back(), &err, &req->src.back()))
            return fail(400, err);
    }
    req->opt = m.defaults;
    if (!sampling.empty()) {   // one token drawn a step: beam 1 (the server's default beam gives way)
        if ((beam_from && beam != 1) || (nbest_from && nbest != 1))
            return fail(400, "item " + std::to_string(beam_from && beam != 1 ? beam_from : nbest_from) +
                                 ": \"sampling\" draws one token per step: \"beam\" and \"nbest\" must be 1");
        beam = nbest = 1;
        parse_sampling(sampling, &req->opt);
        req->opt.temperature = (float)temperature;
        req->opt.seed = (uint64_t)seed;
    } else if (temperature_from || seed_from) {
        return fail(400, "item " + std::to_string(temperature_from ? temperature_from : seed_from) + ": \"" +
                             (temperature_from ? "temperature" : "seed") + "\" applies to sampling: give \"sampling\" too");
    }
    // The server's --nbest gives way to a smaller "beam", as its --beam to "sampling": a request
    // for a greedy search had been refused for an "nbest" it never gave.
    if (!nbest_from && nbest > beam) nbest = beam;
    if (nbest > beam)
        return fail(400, "\"nbest\" " + json_number(nbest) + " is more than \"beam\" " + json_number(beam) +
                             " (n-best lists come from the beam)");
    if (!((float)temperature > 0)) return fail(400, "item " + std::to_string(temperature_from) + ": \"temperature\" must be more than 0");
    req->opt.beam = (int)beam;
    req->opt.nbest = (int)nbest;
    req->opt.alpha = (float)alpha;
    return Status{};
}

// The OpenNMT-py response: nbest lists, the k-th holding each item's k-th best translation
// (its last when it has fewer). A line translated in pieces (--split-long) answers as
// ./translate does: its pieces' k-th bests joined (toolkit/decode.h: join_pieces).
std::string format_response(const ServeModel& m, const TranslateRequest& req, const DecodeJob& job) {
    const int nbest = req.opt.nbest;
    std::vector<std::vector<JoinedHypothesis>> joined;   // per item
    size_t h = 0;   // index of the item's first piece in job.hyps
    for (size_t i = 0; i < req.src.size(); h += req.pieces[i].size(), i++)
        joined.push_back(join_pieces(*m.tok, job.hyps, h, req.pieces[i].size(), req.opt.alpha));
    std::string out = "[";
    for (int k = 0; k < nbest; k++) {
        out += k ? ", [" : "[";
        for (size_t i = 0; i < req.src.size(); i++) {
            const JoinedHypothesis& best = joined[i][std::min(joined[i].size() - 1, (size_t)k)];
            out += (i ? ", " : "") + std::string("{\"src\": ") + json_quote(req.src[i]) + ", \"tgt\": " +
                   json_quote(best.text) + ", \"n_best\": " + std::to_string(nbest) + ", \"pred_score\": " +
                   json_number(best.score) + "}";
        }
        out += "]";
    }
    return out + "]";
}

// ["a", "b"]: strings as a JSON list.
static std::string json_list(const std::vector<std::string>& items) {
    std::string out = "[";
    for (const std::string& s : items) out += (out.size() > 1 ? ", " : "") + json_text(s);
    return out + "]";
}

std::string info_json(const ServeModel& m, const ServeOptions& o) {
    const Backend& b = *m.model->backend;
    return std::string("{\"version\": ") + json_quote(kServeApiVersion) +
           ", \"http\": " + json_quote(std::string("cpp-httplib ") + CPPHTTPLIB_VERSION) +
           ", \"model\": " + json_text(m.model_path) + ", \"ensemble\": " + json_list(m.ensemble_paths) +
           ", \"config\": " + config_to_json(m.model->cfg) +
           ", \"vocab_size\": " + std::to_string(m.tok->vocab_size()) +
           ", \"device\": " + json_quote(b.device() == Device::CUDA ? "cuda" : "cpu") +
           ", \"precision\": " + json_quote(precision_name(b.precision())) +
           ", \"defaults\": {\"beam\": " + std::to_string(m.defaults.beam) + ", \"nbest\": " +
           std::to_string(m.defaults.nbest) + ", \"alpha\": " + json_number(m.defaults.alpha, 7) +
           ", \"max_len_a\": " + json_number(m.defaults.max_len_a, 7) + ", \"max_len_b\": " +
           std::to_string(m.defaults.max_len_b) + "}" +
           ", \"limits\": {\"max_request_lines\": " + std::to_string(o.max_request_lines) +
           ", \"max_request_bytes\": " + std::to_string(o.max_request_bytes) +
           ", \"max_request_beam\": " + std::to_string(o.max_request_beam) +
           ", \"max_input_tokens\": " + std::to_string(m.rules.max_input_tokens) +
           ", \"split_long\": " + (m.rules.split_long ? "true" : "false") +
           ", \"split_sentences\": " + (m.rules.split_sentences ? "true" : "false") +
           ", \"replace_invalid\": " + (m.rules.replace_invalid ? "true" : "false") +
           ", \"request_timeout_s\": " + json_number(o.request_timeout_s) + "}" +
           ", \"batching\": {\"enabled\": " + (o.no_batching ? "false" : "true") +
           ", \"batch_tokens\": " + std::to_string(m.batch_tokens) +
           ", \"batch_wait_ms\": " + std::to_string(o.batch_wait_ms) + "}}";
}

// SIGTERM / SIGINT write a byte here; a watcher thread reads it and stops the server (the
// handler itself does only what is async-signal-safe).
int g_stop_pipe[2] = {-1, -1};
std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int sig) {
    g_stop_signal = sig;
    char c = 1;
    ssize_t r = write(g_stop_pipe[1], &c, 1);
    (void)r;
}

bool install_stop_handlers(std::string* err) {
    if (pipe(g_stop_pipe) != 0) {
        *err = std::string("cannot create a pipe: ") + std::strerror(errno);
        return false;
    }
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);   // a client gone before its answer is a failed send, not death
    return true;
}

void set_json(httplib::Response& res, int status, const std::string& body) {
    res.status = status;
    res.set_content(body, "application/json");
}

// What /health reports and the final line counts, updated by the handlers' threads.
struct ServeCounts {
    std::atomic<long> requests{0}, lines{0};
};

// The connection pool (--serve-threads), the body limit (--max-request-bytes) and the socket
// (*listening: the listening socket's descriptor, once bound).
void configure_server(httplib::Server& svr, const ServeOptions& o, int* listening) {
    const int threads = o.threads;
    svr.new_task_queue = [threads] { return new httplib::ThreadPool((size_t)threads); };
    svr.set_payload_max_length((size_t)o.max_request_bytes);
    svr.set_tcp_nodelay(true);
    // SO_REUSEADDR alone: httplib's default adds SO_REUSEPORT, with which a second server
    // could bind the same port and silently take half the connections.
    svr.set_socket_options([listening](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        *listening = sock;
    });
    svr.set_keep_alive_max_count(1000);
}

// POST /translate: check and encode the request, queue its lines as one job, wait for them.
// The body read here, whatever its Content-Type says (httplib itself caps one it would parse
// as a form, curl -d's default, at 8 KiB): up to --max-request-bytes, else httplib's 413.
void add_translate_route(httplib::Server& svr, const ServeModel& m, const ServeOptions& o, BatchQueue& queue,
                         ServeCounts& counts) {
    svr.Post("/translate", [&](const httplib::Request& http, httplib::Response& res,
                               const httplib::ContentReader& content) {
        if (http.is_multipart_form_data())
            return set_json(res, 415, json_error("send the JSON as the request body, not as multipart/form-data"));
        // --max-request-bytes also caps what httplib cannot cap by Content-Length: a chunked
        // body, a gzip one (counted inflated) and one without a length. Past the limit, the rest
        // of a chunked or gzip body is read and dropped, so that the connection's next request
        // starts where this body ends (httplib keeps the connection open after the answer); a
        // body without a length ends only with the connection, so reading stops at the limit
        // and the 413 goes out before the client closes.
        const bool unsized = !http.has_header("Content-Length") &&
                             http.get_header_value("Transfer-Encoding").find("chunked") == std::string::npos;
        std::string body;
        bool too_large = false;
        const bool read = content([&](const char* data, size_t n) {
            too_large = too_large || body.size() + n > (size_t)o.max_request_bytes;
            if (!too_large) body.append(data, n);
            return !(too_large && unsized);
        });
        if (too_large)
            return set_json(res, 413, json_error("request body larger than --max-request-bytes " +
                                                 std::to_string(o.max_request_bytes)));
        if (!read) return;
        // The clock starts once the body is in, before it is parsed and encoded: the timeout
        // bounds the client's whole wait after sending (parsing and encoding are part of it,
        // though small: 1,000 lines of 40 words in under 15 ms in test_serve.py), and no decoding
        // is spent on a client that gave up that long ago. Reading the body (the client's upload
        // speed) is not counted.
        auto deadline = DecodeJob::Clock::now() + std::chrono::duration_cast<DecodeJob::Clock::duration>(
                                                      std::chrono::duration<double>(o.request_timeout_s));
        TranslateRequest req;
        Status s = parse_request(std::move(body), m, o, &req);
        if (s.code != 200) return set_json(res, s.code, json_error(s.message));
        auto job = std::make_shared<DecodeJob>();
        job->opt = req.opt;
        job->lines = req.src.size();   // (its pieces are the sources: /health counts lines)
        for (size_t i = 0; i < req.pieces.size(); i++)
            for (size_t p = 0; p < req.pieces[i].size(); p++) job->add(req.pieces[i][p], ((uint64_t)i << 32) + p);
        if (!queue.run(job, deadline))
            return set_json(res, 503, json_error("not translated within --request-timeout " +
                                                 json_number(o.request_timeout_s) + " s"));
        if (!job->error.empty()) return set_json(res, 503, json_error("not translated: " + job->error));
        if (first_nan_logprob(job->hyps) >= 0) return set_json(res, 500, json_error(kNanLogprob));
        counts.requests++;
        counts.lines += (long)req.src.size();
        set_json(res, 200, format_response(m, req, *job));
    });
}

// GET /health, GET /info, POST /translate, and JSON answers to httplib's own errors (404, 413,
// 400 on a bad request line) and to an exception in a handler (500).
void add_routes(httplib::Server& svr, const ServeModel& m, const ServeOptions& o, BatchQueue& queue,
                ServeCounts& counts) {
    svr.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
        set_json(res, 200, "{\"status\": \"ok\", \"queued_lines\": " + std::to_string(queue.queued_lines()) +
                               ", \"requests\": " + std::to_string(counts.requests.load()) +
                               ", \"timed_out\": {\"requests\": " + std::to_string(queue.timed_out()) +
                               ", \"sources_not_decoded\": " + std::to_string(queue.timed_out_sources_not_decoded()) +
                               "}}");
    });
    svr.Get("/info", [info = info_json(m, o)](const httplib::Request&, httplib::Response& res) {
        set_json(res, 200, info);
    });
    add_translate_route(svr, m, o, queue, counts);
    svr.set_error_handler([&](const httplib::Request& http, httplib::Response& res) {
        if (!res.body.empty()) return;
        std::string msg = res.status == 404 ? "no such path: " + http.method + " " + http.path +
                                                  " (POST /translate, GET /health, GET /info)"
                        : res.status == 413 ? "request body larger than --max-request-bytes " +
                                                  std::to_string(o.max_request_bytes)
                                            : "HTTP status " + std::to_string(res.status);
        set_json(res, res.status, json_error(msg));
    });
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what += std::string(": ") + e.what();
        } catch (...) {
        }
        set_json(res, 500, json_error(what));
    });
}

// Binds --serve's address (port 0: any free one) and installs the stop handlers; the port
// bound, or -1 after saying why not.
int bind_server(httplib::Server& svr, const ServeModel& m, const ServeOptions& o, const int* listening) {
    int port = o.port;
    bool bound = port == 0 ? (port = svr.bind_to_any_port(o.host)) > 0 : svr.bind_to_port(o.host, port);
    if (!bound) {
        std::fprintf(stderr, "translate: cannot listen on %s:%d (%s)\n", o.host.c_str(), o.port,
                     errno ? std::strerror(errno) : "address not available");
        return -1;
    }
    // Debian's cpp-httplib (compiled, 0.11) listens with a backlog of 5 connections: a burst of
    // clients beyond it overflowed the accept queue and some had their connection reset (64
    // clients at once: 31 of 640 requests). listen() again on the bound socket widens it.
    if (*listening >= 0) (void)::listen(*listening, SOMAXCONN);
    std::string err;
    if (!install_stop_handlers(&err)) {
        std::fprintf(stderr, "translate: %s\n", err.c_str());
        return -1;
    }
    std::string shown_host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
    std::string models = m.model_path;
    for (const std::string& p : m.ensemble_paths) models += " + " + p;
    std::fprintf(stderr, "translate: serving %s on http://%s:%d (POST /translate, GET /health, GET /info)\n",
                 models.c_str(), shown_host.c_str(), port);
    std::fflush(stderr);
    return port;
}

}  // namespace

int serve(const ServeModel& m, const ServeOptions& o) {
    // A request that runs out of memory is answered with an error, not the end of the server:
    // the command-line programs' exit on a failed allocation is undone here, the host's (a
    // handler's is httplib's 500; the decoder's, its batch's 503) and the model's backends'.
    std::set_new_handler(nullptr);
    m.model->backend->throw_out_of_memory = true;
    for (Model* member : m.model->ensemble) member->backend->throw_out_of_memory = true;
    if (m.defaults.beam > o.max_request_beam) {
        std::fprintf(stderr, "translate: --beam %d is more than --max-request-beam %d\n", m.defaults.beam,
                     o.max_request_beam);
        return 2;
    }
    BatchQueue::Settings qs;
    qs.batch_tokens = m.batch_tokens;
    qs.wait = std::chrono::milliseconds(o.batch_wait_ms);
    qs.batching = !o.no_batching;
    BatchQueue queue(qs);
    ServeCounts counts;
    httplib::Server svr;
    int listening = -1;
    configure_server(svr, o, &listening);
    add_routes(svr, m, o, queue, counts);
    if (bind_server(svr, m, o, &listening) < 0) return 1;

    std::atomic<bool> listened{false};
    std::thread listener([&] {
        svr.listen_after_bind();   // returns after stop(), once every handler has answered
        listened = true;
        queue.close();
    });
    std::thread watcher([&] {
        char c;
        while (read(g_stop_pipe[0], &c, 1) < 0 && errno == EINTR) {
        }
        // httplib's stop() does nothing before the listener runs: a signal in the moment after
        // the "serving" line had been lost. Wait for it to run (or to have ended), then stop once.
        while (!svr.is_running() && !listened) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (!listened) svr.stop();
    });
    // until the queue is closed; --batch-tokens is sized for --beam (a request's larger beam: fewer)
    long batches = run_decoder(m.model, &queue, m.batch_tokens, m.defaults.sampling ? 1 : m.defaults.beam);
    listener.join();
    const int sig = g_stop_signal;
    if (!sig) on_stop_signal(0);   // the server ended by itself: release the watcher
    watcher.join();
    std::fprintf(stderr, "translate: stopped%s: %ld requests, %ld lines, %ld batches; %ld requests timed out "
                         "(%ld of their sources not decoded)\n",
                 sig == SIGTERM ? " (SIGTERM)" : sig == SIGINT ? " (SIGINT)" : " (the listening socket failed)",
                 counts.requests.load(), counts.lines.load(), batches, queue.timed_out(),
                 queue.timed_out_sources_not_decoded());
    return sig ? 0 : 1;
}
#endif   // TRANSFORMER_HTTP
