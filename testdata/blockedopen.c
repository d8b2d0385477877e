/* blockedopen: says "pid N", then for each line of stdin
 *   open: opens the file named by its argument (a FIFO: open(2) blocks
 *         until a writer comes), reads a line from it and prints "read
 *         LINE";
 *   join: does the same in a new thread, which the main thread waits for
 *         in pthread_join;
 *   clone: does the same in a child made with clone(CLONE_VM), which
 *         shares its memory (and rtrace's code in it), and waits for it;
 *   vfork: does the same in a child made with vfork(2), which borrows its
 *         parent's memory and stack while the parent waits in vfork;
 * and at the end of stdin prints "done". A test detaches rtrace while the
 * program is blocked inside open or pthread_join, resource functions
 * rtrace hooks. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *path;

static void *readone(void *arg)
{
	char buf[64];
	int fd = open(path, O_RDONLY);

	(void)arg;
	if (fd < 0) {
		perror(path);
		return NULL;
	}
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	printf("read %s", buf);
	fflush(stdout);
	return NULL;
}

static int cloned(void *arg)
{
	readone(arg);
	return 0;
}

int main(int argc, char **argv)
{
	char line[64];
	pthread_t th;

	if (argc < 2)
		return 2;
	path = argv[1];
	printf("pid %d\n", getpid());
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		if (strcmp(line, "open\n") == 0)
			readone(NULL);
		if (strcmp(line, "join\n") == 0) {
			if (pthread_create(&th, NULL, readone, NULL) != 0 || pthread_join(th, NULL) != 0)
				return 1;
			printf("joined\n");
			fflush(stdout);
		}
		if (strcmp(line, "clone\n") == 0) {
			static char stack[1 << 16];
			int st;
			pid_t p = clone(cloned, stack + sizeof stack, CLONE_VM | SIGCHLD, NULL);
			if (p < 0 || waitpid(p, &st, 0) != p)
				return 1;
			printf("waited\n");
			fflush(stdout);
		}
		if (strcmp(line, "vfork\n") == 0) {
			int st;
			pid_t p = vfork();
			if (p == 0) {
				int fd = open(path, O_RDONLY);
				_exit(fd < 0);
			}
			if (p < 0 || waitpid(p, &st, 0) != p)
				return 1;
			printf("vforked %d\n", WEXITSTATUS(st));
			fflush(stdout);
		}
	}
	printf("done\n");
	return 0;
}
