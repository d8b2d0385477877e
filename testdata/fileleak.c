// fileleak: opens descriptors and streams in several ways and closes all
// but 3 descriptors (an open(), a pipe end, a dup()) and 2 FILE streams
// (an fopen() and an fdopen() of the dup'ed descriptor).
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void) {
	int a = open("/dev/null", O_RDONLY);            // leaked
	int b = openat(AT_FDCWD, "/dev/null", O_WRONLY); // closed
	int p[2];
	pipe(p);                                         // p[0] leaked, p[1] closed
	int d = dup(b);                                  // leaked
	int s = socket(AF_UNIX, SOCK_STREAM, 0);         // closed
	FILE *f1 = fopen("/dev/null", "r");              // leaked
	FILE *f2 = fopen("/dev/null", "w");              // closed
	FILE *f3 = fdopen(d, "w");                       // leaked (on the leaked d)
	close(b);
	close(p[1]);
	close(s);
	fclose(f2);
	close(12345); // fails: not a release
	open("/nonexistent/x", O_RDONLY); // fails: not an allocation
	printf("fds %d %d %d, streams %p %p\n", a, p[0], d, (void *)f1, (void *)f3);
	return 0;
}
