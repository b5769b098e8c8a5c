// Many training runs, `jobs` at a time on threads: what the study and the
// experiments train. Trainer objects share nothing, so every run is bitwise
// the same whatever the number of threads or the order they finish in.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "training/trainer.h"

namespace mpverify::training {

struct QueuedRun {
  TrainConfig config;
  std::filesystem::path dir;  // the run directory (what `train --out` writes); replaced
  std::string label;          // for progress lines ("o2-emu seed 3")
};

struct FinishedRun {
  nlohmann::json summary;  // the run's summary.json
  double wall_seconds = 0;
};

// Runs every QueuedRun (in the order given, `jobs` at a time) and returns
// their summaries in the same order. Each configuration is validated (a
// Trainer is built) before anything is written; the first failure stops the
// queue and is rethrown once the running runs end. `progress` (may be empty;
// called under a lock) gets one line per finished run: "[k/n] label: test
// accuracy 97.12%, 12.3 s" (or the final loss for models without accuracy).
//
// Resuming: with a `journal` path (the experiments and the study give
// RUNS/queue.json), the queue writes there, before training, every run's
// directory and configuration, and removes the journal when every run has
// finished. A queue started while the same journal is there (the previous
// attempt was killed) keeps each run whose summary.json (written last,
// atomically) holds its configuration, and trains the others again from
// their start (and every run with an extra_observer, which must see its
// training); a kept run's wall_seconds is 0. Since runs are seeded and
// share nothing, the directories are then byte-identical to an uninterrupted
// queue's. Without a journal, or with another queue's, every run directory
// is replaced.
//
// `on_start(resuming)` (may be empty) is called once, after every
// configuration was validated and before any file is written: `resuming`
// says whether this very queue's journal was found. Callers that clear a
// previous experiment's output do it there, and only when not resuming.
std::vector<FinishedRun> run_queue(const std::vector<QueuedRun>& runs, std::size_t jobs,
                                   const std::function<void(const std::string&)>& progress = {},
                                   const std::filesystem::path& journal = {},
                                   const std::function<void(bool resuming)>& on_start = {});

}  // namespace mpverify::training
