/* Overhead benchmark driver: times probed calls so the agent's cost per call can be measured.
 *   probe_bench uprobe N        N cuMemAlloc_v2+cuMemFree_v2 pairs on libcuda (4 uprobe hits each)
 *   probe_bench usdt N          N pytorch:malloc+free USDT pairs (2 probe hits each)
 *   probe_bench rate R S        R alloc/free pairs per second for S seconds (4R events/s)
 *   probe_bench paced KIND R S  R calls per second for S seconds on this thread, KIND:
 *                               uprobe (a driver call: cuMemAlloc_v2 or cuMemFree_v2, entry and
 *                               return probe), usdt (one pytorch:malloc or pytorch:free hit),
 *                               tcp (one 1-byte send() on a loopback connection: one
 *                               tcp_sendmsg_locked), conn (a loopback connection opened, accepted
 *                               and closed at both ends), syscall (one getppid(), which no probe
 *                               watches); prints "calls=N wall_s=W thread_cpu_s=C"
 * The others print ns per pair. */
#define _GNU_SOURCE /* accept4 */
#define _SDT_HAS_SEMAPHORES 1
#include <arpa/inet.h>
#include <cuda.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

unsigned short pytorch_malloc_semaphore __attribute__((unused, section(".probes")));
unsigned short pytorch_free_semaphore __attribute__((unused, section(".probes")));

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double thread_cpu(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void pair(void)
{
	CUdeviceptr p;

	if (cuMemAlloc(&p, 256) == CUDA_SUCCESS)
		cuMemFree(p);
}

static void usdt_pair(void)
{
	static char block[64];

	/* PyTorch's layout (devPtr, device, size, stream): a loop index as the device made a new
	 * allocator entry per call, filling the agent's table. */
	if (pytorch_malloc_semaphore)
		STAP_PROBE4(pytorch, malloc, (uint64_t)(uintptr_t)block, 0, (uint64_t)4096, (int64_t)0);
	if (pytorch_free_semaphore)
		STAP_PROBE1(pytorch, free, (uint64_t)(uintptr_t)block);
	__asm__ volatile("" ::: "memory");
}

/* A listening loopback socket on a port the kernel picks; ADDR receives its address. */
static int loopback_listener(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);

	*addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (lfd < 0 || bind(lfd, (struct sockaddr *)addr, sizeof(*addr)) || listen(lfd, 16) ||
	    getsockname(lfd, (struct sockaddr *)addr, &len)) {
		perror("listen");
		exit(1);
	}
	return lfd;
}

/* One connection through LFD: connect (the handshake completes on loopback before it returns),
 * accept4 (as servers' event loops call it), close the client's end, then the server's. */
static void connection(int lfd, const struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), cfd;

	if (fd < 0 || connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) ||
	    (cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0) {
		perror("connection");
		exit(1);
	}
	close(fd);
	close(cfd);
}

/* A loopback connection whose other end, a child process, reads and discards until EOF. */
static int loopback_sender(pid_t *reader)
{
	struct sockaddr_in addr;
	int lfd = loopback_listener(&addr), fd;

	*reader = fork();
	if (*reader == 0) {
		static char buf[65536];
		int cfd = accept(lfd, NULL, NULL);

		while (cfd >= 0 && read(cfd, buf, sizeof(buf)) > 0)
			;
		_exit(0);
	}
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (*reader < 0 || fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		perror("connect");
		exit(1);
	}
	close(lfd);
	return fd;
}

/* Makes RATE calls a second for SECONDS: every millisecond the calls due by then, then a sleep
 * to the next millisecond, so the thread's CPU time is the calls' own plus the wake-ups. When the
 * calls take longer than their share of a millisecond it never sleeps: the rate printed is then
 * the most this thread reaches. */
static int paced(const char *kind, double rate, double seconds)
{
	int uprobe = !strcmp(kind, "uprobe"), usdt = !strcmp(kind, "usdt"), tcp = -1, lfd = -1;
	struct sockaddr_in addr;
	pid_t reader = -1;
	long calls = 0;
	double start, cpu0, t;
	struct timespec tick;

	if (!strcmp(kind, "tcp"))
		tcp = loopback_sender(&reader);
	if (!strcmp(kind, "conn"))
		lfd = loopback_listener(&addr);
	cpu0 = thread_cpu();
	start = now();
	clock_gettime(CLOCK_MONOTONIC, &tick);
	while ((t = now() - start) < seconds) {
		long due = (long)(rate * t) + 1;

		while (calls < due) {
			if (uprobe) {
				pair(); /* alloc and free: two calls */
				calls += 2;
			} else if (usdt) {
				usdt_pair(); /* malloc and free */
				calls += 2;
			} else if (tcp >= 0) {
				if (send(tcp, "v", 1, 0) != 1) {
					perror("send");
					return 1;
				}
				calls++;
			} else if (lfd >= 0) {
				connection(lfd, &addr);
				calls++;
			} else {
				syscall(SYS_getppid);
				calls++;
			}
		}
		tick.tv_nsec += 1000000;
		if (tick.tv_nsec >= 1000000000) {
			tick.tv_nsec -= 1000000000;
			tick.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &tick, NULL);
	}
	t = now() - start;
	printf("calls=%ld wall_s=%.6f thread_cpu_s=%.6f\n", calls, t, thread_cpu() - cpu0);
	if (tcp >= 0) {
		close(tcp);
		waitpid(reader, NULL, 0);
	}
	if (lfd >= 0)
		close(lfd);
	return 0;
}

int main(int argc, char **argv)
{
	double start;
	long n;

	if (argc == 3 && !strcmp(argv[1], "uprobe")) {
		n = atol(argv[2]);
		start = now();
		for (long i = 0; i < n; i++)
			pair();
		printf("%.1f ns per pair\n", (now() - start) * 1e9 / (double)n);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "usdt")) {
		n = atol(argv[2]);
		start = now();
		for (long i = 0; i < n; i++)
			usdt_pair();
		printf("%.1f ns per pair\n", (now() - start) * 1e9 / (double)n);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "rate")) {
		long rate = atol(argv[2]);
		double seconds = atof(argv[3]), next;

		start = now();
		next = start;
		for (long i = 0; now() - start < seconds; i++) {
			pair();
			next += 1.0 / (double)rate;
			while (now() < next) {
				struct timespec ts = { 0, 50000 };
				nanosleep(&ts, NULL);
			}
		}
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "paced") &&
	    (!strcmp(argv[2], "uprobe") || !strcmp(argv[2], "usdt") || !strcmp(argv[2], "tcp") ||
	     !strcmp(argv[2], "conn") || !strcmp(argv[2], "syscall")))
		return paced(argv[2], atof(argv[3]), atof(argv[4]));
	fprintf(stderr, "usage: probe_bench uprobe N | usdt N | rate PAIRS_PER_S SECONDS |"
		" paced uprobe|usdt|tcp|conn|syscall CALLS_PER_S SECONDS\n");
	return 2;
}
