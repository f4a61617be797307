// curves.h — training curves as a picture: ./train's --out/curves.svg, drawn from log.csv
// itself (redrawn at each evaluation and at the end of a run), so the figure holds exactly
// the log's data and a resumed run (which appends to the same log.csv) continues the curve.
//
// log.csv is read by column name (event, step, train_loss, lr, dev_loss, bleu_dev,
// bleu_test, elapsed_s; other columns and any event name are accepted): a value goes to the
// series of its column whatever the row's event; empty or non-finite values are left out.
// Two panels share the step axis: (1) training loss and dev loss (left axis), dev BLEU and
// test BLEU (right axis) when the log has them; (2) the learning rate (left axis) and the wall
// time, elapsed_s (right axis), which every row has: one point per row of the log.
// Each series is one <polyline data-series="COLUMN" data-points="N">, its points in log order.
#pragma once
#include <string>

// The SVG document for the text of a log.csv; "" + *error when it has no header with a step
// column or a row cannot be read.
std::string training_curves_svg(const std::string& log_csv, std::string* error);
// Reads log_path and writes svg_path (atomically); false + *error naming the file.
bool draw_training_curves(const std::string& log_path, const std::string& svg_path,
                          std::string* error);
