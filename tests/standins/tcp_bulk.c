/* Bulk TCP transfer for the agent's TCP tests: one side sends BYTES, the other reads to EOF; both
 * wait for the other's close so no retransmit of ours happens after exit. Bounded by a deadline.
 *   tcp_bulk listen PORT SEND_BYTES        accept one connection (server-side sender)
 *   tcp_bulk connect ADDR PORT SEND_BYTES  connect (client-side sender)
 * Prints "pid=N sent=N received=N" when done; exits 1 on any error or after 60 s
 * (TCP_BULK_DEADLINE_S: another deadline, for benchmarks that stream for minutes). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int run(int fd, long long to_send)
{
	static char buf[65536];
	long long sent = 0, received = 0;
	ssize_t n;

	memset(buf, 'v', sizeof(buf));
	while (sent < to_send) {
		size_t chunk = (size_t)(to_send - sent < (long long)sizeof(buf) ? to_send - sent : (long long)sizeof(buf));
		n = send(fd, buf, chunk, 0);
		if (n < 0)
			die("send");
		sent += n;
	}
	if (shutdown(fd, SHUT_WR))
		die("shutdown");
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
		received += n;
	if (n < 0)
		die("recv");
	close(fd);
	printf("pid=%d sent=%lld received=%lld\n", getpid(), sent, received);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	const char *deadline = getenv("TCP_BULK_DEADLINE_S");
	int one = 1, fd;

	alarm(deadline ? (unsigned)atoi(deadline) : 60);
	if (argc == 4 && !strcmp(argv[1], "listen")) {
		int lfd = socket(AF_INET, SOCK_STREAM, 0), cfd;

		if (lfd < 0)
			die("socket");
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		addr.sin_port = htons((unsigned short)atoi(argv[2]));
		if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) || listen(lfd, 1))
			die("bind/listen");
		printf("listening pid=%d\n", getpid());
		fflush(stdout);
		cfd = accept(lfd, NULL, NULL);
		if (cfd < 0)
			die("accept");
		close(lfd);
		return run(cfd, atoll(argv[3]));
	}
	if (argc == 5 && !strcmp(argv[1], "connect")) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			die("socket");
		addr.sin_port = htons((unsigned short)atoi(argv[3]));
		if (inet_pton(AF_INET, argv[2], &addr.sin_addr) != 1)
			die("address");
		if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
			die("connect");
		return run(fd, atoll(argv[4]));
	}
	fprintf(stderr, "usage: tcp_bulk listen PORT SEND_BYTES | connect ADDR PORT SEND_BYTES\n");
	return 2;
}
