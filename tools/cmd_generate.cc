#include <stdio.h>

#include "commands.h"

// Placeholder until the verb lands (issue 2/3); exits 2 so nothing mistakes it for success.
int cmd_generate(int, char**) {
  fprintf(stderr, "ringlm generate: not built yet\n");
  return 2;
}
