/* dlopen: loads the plugin named by argv[1] argv[2] times (default 1),
 * calls into it each time through dlsym, and closes it: its functions are
 * traced only while it is loaded, at whatever address the loader picks. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int before(int x) { return x + 1; }

int use(const char *path, int x)
{
	void *h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return -1;
	}
	int (*run)(int) = (int (*)(int))dlsym(h, "plug_run");
	int r = run(x);
	dlclose(h);
	return r;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int n = argc > 2 ? atoi(argv[2]) : 1;
	int sum = 0;
	for (int i = 0; i < n; i++)
		sum += use(argv[1], before(i));
	printf("dlopen %d\n", sum);
	return 0;
}
