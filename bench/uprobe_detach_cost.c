// What removing uprobes costs, the two ways a BPF program can hold them: N perf-event links (one
// uprobe each, what libbpf 1.1's bpf_program__attach_uprobe_opts and _attach_usdt make) closed
// from THREADS threads; N uprobe_multi links of one offset each (Linux >= 6.6), closed the same
// way; and one uprobe_multi link with all N offsets.
// No process maps FILE, so no breakpoint is written: only the registration is timed.
//   cc -O2 -o /tmp/uprobe_detach_cost bench/uprobe_detach_cost.c -lbpf -lpthread
//   cp /usr/bin/true /tmp/probed && /tmp/uprobe_detach_cost /tmp/probed 0x2600 40 1   (root)
// OFFSET must lie in FILE's .text with room for N * 16 bytes (objdump -h).
#include <bpf/bpf.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// From the kernel's uapi (include/uapi/linux/bpf.h, Linux 6.6): Debian 12's headers predate them.
enum { kTraceUprobeMulti = 48 };
struct link_create_uprobe_multi {
  __u32 prog_fd, target_fd, attach_type, flags;
  __aligned_u64 path, offsets, ref_ctr_offsets, cookies;
  __u32 cnt, multi_flags, pid;
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static int load(enum bpf_attach_type expected) {  // r0 = 0; exit
  const struct bpf_insn insns[] = {{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0}, {.code = BPF_JMP | BPF_EXIT}};
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = expected);
  int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "detach_cost", "GPL", insns, 2, &opts);
  if (fd < 0) perror("bpf_prog_load"), exit(1);
  return fd;
}

static int *links, nlinks, nthreads;

static void *close_some(void *arg) {
  for (int i = (int)(long)arg; i < nlinks; i += nthreads) close(links[i]);
  return NULL;
}

static void close_all(void) {  // links[] from nthreads threads, each every nthreads-th
  pthread_t th[64];
  for (long k = 0; k < nthreads; k++) pthread_create(&th[k], NULL, close_some, (void *)k);
  for (int k = 0; k < nthreads; k++) pthread_join(th[k], NULL);
}

static void perf_links(const char *file, unsigned long off0) {
  int prog = load(0), type;
  FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
  if (!f || fscanf(f, "%d", &type) != 1) perror("uprobe pmu type"), exit(1);
  fclose(f);
  double t0 = now();
  for (int i = 0; i < nlinks; i++) {
    struct perf_event_attr a = {.size = sizeof(a), .type = type, .config1 = (unsigned long)file,
                                .config2 = off0 + 16 * i};
    int pfd = syscall(SYS_perf_event_open, &a, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
    if (pfd < 0) perror("perf_event_open"), exit(1);
    links[i] = bpf_link_create(prog, pfd, BPF_PERF_EVENT, NULL);
    if (links[i] < 0) perror("bpf_link_create"), exit(1);
    close(pfd);  // the link holds the event
  }
  double t1 = now();
  close_all();
  double t2 = now();
  printf("perf links:   %d uprobes, attach %.3f s, close from %d thread(s) %.3f s (%.1f ms a link)\n", nlinks,
         t1 - t0, nthreads, t2 - t1, (t2 - t1) * 1e3 / nlinks);
}

static int create_multi(int prog, const char *file, const unsigned long *offsets, int cnt) {
  struct link_create_uprobe_multi a;
  memset(&a, 0, sizeof(a));
  a.prog_fd = prog;
  a.attach_type = kTraceUprobeMulti;
  a.path = (unsigned long)file;
  a.offsets = (unsigned long)offsets;
  a.cnt = cnt;
  int fd = syscall(SYS_bpf, BPF_LINK_CREATE, &a, sizeof(a));
  if (fd < 0) perror("BPF_LINK_CREATE uprobe_multi"), exit(1);
  return fd;
}

static void multi_links(const char *file, unsigned long off0) {
  int prog = load((enum bpf_attach_type)kTraceUprobeMulti);
  unsigned long *offsets = calloc(nlinks, sizeof(*offsets));
  for (int i = 0; i < nlinks; i++) offsets[i] = off0 + 16 * i;
  double t0 = now();
  for (int i = 0; i < nlinks; i++) links[i] = create_multi(prog, file, &offsets[i], 1);
  double t1 = now();
  close_all();
  double t2 = now();
  printf("uprobe_multi: %d links of one uprobe, attach %.3f s, close from %d thread(s) %.3f s (%.1f ms a link)\n",
         nlinks, t1 - t0, nthreads, t2 - t1, (t2 - t1) * 1e3 / nlinks);
  t0 = now();
  int fd = create_multi(prog, file, offsets, nlinks);
  t1 = now();
  close(fd);
  t2 = now();
  printf("uprobe_multi: one link of %d uprobes, attach %.3f s, close %.3f s\n", nlinks, t1 - t0, t2 - t1);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s FILE OFFSET N THREADS\n", argv[0]);
    return 2;
  }
  nlinks = atoi(argv[3]);
  nthreads = atoi(argv[4]);
  if (nlinks < 1 || nthreads < 1 || nthreads > 64) {
    fprintf(stderr, "N >= 1, 1 <= THREADS <= 64\n");
    return 2;
  }
  links = calloc(nlinks, sizeof(*links));
  perf_links(argv[1], strtoul(argv[2], NULL, 0));
  multi_links(argv[1], strtoul(argv[2], NULL, 0));
  return 0;
}
