/* An NCCL process whose TCP connection stalls: initialises NCCL state (ncclGetUniqueId, real
 * libnccl.so.2), then streams 64 KiB every 10 ms to ADDR:PORT until killed (at most 60 s): paced,
 * so a busy machine's veth backlog drops nothing before the test blackholes the link and checks
 * the agent's NCCL/TCP timeout risk for this pid.
 *   nccl_stall ADDR PORT */
#include <arpa/inet.h>
#include <nccl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static char buf[65536];
	struct sockaddr_in addr = { .sin_family = AF_INET };
	ncclUniqueId id;
	ncclResult_t rc;
	int fd;

	if (argc != 3)
		return 2;
	alarm(60);
	rc = ncclGetUniqueId(&id);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	addr.sin_port = htons((unsigned short)atoi(argv[2]));
	if (fd < 0 || inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		perror("connect");
		return 1;
	}
	printf("pid=%d ncclGetUniqueId=%d\n", getpid(), (int)rc);
	fflush(stdout);
	memset(buf, 'n', sizeof(buf));
	for (;;) {
		if (send(fd, buf, sizeof(buf), 0) < 0)
			return 1;
		usleep(10000);
	}
}
