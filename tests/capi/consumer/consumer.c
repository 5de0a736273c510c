/* A tiny host built against an installed agentrt (find_package or pkg-config): opens a runtime, runs one turn
 * with the offline demo model, and checks the answer. usage: consumer <data dir> */
#include <stdio.h>
#include <string.h>

#include <agentrt.h>

int main(int argc, char** argv) {
  char config[512];
  char* out = NULL;
  agentrt_runtime* rt = NULL;
  int ok;
  if (argc != 2) return 2;
  if (agentrt_abi_version() != AGENTRT_ABI_VERSION) {
    fprintf(stderr, "ABI %u, header %d\n", agentrt_abi_version(), AGENTRT_ABI_VERSION);
    return 1;
  }
  snprintf(config, sizeof config, "{\"data_dir\":\"%s\",\"model\":{\"type\":\"demo\"}}", argv[1]);
  if (agentrt_runtime_open(&rt, config) != AGENTRT_OK ||
      agentrt_turn_start(&out, rt, "{\"threadId\":\"t1\",\"userId\":\"u1\",\"message\":{\"content\":\"hello\"}}") !=
          AGENTRT_OK) {
    fprintf(stderr, "failed: %s\n", agentrt_last_error());
    return 1;
  }
  {
    char turn_id[128] = "";
    const char* p = strstr(out, "\"turnId\":\"");
    if (p) sscanf(p + 10, "%127[^\"]", turn_id);
    agentrt_free(out);
    out = NULL;
    if (agentrt_turn_wait(&out, rt, turn_id, 10000) != AGENTRT_OK) {
      fprintf(stderr, "wait failed: %s\n", agentrt_last_error());
      return 1;
    }
  }
  ok = strstr(out, "\"status\":\"COMPLETED\"") != NULL;
  agentrt_free(out);
  agentrt_runtime_free(rt);
  printf("agentrt %s: %s\n", agentrt_version(), ok ? "turn completed" : "turn did not complete");
  return ok ? 0 : 1;
}
