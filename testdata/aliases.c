// aliases: calls functions glibc exports under two names (open and
// open64, mmap and mmap64, fopen and fopen64: on x86-64 the *64 names are
// the same functions), each by both names, so that a trace shows each
// call under the name the program used. Built with and without -fno-plt
// (calls through the PLT, or through the GOT).
#define _LARGEFILE64_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int main(void) {
	int a = open("/dev/null", O_RDONLY);
	int b = open64("/dev/null", O_RDONLY);
	void *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *m64 = mmap64(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	FILE *f = fopen("/dev/null", "r");
	FILE *f64 = fopen64("/dev/null", "r");
	printf("%d %d %p %p %p %p\n", a, b, m, m64, (void *)f, (void *)f64);
	return 0;
}
