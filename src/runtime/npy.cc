// NumPy .npy files: a header (a Python dict literal) and the raw data.
#include "ember/runtime/npy.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "bytes.h"
#include "ember/support/checked_math.h"
#include "ember/support/error.h"

namespace ember::runtime {

using bytes::get;
using bytes::put;

namespace {
const char* npy_descr(DType t) {
  switch (t) {
    case DType::Float32:
      return "<f4";
    case DType::Float64:
      return "<f8";
    case DType::Int32:
      return "<i4";
    case DType::Int64:
      return "<i8";
    case DType::Bool:
      return "|b1";
    case DType::Int8:
      return "|i1";
    case DType::UInt8:
      return "|u1";
    case DType::BFloat16:
      fail(
          "save_npy: NumPy has no bfloat16, so a .npy file cannot hold a bfloat16 tensor; "
          "cast it to float32 first (model files do hold bfloat16 weights)");
  }
  EMBER_CHECK(false, "unknown dtype");
}

// The value of `key` in NumPy's header dict ("{'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }"), as its raw text.
std::string npy_field(const std::string& header, const std::string& key, const std::string& where) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) fail(where, ": the .npy header has no '", key, "'");
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) fail(where, ": the .npy header is malformed");
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) fail(where, ": the .npy header is malformed");
  char open = header[start];
  size_t stop = open == '('    ? header.find(')', start)
                : open == '\'' ? header.find('\'', start + 1)
                               : header.find_first_of(",}", start);
  if (stop == std::string::npos) fail(where, ": the .npy header is malformed");
  if (open == '(' || open == '\'') ++stop;  // keep the closing character
  return header.substr(start, stop - start);
}
}  // namespace

NDArray load_npy(const std::string& path) {
  const std::string where = "'" + path + "'";
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open ", where, ": no such file, or it is not readable");
  char pre[10];
  if (!in.read(pre, 10) || std::memcmp(pre, "\x93NUMPY", 6) != 0)
    fail(where, " is not a .npy file (save arrays with numpy.save)");
  uint32_t header_len;
  int major = static_cast<unsigned char>(pre[6]);
  if (major == 1) {
    header_len = get<uint16_t>(pre + 8);
  } else if (major == 2 || major == 3) {
    char more[2];
    if (!in.read(more, 2)) fail(where, " is truncated");
    char len[4] = {pre[8], pre[9], more[0], more[1]};
    header_len = get<uint32_t>(len);
  } else {
    fail(where, " has .npy format version ", major, "; Ember reads versions 1 to 3");
  }
  if (header_len > (1u << 20)) fail(where, " has an impossibly long .npy header");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) fail(where, " is truncated");

  std::string descr = npy_field(header, "descr", where);
  DType dtype = DType::Float32;
  bool found = false;
  for (DType t : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool,
                  DType::Int8, DType::UInt8})
    if (descr == std::string("'") + npy_descr(t) + "'") {
      dtype = t;
      found = true;
    }
  if (!found)
    fail(where, " holds dtype ", descr,
         ", which Ember does not support; save a little-endian "
         "float32, float64, int32, int64, bool, int8 or uint8 array");
  if (npy_field(header, "fortran_order", where) != "False")
    fail(where, " is in Fortran order; save np.ascontiguousarray(a) instead");
  std::string shape_text = npy_field(header, "shape", where);
  Shape shape;
  for (size_t i = 1; i < shape_text.size();) {
    size_t j = shape_text.find_first_of(",)", i);
    std::string dim = shape_text.substr(i, j - i);
    if (dim.find_first_not_of(' ') != std::string::npos) {
      char* stop = nullptr;
      long long d = std::strtoll(dim.c_str(), &stop, 10);
      if (d < 0 || d > (1ll << 40)) fail(where, " has a bad shape ", shape_text);
      shape.push_back(d);
    }
    if (j == std::string::npos) break;
    i = j + 1;
  }
  // The data must be in the file: check its size before allocating for it.
  const int64_t bytes = checked_nbytes(shape, dtype_bytes(dtype), where + " (a .npy file)");
  const std::streamoff data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streamoff file_end = in.tellg();
  in.seekg(data_start);
  if (data_start < 0 || file_end < data_start || file_end - data_start < bytes)
    fail(where, " is truncated: its data is shorter than ", dtype_name(dtype), shape_str(shape),
         " (", bytes, " bytes)");
  NDArray t = NDArray::empty(shape, dtype);
  if (t.nbytes() > 0 &&
      !in.read(static_cast<char*>(t.data()), static_cast<std::streamsize>(t.nbytes())))
    fail(where, " is truncated: its data is shorter than ", dtype_name(dtype), shape_str(shape));
  return t;
}

void save_npy(const std::string& path, const NDArray& t) {
  if (!t.defined()) fail("save_npy: the tensor is undefined");
  std::string header =
      std::string("{'descr': '") + npy_descr(t.dtype()) + "', 'fortran_order': False, 'shape': (";
  const Shape& shape = t.shape();
  for (size_t i = 0; i < shape.size(); ++i)  // "(2, 3)", but "(2,)" for one dimension
    header += std::to_string(shape[i]) + (shape.size() == 1      ? ","
                                          : i + 1 < shape.size() ? ", "
                                                                 : "");
  header += "), }";
  // The data starts at a multiple of 64 bytes; the header ends with '\n'.
  size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string pre = "\x93NUMPY";
  pre += '\x01';
  pre += '\x00';
  put<uint16_t>(pre, static_cast<uint16_t>(header.size()));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot write '", path, "'");
  out << pre << header;
  out.write(static_cast<const char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
  if (!out.flush()) fail("cannot write '", path, "' (disk full?)");
}

}  // namespace ember::runtime
