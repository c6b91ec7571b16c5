/* Overhead benchmark driver: times probed calls so the agent's cost per call can be measured.
 *   probe_bench uprobe N        N cuMemAlloc_v2+cuMemFree_v2 pairs on libcuda (4 uprobe hits each)
 *   probe_bench usdt N          N pytorch:malloc+free USDT pairs (2 probe hits each)
 *   probe_bench rate R S        R alloc/free pairs per second for S seconds (4R events/s)
 * Prints ns per pair. */
#define _SDT_HAS_SEMAPHORES 1
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>
#include <time.h>

unsigned short pytorch_malloc_semaphore __attribute__((unused, section(".probes")));
unsigned short pytorch_free_semaphore __attribute__((unused, section(".probes")));

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void pair(void)
{
	CUdeviceptr p;

	if (cuMemAlloc(&p, 256) == CUDA_SUCCESS)
		cuMemFree(p);
}

int main(int argc, char **argv)
{
	static char block[64];
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
		for (long i = 0; i < n; i++) {
			/* PyTorch's layout (devPtr, device, size, stream): a loop index as the device made a
			 * new allocator entry per call, filling the agent's table. */
			if (pytorch_malloc_semaphore)
				STAP_PROBE4(pytorch, malloc, (uint64_t)(uintptr_t)block, 0, (uint64_t)4096, (int64_t)0);
			if (pytorch_free_semaphore)
				STAP_PROBE1(pytorch, free, (uint64_t)(uintptr_t)block);
			__asm__ volatile("" ::: "memory");
		}
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
	fprintf(stderr, "usage: probe_bench uprobe N | usdt N | rate PAIRS_PER_S SECONDS\n");
	return 2;
}
