/* A binary with far more USDT sites than any real one: vigil:alloc_snapshot at 100 places, each
 * with its own constant argument, so that each is a distinct libbpf spec (a spec id of the fixed
 * pool) and an uprobe. The sites never run. Prints "ready pid=N", exits after a stdin line. */
#include <stdio.h>
#include <sys/sdt.h>
#include <unistd.h>

#define SITE(n) STAP_PROBE1(vigil, alloc_snapshot, n);
#define TEN(n) \
	SITE(10 * n + 0) SITE(10 * n + 1) SITE(10 * n + 2) SITE(10 * n + 3) SITE(10 * n + 4) \
	SITE(10 * n + 5) SITE(10 * n + 6) SITE(10 * n + 7) SITE(10 * n + 8) SITE(10 * n + 9)

int main(int argc, char **argv)
{
	char line[16];

	(void)argv;
	if (argc > 100) { /* never: the sites exist, they do not fire */
		TEN(0) TEN(1) TEN(2) TEN(3) TEN(4) TEN(5) TEN(6) TEN(7) TEN(8) TEN(9)
	}
	printf("ready pid=%d\n", getpid());
	fflush(stdout);
	return fgets(line, sizeof(line), stdin) ? 0 : 1;
}
