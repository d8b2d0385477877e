/* plugin: a shared library the dlopen fixture loads at run time. */
int plug_leaf(int x) { return x * 2; }
int plug_run(int x) { return plug_leaf(x) + 1; }
