/* One rank of a communicator for the agent's communicator test, against the stand-in
 * libnccl.so.2 (fake_libnccl.c). The test chooses the unique id and passes it in hex, so the id
 * the agent reports can be checked against bytes it did not read itself.
 * usage: nccl_ranks RANK NRANKS ID_HEX [config]
 *   config: initialise through ncclCommInitRankConfig (otherwise ncclCommInitRank).
 * Prints "loaded pid=P" and waits for a line (the agent attaches in between), initialises, prints
 * "ready" once every rank has joined, then reads commands from stdin:
 *   N      N collectives, each of AllReduce, AllGather, ReduceScatter, Broadcast, Reduce in turn
 *          (every position the communicator argument takes); prints "done TOTAL"
 *   loop   collectives in the same order, 5 ms apart, until killed
 *   comms N  N more communicators of one rank each (ids: the given one with its first two bytes
 *          xor'ed with 1..N), kept until exit; prints "comms N"
 *   exit   ncclCommDestroy, exit */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ncclResult_t one_collective(ncclComm_t comm, long i)
{
	float buf[4] = { 0 };

	switch (i % 5) {
	case 0: return ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, comm, NULL);
	case 1: return ncclAllGather(buf, buf, 1, ncclFloat32, comm, NULL);
	case 2: return ncclReduceScatter(buf, buf, 1, ncclFloat32, ncclSum, comm, NULL);
	case 3: return ncclBroadcast(buf, buf, 4, ncclFloat32, 0, comm, NULL);
	default: return ncclReduce(buf, buf, 4, ncclFloat32, ncclSum, 0, comm, NULL);
	}
}

static int parse_id(const char *hex, ncclUniqueId *id)
{
	if (strlen(hex) != 2 * sizeof(id->internal))
		return -1;
	for (size_t i = 0; i < sizeof(id->internal); i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		id->internal[i] = (char)v;
	}
	return 0;
}

int main(int argc, char **argv)
{
	ncclUniqueId id;
	ncclComm_t comm = NULL;
	ncclResult_t rc;
	char line[32];
	long done = 0;

	if (argc < 4 || parse_id(argv[3], &id)) {
		fprintf(stderr, "usage: nccl_ranks RANK NRANKS ID_HEX(256 digits) [config]\n");
		return 2;
	}
	printf("loaded pid=%d\n", getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	if (argc > 4 && !strcmp(argv[4], "config")) {
		ncclConfig_t config = NCCL_CONFIG_INITIALIZER;

		rc = ncclCommInitRankConfig(&comm, atoi(argv[2]), id, atoi(argv[1]), &config);
	} else {
		rc = ncclCommInitRank(&comm, atoi(argv[2]), id, atoi(argv[1]));
	}
	if (rc != ncclSuccess) {
		fprintf(stderr, "init: %d\n", rc);
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "exit", 4))
			break;
		if (!strncmp(line, "comms ", 6)) {
			long n = atol(line + 6);

			for (long i = 1; i <= n; i++) {
				ncclUniqueId other = id;
				ncclComm_t c;

				other.internal[0] ^= (char)(i & 0xff);
				other.internal[1] ^= (char)(i >> 8);
				if ((rc = ncclCommInitRank(&c, 1, other, 0)) != ncclSuccess) {
					fprintf(stderr, "communicator %ld: %d\n", i, rc);
					return 1;
				}
			}
			printf("comms %ld\n", n);
			fflush(stdout);
			continue;
		}
		if (!strncmp(line, "loop", 4))
			for (;; done++) {
				one_collective(comm, done);
				usleep(5000);
			}
		for (long n = atol(line); n > 0; n--, done++)
			if ((rc = one_collective(comm, done)) != ncclSuccess) {
				fprintf(stderr, "collective %ld: %d\n", done, rc);
				return 1;
			}
		printf("done %ld\n", done);
		fflush(stdout);
	}
	return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
}
