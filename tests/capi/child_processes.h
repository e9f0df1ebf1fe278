/* The processes this process has started and not yet reaped (running, or zombies): its
 * compiler processes, for the plain-C tests. Scans /proc for a parent pid equal to ours, so
 * children started by any thread count. */
#ifndef TINYMLIR_TESTS_CHILD_PROCESSES_H
#define TINYMLIR_TESTS_CHILD_PROCESSES_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Their count; the first `max` pids go to `pids` (which may be NULL). */
static int child_processes(int *pids, int max) {
  DIR *d = opendir("/proc");
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char path[300], text[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = 0;
    const char *paren = strrchr(text, ')'); /* the command name may hold spaces */
    char state;
    int parent = 0;
    if (paren && sscanf(paren + 1, " %c %d", &state, &parent) == 2 && parent == getpid()) {
      if (pids && n < max) pids[n] = atoi(e->d_name);
      ++n;
    }
  }
  closedir(d);
  return n;
}

#endif
