// phases: two phases of allocations far apart in time, for the summary
// at a moment (--summary --at): phase one keeps 10 blocks of 1,000
// bytes; then a pause of 300 ms, so that no moment of phase two's calls
// is within 300 ms of phase one's (a pause only widens under load); then
// phase two keeps 20 blocks of 2,000 bytes and frees 5 of phase one's.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void *one[10], *two[20]; // not static: the stores must stay

__attribute__((noinline)) static void phase1(void) {
	for (int i = 0; i < 10; i++)
		one[i] = malloc(1000); // LINE:phase1
}

__attribute__((noinline)) static void phase2(void) {
	for (int i = 0; i < 20; i++)
		two[i] = malloc(2000); // LINE:phase2
	for (int i = 0; i < 5; i++)
		free(one[i]);
}

int main(void) {
	phase1();
	struct timespec gap = {0, 300 * 1000 * 1000};
	while (nanosleep(&gap, &gap) != 0) {
	}
	phase2();
	printf("phases done\n");
	return 0;
}
