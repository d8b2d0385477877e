// glibcleaks: what glibc allocates for itself and keeps until the process
// ends (getpwuid's buffer and its NSS modules, stdout's buffer), beside
// two leaks of the program's own: memcheck, which has glibc free its own
// at exit (__libc_freeres), reports the program's two only. One of them
// comes from a function a suppression file can name (suppress_me).
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile keep;

__attribute__((noinline)) static void *suppress_me(void) {
	char *p = malloc(24); // LINE:suppressed
	memset(p, 1, 24);
	return p;
}

__attribute__((noinline)) static void *lost(void) {
	char *p = malloc(40); // LINE:lost
	memset(p, 2, 40);
	return p;
}

int main(void) {
	struct passwd *pw = getpwuid(getuid());
	printf("user %s\n", pw ? pw->pw_name : "?");
	keep = suppress_me();
	keep = lost(); // the first block is lost now, the second at exit
	keep = NULL;
	return 0;
}
