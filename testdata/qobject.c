// qobject: QObject instances constructed and destroyed (Qt 5's QtCore),
// for the qobject module, from C: the constructor and destructor are
// called by their symbols on 16 bytes (a QObject is its vtable pointer and
// its private's), as a C++ program's new and delete would. Two objects
// are destroyed, one is kept (a leak). It prints the kept object's
// address.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern void qobject_new(void *self, void *parent) __asm__("_ZN7QObjectC1EPS_");
extern void qobject_delete(void *self) __asm__("_ZN7QObjectD1Ev");

__attribute__((noinline)) static void *make(void) {
	void *o = calloc(1, 16);
	qobject_new(o, NULL); // LINE:make
	return o;
}

int main(void) {
	void *a = make(), *b = make(), *kept = make();
	qobject_delete(a);
	qobject_delete(b);
	free(a);
	free(b);
	char line[64];
	int n = snprintf(line, sizeof line, "kept %p\n", kept);
	write(1, line, n);
	return 0;
}
