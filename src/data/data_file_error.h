// The error a data loader throws when a data set's files are missing or not
// what they should be. Its message names the file (and the line or byte
// where the problem is) and, for a missing file, the command that installs
// it. The CLI turns it into exit code 2: it is bad setup, not a bug.
#pragma once

#include <stdexcept>
#include <string>

namespace mpverify::data {

class DataFileError : public std::runtime_error {
 public:
  explicit DataFileError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace mpverify::data
