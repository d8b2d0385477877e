// memowalk_fp: memowalk.c's frame-pointer chain, built at -O0. fp_leaf's
// malloc is called from fp_mid at the same stack pointer through outer1
// and outer2, whose alloca sizes make up for each other: the return
// addresses up to fp_mid's are the same, fp_mid's saved rbp is not, and
// the frame above it is another one; outer1's return address is still
// where outer1's frame was (in outer2's alloca). A walk memo that did not
// check the saved rbp would give outer1's frames for outer2's call.
#include <alloca.h>
#include <stdlib.h>
#include <string.h>

extern void *volatile sink;
void *volatile memowalk_sp[2]; // fp_leaf's frame address through outer1 and outer2

void *fp_leaf(size_t n, int which) {
	void *p = malloc(n);
	memowalk_sp[which & 1] = __builtin_frame_address(0);
	sink = p;
	return p;
}

void *fp_mid(size_t pad, int which) {
	char *b = alloca(pad);
	memset(b, 0, pad);
	sink = b;
	return fp_leaf(32, which);
}

static void *outer1(int which) {
	char *b = alloca(64);
	sink = b;
	return fp_mid(128, which);
}

static void *outer2(int which) {
	char *b = alloca(128);
	sink = b;
	return fp_mid(64, which);
}

// One call site for both: the return address above them is the same too.
static void *(*volatile const outers[2])(int) = {outer1, outer2};

void *memowalk_fp(int which) { return outers[which & 1](which); }
