// The data-set files a user may point `train --data-dir` at: the KJV text's file (data::read_kjv_data: a
// window table of LZW streams), one .Z stream (data::unlzw), the verse lines (data::kjv_verses),
// scikit-learn's digits.csv.gz (data::load_sklearn_digits) and the MNIST package's JSON (data::load_mnist:
// 0.json is the input; 1.json is missing, which ends the read after 0.json is checked).
// Input: the first byte picks the reader (mod 5: 0 a .Z stream, 1 verse lines, 2 digits.csv.gz, 3 the KJV
// file, 4 MNIST), the rest is the file.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "data/data_file_error.h"
#include "data/kjv_text.h"
#include "data/lzw.h"
#include "data/mnist.h"
#include "data/sklearn_digits.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  if (size == 0) return 0;
  const std::span<const std::uint8_t> rest(data + 1, size - 1);
  const std::string_view text = fuzz::text_of(data + 1, size - 1);
  switch (data[0] % 5) {
    case 0:
      try {
        (void)data::unlzw(rest);
      } catch (const std::invalid_argument&) {
      }
      break;
    case 1:
      try {
        (void)data::kjv_verses(text, "fuzz");
      } catch (const data::DataFileError&) {
      }
      break;
    case 2: {
      const auto file = fuzz::scratch().fresh() / "digits.csv.gz";
      fuzz::write_file(file, text);
      try {
        (void)data::load_sklearn_digits(file);
      } catch (const data::DataFileError&) {
      }
      break;
    }
    case 3: {
      const auto file = fuzz::scratch().fresh() / "bible.data";
      fuzz::write_file(file, text);
      try {
        (void)data::read_kjv_data(file);
      } catch (const data::DataFileError&) {
      }
      break;
    }
    default: {
      const auto& dir = fuzz::scratch().fresh();
      fuzz::write_file(dir / "0.json", text);
      try {
        (void)data::load_mnist(dir);
      } catch (const data::DataFileError&) {
      }
      break;
    }
  }
  return 0;
}
