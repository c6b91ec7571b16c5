/* A caching allocator in miniature with USDT probes laid out as PyTorch's and the worker's,
 * semaphore-gated as both are. PyTorch's, from c10/cuda/CUDACachingAllocator.cpp:
 * TORCH_SDT_WITH_SEMAPHORE(malloc, devPtr, device, size, stream.id()) with void *devPtr,
 * c10::DeviceIndex device (int8_t), size_t size, c10::StreamId (int64_t); and
 * TORCH_SDT_WITH_SEMAPHORE(free, ptr). The worker's: vigil:alloc_block_alloc/free(address, bytes),
 * vigil:alloc_snapshot(reserved, allocated, largest_free_block). Blocks go to two devices (0 and
 * 3) from many threads at once. Prints its own account as JSON after a stdin line (the truth),
 * exits after another. */
#define _SDT_HAS_SEMAPHORES 1
#include <pthread.h>
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
static long v_allocs, v_frees, v_snapshots;

/* PyTorch-shaped traffic: THREADS threads, each BLOCKS blocks on device DEVICES[t % 2], freeing
 * every third; per-device totals summed after the join. */
#define THREADS 8
#define BLOCKS 2000
static const int8_t devices[2] = { 0, 3 };

struct device_account {
	long mallocs, frees;
	uint64_t allocated;
};

struct worker {
	pthread_t thread;
	int index;
	struct device_account account;
};

static void *pytorch_traffic(void *arg)
{
	struct worker *w = arg;
	const int8_t device = devices[w->index % 2];
	const int64_t stream_id = 0x100 + w->index; /* a stream id as c10::Stream::id() returns it */
	char *base_ptr = malloc((size_t)BLOCKS * 1024);

	for (int i = 0; i < BLOCKS; i++) {
		void *ptr = base_ptr + (size_t)i * 1024;
		size_t size = 512u * (size_t)(i % 97 + 1); /* sizes past the int8 range of a device index */

		if (pytorch_malloc_semaphore) {
			STAP_PROBE4(pytorch, malloc, ptr, device, size, stream_id);
			w->account.mallocs++;
			w->account.allocated += size;
		}
		if (i % 3 == 0 && pytorch_free_semaphore) {
			STAP_PROBE1(pytorch, free, ptr);
			w->account.frees++;
			w->account.allocated -= size;
		}
	}
	free(base_ptr);
	return NULL;
}

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

	struct worker workers[THREADS] = { 0 };
	struct device_account per_device[2] = { 0 };

	for (int t = 0; t < THREADS; t++) {
		workers[t].index = t;
		pthread_create(&workers[t].thread, NULL, pytorch_traffic, &workers[t]);
	}
	for (int t = 0; t < THREADS; t++) {
		pthread_join(workers[t].thread, NULL);
		per_device[t % 2].mallocs += workers[t].account.mallocs;
		per_device[t % 2].frees += workers[t].account.frees;
		per_device[t % 2].allocated += workers[t].account.allocated;
	}
	printf("{\"pid\": %d, \"semaphores_enabled\": %s, \"pytorch\": {"
	       "\"%d\": {\"mallocs\": %ld, \"frees\": %ld, \"allocated\": %llu}, "
	       "\"%d\": {\"mallocs\": %ld, \"frees\": %ld, \"allocated\": %llu}}, "
	       "\"vigil\": {\"mallocs\": %ld, \"frees\": %ld, \"snapshots\": %ld, \"reserved\": %llu, "
	       "\"allocated\": %llu, \"largest_free\": %llu}}\n",
	       getpid(), enabled ? "true" : "false",
	       devices[0], per_device[0].mallocs, per_device[0].frees, (unsigned long long)per_device[0].allocated,
	       devices[1], per_device[1].mallocs, per_device[1].frees, (unsigned long long)per_device[1].allocated,
	       v_allocs, v_frees, v_snapshots, (unsigned long long)SLOTS * SLOT,
	       (unsigned long long)allocated_bytes(), (unsigned long long)largest_free());
	fflush(stdout);
	wait_line();
	return 0;
}
