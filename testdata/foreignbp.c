// foreignbp: a function whose entry already holds another tracer's
// breakpoint when rtrace attaches (as a uprobe's int3 from bpftrace or
// perf probe would be there): the program writes the int3 itself, prints
// "ready", and exits at the end of its input without calling it.
#include <stdio.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

__attribute__((noinline)) void victim(void) { puts("not reached"); }

int main(void) {
	uintptr_t page = (uintptr_t)victim & ~(uintptr_t)4095;
	if (mprotect((void *)page, 8192, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
		return 1;
	*(volatile unsigned char *)victim = 0xcc;
	mprotect((void *)page, 8192, PROT_READ | PROT_EXEC);
	printf("ready %d\n", getpid());
	fflush(stdout);
	char buf[16];
	while (read(0, buf, sizeof buf) > 0)
		;
	return 0;
}
