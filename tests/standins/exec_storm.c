/* Exec storm for the agent's process-event test: starts N short-lived processes (posix_spawn of
 * PROGRAM, /bin/true by default), at most P at a time, as fast as the machine allows, and waits
 * for every one. Each child is exactly one exec and one exit of a thread-group leader.
 * Prints "spawned=N failed=F seconds=S rate=R" (R = processes per second).
 * usage: exec_storm N [P [PROGRAM]] */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: exec_storm N [P [PROGRAM]]\n");
    return 2;
  }
  long n = strtol(argv[1], NULL, 10);
  long parallel = argc > 2 ? strtol(argv[2], NULL, 10) : 8;
  char* program = argc > 3 ? argv[3] : "/bin/true";
  if (n <= 0 || parallel <= 0) {
    fprintf(stderr, "exec_storm: N and P must be positive\n");
    return 2;
  }
  char* child_argv[] = {program, NULL};
  long spawned = 0, running = 0, failed = 0;
  double start = now_s();
  while (spawned < n || running > 0) {
    while (spawned < n && running < parallel) {
      pid_t pid;
      int err = posix_spawn(&pid, program, NULL, NULL, child_argv, environ);
      if (err != 0) {
        fprintf(stderr, "exec_storm: posix_spawn %s: error %d\n", program, err);
        return 1;
      }
      ++spawned;
      ++running;
    }
    int status;
    pid_t done = wait(&status);
    if (done < 0) {
      perror("exec_storm: wait");
      return 1;
    }
    --running;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  double took = now_s() - start;
  printf("spawned=%ld failed=%ld seconds=%.3f rate=%.0f\n", spawned, failed, took, (double)spawned / took);
  return failed ? 1 : 0;
}
