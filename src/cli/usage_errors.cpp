#include <stdexcept>

#include "cli/commands.h"
#include "data/data_file_error.h"

namespace mpverify::cli {

void with_usage_errors(const std::function<void()>& work) {
  try {
    work();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  } catch (const data::DataFileError& e) {
    throw UsageError(e.what());
  }
}

}  // namespace mpverify::cli
