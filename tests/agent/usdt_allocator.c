/* A caching allocator in miniature with USDT probes shaped like PyTorch's (pytorch:malloc(ptr,
 * size), pytorch:free(ptr)) and the worker's (vigil:alloc_block_alloc/free(address, bytes),
 * vigil:alloc_snapshot(reserved, allocated, largest_free_block)), semaphore-gated as both are.
 * Prints its own account as JSON after a stdin line (the truth), exits after another. */
#define _SDT_HAS_SEMAPHORES 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>
#include <unistd.h>

#define SEMAPHORE(provider, name) \
	unsigned short provider##_##name##_semaphore __attribute__((unused, section(".probes")))
SEMAPHORE(pytorch, malloc);
SEMAPHORE(pytorch, free);
SEMAPHORE(vigil, alloc_block_alloc);
SEMAPHORE(vigil, alloc_block_free);
SEMAPHORE(vigil, alloc_snapshot);

#define SLOT (64u << 10)
#define SLOTS 64 /* one reserved 4 MiB segment */

static uint64_t base = 0x7e0000000000ull;
static int used[SLOTS];
static long v_allocs, v_frees, v_snapshots, p_mallocs, p_frees;
static uint64_t p_allocated;

static uint64_t allocated_bytes(void)
{
	uint64_t n = 0;

	for (int i = 0; i < SLOTS; i++)
		n += used[i] ? SLOT : 0;
	return n;
}

static uint64_t largest_free(void)
{
	int best = 0, run = 0;

	for (int i = 0; i < SLOTS; i++) {
		run = used[i] ? 0 : run + 1;
		best = run > best ? run : best;
	}
	return (uint64_t)best * SLOT;
}

static void snapshot(void)
{
	if (vigil_alloc_snapshot_semaphore) {
		STAP_PROBE3(vigil, alloc_snapshot, (uint64_t)SLOTS * SLOT, allocated_bytes(), largest_free());
		v_snapshots++;
	}
}

static void block_alloc(int i)
{
	used[i] = 1;
	if (vigil_alloc_block_alloc_semaphore) {
		STAP_PROBE2(vigil, alloc_block_alloc, base + (uint64_t)i * SLOT, (uint64_t)SLOT);
		v_allocs++;
	}
	snapshot();
}

static void block_free(int i)
{
	used[i] = 0;
	if (vigil_alloc_block_free_semaphore) {
		STAP_PROBE2(vigil, alloc_block_free, base + (uint64_t)i * SLOT, (uint64_t)SLOT);
		v_frees++;
	}
	snapshot();
}

static void wait_line(void)
{
	char line[16];

	if (!fgets(line, sizeof(line), stdin))
		exit(1);
}

int main(void)
{
	void *p[100];

	printf("ready pid=%d\n", getpid());
	fflush(stdout);
	wait_line();
	int enabled = pytorch_malloc_semaphore && vigil_alloc_snapshot_semaphore;

	for (int i = 0; i < SLOTS; i++)
		block_alloc(i);
	for (int i = 0; i < SLOTS; i += 2) /* every other slot: free memory is scattered */
		block_free(i);
	for (int i = 41; i < 47; i += 2) /* ... except one run of 7 slots */
		block_free(i);

	for (int i = 0; i < 100; i++) {
		size_t size = 512u * (size_t)(i + 1);

		p[i] = malloc(size);
		if (pytorch_malloc_semaphore) {
			STAP_PROBE2(pytorch, malloc, (uint64_t)(uintptr_t)p[i], (uint64_t)size);
			p_mallocs++;
			p_allocated += size;
		}
	}
	for (int i = 0; i < 100; i += 3) {
		if (pytorch_free_semaphore) {
			STAP_PROBE1(pytorch, free, (uint64_t)(uintptr_t)p[i]);
			p_frees++;
			p_allocated -= 512u * (uint64_t)(i + 1);
		}
		free(p[i]);
	}
	printf("{\"pid\": %d, \"semaphores_enabled\": %s, "
	       "\"pytorch\": {\"mallocs\": %ld, \"frees\": %ld, \"allocated\": %llu}, "
	       "\"vigil\": {\"mallocs\": %ld, \"frees\": %ld, \"snapshots\": %ld, \"reserved\": %llu, "
	       "\"allocated\": %llu, \"largest_free\": %llu}}\n",
	       getpid(), enabled ? "true" : "false", p_mallocs, p_frees, (unsigned long long)p_allocated,
	       v_allocs, v_frees, v_snapshots, (unsigned long long)SLOTS * SLOT,
	       (unsigned long long)allocated_bytes(), (unsigned long long)largest_free());
	fflush(stdout);
	wait_line();
	return 0;
}
