// A read-only memory map of a whole file (page-aligned, so 64-byte aligned for rlm_model_open).
#ifndef RINGLM_TOOLS_MAPPED_FILE_H_
#define RINGLM_TOOLS_MAPPED_FILE_H_

#include <stddef.h>

#include <string>

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // false with *err set when the file cannot be opened or mapped, is empty, or is not a regular
  // file (directories, FIFOs, devices are refused without blocking: conv::open_regular_file).
  bool open(const std::string& path, std::string* err);
  const void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

#endif  // RINGLM_TOOLS_MAPPED_FILE_H_
