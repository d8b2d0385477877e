/* libargs: C library calls whose arguments and return values -a shows from
 * the built-in table of library functions: flags shown by name (open,
 * mmap, access, socket, dlopen, setlocale, clock_gettime), floats returned
 * (atof, strtof), strings, sizes and pointers. */
#include <dlfcn.h>
#include <fcntl.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char buf[64];
	struct timespec ts;
	int fd = open("/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	long n = write(fd, "hello", 5);
	lseek(fd, 0, SEEK_SET);
	close(fd);
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mprotect(p, 4096, PROT_READ);
	munmap(p, 4096);
	int ok = access("/", R_OK | X_OK);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	close(s);
	setlocale(LC_ALL, "C");
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double d = atof("2.5");
	float f = strtof("0.25", NULL);
	long l = strtol("-42", NULL, 10);
	char *q = calloc(4, 8);
	q = realloc(q, 64);
	memset(q, 0, 64);
	snprintf(buf, sizeof buf, "%ld", l);
	int c = strcmp(buf, "-42");
	free(q);
	void *h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
	if (h)
		dlclose(h);
	signal(SIGUSR1, SIG_IGN);
	kill(getpid(), SIGUSR1);
	printf("libargs %ld %d %d %.2f %.2f %d\n", n, ok, c, d, f, argc);
	return 0;
}
