#include "mapped_file.h"

#include "convert/file_io.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

MappedFile::~MappedFile() {
  if (data_ && size_) munmap(data_, size_);
}

bool MappedFile::open(const std::string& path, std::string* err) {
  // A regular file only: a FIFO would block open() forever, a directory or device cannot be
  // mapped as a model (the message names what it is).
  const int fd = ringlm::internal::conv::open_regular_file(path, "", err);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *err = "cannot stat '" + path + "': " + strerror(errno);
    close(fd);
    return false;
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) {
    close(fd);
    *err = "'" + path + "' is empty";
    return false;
  }
  void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    *err = "cannot map '" + path + "': " + strerror(errno);
    size_ = 0;
    return false;
  }
  data_ = p;
  return true;
}
