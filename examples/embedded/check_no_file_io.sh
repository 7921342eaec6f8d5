#!/bin/sh
# CTest embedded_no_file_io: runs embedded_generate under
#   strace -f -e trace=open,openat,read,mmap
# and checks, in the log:
#  1. the program's marker is there: main() starts with read(-1, buf, 0) (= -1 EBADF), the
#     boundary between startup (the dynamic loader) and the program;
#  2. before it, every open/openat is the loader's: /etc/ld.so.cache or a shared library
#     (*.so, *.so.N), plus /proc|/sys files when a sanitizer runtime is linked (its own start-up);
#  3. after it: no open/openat at all, no read (the marker excepted), and every mmap anonymous
#     (MAP_ANONYMOUS, fd -1: thread stacks, malloc arenas of stdio); no file is touched;
#  4. no path anywhere names a model file (*.rlm, stories260K);
#  5. the program printed a continuation (a prefix of llama2.c's reference when the q8 model
#     agrees with it, which is reported, not required).
# usage: check_no_file_io.sh STRACE EXE REFERENCE LOG
set -u
strace=$1 exe=$2 ref=$3 log=$4
out=$("$strace" -f -e trace=open,openat,read,mmap -o "$log" "$exe" "Once upon a time" 32)
rc=$?
if [ $rc -ne 0 ]; then
  echo "FAILED: $exe under strace exited $rc"; cat "$log"; exit 1
fi
fail=0
marker=$(grep -n 'read(-1, ' "$log" | head -1 | cut -d: -f1)
if [ -z "$marker" ]; then
  echo "FAILED: no startup marker read(-1, ...) in the log"; cat "$log"; exit 1
fi
sanitizer=0
if grep -q 'lib\(asan\|ubsan\)\.so' "$log"; then sanitizer=1; fi

# 2. Startup opens.
head -n "$marker" "$log" | grep -E '(^|[0-9] +)(open|openat)\(' > "$log.startup-opens" || true
while IFS= read -r line; do
  path=$(printf '%s\n' "$line" | sed -n 's/.*open[a-z]*([^"]*"\([^"]*\)".*/\1/p')
  case "$path" in
    /etc/ld.so.cache) ;;
    *.so|*.so.[0-9]*) ;;
    /proc/*|/sys/*) [ $sanitizer -eq 1 ] || { echo "FAILED: startup opened $path"; fail=1; } ;;
    *) echo "FAILED: startup opened a non-library file: $line"; fail=1 ;;
  esac
done < "$log.startup-opens"

# 3. After the marker.
tail -n "+$((marker + 1))" "$log" > "$log.after"
if grep -E '(^|[0-9] +)(open|openat)\(' "$log.after"; then
  echo "FAILED: files opened after startup (above)"; fail=1
fi
if grep -E '(^|[0-9] +)read\(' "$log.after"; then
  echo "FAILED: reads after startup (above)"; fail=1
fi
if grep -E '(^|[0-9] +)mmap\(' "$log.after" | grep -Ev 'MAP_ANONYMOUS[|A-Z_]*, -1, 0\)'; then
  echo "FAILED: file mmap after startup (above)"; fail=1
fi
# 4. Model files.
if grep -E '\.rlm"|stories260K' "$log"; then
  echo "FAILED: a model file appears in the trace (above)"; fail=1
fi
# 5. Output.
if [ -z "$out" ]; then
  echo "FAILED: no text generated"; fail=1
fi
if [ -f "$ref" ] && head -c 2000 "$ref" | tr -d '\n' | grep -qF "Once upon a time$(printf '%s' "$out" | tr -d '\n')"; then
  agrees="agrees with llama2.c's f32 reference"
else
  agrees="differs from llama2.c's f32 reference (q8 weights)"
fi

n_start=$(wc -l < "$log.startup-opens")
n_after=$(wc -l < "$log.after")
echo "embedded_generate: \"$out\" ($agrees)"
echo "strace: $(wc -l < "$log") syscalls traced; $n_start open(at)s before the marker (loader):"
sed 's/^/  /' "$log.startup-opens"
echo "after the marker ($n_after syscalls, no open/openat/read, mmaps anonymous only):"
sed 's/^/  /' "$log.after"
if [ $fail -ne 0 ]; then
  echo "embedded_no_file_io: FAILED (full log: $log)"; exit 1
fi
echo "embedded_no_file_io: passed"
