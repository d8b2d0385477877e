// gobject: GObject instances made, referenced and released (GLib's
// gobject-2.0), for the gobject module: 3 objects are made, one of them
// referenced twice more and released three times, one released once, and
// one kept (a leak). It prints the kept object's address.
#include <glib-object.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) static GObject *make(void) {
	return g_object_new(G_TYPE_OBJECT, NULL); // LINE:make
}

int main(void) {
	GObject *a = make(), *b = make(), *kept = make();
	g_object_ref(a);
	g_object_ref(a);
	g_object_unref(a);
	g_object_unref(a);
	g_object_unref(a); // the last reference: a is finalized
	g_object_unref(b);
	char line[64];
	int n = snprintf(line, sizeof line, "kept %p\n", (void *)kept);
	write(1, line, n);
	return 0;
}
